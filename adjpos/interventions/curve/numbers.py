"""The numbers the rule over the position-curve arms (`adjpos.study.rules`) reads, as a table
that can be saved and read back: the paired differences of the outcome between the arms of one
size (`CURVE_DIFFERENCES`, from the rows of a run while they still hold each draw's per-prompt
outcome), and `cell_numbers`, which rebuilds each cell's `CellNumbers` from that table and the
intervention table alone. Numbers only: the study judges them.

The pairs of one (layer, read-out variant, size), in the rule's names (``shift+1``,
``rotate``, ..., ``random``, ``unchanged``), are `arm_pairs`, each an
`adjpos.stats.paired_draw_difference` (a - b, the bootstrap resampling prompts and both sides'
draws together).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from adjpos.interventions.curve.arms import ARMS, ArmKind
from adjpos.interventions.curve.columns import REACHED
from adjpos.stats import Interval, paired_draw_difference, paired_share_difference
from adjpos.tables import Table
from adjpos.tasks.offsets import OFFSETS, TASK_OFFSETS
from adjpos.validation import UsageError

# what an arm's manipulation check reads
CHECK_NUMBERS = ("size_error", "check_value", "unreached_share")
UNCHANGED = "unchanged"  # the unchanged model, in the rule's names
RANDOM = "random"  # the size-matched random curve, in the rule's names

CURVE_DIFFERENCES = Table(
    model="string",  # the model's name (as in the intervention table)
    task="string",  # the task the prompts are drawn from
    seed="Int64",  # the model's seed
    layer="int64",  # the layer changed (the input of block `layer`)
    readout="string",  # the read-out variant: "kept" or "changed"
    dose="float64",  # the dose m: the size of the full shift by m (m < 1: m times the by-1's)
    size_target="float64",  # that size: mean ||h' - h|| / ||h|| of the changed states
    a="string",  # the arm compared, in the rule's names ("shift+1", "rotate", ...)
    b="string",  # what it is compared with ("random", "unchanged", "rotate", "shift-1", ...)
    # "outcome" (exact match, or loss on text), or for a shift against its control on a task
    # "offset_share": the share of wrong characters at the shift's offset
    measure="string",
    value="float64",  # a minus b, on the same prompts
    low="float64",  # the 95% interval's lower bound (prompts and draws resampled)
    high="float64",  # its upper bound
    n_prompts="int64",  # the prompts compared: those at lengths both a and b reach
)


@dataclass(frozen=True)
class SizeNumbers:
    """The numbers of one size of one cell.

    Attributes:
        size: the target change size (mean relative change of the changed states).
        differences: {(a, b): exact match of a minus b}, names as in the module doc.
        checks: {arm: (size_error, check_value, unreached_share)}, the numbers its
            manipulation check is judged on (`adjpos.study.rules.check_passed`); an arm not
            listed is not counted.
        offsets: {shift name (and ``random``, the chance share): {j: share of wrong
            characters at offset j}}.
        percentiles: {arm: % of the random control's draws that harm more than it}.
        controls: {random control: its mean outcome} (on a task, exact match: where it is
            low, the size is not measurable).
        follows: {shift: its share of wrong characters at its offset minus its control's},
            paired over prompts (on a task).
        dose: the dose m the size was run at (None where not recorded).
    """

    size: float
    differences: Mapping[tuple[str, str], Interval]
    checks: Mapping[str, tuple[float, ...]]
    offsets: Mapping[str, Mapping[int, Interval]] = field(default_factory=dict)
    percentiles: Mapping[str, float] = field(default_factory=dict)
    controls: Mapping[str, float] = field(default_factory=dict)
    follows: Mapping[str, Interval] = field(default_factory=dict)
    dose: float | None = None


@dataclass(frozen=True)
class CellNumbers:
    """One cell: its key (task, layer, seed), its sizes, and the task's offset direction
    (`adjpos.tasks.offsets.TASK_OFFSETS`)."""

    key: tuple[Any, ...]
    sizes: Sequence[SizeNumbers]
    direction: int = 1

    def to_plain(self) -> dict[str, Any]:
        """The direction and sizes as JSON-able values (`from_plain` reads them back): per
        size its differences [a, b, value, low, high], checks [size_error, check_value] and
        shifts' error offsets {shift: [[j, value, low, high]]}."""
        sizes = []
        for s in self.sizes:
            p = {"size": s.size, "checks": {a: _plain_pair(c) for a, c in s.checks.items()}}
            p["differences"] = [[a, b, *d.plain()] for (a, b), d in s.differences.items()]
            offsets = s.offsets.items()
            p["offsets"] = {n: [[j, *d.plain()] for j, d in o.items()] for n, o in offsets}
            p |= {"percentiles": dict(s.percentiles)} if s.percentiles else {}
            p |= {"controls": dict(s.controls)} if s.controls else {}
            p |= {"follows": {a: d.plain() for a, d in s.follows.items()}} if s.follows else {}
            p |= {"dose": s.dose} if s.dose is not None else {}
            sizes.append(p)
        return {"direction": int(self.direction), "sizes": sizes}

    @classmethod
    def from_plain(cls, key: tuple[Any, ...], plain: Mapping[str, Any]) -> CellNumbers:
        """The cell `to_plain` wrote, with `key`."""
        sizes = [
            SizeNumbers(
                s["size"],
                {(a, b): Interval.of(rest) for a, b, *rest in s["differences"]},
                {a: tuple(math.nan if v is None else v for v in c) for a, c in s["checks"].items()},
                {n: {int(j): Interval.of(r) for j, *r in by} for n, by in s["offsets"].items()},
                s.get("percentiles", {}),
                s.get("controls", {}),
                {a: Interval.of(d) for a, d in s.get("follows", {}).items()},
                s.get("dose"),
            )
            for s in plain["sizes"]
        ]
        return cls(key, sizes, plain["direction"])


def _plain_pair(pair: Sequence[float]) -> list[float | None]:
    return [None if math.isnan(v) else float(v) for v in pair]


def curve_differences(
    rows: Sequence[dict[str, Any]],
    unchanged: ArrayLike,
    *,
    seed: int = 0,
    per_draw: str = "draw_hits",
    counts: str | None = None,
) -> list[dict[str, Any]]:
    """The `CURVE_DIFFERENCES` records of the arm rows in `rows` (rows that still hold
    `per_draw`, each draw's per-prompt outcome: exact match, or on text each window's loss),
    `unchanged` the unchanged model's per-prompt outcome on the same prompts; with `counts`
    (the rows' key of per-prompt wrong-character counts at each offset, on a task), also
    each shift's share of wrong characters at its offset (direction * k, `TASK_OFFSETS`)
    minus its control's (`adjpos.stats.paired_share_difference`). Each pair reads the
    prompts at lengths both its arms reach (an arm row's ``reached``; every prompt where a row
    has none)."""
    groups: dict[tuple, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r.get("arm") is not None:
            groups[r["layer"], r["readout"], r["dose"]][r["arm"]] = r
    out = []
    for (layer, readout, dose), arms in groups.items():
        hits = {name: np.asarray(r[per_draw], float) for name, r in arms.items()}
        hits[UNCHANGED] = np.asarray(unchanged, float)[None]
        first = next(iter(arms.values()))
        key = {k: first.get(k) for k in ("model", "task", "seed", "size_target")}
        key |= {"layer": layer, "readout": readout, "dose": dose}
        for a, b in arm_pairs(list(arms)):
            if a not in hits or b not in hits:
                continue
            kept = reached_by(arms.get(a), arms.get(b), n=hits[UNCHANGED].shape[1])
            if not kept.any():
                continue
            pair = key | {"a": a, "b": b, "n_prompts": int(kept.sum())}
            found = paired_draw_difference(hits[a][:, kept], hits[b][:, kept], seed=seed)
            out.append(pair | {"measure": "outcome"} | found.record())
            shares = (
                counts and b in arms and _offset_difference(arms[a], arms[b], counts, kept, seed)
            )
            if shares:
                out.append(pair | {"measure": "offset_share"} | shares.record())
    return out


def reached_by(*rows: Mapping[str, Any] | None, n: int) -> np.ndarray:
    """[n] the measured prompts every row (an arm's; None: the unchanged model) reaches at
    its size (its ``reached``; every prompt where a row has none)."""
    kept = np.ones(n, bool)
    for row in rows:
        if row is not None and row.get(REACHED) is not None:
            kept &= np.asarray(row[REACHED], bool)
    return kept


def _offset_difference(
    arm: Mapping[str, Any], control: Mapping[str, Any], counts: str, kept: np.ndarray, seed: int
) -> Interval | None:
    """A shift's share of wrong characters at its offset minus its control's, paired over
    the `kept` prompts (None: not a shift against its control, or no counts)."""
    if not arm.get(counts) or not control.get(counts):
        return None
    kind = arm_kind(arm["arm"])
    if not kind.offsets or control["arm"] != kind.versus or arm.get("task") not in TASK_OFFSETS:
        return None
    j = TASK_OFFSETS[arm["task"]].direction * int(arm["offset"])
    mine, theirs = arm[counts], control[counts]
    if j not in mine["offsets"]:
        return None
    col = mine["offsets"].index(j)
    pick = [
        np.asarray(c[key], float)[kept, col] for c in (mine, theirs) for key in ("hits", "totals")
    ]
    return paired_share_difference(*pick, seed=seed)


def arm_pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """The (a, b) pairs of the arms of one size (rule names): each arm against its random
    control (``random``; the edges' ``edges_random``), then against what the arm table
    compares it with (``"shift"``: every shift among `arms`).

    >>> arm_pairs(["shift+1", "rotate", "random"])
    [('shift+1', 'random'), ('rotate', 'random'), ('rotate', 'unchanged'), ('rotate', 'shift+1')]
    """
    kinds = {a: arm_kind(a) for a in arms}
    shifts = [a for a in arms if kinds[a].offsets]
    pairs = [(a, kinds[a].versus) for a in arms if not kinds[a].control]
    for a in arms:
        for b in kinds[a].compared_with:
            pairs += [(a, s) for s in shifts] if b == "shift" else [(a, b)]
    return pairs


def arm_kind(name: str) -> ArmKind:
    """The row of the arm table of an arm named as in the rule (``shift+1``, ``rotate``).

    >>> arm_kind("shift-2").name
    'shift'
    """
    kind = ARMS.get(re.sub(r"[+-]\d+$", "", str(name)))
    if kind is None:
        raise UsageError(f"unknown curve arm {name!r}; choose from {list(ARMS)}")
    return kind


def cell_numbers(
    rows: Any,
    differences: Any,
    *,
    readout: str = "kept",
    keys: Sequence[str] = ("task", "layer", "seed"),
    harm: int = +1,
) -> list[CellNumbers]:
    """The rule's numbers (`CellNumbers`) of each cell (the rows' `keys`), from a run's arm
    rows (`rows`) and its `CURVE_DIFFERENCES` (`differences`), both DataFrames or lists of
    records, in the read-out variant `readout`: ready for `adjpos.study.rules`.

    A size keeps each arm's check numbers (``size_error``, ``check_value``), its draws'
    ``percentile``, each random control's mean exact match (with `harm` +1) and, on a task (a
    ``task`` key with `TASK_OFFSETS`), each shift's ``error_offset_share_{j}`` with its
    interval, the cell taking the task's direction.
    `harm` -1 (text: a loss rise is the harm) negates each difference a - b (the interval's
    ends swapped), so the rule's *breaks* (upper bound below -t) is a rise above t.
    """
    rows = [r for r in _records(rows) if pd.notna(r.get("arm")) and r["readout"] == readout]
    diffs = [d for d in _records(differences) if d["readout"] == readout]
    sizes: dict[tuple, dict[int, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        sizes[_key(r, keys)][float(r["dose"])][r["arm"]] = r
    cells = []
    for key, by_dose in sizes.items():
        task = dict(zip(keys, key, strict=True)).get("task")
        if task is not None and task not in TASK_OFFSETS:
            raise UsageError(f"no error offsets for task {task!r}; known: {list(TASK_OFFSETS)}")
        numbers = []
        for dose, arms in sorted(by_dose.items()):
            here = [d for d in diffs if (*_key(d, keys), float(d["dose"])) == (*key, dose)]
            found = {(d["a"], d["b"]): _oriented(d, harm) for d in here if _outcome(d)}
            follows = {d["a"]: _oriented(d, +1) for d in here if not _outcome(d)}
            checks = {a: check_numbers(r) for a, r in arms.items()}
            rare = {
                a: float(r["percentile"]) for a, r in arms.items() if pd.notna(r.get("percentile"))
            }
            offsets = (
                {}
                if task is None
                else {a: _shares(r) for a, r in arms.items() if arm_kind(a).offsets or a == RANDOM}
            )
            # the size of the dose: its random control's (the edges' is their own, larger)
            size = float(arms.get(RANDOM, next(iter(arms.values())))["size_target"])
            controls = {
                a: float(r["exact_match"])
                for a, r in arms.items()
                if harm > 0 and arm_kind(a).control and pd.notna(r.get("exact_match"))
            }
            found_at = (found, checks, offsets, rare, controls, follows)
            numbers.append(SizeNumbers(size, *found_at, dose=dose))
        direction = 1 if task is None else TASK_OFFSETS[task].direction
        cells.append(CellNumbers(key, numbers, direction))
    return cells


def check_numbers(row: Mapping[str, Any]) -> tuple[float, ...]:
    """An arm row's `CHECK_NUMBERS`: NaN where missing (a check not measured fails), but
    ``unreached_share`` 0 (a row without it reached every prompt)."""
    return tuple(
        float(row[k]) if pd.notna(row.get(k)) else (0.0 if k == "unreached_share" else math.nan)
        for k in CHECK_NUMBERS
    )


def _key(row: Mapping[str, Any], keys: Sequence[str]) -> tuple:
    """The row's `keys` as plain values (numpy scalars as Python ones; a missing seed None)."""
    values = [row[k].item() if hasattr(row[k], "item") else row[k] for k in keys]
    return tuple(
        (int(v) if pd.notna(v) else None) if k == "seed" else v
        for k, v in zip(keys, values, strict=True)
    )


def _outcome(d: Mapping[str, Any]) -> bool:
    """A difference of the outcome (a table without a ``measure`` column has only those)."""
    return pd.isna(d.get("measure")) or d["measure"] == "outcome"


def _oriented(d: Mapping[str, Any], harm: int) -> Interval:
    value, low, high = (float(d[k]) for k in ("value", "low", "high"))
    return Interval(value, low, high) if harm > 0 else Interval(-value, -high, -low)


def _shares(row: Mapping[str, Any]) -> dict[int, Interval]:
    share = "error_offset_share_{}{}".format
    return {j: Interval(*(float(row[share(j, e)]) for e in ("", "_low", "_high"))) for j in OFFSETS}


def _records(table: Any) -> list[dict[str, Any]]:
    return table.to_dict("records") if hasattr(table, "to_dict") else list(table)
