"""The position-curve arms: each arm's defining property on random curves and states (a shift
keeps every neighbour distance, a rotation every pairwise distance and norm, a scatter breaks
locality, the random control keeps the norm profile in the states' span), and the size
matching (every arm within 5% of a dose's target)."""

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
    scattering_order,
    subspace_rank,
)
from adjpos.interventions.curve.change import (
    apply_curve,
    change_size,
    changed_positions,
    dose_targets,
    match_arm,
    match_parameter,
    pooled_size,
)
from adjpos.validation import UsageError
from factories import random_curve, random_prompts

cases = st.tuples(st.integers(0, 2**31 - 1), st.integers(4, 12), st.integers(2, 9))


@settings(max_examples=40, deadline=None)
@given(cases, st.integers(-3, 3).filter(bool), st.booleans())
def test_a_full_shift_keeps_every_neighbour_distance_moved_by_k(case, k, keep_readout):
    seed, pos, d = case
    curve = random_curve(seed, pos, d)
    changed = changed_positions(pos, keep_readout=keep_readout)
    new = CurveArm("shift", k).new_curve(curve, 1.0, changed)
    for t in range(pos - 1):
        if changed[t] and changed[t + 1] and 0 <= t - k and t + 1 - k < pos:
            got = (new[t + 1] - new[t]).norm()
            want = (curve[t + 1 - k] - curve[t - k]).norm()
            torch.testing.assert_close(got, want)
    for t in range(pos):  # each changed state carries the curve of t - k, clamped
        source = min(max(t - k, 0), pos - 1) if changed[t] else t
        torch.testing.assert_close(new[t], curve[source])


@settings(max_examples=40, deadline=None)
@given(cases, st.floats(0.0, math.pi), st.integers(0, 30))
def test_a_rotation_keeps_every_pairwise_distance_and_norm(case, angle, draw):
    seed, pos, d = case
    curve = random_curve(seed, pos, d, smooth=draw % 2 == 0)
    changed = torch.ones(pos, dtype=torch.bool)
    new = CurveArm("rotate", draw=draw).new_curve(curve, angle, changed)
    torch.testing.assert_close(torch.cdist(new, new), torch.cdist(curve, curve))
    torch.testing.assert_close(new.norm(dim=-1), curve.norm(dim=-1))
    # it turns the curve inside its top principal subspace: nothing moves outside it
    _, _, vh = torch.linalg.svd(curve, full_matrices=True)
    outside = vh[subspace_rank(curve) :]  # [d - r, d]
    moved_outside = (new - curve) @ outside.T
    torch.testing.assert_close(moved_outside, torch.zeros_like(moved_outside))


def test_a_rotation_moves_the_curve_more_with_the_angle():
    curve = random_curve(3, 10, 6)
    changed = torch.ones(10, dtype=torch.bool)
    moved = [
        float((CurveArm("rotate").new_curve(curve, a, changed) - curve).norm())
        for a in (0.0, 0.5, 1.0, 2.0, math.pi)
    ]
    assert moved[0] == pytest.approx(0.0, abs=1e-12)
    assert moved == sorted(moved) and moved[-1] > 0


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(8, 16), st.integers(0, 40))
def test_a_full_scatter_breaks_locality(seed, pos, draw):
    curve = random_curve(seed, pos, 4)
    changed = changed_positions(pos, keep_readout=True)
    new = CurveArm("scatter", draw=draw, seed=seed).new_curve(curve, 1.0, changed)
    order = scattering_order(int(changed.sum()), seed=seed, draw=draw)
    assert not ((order[1:] - order[:-1]).abs() == 1).any()
    assert not (order == torch.arange(len(order))).any()
    # the same set of curve points, none at its own place, no neighbour pair left
    index = changed.nonzero().flatten()
    torch.testing.assert_close(new[index], curve[index[order]])
    # on a straight line (distance = |t - t'|) every neighbour distance at least doubles
    line = torch.arange(pos, dtype=torch.float64)[:, None] * torch.ones(1, 3, dtype=torch.float64)
    scattered = CurveArm("scatter", draw=draw, seed=seed).new_curve(line, 1.0, changed)
    steps = (scattered[1:-1] - scattered[:-2]).norm(dim=-1)
    assert bool((steps >= 2 * math.sqrt(3) - 1e-9).all())


def test_the_scatter_draws_are_seeded():
    same = scattering_order(12, seed=4, draw=1), scattering_order(12, seed=4, draw=1)
    assert torch.equal(*same)
    others = {tuple(scattering_order(12, seed=4, draw=k).tolist()) for k in range(20)}
    assert len(others) == 20


@settings(max_examples=30, deadline=None)
@given(cases, st.integers(0, 30))
def test_the_random_control_keeps_the_norm_profile_in_the_states_span(case, draw):
    seed, pos, d = case
    curve = random_curve(seed, pos, d)
    gen = torch.Generator().manual_seed(seed)
    span = torch.linalg.qr(torch.randn(d, 2, generator=gen, dtype=torch.float64))[0]  # [d, 2]
    states = torch.randn(5, pos, 2, generator=gen, dtype=torch.float64) @ span.T
    changed = torch.ones(pos, dtype=torch.bool)
    new = CurveArm("random", draw=draw).new_curve(curve, 1.0, changed, states)
    r = new - curve
    torch.testing.assert_close(r.norm(dim=-1), curve.norm(dim=-1))
    torch.testing.assert_close(r - (r @ span) @ span.T, torch.zeros_like(r))
    with pytest.raises(UsageError, match="covariance"):
        CurveArm("random").new_curve(curve, 1.0, changed)


def test_remove_takes_the_changed_positions_to_their_mean():
    curve = random_curve(0, 9, 5)
    changed = changed_positions(9)
    new = CurveArm("remove").new_curve(curve, 1.0, changed)
    torch.testing.assert_close(new[:-1], curve[:-1].mean(dim=0).expand(8, 5).clone())
    torch.testing.assert_close(new[-1], curve[-1])
    half = CurveArm("remove").new_curve(curve, 0.5, changed)
    torch.testing.assert_close(half, (curve + new) / 2)


@pytest.mark.parametrize("arm", [CurveArm("shift", 1), *(CurveArm(a) for a in list(ARMS)[1:])])
def test_every_arm_at_zero_changes_nothing_and_keeps_the_readout(arm):
    prompts = random_prompts()
    curves = position_curves(prompts)
    states = prompts[7][0]
    changed = changed_positions(7)
    assert torch.equal(arm.new_curve(curves[7], 0.0, changed, states), curves[7])
    new = arm.new_curve(curves[7], 0.5, changed, states)
    after = apply_curve(states, curves[7], new, changed, keep_norm=False)
    assert torch.equal(after[:, -1], states[:, -1])  # the read-out position is kept
    torch.testing.assert_close(after - states, (new - curves[7]).expand_as(states))
    kept = apply_curve(states, curves[7], new, changed)
    torch.testing.assert_close(kept.norm(dim=-1), states.norm(dim=-1))


def test_every_arm_matches_each_dose_within_five_percent():
    prompts = random_prompts(d=8)
    curves = position_curves(prompts)
    targets = dose_targets(curves, prompts, offsets=(1, 2))
    assert targets[1] < targets[2]
    for k, target in targets.items():
        arms = [CurveArm("shift", k), CurveArm("shift", -k), CurveArm("rotate")]
        arms += [CurveArm(a, draw=draw) for a in ("scatter", "random") for draw in range(3)]
        arms += [CurveArm("remove")]
        for arm in arms:
            matched = match_arm(arm, target, curves, prompts)
            assert matched.matched, (arm, matched)
            assert abs(matched.size / target - 1) <= TOLERANCE
            # the size is what the pooled states say, recomputed by hand per length
            total = count = 0
            for length, curve in curves.items():
                states, changed = prompts[length][0], changed_positions(length)
                new = arm.new_curve(curve, matched.parameter, changed, states)
                after = apply_curve(states, curve, new, changed)
                n = states.shape[0] * int(changed.sum())
                total += float(change_size(states, after, changed)) * n
                count += n
            assert total / count == pytest.approx(matched.size)
        # the smaller full shift is the dose itself, unblended
        full = [match_arm(CurveArm("shift", s * k), target, curves, prompts) for s in (1, -1)]
        assert max(m.parameter for m in full) == 1.0


def test_an_arm_that_cannot_reach_a_size_says_so():
    prompts = random_prompts()
    curves = position_curves(prompts)
    full = pooled_size(CurveArm("shift", 1), 1.0, curves, prompts)
    matched = match_arm(CurveArm("shift", 1), 3 * full, curves, prompts)
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


def test_bad_arms_and_parameters_are_refused():
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
        CurveArm("scatter").new_curve(curve, 1.5, changed_positions(5))
    with pytest.raises(UsageError, match="target size"):
        match_parameter(lambda x: x, 0.0, 1.0)
