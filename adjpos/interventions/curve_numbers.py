"""The numbers the rule over the position-curve arms (`curve_rule`) reads, as a table that can
be saved and read back: the paired differences of exact match between the arms of one size
(`CURVE_DIFFERENCES`, from the rows of `adjpos.interventions.intervention_table` while they
still hold each draw's per-prompt hits), and `cell_numbers`, which rebuilds the rule's
`curve_rule.CellNumbers` from that table and the intervention table alone.

The pairs of one (layer, read-out variant, size), in the rule's names (``shift+1``,
``rotate``, ``scatter``, ``remove``, ``random``, ``unchanged``): every arm against
``random``, ``rotate`` against ``unchanged``, ``scatter`` against ``rotate``, and ``rotate``
and ``scatter`` against each shift; each `curve_rule.paired_draw_difference` (a - b, the
bootstrap resampling prompts and both sides' draws together).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from adjpos.interventions.curve_checks import OFFSETS, TASK_OFFSETS
from adjpos.interventions.curve_rule import (
    CellNumbers,
    Interval,
    SizeNumbers,
    paired_draw_difference,
)
from adjpos.tables import Table
from adjpos.validation import UsageError

UNCHANGED = "unchanged"  # the unchanged model, in the rule's names
RANDOM = "random"  # the size-matched random curve, in the rule's names

CURVE_DIFFERENCES = Table(
    model="string",  # the model's name (as in the intervention table)
    task="string",  # the task the prompts are drawn from
    seed="Int64",  # the model's seed
    layer="int64",  # the layer changed (the input of block `layer`)
    readout="string",  # the read-out variant: "kept" or "changed"
    dose="int64",  # the shift magnitude m whose full shift's size is the size
    size_target="float64",  # that size: mean ||h' - h|| / ||h|| of the changed states
    a="string",  # the arm compared, in the rule's names ("shift+1", "rotate", ...)
    b="string",  # what it is compared with ("random", "unchanged", "rotate", "shift-1", ...)
    value="float64",  # exact match of a minus exact match of b, on the same prompts
    low="float64",  # the 95% interval's lower bound (prompts and draws resampled)
    high="float64",  # its upper bound
)


def curve_differences(
    rows: Sequence[dict[str, Any]],
    unchanged: ArrayLike,
    *,
    seed: int = 0,
    per_draw: str = "draw_hits",
) -> list[dict[str, Any]]:
    """The `CURVE_DIFFERENCES` records of the arm rows in `rows` (rows that still hold
    `per_draw`, each draw's per-prompt outcome: exact match, or on text each window's loss),
    `unchanged` the unchanged model's per-prompt outcome on the same prompts."""
    groups: dict[tuple, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r.get("arm") is not None:
            groups[r["layer"], r["readout"], r["dose"]][r["arm"]] = r
    out = []
    for (layer, readout, dose), arms in groups.items():
        hits = {name: np.asarray(r[per_draw], float) for name, r in arms.items()}
        hits[UNCHANGED] = np.asarray(unchanged, float)[None]
        first = next(iter(arms.values()))
        shifts = [a for a in arms if a.startswith("shift")]
        pairs = [(a, RANDOM) for a in arms if a != RANDOM]
        pairs += [("rotate", UNCHANGED), ("scatter", "rotate")]
        pairs += [(a, s) for s in shifts for a in ("rotate", "scatter")]
        for a, b in pairs:
            if a in hits and b in hits:
                found = paired_draw_difference(hits[a], hits[b], seed=seed)
                out.append(
                    {k: first.get(k) for k in ("model", "task", "seed", "size_target")}
                    | {"layer": layer, "readout": readout, "dose": dose, "a": a, "b": b}
                    | {"value": found.value, "low": found.low, "high": found.high}
                )
    return out


def cell_numbers(rows: Any, differences: Any, *, readout: str = "kept") -> list[CellNumbers]:
    """The rule's numbers (`curve_rule.CellNumbers`) of each (task, layer, seed) cell, from
    the intervention table's arm rows (`rows`) and the `CURVE_DIFFERENCES` table
    (`differences`), both DataFrames or lists of records, in the read-out variant `readout`:
    ready for `curve_rule.hypothesis_outcomes`.

    A size's ``checks`` are the arms' ``check_passed`` (an arm with several rows at one size
    passes when every row does); its ``offsets`` each shift's ``error_offset_share_{j}`` with
    its interval, for j in -2..2.

    Raises:
        ValueError: a task with no error offsets (`curve_checks.TASK_OFFSETS`).
    """
    rows = [r for r in _records(rows) if _present(r.get("arm")) and r["readout"] == readout]
    diffs = [d for d in _records(differences) if d["readout"] == readout]
    sizes: dict[tuple, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        size = sizes[r["task"], int(r["layer"]), _seed(r["seed"])].setdefault(
            int(r["dose"]), {"size": float(r["size_target"]), "checks": {}, "offsets": {}}
        )
        passed = _present(r["check_passed"]) and bool(r["check_passed"])
        size["checks"][r["arm"]] = size["checks"].get(r["arm"], True) and passed
        if r["arm"].startswith("shift"):
            share = "error_offset_share_{}{}".format
            size["offsets"][r["arm"]] = {
                j: Interval(*(float(r[share(j, end)]) for end in ("", "_low", "_high")))
                for j in OFFSETS
            }
    cells = []
    for (task, layer, seed), by_dose in sizes.items():
        if task not in TASK_OFFSETS:
            raise UsageError(f"no error offsets for task {task!r}; known: {list(TASK_OFFSETS)}")
        numbers = []
        for dose, size in sorted(by_dose.items()):
            found = {
                (d["a"], d["b"]): Interval(float(d["value"]), float(d["low"]), float(d["high"]))
                for d in diffs
                if (d["task"], int(d["layer"]), _seed(d["seed"]), int(d["dose"]))
                == (task, layer, seed, dose)
            }
            numbers.append(SizeNumbers(size["size"], found, size["checks"], size["offsets"]))
        cells.append(CellNumbers((task, layer, seed), numbers, TASK_OFFSETS[task].direction))
    return cells


def text_cell_numbers(
    rows: Any,
    differences: Any,
    *,
    keys: Sequence[str] = ("model", "layer"),
    readout: str = "kept",
) -> list[CellNumbers]:
    """The rule's numbers of each cell (`keys` of the rows) of a text run's arm rows and its
    `CURVE_DIFFERENCES` of loss (`adjpos.interventions.text_intervention_table`), in the
    read-out variant `readout`. A loss rise is the harm: each difference a - b in nats is
    negated (the interval's ends swapped), so the rule's *breaks* (upper bound below -t) is
    a loss rise whose lower bound is above t. Each size keeps the arms' ``check_passed`` and
    ``percentile``; there are no error offsets (`RuleCriteria` with ``offset_share=None``)."""
    rows = [r for r in _records(rows) if _present(r.get("arm")) and r["readout"] == readout]
    diffs = [d for d in _records(differences) if d["readout"] == readout]
    sizes: dict[tuple, dict[int, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        sizes[tuple(_plain(r[k]) for k in keys)][int(r["dose"])][r["arm"]] = r
    cells = []
    for key, by_dose in sizes.items():
        numbers = []
        for dose, arms in sorted(by_dose.items()):
            found = {
                (d["a"], d["b"]): Interval(-float(d["value"]), -float(d["high"]), -float(d["low"]))
                for d in diffs
                if (*(_plain(d[k]) for k in keys), int(d["dose"])) == (*key, dose)
            }
            checks = {
                a: _present(r["check_passed"]) and bool(r["check_passed"]) for a, r in arms.items()
            }
            rare = {
                a: float(r["percentile"]) for a, r in arms.items() if _present(r.get("percentile"))
            }
            size = float(next(iter(arms.values()))["size_target"])
            numbers.append(SizeNumbers(size, found, checks, {}, rare))
        cells.append(CellNumbers(key, numbers))
    return cells


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _records(table: Any) -> list[dict[str, Any]]:
    return table.to_dict("records") if hasattr(table, "to_dict") else list(table)


def _present(value: Any) -> bool:
    """Not None, NaN or pandas' NA."""
    return (
        value is not None
        and not (isinstance(value, float) and np.isnan(value))
        and (str(value) != "<NA>")
    )


def _seed(value: Any) -> int | None:
    return int(value) if _present(value) else None
