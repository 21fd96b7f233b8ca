"""Each intervention does what it claims and leaves intact what it claims to leave intact."""

import pytest
import torch

from adjpos import build_model, capture_residuals, cosine_matrix
from adjpos.interventions import (
    LeaceErase,
    NoIntervention,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
    SubspaceSwap,
    UniformAttention,
    intervene,
)
from adjpos.seeds import derive_seed
from factories import tiny_bridge, tiny_config


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
    with pytest.raises(ValueError, match="'shuffle' is not an intervention: pass an object"):
        with intervene(model, "shuffle", layer=0):
            pass


def _partner_reference(batch, pos, seed):
    """The permutation rule spelled out: one seeded draw of [batch, pos] keys per length."""
    gen = torch.Generator().manual_seed(derive_seed(seed, "partner positions", pos))
    return torch.rand(batch, pos, generator=gen).argsort(dim=1)


@pytest.mark.parametrize("mirrored", [False, True])
def test_norm_scale_control_applies_the_permutations_ratios_elsewhere(mirrored):
    resid = _resid(2)
    norms = resid.norm(dim=-1)
    permuted = NormPermute(seed=5, mirrored=mirrored)(resid).norm(dim=-1)
    scaled_states = NormScaleControl(seed=5, mirrored=mirrored)(resid)
    scaled = scaled_states.norm(dim=-1)
    ratios = lambda new: (new / norms).flatten().sort().values  # noqa: E731
    torch.testing.assert_close(ratios(scaled), ratios(permuted))  # the same ratios, as a set
    assert not torch.allclose(scaled, permuted)  # but not at the same places
    directions = torch.nn.functional.cosine_similarity(scaled_states, resid, dim=-1)
    torch.testing.assert_close(directions, torch.ones_like(directions))


def test_subspace_swap_matches_a_loop_reference_and_keeps_norms():
    resid = _resid(3)
    swap = SubspaceSwap.random_subspace(16, rank=3, seed=4)
    out = swap(resid)
    basis = swap.basis
    proj = basis @ basis.T
    order = _partner_reference(*resid.shape[:2], seed=swap.seed)
    for b in range(resid.shape[0]):
        for k in range(resid.shape[1]):
            x, partner = resid[b, k], resid[b, order[b, k]]
            expected = x - proj @ x + proj @ partner
            expected = expected * x.norm() / expected.norm()
            torch.testing.assert_close(out[b, k], expected)
    torch.testing.assert_close(out.norm(dim=-1), resid.norm(dim=-1))
    assert swap.random and swap.rank == 3
    torch.testing.assert_close(swap.basis.T @ swap.basis, torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(SubspaceSwap.random_subspace(16, rank=3, seed=4).basis, basis)


def _positional_states(n=3000, d=24, n_pos=8, seed=0):
    """States whose position is written in the first two coordinates (plus noise elsewhere)."""
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, n_pos, (n,), generator=gen)
    states = torch.randn(n, d, generator=gen, dtype=torch.float64)
    angle = positions.double() * (2 * torch.pi / n_pos)
    states[:, 0] += 6 * angle.cos()
    states[:, 1] += 6 * angle.sin()
    return states, positions


def test_subspace_swap_fit_finds_the_position_subspace():
    states, positions = _positional_states()
    swap = SubspaceSwap.fit(states, positions, rank=2)
    assert not swap.random
    torch.testing.assert_close(swap.basis.T @ swap.basis, torch.eye(2, dtype=torch.float64))
    # the planted plane: its projection onto the fitted plane keeps (nearly) all of it
    plane = swap.basis[:2]
    assert torch.linalg.svdvals(plane).min() > 0.95


def test_subspace_swap_fit_is_quiet_about_a_position_seen_once():
    """The end of the longest prompts is one state: its zero within-class spread is right, and
    fitting says nothing about it (a quick study run used to print 84 warnings)."""
    import warnings

    states, positions = _positional_states(n=200)
    positions[0] = 8  # a ninth position with one state
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        swap = SubspaceSwap.fit(states, positions, rank=2)
    assert swap.rank == 2


def _probe_accuracy(train_x, train_y, test_x, test_y):
    from sklearn.linear_model import LogisticRegression

    probe = LogisticRegression(max_iter=2000).fit(train_x.numpy(), train_y.numpy())
    return probe.score(test_x.numpy(), test_y.numpy())


def test_leace_position_leaves_a_linear_probe_at_chance():
    states, positions = _positional_states(n=6000)
    fit, test = slice(0, 4000), slice(4000, None)
    erase = LeaceErase.fit(states[fit], positions[fit])
    erased = erase(states[None])[0]
    assert _probe_accuracy(states[fit], positions[fit], states[test], positions[test]) > 0.9
    chance = 1 / 8
    erased_accuracy = _probe_accuracy(erased[fit], positions[fit], erased[test], positions[test])
    assert erased_accuracy < chance + 0.03
    # on the states it was fitted on, no direction covaries with any position label
    onehot = torch.nn.functional.one_hot(positions[fit]).double()
    centred = erased[fit] - erased[fit].mean(dim=0)
    cross = centred.T @ (onehot - onehot.mean(dim=0)) / len(onehot)
    assert cross.abs().max() < 1e-8
    control = LeaceErase.fit(states[fit], positions[fit], shuffled=True, seed=1)
    assert (erase.shuffled, control.shuffled) == (False, True)
    assert erase.rank == control.rank == 7
    kept = control(states[None])[0]  # erases as many directions, but not position's
    assert _probe_accuracy(kept[fit], positions[fit], kept[test], positions[test]) > 3 * chance


def test_fitted_interventions_run_inside_a_model():
    model, tokens = _model(), _tokens()
    states = capture_residuals(model, tokens, layers=[1])[0].reshape(-1, 32)
    positions = torch.arange(tokens.shape[1]).repeat(tokens.shape[0])
    for iv in (
        SubspaceSwap.fit(states, positions, rank=2),
        LeaceErase.fit(states, positions),
        NormScaleControl(seed=1),
    ):
        with intervene(model, iv, layer=1):
            changed = model(tokens)
        assert changed.shape == model(tokens).shape
        assert not torch.allclose(changed, model(tokens))


@pytest.mark.usefixtures("user_errors")
def test_bad_ranks_are_named():
    states, positions = _positional_states(n=200, n_pos=4)
    with pytest.raises(ValueError, match=r"rank must be an int in \[1, 3\] \(distinct positions"):
        SubspaceSwap.fit(states, positions, rank=4)
    with pytest.raises(ValueError, match=r"rank must be an int in \[1, 16\] \(d_model\), got 0"):
        SubspaceSwap.random_subspace(16, rank=0)


def test_interventions_work_on_a_transformer_bridge():
    """The hooks are TransformerLens names, so a TransformerBridge takes them too."""
    bridge = tiny_bridge()
    tokens = _tokens(batch=3, pos=9)
    with torch.no_grad():
        plain = bridge(tokens)
        with intervene(bridge, NoIntervention(), layer=1):
            same = bridge(tokens)
        torch.testing.assert_close(same, plain, rtol=0, atol=0)
        with intervene(bridge, NormPermute(seed=0, mirrored=True), layer=1):
            changed = bridge(tokens)
        assert not torch.allclose(changed, plain)
        torch.testing.assert_close(bridge(tokens), plain, rtol=0, atol=0)  # hooks removed
    # its attention pattern hook is read-only: refused rather than silently doing nothing
    with pytest.raises(ValueError, match="attention pattern and needs a HookedTransformer"):
        with intervene(bridge, UniformAttention(), layer=1):
            pass
