"""The rule that reads the position-curve arms (`curve_arms`), written before the numbers.

Per cell (task x layer x seed) and per size of the dose, each comparison is a paired
per-prompt difference in exact match, a - b, with a 95% interval (`paired_draw_difference`:
bootstrap over prompts and control draws together). The interval's bound, never the point,
is set against the tolerance t (`RuleCriteria.tolerance`, 0.05):

- a *breaks* beyond b: high < -t;  a *holds* against b: low > -t (it cannot be t worse);
- a is *as bad as* b: high < t (a is not t better than b).

The arms are named ``shift+k`` / ``shift-k``, ``rotate``, ``scatter``, ``remove``; ``random``
is the size-matched random control, ``unchanged`` the unchanged model. An arm whose manipulation
check failed (`curve_checks.passes_check`) is left out of every comparison and listed in
``not_counted``. At one size:

- **address**, per shift by k: *for* when it breaks beyond ``random`` and its wrong answers
  follow it (the share of wrong characters at offset direction * k, `TASK_OFFSETS`, has its
  lower bound above `RuleCriteria.offset_share`); *against* when it holds against
  ``random``, or breaks but the share's upper bound is below `offset_share` (it breaks the
  task some other way). The size is *for* (*against*) when every counted shift is.
- **relational** (positions matched by similarity): needs every counted shift to break
  beyond ``random``. *for* when ``rotate`` holds against ``unchanged`` (the task kept within t);
  *against* ("absolute") when ``rotate`` is as bad as every shift.
- **locality**: *for* when ``scatter`` breaks beyond every shift and beyond ``rotate``;
  *against* when it holds against ``rotate`` or against some shift.

Where nothing is decoded (text, `adjpos.interventions.text`) ``offset_share`` is None: a
shift that breaks beyond ``random`` is *for* address by itself (its manipulation check, the
curve moved by k, already passed). With `RuleCriteria.percentile` set, an arm breaks beyond
``random`` only when fewer than that many % of the random draws harm more (its row's
``percentile``, `SizeNumbers.percentiles`).

Otherwise a size is *within* (undecided). Over the sizes, address and relational are *for*
(*against*) when some size is and none is the other way; locality is *for* at
`RuleCriteria.min_sizes` or more sizes, *against* when some size is against and fewer than
that many sizes are left that are not against (a cell measured at fewer sizes than that, none
against, stays *within*: too few sizes to decide is not evidence against). The cell's
reading: "not read" when every counted arm at every size holds against ``random``; else the
claims found (address, relational or absolute, locality), or "undecided".

So a model that ignores the curve comes out address *against* (no shift breaks), relational
*within* (there is no broken shift to set rotation against), locality *against*, "not
read"; a model that reads the curve's absolute directions (rotation breaks it as a shift
does) relational *against*, read "absolute".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, no_type_check

import numpy as np
from numpy.typing import ArrayLike

from adjpos.stats import LEVEL, N_BOOT
from adjpos.validation import UsageError, is_int

CLAIMS = ("address", "relational", "locality")
OUTCOMES = ("for", "against", "within")
ARMS = ("rotate", "scatter", "remove")
_SHIFT = re.compile(r"shift([+-]\d+)")


@dataclass(frozen=True)
class Interval:
    """A paired difference a - b (or a share) with its 95% interval."""

    value: float
    low: float
    high: float

    def plain(self) -> list[float | None]:
        """[value, low, high] as JSON-able values (NaN as None; `of` reads them back)."""
        return [None if math.isnan(v) else float(v) for v in (self.value, self.low, self.high)]

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Interval:
        return cls(*(math.nan if v is None else v for v in values))


@dataclass(frozen=True)
class SizeNumbers:
    """The numbers of one size of one cell.

    Attributes:
        size: the target change size (mean relative change of the changed states).
        differences: {(a, b): exact match of a minus b}, names as in the module doc.
        checks: {arm: passed its manipulation check}; an arm not listed is not counted.
        offsets: {shift name: {j: share of wrong characters at offset j}}.
        percentiles: {arm: % of the random control's draws that harm more than it}.
    """

    size: float
    differences: Mapping[tuple[str, str], Interval]
    checks: Mapping[str, bool]
    offsets: Mapping[str, Mapping[int, Interval]] = field(default_factory=dict)
    percentiles: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CellNumbers:
    """One cell: its key (task, layer, seed), its sizes, and the task's offset direction
    (`curve_checks.TASK_OFFSETS`)."""

    key: tuple[Any, ...]
    sizes: Sequence[SizeNumbers]
    direction: int = 1

    def to_plain(self) -> dict[str, Any]:
        """The direction and sizes as JSON-able values (`from_plain` reads them back): per
        size its differences [a, b, value, low, high], checks and shifts' error offsets
        {shift: [[j, value, low, high]]}."""
        sizes = [
            {"size": s.size, "checks": {a: bool(ok) for a, ok in s.checks.items()}}
            | {"differences": [[a, b, *d.plain()] for (a, b), d in s.differences.items()]}
            | {
                "offsets": {
                    n: [[j, *d.plain()] for j, d in o.items()] for n, o in s.offsets.items()
                }
            }
            | ({"percentiles": dict(s.percentiles)} if s.percentiles else {})
            for s in self.sizes
        ]
        return {"direction": int(self.direction), "sizes": sizes}

    @classmethod
    def from_plain(cls, key: tuple[Any, ...], plain: Mapping[str, Any]) -> CellNumbers:
        """The cell `to_plain` wrote, with `key`."""
        sizes = [
            SizeNumbers(
                s["size"],
                {(a, b): Interval.of(rest) for a, b, *rest in s["differences"]},
                s["checks"],
                {n: {int(j): Interval.of(r) for j, *r in by} for n, by in s["offsets"].items()},
                s.get("percentiles", {}),
            )
            for s in plain["sizes"]
        ]
        return cls(key, sizes, plain["direction"])


@dataclass(frozen=True)
class RuleCriteria:
    """The thresholds of the rule (see the module doc; `offset_share` None: no error offsets,
    `percentile` None: the draws' percentile not read)."""

    tolerance: float = 0.05
    offset_share: float | None = 0.5
    min_sizes: int = 2
    percentile: float | None = None

    def __post_init__(self) -> None:
        share = 0.5 if self.offset_share is None else self.offset_share
        if not 0 < self.tolerance < 1 or not 0 < share < 1:
            raise UsageError("tolerance and offset_share must be in (0, 1)")
        if self.percentile is not None and not 0 < self.percentile <= 100:
            raise UsageError(f"percentile must be in (0, 100], got {self.percentile!r}")
        if not is_int(self.min_sizes) or self.min_sizes < 1:
            raise UsageError(f"min_sizes must be an int >= 1, got {self.min_sizes!r}")


@dataclass(frozen=True)
class CellOutcome:
    """The rule's answer for one cell: each claim's outcome over the sizes, each size's, the
    reading, and the (size, arm) pairs left out for a failed check."""

    address: str
    relational: str
    locality: str
    reading: str
    per_size: tuple[dict[str, Any], ...]
    not_counted: tuple[tuple[float, str], ...]


def hypothesis_outcomes(
    cells: Sequence[CellNumbers], criteria: RuleCriteria | None = None
) -> dict[str, Any]:
    """Apply the rule to every cell.

    Returns:
        ``{"cells": {key: CellOutcome}, "claims": {claim: {"for": [keys], "against":
        [keys], "within": [keys]}}}``.
    """
    criteria = criteria or RuleCriteria()
    out = {cell.key: cell_outcome(cell, criteria) for cell in cells}
    claims = {
        claim: {o: [k for k, c in out.items() if getattr(c, claim) == o] for o in OUTCOMES}
        for claim in CLAIMS
    }
    return {"cells": out, "claims": claims}


def cell_outcome(cell: CellNumbers, criteria: RuleCriteria) -> CellOutcome:
    """The rule (module doc) on one cell."""
    if cell.direction not in (1, -1) or not cell.sizes:
        raise UsageError("a cell needs direction +1 or -1 and at least one size")
    per_size = [_size_outcome(s, cell.direction, criteria) for s in cell.sizes]
    locality = [s["locality"] for s in per_size]
    n_for, n_against = locality.count("for"), locality.count("against")
    outcome = {
        "address": _combine([s["address"] for s in per_size]),
        "relational": _combine([s["relational"] for s in per_size]),
        "locality": "for"
        if n_for >= criteria.min_sizes
        else "against"
        if n_against and len(locality) - n_against < criteria.min_sizes
        else "within",
    }
    found = [c for c in ("address",) if outcome[c] == "for"]
    found += {"for": ["relational"], "against": ["absolute"]}.get(outcome["relational"], [])
    found += ["locality"] if outcome["locality"] == "for" else []
    if all(s["not_read"] == "yes" for s in per_size):
        reading = "not read"
    else:
        reading = "+".join(found) or "undecided"
    skipped = tuple(
        (s.size, arm) for s in cell.sizes for arm in _arms(s, counted=False) if not _ok(s, arm)
    )
    return CellOutcome(**outcome, reading=reading, per_size=tuple(per_size), not_counted=skipped)


def _size_outcome(numbers: SizeNumbers, direction: int, criteria: RuleCriteria) -> dict:
    t = criteria.tolerance
    diff = numbers.differences
    shifts = [a for a in _arms(numbers) if _SHIFT.fullmatch(a)]

    @no_type_check  # made at every call: kept out of the tests' type checker
    def get(a: str, b: str) -> Interval | None:
        return diff.get((a, b))

    rare = numbers.percentiles.get
    breaks = {
        a: _breaks(get(a, "random"), t)
        and (criteria.percentile is None or rare(a, math.inf) < criteria.percentile)
        for a in _arms(numbers)
    }
    holds = {a: _holds(get(a, "random"), t) for a in _arms(numbers)}
    address = []
    for name in shifts:
        k = int(_SHIFT.fullmatch(name)[1])
        share = numbers.offsets.get(name, {}).get(direction * k)
        if criteria.offset_share is None:  # nothing decoded: the shift's breaking is enough
            follows, strays = True, False
        else:
            follows = share is not None and share.low > criteria.offset_share
            strays = share is not None and share.high < criteria.offset_share
        address.append(
            "for"
            if breaks[name] and follows
            else "against"
            if holds[name] or (breaks[name] and strays)
            else "within"
        )
    all_break = bool(shifts) and all(breaks[s] for s in shifts)
    relational = "within"
    if all_break and _ok(numbers, "rotate"):
        if _holds(get("rotate", "unchanged"), t):
            relational = "for"
        elif all(_as_bad(get("rotate", s), t) for s in shifts):
            relational = "against"
    locality = "within"
    if shifts and _ok(numbers, "scatter") and _ok(numbers, "rotate"):
        versus = [get("scatter", s) for s in shifts] + [get("scatter", "rotate")]
        if all(_breaks(d, t) for d in versus):
            locality = "for"
        elif any(_holds(d, t) for d in versus):
            locality = "against"
    counted = _arms(numbers)
    return {
        "size": numbers.size,
        "address": _combine(address, strict=True),
        "relational": relational,
        "locality": locality,
        "not_read": "yes" if counted and all(holds[a] for a in counted) else "no",
    }


def _arms(numbers: SizeNumbers, *, counted: bool = True) -> list[str]:
    """The arms of a size (those in a difference against ``random``), the counted ones by
    default."""
    names = sorted({a for a, b in numbers.differences if b == "random"} | set(numbers.checks))
    names = [a for a in names if a in ARMS or _SHIFT.fullmatch(a)]
    return [a for a in names if _ok(numbers, a)] if counted else names


def _ok(numbers: SizeNumbers, arm: str) -> bool:
    return bool(numbers.checks.get(arm, False))


def _breaks(d: Interval | None, t: float) -> bool:
    return d is not None and d.high < -t


def _holds(d: Interval | None, t: float) -> bool:
    return d is not None and d.low > -t


def _as_bad(d: Interval | None, t: float) -> bool:
    return d is not None and d.high < t


def _combine(outcomes: list[str], *, strict: bool = False) -> str:
    """strict: "for" ("against") when every outcome is; else when some is and none is the
    other way. "within" for none."""
    if not outcomes:
        return "within"
    for side, other in (("for", "against"), ("against", "for")):
        if all(o == side for o in outcomes):
            return side
        if not strict and side in outcomes and other not in outcomes:
            return side
    return "within"


def paired_draw_difference(
    a: ArrayLike,
    b: ArrayLike,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> Interval:
    """The mean of `a` minus the mean of `b` over the same prompts, with a percentile
    bootstrap interval that resamples the prompts (paired: the same resample on both sides)
    and, independently, each side's draws (a random control's).

    Args:
        a, b: [draws, prompts] per-prompt outcomes (e.g. exact match 0/1), one row per draw
            (one row for an arm without draws), the same prompts in the same order.

    Raises:
        ValueError: not two 2-d arrays over the same prompts, or a bad level or n_boot.
    """
    x, y = np.atleast_2d(np.asarray(a, float)), np.atleast_2d(np.asarray(b, float))
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or not x.size or not y.size:
        raise UsageError(
            f"a and b must be [draws, prompts] over the same prompts, got {x.shape}, {y.shape}"
        )
    if not 0 < level < 1 or not is_int(n_boot) or n_boot < 1:
        raise UsageError(f"need level in (0, 1) and n_boot >= 1, got {level!r}, {n_boot!r}")
    rng = np.random.default_rng(seed)
    prompts = rng.integers(0, x.shape[1], size=(n_boot, x.shape[1]))
    draws_a = rng.integers(0, len(x), size=(n_boot, len(x)))
    draws_b = rng.integers(0, len(y), size=(n_boot, len(y)))
    p = _counts(prompts, x.shape[1])
    boots = ((_counts(draws_a, len(x)) @ x) * p).sum(1) / (len(x) * x.shape[1])
    boots -= ((_counts(draws_b, len(y)) @ y) * p).sum(1) / (len(y) * y.shape[1])
    low, high = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(x.mean() - y.mean()), float(low), float(high))


def _counts(picks: np.ndarray, n: int) -> np.ndarray:
    """[n_boot, n] how often each index appears in each row of `picks`."""
    counts = np.zeros((len(picks), n))
    np.add.at(counts, (np.arange(len(picks))[:, None], picks), 1)
    return counts
