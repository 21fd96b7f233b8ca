"""The one runner above the intervention table: every (layer, read-out variant, intervention)
unit built from its spec, measured, kept in a run folder, and set beside its control.

What a unit's measurement is depends on where it runs, so the runner takes a `Measurement`:
on a task, exact match over held-out prompts (`adjpos.interventions.task`); on text, the
next-token loss of each sequence's continuation (`adjpos.interventions.text`). Both give each
unit one outcome per prompt or sequence (its mean over the draws of a random control) and one
mean outcome per draw, which the pairing with the control reads.

A dosed spec (`specs.Dose`) is one unit per (size, offset), and brings its control along:
each of its rows is set beside the control's row of the same size, and keeps each draw's
outcome per prompt, so its paired difference resamples prompts and draws together
(`curve_rule.paired_draw_difference`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from adjpos.interventions.curve_rule import paired_draw_difference
from adjpos.interventions.specs import (
    DEFAULT_DOSES,
    READOUTS,
    SPECS,
    Dose,
    Fitted,
    InterventionSpec,
    check_doses,
    check_interventions,
)
from adjpos.interventions.subspaces import variance_share
from adjpos.stats import paired_difference
from adjpos.validation import UsageError, is_int

DEFAULT_DRAWS = 20


@dataclass(frozen=True)
class Unit:
    """One measurement: `spec` at `layer` in the read-out variant `readout` (a dosed spec: at
    `dose`)."""

    layer: int
    readout: str
    spec: InterventionSpec
    dose: Dose | None = None

    @property
    def key(self) -> str:
        """The unit's name in a run folder."""
        name = f"layer{self.layer}-{self.readout}-{self.spec.name}"
        return name if self.dose is None else f"{name}-{self.dose.key}"


@dataclass(frozen=True)
class Outcome:
    """How a measurement's outcome is named and read.

    Args:
        mean: the row's column of the mean outcome ("exact_match", "loss").
        difference: the column of the paired difference from the control (with _low, _high).
        harm: +1 where a lower outcome is more harm (exact match), -1 where a higher one is
            (loss).
        per_item, per_draw: the row's keys of the outcome per prompt (or sequence; the mean
            over draws) and the mean outcome of each draw (kept in a run folder, dropped from
            the table).
        per_draw_item: the key of each draw's outcome per prompt, [draws][prompts] (the
            dosed specs' rows; kept in a run folder, dropped from the table).
    """

    mean: str
    difference: str
    harm: int
    per_item: str
    per_draw: str
    per_draw_item: str | None = None

    @property
    def hidden(self) -> tuple[str, ...]:
        """The keys a run folder keeps and the table drops."""
        return tuple(k for k in (self.per_item, self.per_draw, self.per_draw_item) if k)


@runtime_checkable
class Measurement(Protocol):
    """Where the units run: what they are fitted on and what is measured."""

    outcome: Outcome

    def fitted(self, layer: int, needs: set[str]) -> Fitted:
        """What the specs build from at `layer`, with `needs` (from "states", "prompts")."""
        ...

    def measure(self, built: list[Any], unit: Unit) -> dict[str, Any]:
        """The unit's columns from its draws, with the outcome's per_item and per_draw."""
        ...


def plan_units(
    model: Any,
    layers: Sequence[int] | None,
    interventions: Sequence[str | InterventionSpec],
    readouts: Sequence[str],
    control_draws: int,
    doses: Sequence[int] = DEFAULT_DOSES,
) -> list[Unit]:
    """The units of a run, checked (layers default to all; each spec in its own read-out
    variants only; a dosed spec at each of `doses`, its dosed control added when not asked
    for).

    Raises:
        ValueError: a layer out of range, unknown or repeated interventions or read-out
            variants, an intervention none of whose read-out variants is asked for,
            control_draws < 1, or doses that are not distinct ints >= 1.
    """
    specs = check_interventions(interventions)
    doses = check_doses(doses)
    names = {s.name for s in specs}
    controls = [s.control for s in specs if s.dosed and s.control not in names]
    specs += [SPECS[c] for c in dict.fromkeys(controls) if SPECS[c].dosed]
    n_layers = model.cfg.n_layers
    layers = list(range(n_layers)) if layers is None else list(layers)
    bad = [x for x in layers if not is_int(x) or not 0 <= x < n_layers]
    if bad or not layers:
        raise UsageError(f"layers {bad or layers} are not in [0, {n_layers - 1}]")
    readouts = list(readouts)
    if not readouts or set(readouts) - set(READOUTS) or len(set(readouts)) < len(readouts):
        raise UsageError(f"readouts must be distinct names from {list(READOUTS)}, got {readouts}")
    for variants in dict.fromkeys(s.readouts for s in specs):
        left_out = [s.name for s in specs if s.readouts == variants]
        if not set(variants) & set(readouts):
            needed = " or ".join(repr(r) for r in variants)
            raise UsageError(f"{left_out} need the {needed} read-out")
    if not is_int(control_draws) or control_draws < 1:
        raise UsageError(f"control_draws must be an int >= 1, got {control_draws!r}")
    return [
        Unit(layer, readout, spec, dose)
        for layer in layers
        for readout in readouts
        for spec in specs
        if readout in spec.readouts
        for dose in spec.doses(doses)
    ]


def run_units(
    units: Sequence[Unit],
    measurement: Measurement,
    *,
    control_draws: int,
    columns: dict[str, Any],
    seed: int,
    folder: Any = None,
    progress: bool | None = None,
) -> list[dict[str, Any]]:
    """Every unit's row (`columns`, then the unit's own), each beside its control's.

    A drawn spec is built `control_draws` times (draws 0, 1, ...), each other spec once; a
    matched spec is matched to its ``matched_to`` built on the same layer. With `folder` (an
    `adjpos.runs.RunFolder`) a finished unit is read back instead of measured again, and each
    unit is marked done as it finishes (resumable)."""
    rows = measure_units(
        units,
        measurement,
        control_draws=control_draws,
        columns=columns,
        folder=folder,
        progress=progress,
    )
    return pair_with_controls(rows, measurement.outcome, seed)


def measure_units(
    units: Sequence[Unit],
    measurement: Measurement,
    *,
    control_draws: int,
    columns: dict[str, Any],
    folder: Any = None,
    progress: bool | None = None,
) -> list[dict[str, Any]]:
    """`run_units` before the pairing: each unit's row with its outcome per prompt and per
    draw (the measurement's `Outcome`)."""
    given = {u.spec.name: u.spec for u in units}
    rows = []
    for unit in tqdm(units, desc="interventions", disable=_quiet(progress)):
        if folder is not None and folder.is_done(unit.key):
            rows.append(folder.result(unit.key))
            continue
        spec = unit.spec
        matched_spec = None
        if spec.matched_to is not None:
            matched_spec = given.get(spec.matched_to) or SPECS[spec.matched_to]
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
        row["share"] = _share(built, fitted)
        if folder is not None:
            folder.mark_done(unit.key, row)
        rows.append(row)
    return rows


def pair_with_controls(
    rows: list[dict[str, Any]], outcome: Outcome, seed: int
) -> list[dict[str, Any]]:
    """Each row beside its control's row of the same layer, read-out variant (and dose): the
    paired difference of the outcome over prompts (intervention minus control, with a paired
    bootstrap interval, over prompts and draws together where each draw's outcomes are kept)
    and ``percentile``, the share (%) of the control's draws that harm more than the
    intervention (ties count half; only for a control of several draws)."""
    index = {(r["layer"], r["readout"], r.get("dose"), r["intervention"]): r for r in rows}
    names = [outcome.difference, f"{outcome.difference}_low", f"{outcome.difference}_high"]
    out = []
    for r in rows:
        control = index.get((r["layer"], r["readout"], r.get("dose"), r["control"]))
        extra: dict[str, Any] = dict.fromkeys([*names, "percentile"])
        if control is not None and control is not r:
            each = outcome.per_draw_item
            if r.get(each) and control.get(each):
                paired = paired_draw_difference(r[each], control[each], seed=seed)
                found = (paired.value, paired.low, paired.high)
            else:
                found = paired_difference(r[outcome.per_item], control[outcome.per_item], seed=seed)
            extra |= dict(zip(names, found, strict=True))
            draws = outcome.harm * np.array(control.get(outcome.per_draw) or [])
            if len(draws) > 1:
                mine = outcome.harm * r[outcome.mean]
                share = np.mean(draws < mine) + np.mean(draws == mine) / 2
                extra["percentile"] = float(100 * share)
        out.append({k: v for k, v in r.items() if k not in outcome.hidden} | extra)
    return out


def _share(built: list[Any], fitted: Fitted) -> float | None:
    """The mean share of the fitting states' variance in the swapped subspaces."""
    if fitted.states is None or not hasattr(built[0], "basis"):
        return None
    return float(np.mean([variance_share(iv.basis, fitted.states) for iv in built]))


def _quiet(progress: bool | None) -> bool | None:
    return None if progress is None else not progress
