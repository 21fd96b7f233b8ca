"""The rule that reads the position-curve arms (`adjpos.interventions.curve`), written before
the numbers (docs/causal.md), shared by the hypothesis claim (on the tasks) and the text claim
(on text).

Per cell (task x layer x seed) and per size of the dose, each comparison is a paired
per-prompt difference in exact match, a - b, with a 95% interval (`paired_draw_difference`:
bootstrap over prompts and control draws together, `adjpos.stats`). Its bound, never its point,
is set against the tolerance t (`Criteria.curve_tolerance`, 0.05; on text `Criteria.text_gap`):
a *breaks* beyond b when high < -t; a *holds* against b when low > -t (it cannot be t worse);
a is *as bad as* b when high < t (a is not t better than b).

The arms are named ``shift+k`` / ``shift-k``, ``rotate``, ``scatter``, ``remove``, ``edges``;
``random`` is the size-matched random control of the run arms, ``edges_random`` that of the
edges, ``unchanged`` the unchanged model. An arm whose manipulation check failed
(`check_passed`) is left out of every comparison and listed in ``not_counted``. A size where
an arm's random control leaves less than `Criteria.curve_measurable` exact match (0.25) is
*not measurable* for the claims read against that control: counted neither way, and the
cell says how many sizes were. At one size:

- **address**, per shift by k: *for* when it breaks beyond ``random`` and its wrong answers
  follow it: their share at offset direction * k (`TASK_OFFSETS`) exceeds the random
  control's, the paired share difference's lower bound above 0 (`SizeNumbers.follows`);
  *against* when it holds against ``random``. The size is *for* (*against*) when every
  counted shift is.
- **relational** (positions matched by similarity): needs every counted shift to break
  beyond ``random``. *for* when ``rotate`` holds against ``random`` (its control);
  *against* ("absolute") when ``rotate`` is as bad as every shift.
- **locality**: *for* when ``scatter`` breaks beyond every shift and beyond ``rotate``;
  *against* when it holds against ``rotate`` or against some shift.
- **boundary**: *for* when ``edges`` breaks beyond ``edges_random``; *against* when it holds
  against it.

On text (`CurveRule.of` with ``on_text``) the harm is a loss rise, t is `Criteria.text_gap`
nats and one size is enough for locality; nothing is decoded, so there are no error offsets
and a shift that breaks beyond ``random`` is *for* address by itself (its manipulation check,
the curve moved by k, already passed); and an arm breaks beyond ``random`` only when fewer than
`Criteria.percentile` % of the random draws harm more (`SizeNumbers.percentiles`).

Otherwise a size is *within* (undecided). Over the sizes, address, relational and boundary are
*for* (*against*) when some size is and none is the other way; locality is *for* at
`Criteria.min_sizes` or more sizes, *against* when some size is against and fewer than that
many sizes are left that are not against (too few sizes to decide is not evidence against).
The cell's reading: "not read" when every counted arm at every size holds against its control;
else the claims found (address, relational or absolute, locality, boundary), or "undecided".
So a model that ignores the curve comes out address *against* (no shift breaks), relational
*within* (no broken shift to set rotation against), locality *against*, "not read"; one that
reads the curve's absolute directions (rotation breaks it as a shift does) relational
*against*, read "absolute".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, no_type_check

from adjpos.interventions.curve.numbers import (
    RANDOM,
    UNCHANGED,
    CellNumbers,
    SizeNumbers,
    arm_kind,
    check_numbers,
)
from adjpos.stats import Interval, Outcome
from adjpos.study.claim import CRITERIA, Criteria
from adjpos.validation import UsageError

CLAIMS = ("address", "relational", "locality", "boundary")


@dataclass(frozen=True)
class CurveRule:
    """The rule's thresholds where it runs, all read from one `Criteria` (`of`): the tolerance
    t, whether answers are decoded (their error offsets read), the sizes locality needs, the
    draws' percentile (None: not read) and the control's exact match a size needs to be
    measurable (None: every size is)."""

    criteria: Criteria
    tolerance: float
    decoded: bool
    min_sizes: int
    percentile: float | None
    measurable: float | None = None

    @classmethod
    def of(cls, criteria: Criteria, *, on_text: bool = False) -> CurveRule:
        """On a task: `curve_tolerance`, error offsets, `min_sizes`, no percentile,
        `curve_measurable`; on text: `text_gap` nats, no offsets, one size, `percentile`."""
        if on_text:
            return cls(criteria, criteria.text_gap, False, 1, criteria.percentile)
        c = criteria
        return cls(c, c.curve_tolerance, True, c.min_sizes, None, c.curve_measurable)


@dataclass(frozen=True)
class CellOutcome:
    """The rule's answer for one cell: each claim's outcome over the sizes, each size's, the
    reading, the (size, arm) pairs left out for a failed check, and the sizes not measurable
    (their random control too low to tell a break)."""

    address: Outcome
    relational: Outcome
    locality: Outcome
    boundary: Outcome
    reading: str
    per_size: tuple[dict[str, Any], ...]
    not_counted: tuple[tuple[float, str], ...]
    not_measurable: int = 0


def hypothesis_outcomes(
    cells: Sequence[CellNumbers], criteria: Criteria = CRITERIA, *, on_text: bool = False
) -> dict[str, Any]:
    """Apply the rule to every cell.

    Returns:
        ``{"cells": {key: CellOutcome}, "claims": {claim: {Outcome: [keys]}}}``.
    """
    out = {cell.key: cell_outcome(cell, criteria, on_text=on_text) for cell in cells}
    claims = {
        claim: {o: [k for k, c in out.items() if getattr(c, claim) == o] for o in Outcome}
        for claim in CLAIMS
    }
    return {"cells": out, "claims": claims}


def cell_outcome(
    cell: CellNumbers, criteria: Criteria = CRITERIA, *, on_text: bool = False
) -> CellOutcome:
    """The rule (module doc) on one cell, on a task or (`on_text`) on text."""
    if cell.direction not in (1, -1) or not cell.sizes:
        raise UsageError("a cell needs direction +1 or -1 and at least one size")
    rule = CurveRule.of(criteria, on_text=on_text)
    per_size = [_size_outcome(s, cell.direction, rule) for s in cell.sizes]
    locality = [s["locality"] for s in per_size]
    min_sizes, n_against = rule.min_sizes, locality.count(Outcome.AGAINST)
    few_left = n_against > 0 and len(locality) - n_against < min_sizes
    outcome = {c: _combine([s[c] for s in per_size]) for c in ("address", "relational", "boundary")}
    outcome["locality"] = _side(locality.count(Outcome.FOR) >= min_sizes, few_left)
    found = ["address"] if outcome["address"] == Outcome.FOR else []
    relational = {Outcome.FOR: ["relational"], Outcome.AGAINST: ["absolute"]}
    found += relational.get(outcome["relational"], [])
    found += ["locality"] if outcome["locality"] == Outcome.FOR else []
    found += ["boundary"] if outcome["boundary"] == Outcome.FOR else []
    not_read = all(s["not_read"] == "yes" for s in per_size)
    reading = "not read" if not_read else "+".join(found) or "undecided"
    tested = [(s, arm) for s in cell.sizes for arm in _arms(s, rule, counted=False)]
    skipped = tuple((s.size, arm) for s, arm in tested if not _ok(s, arm, rule))
    unmeasured = sum(s["measurable"] == "no" for s in per_size)
    said = {"reading": reading, "per_size": tuple(per_size), "not_counted": skipped}
    return CellOutcome(**outcome, **said, not_measurable=unmeasured)


def _size_outcome(numbers: SizeNumbers, direction: int, criteria: CurveRule) -> dict:
    t, diff = criteria.tolerance, numbers.differences
    counted = _arms(numbers, criteria)
    shifts = [a for a in counted if arm_kind(a).offsets]
    rare = numbers.percentiles.get
    versus = {a: arm_kind(a).versus for a in counted}
    breaks = {
        a: _breaks(diff.get((a, versus[a])), t)
        and (criteria.percentile is None or rare(a, math.inf) < criteria.percentile)
        for a in counted
    }
    holds = {a: _holds(diff.get((a, versus[a])), t) for a in counted}
    level = numbers.controls.get

    @no_type_check
    def measurable(control: str) -> bool:
        return criteria.measurable is None or level(control, math.inf) >= criteria.measurable

    address = []
    for name in shifts:
        # nothing decoded (text): the shift's breaking is enough (its check: the curve moved)
        share = numbers.follows.get(name)
        follows = not criteria.decoded or (share is not None and share.low > 0)
        address.append(_side(breaks[name] and follows, holds[name]))
    all_break = bool(shifts) and all(breaks[s] for s in shifts)
    relational = Outcome.WITHIN
    if all_break and _ok(numbers, "rotate", criteria):
        as_bad = all(_as_bad(diff.get(("rotate", s)), t) for s in shifts)
        relational = _side(holds["rotate"], as_bad)
    locality = Outcome.WITHIN
    if shifts and _ok(numbers, "scatter", criteria) and _ok(numbers, "rotate", criteria):
        versus_scatter = [diff.get(("scatter", b)) for b in [*shifts, "rotate"]]
        breaks_all = all(_breaks(d, t) for d in versus_scatter)
        locality = _side(breaks_all, any(_holds(d, t) for d in versus_scatter))
    boundary = Outcome.WITHIN
    if "edges" in counted and measurable(versus["edges"]):
        boundary = _side(breaks["edges"], holds["edges"])
    runs_measurable = measurable("random")
    if not runs_measurable:  # the random curve breaks the task by itself: nothing to tell
        address, relational, locality = [], Outcome.WITHIN, Outcome.WITHIN
    return {
        "size": numbers.size,
        "dose": numbers.dose,
        "address": _combine(address, strict=True),
        "relational": relational,
        "locality": locality,
        "boundary": boundary,
        "measurable": "yes" if runs_measurable else "no",
        "not_read": "yes" if counted and all(holds[a] for a in counted) else "no",
    }


def _arms(numbers: SizeNumbers, rule: CurveRule, *, counted: bool = True) -> list[str]:
    """The tested arms of a size (those in a difference against their random control, the
    controls themselves left out), the counted ones by default."""
    tested = {a for a, b in numbers.differences if a != UNCHANGED and b == arm_kind(a).versus}
    names = sorted(tested | set(numbers.checks))
    names = [a for a in names if a not in (RANDOM, UNCHANGED) and not arm_kind(a).control]
    return [a for a in names if _ok(numbers, a, rule)] if counted else names


def _ok(numbers: SizeNumbers, arm: str, rule: CurveRule) -> bool:
    found = numbers.checks.get(arm)
    return found is not None and check_passed(arm, *found, criteria=rule.criteria)


def check_passed(
    arm: str,
    size_error: float,
    check_value: float,
    unreached_share: float = 0.0,
    *,
    criteria: Criteria,
) -> bool:
    """Whether an arm (named as in the rule: ``shift+1``, ``rotate``) did what its name says:
    its ``size_error`` at most `Criteria.curve_size_tolerance` at the lengths it reaches, those
    lengths holding at least `Criteria.curve_reach` of the measured prompts (1 -
    ``unreached_share``: a scatter of a short run falls short of a shift's size, and every
    comparison reads the prompts at lengths both its sides reach), and its check number
    (``check_value``, its row of the arm table's `Check`) on the right side of its threshold
    (the named `Criteria` field; 0 where none is named). NaN fails.

    >>> check_passed("rotate", 0.01, 1e-9, criteria=CRITERIA)
    True
    >>> check_passed("rotate", 0.01, 0.2, criteria=CRITERIA)  # a distance changed
    False
    >>> check_passed("scatter", 0.01, 0.3, 0.7, criteria=CRITERIA)  # 30% of prompts reached
    False
    """
    if not size_error <= criteria.curve_size_tolerance:
        return False
    if not 1 - unreached_share >= criteria.curve_reach:
        return False
    check = arm_kind(arm).check
    if check is None:
        return True
    threshold = 0.0 if check.criterion is None else getattr(criteria, check.criterion)
    passes = {"<=": check_value <= threshold, ">=": check_value >= threshold}
    return bool(passes.get(check.relation, check_value > threshold))


def row_passed(row: Any, criteria: Criteria = CRITERIA) -> bool:
    """`check_passed` on an arm row (a mapping or a DataFrame row) by its `check_numbers`."""
    if not hasattr(row, "get"):
        row = row._asdict()
    return check_passed(row["arm"], *check_numbers(row), criteria=criteria)


def _side(for_: bool, against: bool) -> Outcome:
    return Outcome.FOR if for_ else Outcome.AGAINST if against else Outcome.WITHIN


def _breaks(d: Interval | None, t: float) -> bool:
    return d is not None and d.high < -t


def _holds(d: Interval | None, t: float) -> bool:
    return d is not None and d.low > -t


def _as_bad(d: Interval | None, t: float) -> bool:
    return d is not None and d.high < t


def _combine(outcomes: list[Outcome], *, strict: bool = False) -> Outcome:
    """strict: for (against) when every outcome is; else when some is and none is the other
    way. Within for none."""
    if not outcomes:
        return Outcome.WITHIN
    for side, other in ((Outcome.FOR, Outcome.AGAINST), (Outcome.AGAINST, Outcome.FOR)):
        if all(o == side for o in outcomes):
            return side
        if not strict and side in outcomes and other not in outcomes:
            return side
    return Outcome.WITHIN
