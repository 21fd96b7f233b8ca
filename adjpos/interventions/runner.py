"""The one pipeline above the intervention table, `run_table`: the units of a run (planned by
`specs.plan_units`) -> each unit built from its spec and measured, kept in a run folder ->
each row set beside its control -> the table -> the paired differences between the
position-curve arms of each size (`curve.numbers.curve_differences`).

What a unit's measurement is depends on where it runs, so the runner takes a `Measurement`:
on a task, exact match over held-out prompts (`adjpos.interventions.task`); on text, the
next-token loss of each sequence's continuation (`adjpos.interventions.text`). Both give each
unit one outcome per prompt or sequence (its mean over the draws of a random control) and one
mean outcome per draw, which the pairing with the control reads (`OutcomeColumns` names them).

A dosed spec (`spec.Dose`) is one unit per (size, offset), and brings its control along:
each of its rows is set beside the control's row of the same size, and keeps each draw's
outcome per prompt, so its paired difference resamples prompts and draws together
(`adjpos.stats.paired_draw_difference`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from adjpos.interventions.curve.columns import REACHED
from adjpos.interventions.curve.numbers import CURVE_DIFFERENCES, curve_differences, reached_by
from adjpos.interventions.spec import Fitted, Unit
from adjpos.interventions.subspaces import variance_share
from adjpos.stats import paired_difference, paired_draw_difference
from adjpos.tables import Table

DEFAULT_DRAWS = 20


@dataclass(frozen=True)
class OutcomeColumns:
    """How a measurement's outcome is named and read. The per-prompt keys (the last four, and
    an arm's ``reached``) are kept in a run folder and dropped from the table (`hidden`).

    Args:
        mean: the row's column of the mean outcome ("exact_match", "loss").
        difference: the column of the paired difference from the control (with _low, _high).
        harm: +1 where a lower outcome is more harm (exact match), -1 where a higher one is
            (loss).
        per_item, per_draw: the row's keys of the outcome per prompt (or sequence; the mean
            over draws) and the mean outcome of each draw.
        per_draw_item: the key of each draw's outcome per prompt, [draws][prompts] (the
            dosed specs' rows).
        per_item_counts: the key of per-prompt counts the paired differences also read (the
            dosed specs' rows on a task: wrong characters at each offset).
    """

    mean: str
    difference: str
    harm: int
    per_item: str
    per_draw: str
    per_draw_item: str | None = None
    per_item_counts: str | None = None

    @property
    def hidden(self) -> tuple[str, ...]:
        """The keys a run folder keeps and the table drops."""
        keys = (self.per_item, self.per_draw, self.per_draw_item, self.per_item_counts, REACHED)
        return tuple(k for k in keys if k)


@runtime_checkable  # the tests' type checker checks arguments against it
class Measurement(Protocol):
    """Where the units run: ``fitted(layer, needs)``, what the specs build from at `layer`
    (`needs` from "states", "prompts"); ``measure(built, unit)``, the unit's columns from its
    draws, with the outcome's per_item and per_draw; ``unchanged()``, the unchanged model's
    outcome on each measured prompt or sequence."""

    outcome: OutcomeColumns

    def fitted(self, layer: int, needs: set[str]) -> Fitted: ...

    def measure(self, built: list[Any], unit: Unit) -> dict[str, Any]: ...

    def unchanged(self) -> Any: ...


def run_table(
    units: Sequence[Any],
    measurement: Measurement,
    *,
    table: Table,
    control_draws: int,
    columns: dict[str, Any],
    seed: int,
    extra: dict[str, Any] | None = None,
    folder: Any = None,
    progress: bool | None = None,
    return_differences: bool = False,
) -> Any:
    """Every unit measured (`measure_units`), each row beside its control's
    (`pair_with_controls`), as a DataFrame of `table` (each row `columns`, the unit's own, then
    `extra`); with `return_differences`, also the paired differences between the arms of each
    size (`CURVE_DIFFERENCES`, empty without a dosed spec)."""
    rows = measure_units(units, measurement, control_draws, columns, folder, progress)
    blank, extra = dict.fromkeys(table.names), extra or {}
    paired = pair_with_controls(rows, measurement.outcome, seed)
    frame = table.frame([blank | r | extra for r in paired])
    if not return_differences:
        return frame
    outcome, dosed = measurement.outcome, [r for r in rows if r.get("arm") is not None]
    keys = {"per_draw": outcome.per_draw_item, "counts": outcome.per_item_counts}
    # the unchanged model is measured only where needed
    found = dosed and curve_differences(dosed, measurement.unchanged(), seed=seed, **keys)
    return frame, CURVE_DIFFERENCES.frame(found)


def measure_units(
    units: Sequence[Unit],
    measurement: Measurement,
    control_draws: int,
    columns: dict[str, Any],
    folder: Any = None,
    progress: bool | None = None,
) -> list[dict[str, Any]]:
    """Each unit's row (`columns`, then the unit's own) with its outcome per prompt and per
    draw (the measurement's `OutcomeColumns`). A drawn spec is built `control_draws` times
    (draws 0, 1, ...), each other spec once; a matched spec is matched to its ``matched_to``
    built on the same layer. With `folder` (an `adjpos.runs.RunFolder`) a finished unit is
    read back instead of measured again, and each unit is marked done as it finishes."""
    rows = []
    quiet = None if progress is None else not progress  # None: quiet off a terminal
    for unit in tqdm(units, desc="interventions", disable=quiet):
        if folder is not None and folder.is_done(unit.key):
            rows.append(folder.result(unit.key))
            continue
        spec = unit.spec
        matched_spec = spec.matched_to
        needs = {s.fitted_on for s in (spec, matched_spec) if s is not None} - {None}
        fitted = measurement.fitted(unit.layer, needs)
        matched = None if matched_spec is None else matched_spec.build(fitted)
        draws = control_draws if spec.drawn else 1
        built = [
            spec.build(fitted, draw=d, matched=matched, dose=unit.dose, readout=unit.readout)
            for d in range(draws)
        ]
        row = columns | {"layer": unit.layer, "intervention": spec.name, "readout": unit.readout}
        if unit.dose is not None:
            row |= {"dose": unit.dose.size, "offset": unit.dose.offset}
        row |= {"control": spec.control, "rank": getattr(built[0], "rank", None)}
        row |= measurement.measure(built, unit)
        row["control_draws"] = draws if spec.drawn else None
        # a subspace's change: the mean share of the fitting states' variance in it
        swapped = fitted.states is not None and hasattr(built[0], "basis")
        shares = [variance_share(iv.basis, fitted.states) for iv in built] if swapped else None
        row["share"] = None if shares is None else float(np.mean(shares))
        if folder is not None:
            folder.mark_done(unit.key, row)
        rows.append(row)
    return rows


def pair_with_controls(
    rows: list[dict[str, Any]], outcome: OutcomeColumns, seed: int
) -> list[dict[str, Any]]:
    """Each row beside its control's row of the same layer, read-out variant (and dose): the
    paired difference of the outcome over prompts (intervention minus control, with a paired
    bootstrap interval, over prompts and draws together where each draw's outcomes are kept,
    then on the prompts a position-curve arm reaches at its size, `reached_by`) and
    ``percentile``, the share (%) of the control's draws that harm more than the
    intervention (ties count half; only for a control of several draws)."""
    index = {(r["layer"], r["readout"], r.get("dose"), r["intervention"]): r for r in rows}
    names = [outcome.difference, f"{outcome.difference}_low", f"{outcome.difference}_high"]
    out = []
    for r in rows:
        control = index.get((r["layer"], r["readout"], r.get("dose"), r["control"]))
        extra: dict[str, Any] = dict.fromkeys([*names, "percentile"])
        if control is not None and control is not r:
            each = outcome.per_draw_item
            draws = np.array(control.get(outcome.per_draw) or [])
            mine = r[outcome.mean]
            kept = reached_by(r, control, n=len(r[each][0])) if r.get(each) else None
            if kept is not None and not kept.any():  # an arm that reaches no prompt's length
                found, draws = (None, None, None), []
            elif kept is not None and control.get(each):  # on the prompts an arm reaches
                ours, theirs = (np.asarray(x[each], float)[:, kept] for x in (r, control))
                paired = paired_draw_difference(ours, theirs, seed=seed)
                found = (paired.value, paired.low, paired.high)
                draws, mine = theirs.mean(axis=1), ours.mean()
            else:
                found = paired_difference(r[outcome.per_item], control[outcome.per_item], seed=seed)
            extra |= dict(zip(names, found, strict=True))
            if len(draws) > 1:
                draws, mine = outcome.harm * draws, outcome.harm * mine
                share = np.mean(draws < mine) + np.mean(draws == mine) / 2
                extra["percentile"] = float(100 * share)
        out.append({k: v for k, v in r.items() if k not in outcome.hidden} | extra)
    return out
