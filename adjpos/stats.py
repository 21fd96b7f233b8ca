"""Small statistics on plain arrays and the verdicts drawn from them: where one interval lies
against another (`compare_intervals`), that as an `Outcome` for a claim (`judge`) and a claim's
`Status` from its counts (`Status.of`, the one rule); intervals of proportions, of means over
units and seeds, and of paired differences; the variance ratio and its Spearman correlation.
Bad input (shapes, counts, a level outside (0, 1)) raises `UsageError` naming it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from adjpos.validation import UsageError, check_positive_int

__all__ = [
    "OUTCOMES",
    "Interval",
    "STATUS_RULE",
    "Outcome",
    "Status",
    "every_seed",
    "judge",
    "VARIANCE_SUMMARY",
    "bootstrap_interval",
    "compare_intervals",
    "paired_difference",
    "paired_draw_difference",
    "seed_interval",
    "spearman",
    "variance_difference",
    "variance_ratio",
    "variance_summary",
    "wilson_interval",
]

N_BOOT = 2000
# The columns `variance_summary` returns, with their pandas dtypes (for `adjpos.tables.Table`).
VARIANCE_SUMMARY = {
    **{f"{n}{end}": "float64" for n in ("ratio", "spearman") for end in ("", "_low", "_high")},
    "n_sequences": "int64",
}
LEVEL = 0.95
# What `compare_intervals` answers.
OUTCOMES = ("above", "below", "within")


def compare_intervals(low: float, high: float, other_low: float, other_high: float) -> str:
    """Where the interval [low, high] lies against [other_low, other_high]: "above" when it
    lies wholly above (low > other_high), "below" when wholly below (high < other_low), and
    "within" when the two overlap or touch (a difference inside the uncertainty is none) or a
    bound is unknown (NaN). A point is an interval of width 0: ``compare_intervals(x, x, c,
    c)`` compares two numbers.

    Example:
        >>> compare_intervals(0.6, 0.7, 0.4, 0.55)
        'above'
        >>> compare_intervals(0.5, 0.7, 0.4, 0.55)
        'within'
        >>> compare_intervals(0.8, 0.9, 1.0, 1.0)
        'below'
    """
    if np.isnan(np.array([low, high, other_low, other_high], dtype=float)).any():
        return "within"
    if low > high or other_low > other_high:
        raise UsageError(
            f"compare_intervals needs two intervals with low <= high, got [{low}, {high}] and "
            f"[{other_low}, {other_high}]"
        )
    if low > other_high:
        return "above"
    if high < other_low:
        return "below"
    return "within"


class Outcome(str, Enum):
    """What one cell says of a claim: for it, against it, or within the uncertainty."""

    FOR = "for"
    AGAINST = "against"
    WITHIN = "within"

    def __str__(self) -> str:
        return self.value


class Status(str, Enum):
    """A claim's verdict over its cells (the rule: `Status.of`)."""

    SUPPORTED = "supported"
    LIMITED = "limited"
    MIXED = "mixed"
    NOT_SUPPORTED = "not supported"
    NOT_SHOWN = "not shown"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, n_for: int, n_against: int, n_cells: int) -> Status:
        """The one status rule (in words: `STATUS_RULE`)."""
        if n_for and n_against:
            return cls.MIXED
        if n_against:
            return cls.NOT_SUPPORTED
        if not n_for:
            return cls.NOT_SHOWN
        return cls.SUPPORTED if 2 * n_for >= n_cells else cls.LIMITED


# Status.of in words, for the report and the docs.
STATUS_RULE = {
    Status.SUPPORTED: "for in at least half the cells tested, none against",
    Status.LIMITED: "for in fewer than half the cells tested, none against",
    Status.MIXED: "for in some cells, against in others",
    Status.NOT_SUPPORTED: "against in some cells, for in none",
    Status.NOT_SHOWN: "neither for nor against in any cell (all within, or none tested)",
}


def judge(
    low: float, high: float, other_low: float, other_high: float, *, favour: str = "above"
) -> Outcome:
    """The one way an interval becomes an outcome: `compare_intervals` of the two is
    `Outcome.FOR` on the `favour` side ("above" or "below"), `AGAINST` on the other, `WITHIN`
    otherwise."""
    side = compare_intervals(low, high, other_low, other_high)
    if side == "within":
        return Outcome.WITHIN
    return Outcome.FOR if side == favour else Outcome.AGAINST


def every_seed(outcomes: Iterable[Outcome]) -> Outcome:
    """A cell's outcome over its seeds: for (against) only when every seed's is, else
    within (a cell counts only when it holds for every seed)."""
    found = set(outcomes)
    return found.pop() if len(found) == 1 else Outcome.WITHIN


def wilson_interval(successes: int | float, n: int, *, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval of a proportion `successes` / `n`, the interval of every
    proportion adjpos reports: unlike a bootstrap it does not collapse to a point when every
    unit succeeds (or none does), and it stays inside [0, 1]. `successes` may be a mean count
    (hits averaged over random draws): the interval is then that of `n` units.

    Example:
        >>> low, high = wilson_interval(64, 64)
        >>> round(low, 3), high
        (0.943, 1.0)
    """
    from scipy.stats import norm

    check_positive_int("n", n)
    real = isinstance(successes, numbers.Real) and not isinstance(successes, bool)
    if not real or not 0 <= successes <= n:
        raise UsageError(f"successes must be a number in 0..{n}, got {successes!r}")
    check_bootstrap(level)
    z = float(norm.ppf(0.5 + level / 2))
    p, z2 = successes / n, z * z / n
    centre = (p + z2 / 2) / (1 + z2)
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n)) / (1 + z2)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    return float(low), float(1.0 if successes == n else min(1.0, centre + half))


def bootstrap_interval(
    values: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values`, or with `weights` of sum(w v) /
    sum(w) (e.g. per-prompt correct tokens / tokens: the pooled token accuracy).

    Example:
        >>> low, high = bootstrap_interval([0, 1] * 200)
        >>> 0.44 < low < 0.5 < high < 0.56
        True
    """
    x = np.asarray(values, dtype=float).reshape(-1)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float).reshape(-1)
    if x.size == 0:
        raise UsageError("bootstrap_interval needs at least one value")
    if w.shape != x.shape:
        raise UsageError(f"values and weights differ in length: {x.size} and {w.size}")
    if not (np.isfinite(x).all() and np.isfinite(w).all()):
        raise UsageError("bootstrap_interval needs finite values and weights")
    check_bootstrap(level, n_boot)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, x.size, size=(n_boot, x.size))
    totals = w[picks].sum(axis=1)
    means = (w * x)[picks].sum(axis=1) / np.where(totals > 0, totals, np.nan)
    return _percentiles(means, level)


def check_bootstrap(level: Any, n_boot: Any = 1) -> None:
    """Raise `UsageError` unless `level` is in (0, 1) and `n_boot` a positive int."""
    if not isinstance(level, float | int) or not 0 < level < 1:
        raise UsageError(f"level must be in (0, 1), got {level!r}")
    check_positive_int("n_boot", n_boot)


def _percentiles(boots: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval at `level` of bootstrap statistics (NaN draws left out)."""
    low, high = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    summary: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``summary(mean of a's rows) - summary(mean of b's rows)``, with a paired percentile
    bootstrap interval: the units (rows, e.g. the same sequences under two models) are
    resampled together, so what the two share cancels. `summary` maps mean rows [k, ...] to k
    numbers (default: the mean itself). Units where either side is NaN are left out.

    Example:
        >>> a = np.arange(50.0)
        >>> d, low, high = paired_difference(a + 1.0, a)  # every unit 1 higher
        >>> d, low, high
        (1.0, 1.0, 1.0)
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim == 0:
        raise UsageError(
            f"a and b must have the same shape [unit, ...], got {x.shape} and {y.shape}"
        )
    x, y = x.reshape(len(x), -1), y.reshape(len(y), -1)
    kept = ~(np.isnan(x).any(axis=1) | np.isnan(y).any(axis=1))
    x, y = x[kept], y[kept]
    if not len(x):
        raise UsageError("paired_difference needs at least one unit measured on both sides")
    check_bootstrap(level, n_boot)
    n = len(x)
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)
    if summary is None:  # the mean of the per-unit differences, resampled as one
        boots, value = (counts @ (x - y))[:, 0] / n, (x - y).mean(axis=0)
    else:
        boots = summary(counts @ x / n) - summary(counts @ y / n)  # [n_boot]
        value = summary(x.mean(axis=0, keepdims=True)) - summary(y.mean(axis=0, keepdims=True))
    return float(value[0]), *_percentiles(boots, level)


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

    def record(self) -> dict[str, float]:
        """{"value", "low", "high"}: a table's columns."""
        return {"value": self.value, "low": self.low, "high": self.high}


def paired_draw_difference(
    a: ArrayLike,
    b: ArrayLike,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> Interval:
    """The mean of `a` minus the mean of `b`, [draws, prompts] per-prompt outcomes over the
    same prompts (one row for an arm without draws), with a percentile bootstrap interval that
    resamples the prompts (the same resample on both sides) and, independently, each side's
    draws.
    """
    x, y = np.atleast_2d(np.asarray(a, float)), np.atleast_2d(np.asarray(b, float))
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or not x.size or not y.size:
        raise UsageError(
            f"a and b must be [draws, prompts] over the same prompts, got {x.shape}, {y.shape}"
        )
    check_bootstrap(level, n_boot)
    rng = np.random.default_rng(seed)
    prompts = rng.integers(0, x.shape[1], size=(n_boot, x.shape[1]))
    draws_a = rng.integers(0, len(x), size=(n_boot, len(x)))
    draws_b = rng.integers(0, len(y), size=(n_boot, len(y)))
    p = _counts(prompts, x.shape[1])
    boots = ((_counts(draws_a, len(x)) @ x) * p).sum(1) / (len(x) * x.shape[1])
    boots -= ((_counts(draws_b, len(y)) @ y) * p).sum(1) / (len(y) * y.shape[1])
    return Interval(float(x.mean() - y.mean()), *_percentiles(boots, level))


def paired_share_difference(
    hits_a: ArrayLike,
    totals_a: ArrayLike,
    hits_b: ArrayLike,
    totals_b: ArrayLike,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> Interval:
    """The pooled share sum(hits_a) / sum(totals_a) minus sum(hits_b) / sum(totals_b), each a
    [prompts] count over the same prompts, with a percentile bootstrap interval that resamples
    the prompts (the same resample on both sides). NaN where a side has no total.
    """
    arrays = [np.asarray(x, float) for x in (hits_a, totals_a, hits_b, totals_b)]
    if any(x.ndim != 1 or x.shape != arrays[0].shape for x in arrays) or not arrays[0].size:
        raise UsageError(f"the counts must be 1-d over the same prompts, got {arrays[0].shape}")
    check_bootstrap(level, n_boot)
    rng = np.random.default_rng(seed)
    p = _counts(rng.integers(0, len(arrays[0]), size=(n_boot, len(arrays[0]))), len(arrays[0]))
    with np.errstate(invalid="ignore", divide="ignore"):
        a_hits, a_total, b_hits, b_total = (p @ x for x in arrays)
        boots = a_hits / a_total - b_hits / b_total
        point = arrays[0].sum() / arrays[1].sum() - arrays[2].sum() / arrays[3].sum()
    if np.isnan(point):
        return Interval(math.nan, math.nan, math.nan)
    boots = boots[~np.isnan(boots)]
    return Interval(float(point), *_percentiles(boots, level))


def _counts(picks: np.ndarray, n: int) -> np.ndarray:
    """[n_boot, n] how often each index appears in each row of `picks`."""
    counts = np.zeros((len(picks), n))
    np.add.at(counts, (np.arange(len(picks))[:, None], picks), 1)
    return counts


def seed_interval(values: ArrayLike, *, level: float = LEVEL) -> tuple[float, float, float]:
    """The mean of a few per-seed values with its Student-t interval over the seeds (NaN
    bounds for a single seed: one draw says nothing of the spread).

    Example:
        >>> mean, low, high = seed_interval([1.0, 2.0, 3.0])
        >>> mean, round(low, 2), round(high, 2)
        (2.0, -0.48, 4.48)
    """
    from scipy.stats import t

    x = np.asarray(values, dtype=float).reshape(-1)
    x = x[~np.isnan(x)]
    if not len(x):
        raise UsageError("seed_interval needs at least one value")
    mean = float(x.mean())
    if len(x) < 2:
        return mean, float("nan"), float("nan")
    half = float(t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return mean, mean - half, mean + half


def variance_ratio(profile: ArrayLike) -> float:
    """Mean over the last third of a per-position profile (such as the hidden state's
    variance) over the mean over its first third (at least one position each): below 1, it
    shrinks with position.

    Example:
        >>> variance_ratio([4.0, 4.0, 3.0, 2.0, 1.0, 1.0])
        0.25
    """
    values = np.asarray(profile, dtype=float).reshape(-1)
    if values.size < 2 or not np.isfinite(values).all():
        raise UsageError(f"variance_ratio needs at least 2 finite values, got {values.size}")
    return float(_ratio_rows(values[None])[0])


def variance_summary(
    values: np.ndarray, *, n_boot: int = 1000, level: float = LEVEL, seed: int = 0
) -> dict:
    """Ratio and Spearman correlation with position of the mean variance profile of
    `values` [sequence, position], with bootstrap intervals over the sequences."""
    n = values.shape[0]
    weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)
    boots = weights @ values / n  # [n_boot, position]: the resampled mean profiles
    out = {}
    for name, (one, rows) in _SUMMARIES.items():
        low, high = np.quantile(rows(boots), [(1 - level) / 2, (1 + level) / 2])
        out |= {name: one(values.mean(axis=0)), f"{name}_low": low, f"{name}_high": high}
    return {k: float(v) for k, v in out.items()} | {"n_sequences": n}


def variance_difference(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = 1000, level: float = LEVEL, seed: int = 0
) -> dict[str, float]:
    """`variance_summary`'s statistics of `a` minus those of `b`, variance profiles of the same
    sequences (e.g. a trained model and its initial weights), with paired intervals."""
    out = {}
    for name, (_, rows) in _SUMMARIES.items():
        value, low, high = paired_difference(a, b, rows, n_boot=n_boot, level=level, seed=seed)
        out |= {name: value, f"{name}_low": low, f"{name}_high": high}
    return out


def _ratio_rows(rows: np.ndarray) -> np.ndarray:
    """`variance_ratio` of each row of `rows` [n, positions]."""
    third = max(1, rows.shape[1] // 3)
    return rows[:, -third:].mean(axis=1) / rows[:, :third].mean(axis=1)


def spearman(profile: np.ndarray) -> float:
    """Spearman correlation of a profile with its position (average ranks for ties; NaN for a
    constant profile, which has no rank order)."""
    return float(spearman_rows(np.asarray(profile, dtype=float).reshape(1, -1))[0])


def spearman_rows(rows: np.ndarray) -> np.ndarray:
    """`spearman` of each row of `rows` [n, positions], all rows at once.

    Example:
        >>> spearman_rows(np.array([[1.0, 2.0, 3.0], [3.0, 1.0, 1.0], [2.0, 2.0, 2.0]]))
        array([ 1.       , -0.8660254,        nan])
    """
    from scipy.stats import rankdata

    ranks = rankdata(rows, axis=1)
    ranks -= ranks.mean(axis=1, keepdims=True)
    positions = np.arange(rows.shape[1], dtype=float) - (rows.shape[1] - 1) / 2
    scale = np.sqrt((ranks * ranks).sum(axis=1) * (positions * positions).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, np.clip((ranks @ positions) / scale, -1, 1), np.nan)


# variance_summary's statistics: each on one profile, and on every row of a [n, positions] array.
_SUMMARIES = {"ratio": (variance_ratio, _ratio_rows), "spearman": (spearman, spearman_rows)}
