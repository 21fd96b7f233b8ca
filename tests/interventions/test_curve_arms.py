"""The position-curve arms on a prompt's runs: each arm's defining property on random curves
and random runs (an interior shift keeps every neighbour distance inside a run and never
crosses its edge, a rotation every distance and norm, a scatter breaks the interior's
locality and keeps the edges, the edges arm moves the edges alone, the random control keeps
the norm profile in the states' span), and the size matching (every arm within 5% of a
dose's target at every prompt length, prompts of one length with different runs)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.interventions import position_curves
from adjpos.interventions.curve.arms import (
    ARMS,
    TOLERANCE,
    CurveArm,
    changed_positions,
    check_runs,
    scattering_order,
    subspace_rank,
)
from adjpos.interventions.curve.change import (
    _layouts,
    apply_curve,
    dose_targets,
    length_size,
    match_arm,
    match_parameter,
)
from adjpos.metrics.norms import relative_change
from adjpos.validation import UsageError
from factories import prompt_run, random_curve, random_prompts


@st.composite
def layouts(draw, min_pos=6, max_pos=14):
    """(seed, pos, d, runs): one or two runs, apart, before the read-out (the last position)."""
    seed, d = draw(st.integers(0, 2**31 - 1)), draw(st.integers(2, 8))
    pos = draw(st.integers(min_pos, max_pos))
    first = draw(st.integers(0, 2))
    last = draw(st.integers(first, pos - 2))
    runs = [(first, last)]
    if last + 2 <= pos - 2 and draw(st.booleans()):
        start = draw(st.integers(last + 2, pos - 2))
        runs.append((start, draw(st.integers(start, pos - 2))))
    return seed, pos, d, tuple(runs)


def _in_runs(runs):
    return {t: (f, l_) for f, l_ in runs for t in range(f, l_ + 1)}


@settings(max_examples=60, deadline=None)
@given(layouts(), st.integers(-3, 3).filter(bool))
def test_an_interior_shift_moves_each_run_by_k_clamped_to_the_run(layout, k):
    seed, pos, d, runs = layout
    curve = random_curve(seed, pos, d)
    new = CurveArm("shift", k).new_curve(curve, 1.0, runs)
    inside = _in_runs(runs)
    for t in range(pos):
        if t in inside:  # the point of t - k, clamped to the run: never a fixed token's
            first, last = inside[t]
            torch.testing.assert_close(new[t], curve[min(max(t - k, first), last)])
        else:
            assert torch.equal(new[t], curve[t])
    for t in range(pos - 1):  # every neighbour distance inside a run, moved by k
        if t in inside and t + 1 in inside and inside[t] == inside[t + 1]:
            first, last = inside[t]
            if first <= t - k and t + 1 - k <= last:
                got, want = new[t + 1] - new[t], curve[t + 1 - k] - curve[t - k]
                torch.testing.assert_close(got.norm(), want.norm())


@settings(max_examples=40, deadline=None)
@given(layouts(), st.floats(0.0, math.pi), st.integers(0, 30))
def test_a_rotation_keeps_every_distance_between_the_runs_points_and_every_norm(
    layout, angle, draw
):
    seed, pos, d, runs = layout
    curve = random_curve(seed, pos, d, smooth=draw % 2 == 0)
    new = CurveArm("rotate", draw=draw).new_curve(curve, angle, runs)
    index = changed_positions(ARMS["rotate"], runs, pos)
    torch.testing.assert_close(
        torch.cdist(new[index], new[index]), torch.cdist(curve[index], curve[index])
    )
    torch.testing.assert_close(new.norm(dim=-1), curve.norm(dim=-1))
    assert torch.equal(new[~index], curve[~index])
    # it turns the curve inside its top principal subspace: nothing moves outside it
    _, _, vh = torch.linalg.svd(curve, full_matrices=True)
    outside = vh[subspace_rank(curve) :]  # [d - r, d]
    moved_outside = (new - curve) @ outside.T
    torch.testing.assert_close(moved_outside, torch.zeros_like(moved_outside))


def test_a_rotation_moves_the_curve_more_with_the_angle():
    curve = random_curve(3, 10, 6)
    moved = [
        float((CurveArm("rotate").new_curve(curve, a, prompt_run(10)) - curve).norm())
        for a in (0.0, 0.5, 1.0, 2.0, math.pi)
    ]
    assert moved[0] == pytest.approx(0.0, abs=1e-12)
    assert moved == sorted(moved) and moved[-1] > 0


@settings(max_examples=40, deadline=None)
@given(layouts(min_pos=9, max_pos=18), st.integers(0, 40))
def test_a_full_scatter_deranges_each_runs_interior_and_keeps_its_edges(layout, draw):
    seed, pos, _, runs = layout
    curve = random_curve(seed, pos, 4)
    new = CurveArm("scatter", draw=draw, seed=seed).new_curve(curve, 1.0, runs)
    inside = _in_runs(runs)
    for t in range(pos):
        if t not in inside or t in inside[t]:  # outside every run, or a run's first or last
            assert torch.equal(new[t], curve[t])
    for first, last in runs:
        inner = last - first - 1
        if inner < 2:
            continue
        order = scattering_order(inner, seed=seed, draw=draw)
        if inner >= 5:  # room enough: no neighbours together and none in place
            assert not ((order[1:] - order[:-1]).abs() == 1).any()
            assert not (order == torch.arange(inner)).any()
        torch.testing.assert_close(new[first + 1 : last], curve[first + 1 + order])
    # on a straight line (distance = |t - t'|) every interior step of a long run grows
    line = torch.arange(pos, dtype=torch.float64)[:, None] * torch.ones(1, 3, dtype=torch.float64)
    one_run = ((0, pos - 2),)
    scattered = CurveArm("scatter", draw=draw, seed=seed).new_curve(line, 1.0, one_run)
    steps = (scattered[2:-2] - scattered[1:-3]).norm(dim=-1)
    assert bool((steps >= 2 * math.sqrt(3) - 1e-9).all())


def test_the_scatter_draws_are_seeded():
    same = scattering_order(12, seed=4, draw=1), scattering_order(12, seed=4, draw=1)
    assert torch.equal(*same)
    others = {tuple(scattering_order(12, seed=4, draw=k).tolist()) for k in range(20)}
    assert len(others) == 20


@settings(max_examples=40, deadline=None)
@given(layouts())
def test_the_edges_take_the_points_just_outside_their_run_and_nothing_else_moves(layout):
    seed, pos, d, runs = layout
    curve = random_curve(seed, pos, d)
    new = CurveArm("edges").new_curve(curve, 1.0, runs)
    want = curve.clone()
    for first, last in runs:
        want[last] = curve[last + 1]
        if first > 0:  # a run at the prompt's start keeps its first point
            want[first] = curve[first - 1]  # a one-position run: the point before it
    torch.testing.assert_close(new, want)
    moved = changed_positions(ARMS["edges"], runs, pos)
    assert moved.tolist() == [
        any(t == last or (t == first and first > 0) for first, last in runs) for t in range(pos)
    ]


@settings(max_examples=30, deadline=None)
@given(layouts(), st.integers(0, 30), st.sampled_from(["random", "edges_random"]))
def test_the_random_controls_keep_the_norm_profile_in_the_states_span(layout, draw, arm):
    seed, pos, d, runs = layout
    curve = random_curve(seed, pos, d)
    gen = torch.Generator().manual_seed(seed)
    span = torch.linalg.qr(torch.randn(d, 2, generator=gen, dtype=torch.float64))[0]  # [d, 2]
    states = torch.randn(5, pos, 2, generator=gen, dtype=torch.float64) @ span.T
    new = CurveArm(arm, draw=draw).new_curve(curve, 1.0, runs, states)
    changed = changed_positions(ARMS[arm], runs, pos)
    r = new - curve
    torch.testing.assert_close(r[changed].norm(dim=-1), curve[changed].norm(dim=-1))
    assert torch.equal(r[~changed], torch.zeros_like(r[~changed]))
    torch.testing.assert_close(r - (r @ span) @ span.T, torch.zeros_like(r))
    with pytest.raises(UsageError, match="covariance"):
        CurveArm(arm).new_curve(curve, 1.0, runs)


def test_remove_takes_the_runs_to_their_mean():
    curve = random_curve(0, 9, 5)
    runs = ((1, 3), (5, 7))
    new = CurveArm("remove").new_curve(curve, 1.0, runs)
    index = [1, 2, 3, 5, 6, 7]
    torch.testing.assert_close(new[index], curve[index].mean(dim=0).expand(6, 5).clone())
    torch.testing.assert_close(new[[0, 4, 8]], curve[[0, 4, 8]])
    half = CurveArm("remove").new_curve(curve, 0.5, runs)
    torch.testing.assert_close(half, (curve + new) / 2)


@pytest.mark.parametrize(
    "arm", [CurveArm("shift", 1), *(CurveArm(a) for a in ARMS if not ARMS[a].offsets)]
)
def test_every_arm_at_zero_changes_nothing_and_keeps_the_fixed_tokens(arm):
    prompts = random_prompts()
    curves = position_curves(prompts)
    states = prompts[7][0]
    runs = ((1, 2), (4, 5))
    changed = changed_positions(arm.kind, runs, 7)
    assert torch.equal(arm.new_curve(curves[7], 0.0, runs, states), curves[7])
    new = arm.new_curve(curves[7], 0.5, runs, states)
    after = apply_curve(states, curves[7], new, changed, keep_norm=False)
    for t in (0, 3, 6):  # the fixed tokens and the read-out keep their states
        assert torch.equal(after[:, t], states[:, t])
    torch.testing.assert_close(after - states, (new - curves[7]).expand_as(states))
    kept = apply_curve(states, curves[7], new, changed)
    torch.testing.assert_close(kept.norm(dim=-1), states.norm(dim=-1))


def _runs_of(tokens):
    """Two runs whose split depends on the prompt (as addition's operands do)."""
    split = 4 + int(tokens[0]) % 2
    return ((0, split), (split + 2, len(tokens) - 2))


def test_every_arm_matches_each_dose_within_five_percent_at_every_length():
    prompts = random_prompts(d=8, lengths=(13, 14, 16), n=10)
    curves = position_curves(prompts)
    for length, curve in curves.items():
        layouts = _layouts(prompts[length], _runs_of)
        assert len(layouts) == 2  # one length, two ways to split it
        states = prompts[length][0]
        targets = dose_targets(curve, layouts, offsets=(1, 2))
        assert 0 < targets[1] < targets[2]
        for k, target in targets.items():
            arms = [CurveArm("shift", k), CurveArm("shift", -k), CurveArm("remove")]
            arms += [CurveArm(a, draw=d) for a in ("random", "rotate") for d in (0, 1)]
            # a run's interior scattered reaches the size of the shift by 1 (not more, on runs
            # of a few positions: each point moves a few steps at most)
            arms += [CurveArm("scatter", draw=d) for d in (0, 1) if k == 1]
            for arm in arms:
                matched = match_arm(arm, target, curve, layouts, states)
                assert matched.matched, (length, arm, matched)
                assert abs(matched.size / target - 1) <= TOLERANCE
                # the size is what the states of each layout say, recomputed by hand
                total = count = 0
                for runs, group in layouts.items():
                    changed = changed_positions(arm.kind, runs, length)
                    new = arm.new_curve(curve, matched.parameter, runs, states)
                    after = apply_curve(group, curve, new, changed)
                    n = group.shape[0] * int(changed.sum())
                    total += float(relative_change(group[:, changed], after[:, changed])) * n
                    count += n
                assert total / count == pytest.approx(matched.size)
            # the smaller full shift is the dose itself, unblended
            full = [match_arm(CurveArm("shift", s * k), target, curve, layouts) for s in (1, -1)]
            assert max(m.parameter for m in full) == 1.0


def test_an_arm_that_cannot_reach_a_size_says_so():
    prompts = random_prompts()
    curve = position_curves(prompts)[7]
    layouts = {prompt_run(7): prompts[7][0]}
    full = length_size(CurveArm("shift", 1), 1.0, curve, layouts)
    matched = match_arm(CurveArm("shift", 1), 3 * full, curve, layouts)
    assert not matched.matched and matched.parameter == 1.0


@settings(max_examples=50, deadline=None)
@given(st.floats(0.01, 50.0), st.floats(0.1, 10.0), st.booleans())
def test_match_parameter_inverts_an_increasing_size(target, slope, bounded):
    def size_of(x):
        return slope * x + 0.1 * x**2

    upper = 100.0 if bounded else None
    parameter, size = match_parameter(size_of, target, upper)
    assert size == size_of(parameter)
    assert abs(size / target - 1) <= TOLERANCE / 10


def test_bad_arms_parameters_and_runs_are_refused():
    with pytest.raises(UsageError, match="unknown curve arm"):
        CurveArm("twist")
    with pytest.raises(UsageError, match="offset"):
        CurveArm("shift")
    with pytest.raises(UsageError, match="offset"):
        CurveArm("rotate", offset=1)
    with pytest.raises(UsageError, match="nonzero int"):
        CurveArm("shift", 0)
    curve = random_curve(0, 5, 3)
    with pytest.raises(UsageError, match=r"scatter parameter must be in \[0, 1.0\]"):
        CurveArm("scatter").new_curve(curve, 1.5, prompt_run(5))
    with pytest.raises(UsageError, match="target size"):
        match_parameter(lambda x: x, 0.0, 1.0)
    for bad in [((3, 1),), ((0, 2), (2, 3)), ((1, 5),), "runs"]:
        with pytest.raises(UsageError, match="runs"):
            check_runs(bad, 5)
