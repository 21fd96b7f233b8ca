"""The columns an arm's row carries (`ARM_TABLE`): its size, its parameter, its manipulation
check numbers (`checks`; the study judges them) and where its wrong answers point
(`adjpos.tasks.offsets`). `curve_columns` computes them for one unit from its draws.

The checks are computed on the measured prompts' states at the layer (the states the change
writes: the change acts on the input of the block, so the states after it are the states
before it, changed), pooled over prompt lengths with the prompts as weights, and over the
draws by their mean; ``size_error`` and ``check_value`` keep the draw that passes least.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from adjpos.interventions.curve.arms import Runs
from adjpos.interventions.curve.change import CurveChange, apply_curve, reached_prompts
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
from adjpos.tables import Table, with_interval
from adjpos.tasks.offsets import OFFSETS, error_offset_counts, error_offset_shares
from adjpos.types import PromptStates

# The columns of the position curve's arms; missing on the other rows.
ARM_TABLE = Table(
    arm="string",  # the arm in the rule's names: "shift+1", "rotate", "scatter", "random", ...
    dose="float64",  # the dose m whose size the arm is matched to (`CURVE_DIFFERENCES`)
    offset="Int64",  # a shift's k: each changed state carries the curve of position t - k
    size_target="float64",  # that size, mean ||h' - h|| / ||h|| on the fitting prompts
    parameter="float64",  # the arm's matched parameter (blend, angle, fraction, alpha, scale)
    # (the change size measured while decoding is `perturbation`)
    distance_change="float64",  # relative change of the pairwise distances of the curve
    curve_offset="float64",  # nearest unchanged curve point's position minus t (-k: shift k)
    curve_moved="float64",  # a shift's full curve_offset times -sign(k) (> 0: moved its way); else
    # the mean distance of each changed point's nearest unchanged point from its own position
    curve_adjacency="float64",  # the changed curve's own locality (adjacency of its points)
    curve_adjacency_before="float64",  # the same of the unchanged curve
    locality_drop="float64",  # curve_adjacency_before - curve_adjacency
    prompt_adjacency="float64",  # adjacency score of the changed prompt rows, after
    prompt_adjacency_before="float64",  # the same, before the change
    readout_spearman="float64",  # Spearman of cosine with distance, seen from the read-out
    readout_spearman_before="float64",  # the same, before the change
    probe_accuracy="float64",  # a position probe fitted on unchanged states, on changed ones
    probe_accuracy_before="float64",  # the same probe on the unchanged measured states
    probe_offset="float64",  # the mean change of its reading (about -k after a shift by k)
    size_error="float64",  # the largest |size / target - 1| of its draws at the lengths it reaches
    unreached_share="float64",  # prompts at lengths some draw does not reach: left out of its pairs
    check_value="float64",  # its check number (`arms.Check`), the draw that passes least
    n_wrong="float64",  # wrong answer characters compared (all draws; right-length answers)
    answers_shorter="float64",  # answers shorter than the right one (not compared by character)
    answers_longer="float64",  # answers longer than the right one
    # the share of wrong characters at each offset j, with its interval
    **with_interval(*(f"error_offset_share_{j}" for j in OFFSETS)),
)
REACHED = "reached"  # a row's key: per measured prompt, whether every draw reaches its size
# The manipulation checks among them (each a mean over the draws).
_NAMES = ARM_TABLE.names
CHECKS = tuple(_NAMES[_NAMES.index("distance_change") : _NAMES.index("size_error")])


def fit_position_probe(prompts: PromptStates, counts: Mapping[int, int]) -> Any:
    """A ridge probe of position (`adjpos.probes.fit.make_probe`) fitted on the unchanged
    fitting states of the measured lengths, its prediction rounded to a position."""
    from adjpos.probes.fit import make_probe

    x = torch.cat([prompts[n][0].reshape(-1, prompts[n][0].shape[-1]) for n in sorted(counts)])
    y = torch.cat([torch.arange(n).repeat(len(prompts[n][0])) for n in sorted(counts)])
    return _Rounded(make_probe("ridge").fit(x.double().numpy(), y.numpy()))


@dataclass(frozen=True)
class _Rounded:
    probe: Any

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.rint(self.probe.predict(x))


def curve_columns(
    built: Sequence[CurveChange],
    decoded: Sequence[Sequence[str]] | None,
    *,
    lengths: Sequence[int],
    states: Mapping[tuple[int, Runs], Tensor],
    tokens: Mapping[int, Tensor],
    probe: Any,
    prompts: Sequence[str] = (),
    answers: Sequence[str] = (),
    task: str | None = None,
) -> dict[str, Any]:
    """The arm columns of one unit.

    Args:
        built: its draws (one `CurveChange` each).
        decoded: each draw's answers to `prompts` (whose right answers are `answers`); None
            with `task` None where nothing is decoded (text: no error-offset columns).
        lengths: each measured prompt's length (which prompts its draws reach,
            ``reached``: the only ones its paired differences read).
        states: {(prompt length, runs): [n, L, d_model]} the measured prompts' states at the
            layer, grouped by length and runs.
        tokens: {prompt length: [n, L]} the fitting prompts' tokens (where the format's
            fixed tokens sit).
        probe: the position probe (`fit_position_probe`).
        task: the task's name (`adjpos.tasks.offsets.TASK_OFFSETS`); None: no error-offset columns.

    Returns:
        the arm columns (`ARM_TABLE`; ``size_error`` and ``check_value`` are what its
        manipulation check is judged on, `adjpos.study.rules.check_passed`).
    """
    first = built[0]
    memo: dict[tuple[int, Runs, str], dict[str, float]] = {}
    numbers = [_checks(change, states, tokens, probe, memo) for change in built]
    errors = [e for change in built for e in change.size_errors]
    reached = reached_prompts(built, lengths)
    check, worst = first.arm.kind.check, None
    if check is not None:  # the draw that passes least (NaN when any draw's is NaN)
        values = np.array([n[check.number] for n in numbers], float)
        worst = float(values.max() if check.relation == "<=" else values.min())
    shares = {}
    if task is not None:
        shares = error_offset_shares(
            [a for answers_of in decoded for a in answers_of],
            list(answers) * len(decoded),
            list(prompts) * len(decoded),
            task,
            offsets=OFFSETS,
        )
        # per prompt, the draws summed: what the paired share difference resamples
        counts = [error_offset_counts(d, answers, prompts, task, offsets=OFFSETS) for d in decoded]
        hits, totals = (np.sum([c[i] for c in counts], axis=0).tolist() for i in (0, 1))
        shares["offset_counts"] = {"hits": hits, "totals": totals, "offsets": list(OFFSETS)}
    return (
        {"arm": first.arm.name, "size_target": first.target}
        | {"parameter": float(np.mean([c.parameter for c in built]))}
        | {name: _nanmean(np.array([n[name] for n in numbers])) for name in CHECKS}
        | {"size_error": max(errors, default=np.nan)}
        | {"unreached_share": 1 - float(np.mean(reached))}
        | {REACHED: reached}
        | {"check_value": worst}
        | shares
    )


def _checks(
    change: CurveChange,
    states: Mapping[tuple[int, Runs], Tensor],
    tokens: Mapping[int, Tensor],
    probe: Any,
    memo: dict[tuple[int, Runs, str], dict[str, float]],
) -> dict[str, float]:
    """One draw's check numbers, pooled over the lengths and runs (weights: measured prompts)
    where they are defined (a curve's locality needs three varying changed positions, a
    read-out's rank correlation two earlier positions; NaN where none has them). `memo` keeps
    the unchanged states' numbers across the draws of a unit."""
    sums: dict[str, float] = defaultdict(float)
    totals: dict[str, int] = defaultdict(int)
    offset = change.arm.offset
    for (length, runs), before in states.items():
        curve, new = change.curves[length], change.new_curve(length, runs)
        changed = change.changed(length, runs)
        if not changed.any():
            continue
        before = before.double()
        after = apply_curve(before, curve, new, changed)
        varying = changed & varying_positions(tokens[length])
        key = (length, runs, change.arm.kind.on)
        if key not in memo:  # the unchanged curve's and states' numbers, alike for every draw
            memo[key] = {
                "curve_adjacency_before": curve_adjacency(curve, varying),
                "prompt_adjacency_before": float(prompt_adjacency(before, changed).nanmean()),
                "readout_spearman_before": _nanmean(
                    readout_similarity_spearman(before, length - 1)
                ),
                "probe_accuracy_before": probe_accuracy(probe, before, changed),
                "probe_reading": probe_offset(probe, before, changed),
            }
        moved = curve_offset(curve, new, changed)
        found = memo[key] | {
            "distance_change": curve_distance_change(curve, new, changed),
            "curve_offset": moved,
            # a shift's points moved its way (at its full blend: a blended point lies between
            # two points of the curve, as near one as the other at half); another arm's at all
            "curve_moved": -np.sign(offset)
            * curve_offset(curve, change.arm.new_curve(curve, 1.0, runs), changed)
            if offset
            else curve_offset(curve, new, changed, absolute=True),
            "curve_adjacency": curve_adjacency(new, varying),
            "prompt_adjacency": float(prompt_adjacency(after, changed).nanmean()),
            "readout_spearman": _nanmean(readout_similarity_spearman(after, length - 1)),
            "probe_accuracy": probe_accuracy(probe, after, changed),
            # the change of the probe's reading (its own bias at the unchanged states removed)
            "probe_offset": probe_offset(probe, after, changed) - memo[key]["probe_reading"],
        }
        found["locality_drop"] = found["curve_adjacency_before"] - found["curve_adjacency"]
        for name, value in found.items():
            if not np.isnan(value):
                sums[name] += len(before) * value
                totals[name] += len(before)
    return {name: sums[name] / totals[name] if totals[name] else np.nan for name in CHECKS}


def _nanmean(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")
