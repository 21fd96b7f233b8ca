"""The position curve's swap and mirror: the curve against a loop-by-loop reference, what the
two interventions keep, the scattering permutations, and the table's kept-only rule."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.interventions import (
    SPECS,
    Fitted,
    PositionMeanSwap,
    fit_prompt_states,
    held_out_prompts,
    intervention_table,
    position_curves,
)
from adjpos.interventions.curve.position import CANDIDATES, MIN_FIT, scattering_permutations
from adjpos.metrics import adjacency_probability, cosine_matrix
from reference import slow_position_curves


def _prompts(seed=0, lengths=(6, 7, 9), n=6, d=5, vocab=8):
    """{L: (states, tokens)}: a token part, a smooth position curve and noise."""
    gen = torch.Generator().manual_seed(seed)
    embed = torch.randn(vocab, d, generator=gen, dtype=torch.float64)
    out = {}
    for length in lengths:
        tokens = torch.randint(0, vocab, (n, length), generator=gen)
        t = torch.arange(length, dtype=torch.float64)[:, None]
        curve = torch.cat([torch.cos(t / 3), torch.sin(t / 3), t / length], dim=1)
        curve = torch.nn.functional.pad(curve, (0, d - 3))
        noise = 0.1 * torch.randn(n, length, d, generator=gen, dtype=torch.float64)
        out[length] = (embed[tokens] + 2 * curve + noise, tokens)
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(MIN_FIT - 1, 6))
def test_the_curves_match_the_slow_reference(seed, d, n):
    prompts = _prompts(seed, lengths=(3, 5, 8), n=n, d=max(d, 3))
    got = position_curves(prompts) if n >= MIN_FIT else None
    nested = {k: (s.tolist(), t.tolist()) for k, (s, t) in prompts.items()}
    want = slow_position_curves(nested, MIN_FIT)
    if n < MIN_FIT:
        assert want == {}
        with pytest.raises(ValueError, match=f"need {MIN_FIT} prompts of one length"):
            position_curves(prompts)
        return
    assert sorted(got) == sorted(want)
    for length, curve in got.items():
        torch.testing.assert_close(curve, torch.tensor(want[length], dtype=torch.float64))


def _before_readout(n):
    """The mask `intervene` hands over with the read-out kept: no position is read out."""
    return torch.zeros(n, dtype=torch.bool)


def test_the_swap_moves_the_curve_alone_and_keeps_the_norms():
    prompts = _prompts()
    states = prompts[7][0][:, :6]  # a 7-token prompt's positions before its read-out
    for iv in (PositionMeanSwap.fit(prompts, seed=2), PositionMeanSwap.mirror(prompts)):
        loose = PositionMeanSwap(iv.curves, iv.orders, keep_norm=False)
        order = iv.order(7)
        curve = iv.curves[7][:6]
        # without the norm kept: exactly the curve of another position in place of its own
        moved = loose(states, _before_readout(6))
        torch.testing.assert_close(moved, states - curve + curve[order])
        kept = iv(states, _before_readout(6))
        torch.testing.assert_close(kept.norm(dim=-1), states.norm(dim=-1))
        assert sorted(order.tolist()) == list(range(6))  # a permutation of those positions
    assert PositionMeanSwap.mirror(prompts).order(7).tolist() == [5, 4, 3, 2, 1, 0]


def test_the_mirror_keeps_the_curves_adjacency_and_the_swap_breaks_it():
    prompts = _prompts(lengths=(16,), n=8)
    swap, mirror = PositionMeanSwap.fit(prompts), PositionMeanSwap.mirror(prompts)
    curve = swap.curves[16][:15]
    assert torch.equal(curve[mirror.order(16)], curve.flip(0))

    def adjacency(states):
        return float(adjacency_probability(cosine_matrix(states[None]), ties="half"))

    before = adjacency(curve)
    assert adjacency(curve.flip(0)) == pytest.approx(before, abs=0.05)
    assert adjacency(curve[swap.order(16)]) < before - 0.2


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 30), st.integers(0, 1000))
def test_scattering_permutations_keep_no_neighbours_where_the_length_allows(n, seed):
    perms = scattering_permutations(n, seed)
    assert 1 <= len(perms) <= CANDIDATES
    assert len({tuple(p.tolist()) for p in perms}) == len(perms)
    for p in perms:
        assert sorted(p.tolist()) == list(range(n))
        if n >= 5:
            assert not ((p[1:] - p[:-1]).abs() == 1).any() and not (p == torch.arange(n)).any()
    assert [p.tolist() for p in scattering_permutations(n, seed)] == [p.tolist() for p in perms]


def test_the_swap_is_the_candidate_closest_in_size_to_the_mirror():
    prompts = _prompts(lengths=(12,), n=8)
    swap, mirror = PositionMeanSwap.fit(prompts, seed=1), PositionMeanSwap.mirror(prompts)
    states = prompts[12][0][:, :11]

    def size(iv):
        after = iv(states, _before_readout(11))
        return float(((after - states).norm(dim=-1) / states.norm(dim=-1)).mean())

    target = size(mirror)
    sizes = [size(PositionMeanSwap(swap.curves, {12: p})) for p in scattering_permutations(11, 1)]
    assert abs(size(swap) - target) == pytest.approx(min(abs(s - target) for s in sizes))


def test_the_position_curve_needs_the_readout_kept_and_a_fitted_length():
    prompts = _prompts()
    swap = PositionMeanSwap.fit(prompts)
    states = prompts[7][0][:, :6]
    with pytest.raises(ValueError, match="before the read-out, the read-out kept"):
        swap(states)
    with pytest.raises(ValueError, match="before the read-out, the read-out kept"):
        swap(states, readout=torch.arange(6) >= 5)
    with pytest.raises(
        ValueError, match=r"no position curve for prompts of 8 tokens; fitted: \[6, 7, 9\]"
    ):
        swap(torch.zeros(2, 7, 5, dtype=torch.float64), readout=_before_readout(7))
    with pytest.raises(ValueError, match="pass the prompt states"):
        SPECS["position_mean_swap"].build(Fitted(d_model=5))


def test_the_table_runs_the_position_curve_with_the_readout_kept_only():
    from adjpos import load_pretrained

    model, task = load_pretrained("addition")
    held = held_out_prompts(task, 30, seed=2)
    prompts = fit_prompt_states(model, task, held, 1, seed=2)
    lengths = {len(task.encode(p)) for p in held.test.prompts}
    assert lengths <= {n for n, (s, _) in prompts.items() if len(s) >= MIN_FIT}
    for n, (states, tokens) in prompts.items():
        assert states.shape[:2] == tokens.shape and tokens.shape[1] == n
    names = ["none", "position_mean_swap", "position_mean_mirror"]
    table = intervention_table(
        model,
        task,
        layers=[1],
        interventions=names,
        n_prompts=30,
        seed=2,
        readouts=["kept", "changed"],
    )
    assert set(zip(table.readout, table.intervention, strict=True)) == {
        ("kept", "none"),
        ("changed", "none"),
        ("kept", "position_mean_swap"),
        ("kept", "position_mean_mirror"),
    }
    swap = table.set_index("intervention").loc["position_mean_swap"]
    assert swap.control == "position_mean_mirror" and swap.log_norm_change < 1e-6
    with pytest.raises(ValueError, match=r"\['position_mean_swap'\] need the 'kept' read-out"):
        intervention_table(
            model, task, interventions=["position_mean_swap"], readouts=["changed"], n_prompts=30
        )
