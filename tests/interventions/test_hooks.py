"""Each intervention does what it claims and leaves intact what it claims to leave intact."""

import pytest
import torch

from adjpos import build_model, capture_residuals, cosine_matrix
from adjpos.interventions import (
    NoIntervention,
    NormPermute,
    NormPermuteControl,
    UniformAttention,
    intervene,
)
from factories import tiny_config


def _model():
    return build_model(tiny_config(n_layers=2, d_model=32, n_heads=4, dtype="float64"))


def _tokens(batch=6, pos=10, seed=0):
    return torch.randint(0, 20, (batch, pos), generator=torch.Generator().manual_seed(seed))


def _resid(seed=0):
    return torch.randn(4, 9, 16, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_none_reproduces_the_model_exactly():
    model, tokens = _model(), _tokens()
    for layer in (0, 1):
        with intervene(model, NoIntervention(), layer=layer):
            out = model(tokens)
        assert torch.equal(out, model(tokens))


@pytest.mark.parametrize("mirrored", [False, True])
def test_norm_permute_keeps_every_cosine_and_moves_the_norms(mirrored):
    resid = _resid()
    changed = NormPermute(seed=3, mirrored=mirrored)(resid)
    torch.testing.assert_close(cosine_matrix(changed), cosine_matrix(resid), atol=1e-5, rtol=0)
    before, after = resid.norm(dim=-1), changed.norm(dim=-1)
    torch.testing.assert_close(after.sort(dim=1).values, before.sort(dim=1).values)
    assert not torch.allclose(after, before)
    if mirrored:
        torch.testing.assert_close(after, before.flip(dims=[1]))
    torch.testing.assert_close(NormPermute(seed=3, mirrored=mirrored)(resid), changed)  # fixed rule


def test_norm_permute_control_takes_the_same_position_of_another_sequence():
    resid = _resid(1)
    changed = NormPermuteControl()(resid)
    torch.testing.assert_close(changed.norm(dim=-1), resid.norm(dim=-1).roll(-1, dims=0))
    directions = torch.nn.functional.cosine_similarity(changed, resid, dim=-1)
    torch.testing.assert_close(directions, torch.ones_like(directions))
    with pytest.raises(ValueError, match="at least 2 sequences"):
        NormPermuteControl()(resid[:1])


def test_the_two_norm_changes_are_of_comparable_size():
    """The control must move norms about as much as the permutation, or a larger drop under
    the permutation would only mean a larger perturbation."""
    model = _model()
    acts = capture_residuals(model, _tokens(batch=32, pos=12), layers=[1])[0]

    def size(changed):
        return (changed.norm(dim=-1).log() - acts.norm(dim=-1).log()).abs().mean()

    permuted, control = size(NormPermute(seed=0)(acts)), size(NormPermuteControl()(acts))
    assert 0.5 < float(permuted / control) < 2.0, (float(permuted), float(control))


def test_interventions_act_at_their_layer_only():
    model, tokens = _model(), _tokens()
    plain = capture_residuals(model, tokens)
    with intervene(model, NormPermute(seed=1, mirrored=True), layer=1):
        changed = capture_residuals(model, tokens)
        logits = model(tokens)
    assert torch.equal(changed[:2], plain[:2])  # layers 0 and 1 are before the hook's block
    assert not torch.allclose(changed[2], plain[2])
    assert not torch.allclose(logits, model(tokens))
    assert torch.equal(capture_residuals(model, tokens), plain)  # the hook is gone


def test_uniform_attention_replaces_the_pattern():
    pattern = torch.softmax(torch.randn(2, 4, 5, 5), dim=-1).tril()
    uniform = UniformAttention()(pattern)
    expected = torch.ones(5, 5).tril() / torch.arange(1, 6)[:, None]
    torch.testing.assert_close(uniform, expected.expand_as(pattern))
    some = UniformAttention(heads=(1,))(pattern)
    torch.testing.assert_close(some[:, 1], expected.expand(2, 5, 5))
    assert torch.equal(some[:, [0, 2, 3]], pattern[:, [0, 2, 3]])


def test_uniform_attention_in_a_model_is_the_average_of_the_values():
    """With uniform attention in block 0, position 0 still attends to itself only, so its
    output is unchanged; later positions change."""
    model, tokens = _model(), _tokens()
    plain = capture_residuals(model, tokens, layers=[1])[0]
    with intervene(model, UniformAttention(), layer=0):
        changed = capture_residuals(model, tokens, layers=[1])[0]
    torch.testing.assert_close(changed[:, 0], plain[:, 0])
    assert not torch.allclose(changed[:, 1:], plain[:, 1:])


@pytest.mark.usefixtures("user_errors")
def test_bad_layers_heads_and_objects_are_named():
    model = _model()
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 1\], got 2"):
        with intervene(model, NoIntervention(), layer=2):
            pass
    with pytest.raises(ValueError, match=r"heads \[7\] are out of range; the model has 4 heads"):
        with intervene(model, UniformAttention(heads=(7,)), layer=0):
            pass
    with pytest.raises(ValueError, match="unknown intervention 'shuffle'; choose from"):
        with intervene(model, "shuffle", layer=0):
            pass
