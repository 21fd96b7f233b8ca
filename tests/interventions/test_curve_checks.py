"""The manipulation checks of the position-curve arms against slow references, and the error
offsets of each task (the mapping from an answer position to what it reads)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from adjpos.interventions.curve.arms import CurveArm
from adjpos.interventions.curve.change import apply_curve
from adjpos.interventions.curve.checks import (
    curve_adjacency,
    curve_distance_change,
    curve_offset,
    probe_accuracy,
    probe_offset,
    prompt_adjacency,
    readout_similarity_spearman,
    varying_positions,
)
from adjpos.study.claim import CRITERIA
from adjpos.study.rules import check_passed
from adjpos.tasks import get_task
from factories import prompt_run
from reference import slow_adjacency_rows, slow_cosine


def smooth_states(seed=0, batch=4, pos=9, d=6):
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(pos, dtype=torch.float64)[:, None]
    curve = torch.cat([torch.cos(t / 3), torch.sin(t / 3), t / pos], dim=1)
    curve = torch.nn.functional.pad(curve, (0, d - 3))
    curve = curve - curve.mean(dim=0)
    noise = 0.3 * torch.randn(batch, pos, d, generator=gen, dtype=torch.float64)
    return 3 * curve + noise + 1.0, curve


def _changed(pos):
    """The positions an arm changes on one run over the whole prompt before its read-out."""
    return torch.arange(pos) < pos - 1


def test_curve_distance_change_is_zero_for_a_rotation_and_not_for_a_scatter():
    _, curve = smooth_states()
    changed = _changed(9)
    rotated = CurveArm("rotate").new_curve(curve, 1.0, prompt_run(len(changed)))
    scattered = CurveArm("scatter").new_curve(curve, 1.0, prompt_run(len(changed)))
    assert curve_distance_change(curve, rotated, changed) < 1e-12
    assert curve_distance_change(curve, scattered, changed) > 0.2
    # against the definition, pair by pair
    idx = range(8)
    d0 = np.array([[float((curve[i] - curve[j]).norm()) for j in idx] for i in idx])
    d1 = np.array([[float((scattered[i] - scattered[j]).norm()) for j in idx] for i in idx])
    want = np.linalg.norm(d1 - d0) / np.linalg.norm(d0)
    assert curve_distance_change(curve, scattered, changed) == pytest.approx(want)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 8))
def test_prompt_adjacency_matches_the_slow_rows(seed, pos):
    gen = torch.Generator().manual_seed(seed)
    states = torch.randn(3, pos, 4, generator=gen, dtype=torch.float64)
    changed = _changed(pos)
    got = prompt_adjacency(states, changed)
    for b in range(3):
        sim = slow_cosine(states[b].tolist())
        rows = slow_adjacency_rows(sim, pos)
        picked = [r for k, r in enumerate(rows) if changed[k] and not math.isnan(r)]
        want = sum(picked) / len(picked) if picked else math.nan
        if math.isnan(want):
            assert math.isnan(float(got[b]))
        else:
            assert float(got[b]) == pytest.approx(want)


def test_a_scatter_lowers_the_prompt_adjacency_and_a_rotation_keeps_the_distances():
    states, curve = smooth_states(batch=8)
    changed = _changed(9)
    before = float(prompt_adjacency(states, changed).mean())
    for arm, draw in (("scatter", 0), ("rotate", 0)):
        new = CurveArm(arm, draw=draw).new_curve(curve * 3, 1.0, prompt_run(len(changed)))
        after = apply_curve(states, curve * 3, new, changed, keep_norm=False)
        score = float(prompt_adjacency(after, changed).mean())
        checks = {
            "size": 1.0,
            "target": 1.0,
            "adjacency": score,
            "adjacency_before": before,
            "distance_change": curve_distance_change(curve * 3, new, changed),
            "curve_adjacency": curve_adjacency(new, changed),
            "curve_adjacency_before": curve_adjacency(curve * 3, changed),
        }
        if arm == "scatter":
            assert score < before  # the states' own prompt rows lose adjacency too
        checks["locality_drop"] = checks["curve_adjacency_before"] - checks["curve_adjacency"]
        kind = CurveArm(arm, draw=draw).kind
        value = float("nan") if kind.check is None else checks[kind.check.number]
        assert check_passed(arm, 0.0, value, criteria=CRITERIA)
    assert not check_passed("rotate", 0.0, 0.1, criteria=CRITERIA)
    assert not check_passed(
        "scatter", 0.0, 0.99 - checks["curve_adjacency_before"], criteria=CRITERIA
    )
    assert not check_passed("remove", 0.2, float("nan"), criteria=CRITERIA)


def test_readout_spearman_matches_scipy():
    states, _ = smooth_states(batch=5, pos=10)
    got = readout_similarity_spearman(states, 9)
    for b in range(5):
        sims = [float(torch.cosine_similarity(states[b, 9], states[b, j], dim=0)) for j in range(9)]
        want = spearmanr(sims, [9 - j for j in range(9)]).statistic
        assert got[b] == pytest.approx(want)
    assert np.isnan(readout_similarity_spearman(states, 1)).all()


class ShiftedProbe:
    """Reads position exactly from the first coordinate (state = position there)."""

    def predict(self, x):
        return np.round(x[:, 0])


def test_the_probe_checks_see_a_shift_as_an_offset():
    pos = 8
    states = torch.arange(pos, dtype=torch.float64)[None, :, None].repeat(3, 1, 2)
    curve = states[0]
    changed = _changed(pos)
    new = CurveArm("shift", 2).new_curve(curve, 1.0, prompt_run(len(changed)))
    after = apply_curve(states, curve, new, changed, keep_norm=False)
    assert probe_accuracy(ShiftedProbe(), states, changed) == 1.0
    # positions 2..6 read 2 less; 0 and 1 are clamped to 0 (one right, one off by 1)
    assert probe_accuracy(ShiftedProbe(), after, changed) == pytest.approx(1 / 7)
    assert probe_offset(ShiftedProbe(), after, changed) == pytest.approx(-(5 * 2 + 1) / 7)
    # the shift's check reads the changed curve itself: its points sit at t - k
    assert curve_offset(curve, new, changed) == pytest.approx(-(5 * 2 + 1) / 7)
    # blended down: stays put
    half = CurveArm("shift", 2).new_curve(curve, 0.2, prompt_run(len(changed)))
    assert curve_offset(curve, half, changed) == 0
    # judged on curve_moved = -sign(k) * curve_offset: above 0, moved the shift's way
    assert check_passed("shift+2", 0.0, 1.5, criteria=CRITERIA)
    assert not check_passed("shift+2", 0.0, 0.0, criteria=CRITERIA)
    assert not check_passed("shift-2", 0.0, -1.0, criteria=CRITERIA)


def test_curve_adjacency_is_one_on_a_line_kept_by_a_rotation_and_lost_by_a_scatter():
    line = torch.arange(10, dtype=torch.float64)[:, None] * torch.tensor([[1.0, 2.0, 0.5]])
    line = line - line.mean(dim=0)
    changed = _changed(10)
    assert curve_adjacency(line, changed) == 1.0
    rotated = CurveArm("rotate").new_curve(line, 2.0, prompt_run(len(changed)))
    assert curve_adjacency(rotated, changed) == pytest.approx(1.0)
    scattered = CurveArm("scatter").new_curve(line, 1.0, prompt_run(len(changed)))
    assert curve_adjacency(scattered, changed) < 0.8
    # against the definition: row k, pairs i < j < k, |c_k - c_i| > |c_k - c_j| (a tie is not
    # ordered: the library's one tie rule)
    points = scattered[:9]
    rows = []
    for k in range(2, 9):
        dist = [float((points[k] - points[i]).norm()) for i in range(k)]
        pairs = [(i, j) for j in range(k) for i in range(j)]
        ordered = sum(1.0 if dist[i] > dist[j] else 0.0 for i, j in pairs)
        rows.append(ordered / len(pairs))
    assert curve_adjacency(scattered, changed) == pytest.approx(sum(rows) / len(rows))


def test_varying_positions_leave_out_a_format_fixed_in_place():
    task = get_task("reversal")
    prompts = [p for p in task.draw_prompts(400, generator=torch.Generator().manual_seed(0))]
    same = [p for p in prompts if len(p) == 12][:8]
    tokens = torch.stack([task.encode(p) for p in same])
    got = varying_positions(tokens)
    assert got.tolist() == [False] * 4 + [True] * 6 + [False] * 2  # rev( digits )=
