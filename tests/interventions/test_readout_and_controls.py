"""The read-out positions kept or changed, and the matched controls: position-matched norm
rescalings, the common rescaling, variance-matched random subspaces, size-matched erasures."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos import build_model
from adjpos.interventions import (
    LeaceErase,
    NormCommonScale,
    NormPermute,
    NormScaleControl,
    SubspaceErase,
    SubspaceSwap,
    UniformAttention,
    intervene,
)
from adjpos.interventions.subspaces import tilted_subspace, variance_share
from adjpos.metrics.norms import relative_change
from adjpos.seeds import derived_generator
from factories import tiny_config


def _resid(seed=0, batch=4, pos=9, d=16):
    gen = torch.Generator().manual_seed(seed)
    scale = torch.rand(batch, pos, 1, generator=gen, dtype=torch.float64) + 0.5
    return torch.randn(batch, pos, d, generator=gen, dtype=torch.float64) * scale


def _states(seed=0, n=400, d=12):
    """Anisotropic states: a few directions hold most of the variance."""
    gen = torch.Generator().manual_seed(seed)
    scales = torch.logspace(1, -1, d, dtype=torch.float64)
    return torch.randn(n, d, generator=gen, dtype=torch.float64) * scales + 3.0


def _model():
    return build_model(tiny_config(n_layers=2, d_model=32, n_heads=4, dtype="float64"))


@pytest.mark.parametrize("start", [0, 4, 9])
def test_kept_readout_positions_pass_untouched_and_the_rest_change(start):
    model = _model()
    tokens = torch.randint(0, 20, (5, 10), generator=torch.Generator().manual_seed(1))
    record = []
    with intervene(model, NormPermute(seed=1), layer=1, readout_from=start, keep_readout=True):
        kept = model(tokens)
    with intervene(model, NormPermute(seed=1), layer=1, readout_from=start, record=record):
        changed = model(tokens)
    plain = model(tokens)
    # At the site (a hook after the intervention's sees what it wrote): the read-out states
    # are the clean ones when kept.
    captured = {}

    def grab(key):
        return [("blocks.1.hook_resid_pre", lambda a, hook: captured.update({key: a}))]

    for key, keep in (("kept", True), ("changed", False)):
        with intervene(model, NormPermute(seed=1), layer=1, readout_from=start, keep_readout=keep):
            with model.hooks(fwd_hooks=grab(key)):
                model(tokens)
    with model.hooks(fwd_hooks=grab("clean")):
        model(tokens)
    torch.testing.assert_close(captured["kept"][:, start:], captured["clean"][:, start:])
    if start > 0:
        assert not torch.allclose(captured["kept"][:, :start], captured["clean"][:, :start])
    if start < 10:
        assert not torch.allclose(changed[:, start:], kept[:, start:])
    assert not torch.allclose(changed, plain)
    assert len(record) == 1 and record[0][1] == 5 * 10  # every state handed to the hook


def test_the_recorded_size_is_the_mean_relative_change_of_the_changed_states():
    model = _model()
    tokens = torch.randint(0, 20, (3, 8), generator=torch.Generator().manual_seed(2))
    clean = {}
    with model.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", lambda a, hook: clean.update(x=a))]):
        model(tokens)
    resid = clean["x"]
    # changed: the whole sequence permuted; kept: the prompt before the read-out (0 .. 4)
    whole, prompt = NormPermute(seed=0)(resid), NormPermute(seed=0)(resid[:, :5])
    for keep, expected, cols in ((False, whole, slice(None)), (True, prompt, slice(0, 5))):
        record = []
        with intervene(
            model, NormPermute(seed=0), layer=1, readout_from=5, keep_readout=keep, record=record
        ):
            model(tokens)
        before, after = resid[:, cols], expected[:, cols]
        sizes = ((after - before).norm(dim=-1) / before.norm(dim=-1)).detach().flatten()
        assert record[0][1] == sizes.numel()
        assert record[0][0] == pytest.approx(float(sizes.sum()))


def test_with_the_readout_kept_the_change_does_not_depend_on_later_tokens():
    """Kept: the intervention sees the prompt alone, so what it writes at positions before
    the read-out is the same whatever follows (as under a KV cache)."""
    model = _model()
    tokens = torch.randint(0, 20, (4, 9), generator=torch.Generator().manual_seed(5))
    other = torch.cat([tokens[:, :6], (tokens[:, 6:] + 7) % 20], dim=1)
    for iv in (NormPermute(seed=2), SubspaceSwap.random_subspace(32, rank=3)):
        written = {}
        for key, toks in (("a", tokens), ("b", other), ("short", tokens[:, :6])):
            grab = ("blocks.1.hook_resid_pre", lambda a, hook, k=key, w=written: w.update({k: a}))
            with intervene(model, iv, layer=1, readout_from=5, keep_readout=True):
                with model.hooks(fwd_hooks=[grab]):
                    model(toks)
        torch.testing.assert_close(written["a"][:, :6], written["b"][:, :6])
        torch.testing.assert_close(written["a"][:, :6], written["short"])


def test_kept_readout_keeps_the_attention_rows_of_the_readout_queries():
    model = _model()
    tokens = torch.randint(0, 20, (2, 7), generator=torch.Generator().manual_seed(3))
    patterns = {}
    hook = ("blocks.0.attn.hook_pattern", lambda a, hook: patterns.update(p=a.clone()))
    with model.hooks(fwd_hooks=[hook]):
        model(tokens)
    clean = patterns["p"]
    with intervene(model, UniformAttention(), layer=0, readout_from=4, keep_readout=True):
        out = {}
        after = ("blocks.0.attn.hook_z", lambda a, hook: out.update(z=a))
        with model.hooks(fwd_hooks=[after]):
            model(tokens)
    uniform = UniformAttention()(clean)
    expected = torch.cat([uniform[:, :, :4], clean[:, :, 4:]], dim=2)
    # z = pattern @ v: recompute it from the expected pattern and the model's values
    values = {}
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_v", lambda a, hook: values.update(v=a))]):
        model(tokens)
    z = torch.einsum("bhqk,bkhd->bqhd", expected, values["v"])
    torch.testing.assert_close(out["z"], z)


def test_keep_readout_needs_the_readout_position():
    with pytest.raises(ValueError, match="keep_readout needs readout_from"):
        with intervene(_model(), NormPermute(), layer=1, keep_readout=True):
            pass
    with pytest.raises(ValueError, match="readout_from must be an int >= 0, got -1"):
        with intervene(_model(), NormPermute(), layer=1, readout_from=-1):
            pass


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 1000), st.integers(0, 8), st.booleans(), st.integers(0, 3))
def test_the_scale_control_matches_the_permutation_at_the_readout(seed, start, mirrored, draw):
    resid = _resid(seed)
    readout = torch.arange(9) >= start
    norms = resid.norm(dim=-1)
    permuted = NormPermute(seed=seed, mirrored=mirrored)(resid).norm(dim=-1) / norms
    control = NormScaleControl(seed=seed, mirrored=mirrored, draw=draw)
    scaled = control(resid, readout=readout).norm(dim=-1) / norms
    torch.testing.assert_close(scaled[:, readout], permuted[:, readout])  # position by position
    torch.testing.assert_close(  # elsewhere the same ratios, as a set
        scaled[:, ~readout].flatten().sort().values, permuted[:, ~readout].flatten().sort().values
    )


def test_control_draws_differ_and_each_is_fixed():
    resid = _resid(5)
    first = NormScaleControl(seed=2, draw=0)(resid)
    assert torch.equal(first, NormScaleControl(seed=2, draw=0)(resid))
    assert not torch.allclose(first, NormScaleControl(seed=2, draw=1)(resid))


@pytest.mark.parametrize("mirrored", [False, True])
def test_the_common_scale_keeps_the_norms_order_and_matches_the_mean_size(mirrored):
    resid, start = _resid(7), 6
    readout = torch.arange(9) >= start
    norms = resid.norm(dim=-1)
    permuted = NormPermute(seed=3, mirrored=mirrored)(resid).norm(dim=-1) / norms
    common = NormCommonScale(seed=3, mirrored=mirrored)(resid, readout=readout)
    ratios = common.norm(dim=-1) / norms
    for row in range(4):
        factor = permuted[row, :start].log().abs().mean().exp()
        torch.testing.assert_close(ratios[row, :start], factor.expand(start))
    torch.testing.assert_close(ratios[:, start:], permuted[:, start:])
    directions = torch.nn.functional.cosine_similarity(common, resid, dim=-1)
    torch.testing.assert_close(directions, torch.ones_like(directions))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 100), st.integers(1, 4), st.floats(0.05, 0.9))
def test_a_variance_matched_random_subspace_holds_the_asked_share(seed, rank, share):
    states = _states(seed)
    swap = SubspaceSwap.random_subspace(12, rank=rank, seed=seed, states=states, share=share)
    basis = swap.basis
    torch.testing.assert_close(basis.T @ basis, torch.eye(rank, dtype=basis.dtype))

    def end(target):  # the most (or least) tilted basis of the same Gaussian draw
        gen = derived_generator(seed, "random subspace", 0)
        return variance_share(
            tilted_subspace(
                states, rank, lambda b: variance_share(b, states), target, generator=gen
            ),
            states,
        )

    lowest, highest = end(-1.0), end(2.0)
    got = variance_share(basis, states)
    if lowest < share < highest:
        assert got == pytest.approx(share, abs=1e-3)
    else:  # out of reach: the closer end
        assert got == pytest.approx(lowest if share <= lowest else highest)
    untilted = SubspaceSwap.random_subspace(12, rank=rank, seed=seed).basis  # alpha = 0
    assert lowest < variance_share(untilted, states) < highest
    assert swap.random


def test_random_subspace_draws_differ_and_without_states_are_uniform():
    a = SubspaceSwap.random_subspace(12, rank=3, seed=0, draw=0).basis
    b = SubspaceSwap.random_subspace(12, rank=3, seed=0, draw=1).basis
    assert not torch.allclose(a @ a.T, b @ b.T)


def test_the_random_erasure_erases_as_many_directions_and_changes_the_states_as_much():
    states = _states(3, n=600)
    positions = torch.arange(600) % 6
    states[:, 0] += positions.double() * 2.0  # position lives in one direction
    eraser = LeaceErase.fit(states, positions)
    erase = SubspaceErase.matched(states, eraser, draw=0)
    assert erase.rank == eraser.rank
    batch = states[None]
    target = float(relative_change(states, eraser(batch)[0]))
    assert float(relative_change(states, erase(batch)[0])) == pytest.approx(target, rel=1e-3)
    # a projection: erasing twice is erasing once
    torch.testing.assert_close(erase(erase(batch)), erase(batch))
    other = SubspaceErase.matched(states, eraser, draw=1)
    assert not torch.allclose(other.basis @ other.basis.T, erase.basis @ erase.basis.T)
