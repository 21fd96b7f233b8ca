"""The manipulation checks of the position-curve arms against slow references, and the error
offsets of each task (the mapping from an answer position to what it reads)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from adjpos.interventions.curve.arms import CurveArm, apply_curve, changed_positions
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
from adjpos.interventions.curve.offsets import (
    OFFSETS,
    TASK_OFFSETS,
    error_offset_counts,
    error_offset_shares,
    reversal_source,
)
from adjpos.study.claim import CRITERIA
from adjpos.study.rules import check_passed
from adjpos.tasks import get_task
from reference import slow_adjacency_rows, slow_cosine


def smooth_states(seed=0, batch=4, pos=9, d=6):
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(pos, dtype=torch.float64)[:, None]
    curve = torch.cat([torch.cos(t / 3), torch.sin(t / 3), t / pos], dim=1)
    curve = torch.nn.functional.pad(curve, (0, d - 3))
    curve = curve - curve.mean(dim=0)
    noise = 0.3 * torch.randn(batch, pos, d, generator=gen, dtype=torch.float64)
    return 3 * curve + noise + 1.0, curve


def test_curve_distance_change_is_zero_for_a_rotation_and_not_for_a_scatter():
    _, curve = smooth_states()
    changed = changed_positions(9)
    rotated = CurveArm("rotate").new_curve(curve, 1.0, changed)
    scattered = CurveArm("scatter").new_curve(curve, 1.0, changed)
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
    changed = changed_positions(pos)
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
    changed = changed_positions(9)
    before = float(prompt_adjacency(states, changed).mean())
    for arm, draw in (("scatter", 0), ("rotate", 0)):
        new = CurveArm(arm, draw=draw).new_curve(curve * 3, 1.0, changed)
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
        assert check_passed(arm, 0.0, value, CRITERIA)
    assert not check_passed("rotate", 0.0, 0.1, CRITERIA)
    assert not check_passed("scatter", 0.0, 0.99 - checks["curve_adjacency_before"], CRITERIA)
    assert not check_passed("remove", 0.2, float("nan"), CRITERIA)


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
    changed = changed_positions(pos)
    new = CurveArm("shift", 2).new_curve(curve, 1.0, changed)
    after = apply_curve(states, curve, new, changed, keep_norm=False)
    assert probe_accuracy(ShiftedProbe(), states, changed) == 1.0
    # positions 2..6 read 2 less; 0 and 1 are clamped to 0 (one right, one off by 1)
    assert probe_accuracy(ShiftedProbe(), after, changed) == pytest.approx(1 / 7)
    assert probe_offset(ShiftedProbe(), after, changed) == pytest.approx(-(5 * 2 + 1) / 7)
    # the shift's check reads the changed curve itself: its points sit at t - k
    assert curve_offset(curve, new, changed) == pytest.approx(-(5 * 2 + 1) / 7)
    half = CurveArm("shift", 2).new_curve(curve, 0.2, changed)  # blended down: stays put
    assert curve_offset(curve, half, changed) == 0
    # judged on curve_moved = -sign(k) * curve_offset: above 0, moved the shift's way
    assert check_passed("shift+2", 0.0, 1.5, CRITERIA)
    assert not check_passed("shift+2", 0.0, 0.0, CRITERIA)
    assert not check_passed("shift-2", 0.0, -1.0, CRITERIA)


# --- error offsets --------------------------------------------------------------------------


def test_the_reversal_source_is_prompt_digit_n_minus_1_minus_i():
    prompt = "rev(12345)="
    assert [prompt[reversal_source(prompt, i)] for i in range(5)] == list("54321")
    assert [reversal_source(prompt, i) for i in range(5)] == [8, 7, 6, 5, 4]
    candidate = TASK_OFFSETS["reversal"].candidate
    # answer digit 1 ("4", prompt digit 3): offset +1 is prompt digit 4 ("5"), -2 digit 1
    assert [candidate(prompt, "54321", 1, j) for j in OFFSETS] == list("23455")[:3] + ["5", ")"]
    with pytest.raises(ValueError, match="outside the 5 digits"):
        reversal_source(prompt, 5)


@pytest.mark.parametrize("name", sorted(TASK_OFFSETS))
def test_offset_zero_is_the_right_answer_on_every_task(name):
    task = get_task(name)
    prompts = task.draw_prompts(60, generator=torch.Generator().manual_seed(0), split="test")
    candidate = TASK_OFFSETS[name].candidate
    for prompt in prompts:
        answer = task.solve(prompt)
        for i, char in enumerate(answer):
            assert candidate(prompt, answer, i, 0) == char


def test_offset_candidates_of_the_other_tasks():
    assert TASK_OFFSETS["addition"].candidate("123+456=", "579", 0, 1) == "7"
    assert TASK_OFFSETS["addition"].candidate("123+456=", "579", 2, 1) is None
    assert TASK_OFFSETS["indexing"].candidate("wherex(134504392,4)=", "2", 0, -1) == "1"
    assert TASK_OFFSETS["indexing"].candidate("wherex(134504392,4)=", "2", 0, -2) == "0"
    assert TASK_OFFSETS["indexing"].candidate("wherex(1345,1)=", "0", 0, -1) is None
    assert TASK_OFFSETS["ordering"].candidate("ord(5831,3851)=", "2103", 0, 1) == "3"
    assert TASK_OFFSETS["ordering"].candidate("ord(5831,3851)=", "2103", 3, 1) is None


def slow_shares(predicted, answers, prompts):
    """Reversal only, written from the definition: wrong digit i equal to prompt digit
    n-1-i+j (or the bracket there)."""
    hits = {j: 0 for j in OFFSETS}
    wrong = {j: 0 for j in OFFSETS}
    for got, right, prompt in zip(predicted, answers, prompts, strict=True):
        digits = prompt[4:-2]
        n = len(digits)
        for i in range(min(len(got), len(right))):
            if got[i] != right[i]:
                for j in OFFSETS:
                    at = 4 + (n - 1 - i) + j
                    if 0 <= at < len(prompt):
                        wrong[j] += 1
                        hits[j] += got[i] == prompt[at]
    return {j: hits[j] / wrong[j] if wrong[j] else math.nan for j in OFFSETS}


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(-2, 2), st.floats(0.0, 1.0))
def test_reversal_shares_match_the_definition_and_follow_a_shifted_copy(seed, k, noise):
    task = get_task("reversal")
    gen = torch.Generator().manual_seed(seed)
    prompts = task.draw_prompts(30, generator=gen, split="test")
    answers = [task.solve(p) for p in prompts]
    rng = np.random.default_rng(seed)
    predicted = []
    for prompt, answer in zip(prompts, answers, strict=True):  # the digit k off, or random
        n = len(answer)
        out = []
        for i in range(n):
            at = reversal_source(prompt, i) + k
            off = prompt[at] if 4 <= at < 4 + n else "0"
            out.append(off if rng.random() > noise else str(rng.integers(10)))
        predicted.append("".join(out))
    shares = error_offset_shares(predicted, answers, prompts, "reversal")
    want = slow_shares(predicted, answers, prompts)
    for j in OFFSETS:
        got = shares[f"error_offset_share_{j}"]
        assert (math.isnan(got) and math.isnan(want[j])) or got == pytest.approx(want[j])
    assert shares["error_offset_share_0"] in (0.0,) or math.isnan(shares["error_offset_share_0"])
    if k and noise < 0.3 and shares["n_wrong"] > 20:
        others = [shares[f"error_offset_share_{j}"] for j in OFFSETS if j != k]
        assert shares[f"error_offset_share_{k}"] > max(others)
        assert shares[f"error_offset_share_{k}_low"] <= shares[f"error_offset_share_{k}"]


def test_error_offset_counts_refuse_bad_input():
    with pytest.raises(ValueError, match="no error offsets for task"):
        error_offset_counts(["1"], ["1"], ["x"], "copying")
    with pytest.raises(ValueError, match="one entry per prompt"):
        error_offset_counts(["1"], ["1", "2"], ["rev(1)="], "reversal")
    matches, counted = error_offset_counts(["12"], ["12"], ["rev(21)="], "reversal")
    assert not matches.any() and not counted.any()


def test_curve_adjacency_is_one_on_a_line_kept_by_a_rotation_and_lost_by_a_scatter():
    line = torch.arange(10, dtype=torch.float64)[:, None] * torch.tensor([[1.0, 2.0, 0.5]])
    line = line - line.mean(dim=0)
    changed = changed_positions(10)
    assert curve_adjacency(line, changed) == 1.0
    rotated = CurveArm("rotate").new_curve(line, 2.0, changed)
    assert curve_adjacency(rotated, changed) == pytest.approx(1.0)
    scattered = CurveArm("scatter").new_curve(line, 1.0, changed)
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


def test_wider_offsets_cover_a_longer_shift():
    prompts = ["rev(1234567)="]
    answers = ["7654321"]
    predicted = ["4321"]  # each digit the prompt digit 3 before the one asked for
    shares = error_offset_shares(predicted, answers, prompts, "reversal", offsets=range(-3, 4))
    assert shares["error_offset_share_-3"] == 1.0
    assert shares["error_offset_share_3"] == 0.0 and shares["n_wrong"] == 4


def test_varying_positions_leave_out_a_format_fixed_in_place():
    task = get_task("reversal")
    prompts = [p for p in task.draw_prompts(400, generator=torch.Generator().manual_seed(0))]
    same = [p for p in prompts if len(p) == 12][:8]
    tokens = torch.stack([task.encode(p) for p in same])
    got = varying_positions(tokens)
    assert got.tolist() == [False] * 4 + [True] * 6 + [False] * 2  # rev( digits )=
