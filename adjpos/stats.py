"""Small statistics on plain arrays: the percentile bootstrap interval of a mean over
independent units (prompts, sequences, seeds), the variance ratio of a profile and its
Spearman correlation with position, with intervals over sequences."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from adjpos.validation import UsageError, is_int

__all__ = [
    "OUTCOMES",
    "VARIANCE_SUMMARY",
    "bootstrap_interval",
    "compare_intervals",
    "spearman",
    "variance_ratio",
    "variance_summary",
]

N_BOOT = 2000
# The columns `variance_summary` returns, with their pandas dtypes (for `adjpos.tables.Table`).
VARIANCE_SUMMARY = {
    "ratio": "float64",
    "ratio_low": "float64",
    "ratio_high": "float64",
    "spearman": "float64",
    "spearman_low": "float64",
    "spearman_high": "float64",
    "n_sequences": "int64",
}
LEVEL = 0.95
# What `compare_intervals` answers.
OUTCOMES = ("above", "below", "within")


def compare_intervals(low: float, high: float, other_low: float, other_high: float) -> str:
    """Where the interval [low, high] lies against [other_low, other_high]: "above" when it
    lies wholly above (low > other_high), "below" when wholly below (high < other_low), and
    "within" when the two overlap or touch: a difference inside the uncertainty is none. An
    unknown bound (NaN, e.g. the correlation of a constant profile) gives "within" too: nothing
    can be said.

    A point is an interval of width 0, so ``compare_intervals(x, x, c, c)`` compares two
    numbers, and the interval of a difference ``gap ± z * error`` against ``(0, 0)`` says
    whether the difference exceeds z standard errors.

    Example:
        >>> compare_intervals(0.6, 0.7, 0.4, 0.55)
        'above'
        >>> compare_intervals(0.5, 0.7, 0.4, 0.55)
        'within'
        >>> compare_intervals(0.8, 0.9, 1.0, 1.0)
        'below'

    Raises:
        UsageError: an interval's low exceeds its high.
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


def bootstrap_interval(
    values: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the (weighted) mean of `values`.

    Units are resampled with replacement `n_boot` times; with `weights` the statistic is
    sum(w v) / sum(w) (e.g. per-prompt correct tokens / tokens: the pooled token accuracy).

    Example:
        >>> low, high = bootstrap_interval([0, 1] * 200)
        >>> 0.44 < low < 0.5 < high < 0.56
        True

    Raises:
        ValueError: no values, values and weights of different lengths, non-finite values,
            `level` outside (0, 1) or `n_boot` below 1.
    """
    x = np.asarray(values, dtype=float).reshape(-1)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float).reshape(-1)
    if x.size == 0:
        raise UsageError("bootstrap_interval needs at least one value")
    if w.shape != x.shape:
        raise UsageError(f"values and weights differ in length: {x.size} and {w.size}")
    if not (np.isfinite(x).all() and np.isfinite(w).all()):
        raise UsageError("bootstrap_interval needs finite values and weights")
    if not 0 < level < 1:
        raise UsageError(f"level must be in (0, 1), got {level!r}")
    if not is_int(n_boot) or n_boot < 1:
        raise UsageError(f"n_boot must be a positive int, got {n_boot!r}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, x.size, size=(n_boot, x.size))
    totals = w[picks].sum(axis=1)
    means = (w * x)[picks].sum(axis=1) / np.where(totals > 0, totals, np.nan)
    tail = (1 - level) / 2
    low, high = np.nanquantile(means, [tail, 1 - tail])
    return float(low), float(high)


def variance_ratio(profile: ArrayLike) -> float:
    """Mean over the last third of the positions divided by the mean over the first third (a
    third is at least one position) of a per-position profile, such as the variance of the
    hidden state: below 1, it shrinks with position.

    Example:
        >>> variance_ratio([4.0, 4.0, 3.0, 2.0, 1.0, 1.0])
        0.25

    Raises:
        ValueError: fewer than 2 positions, or non-finite values.
    """
    values = np.asarray(profile, dtype=float).reshape(-1)
    if values.size < 2 or not np.isfinite(values).all():
        raise UsageError(f"variance_ratio needs at least 2 finite values, got {values.size}")
    third = max(1, values.size // 3)
    return float(values[-third:].mean() / values[:third].mean())


def variance_summary(values: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """Ratio and Spearman correlation with position of the mean variance profile of
    `values` [sequence, position], with percentile bootstrap intervals over the sequences."""
    n = values.shape[0]
    weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)
    boots = weights @ values / n  # [n_boot, position]: the resampled mean profiles
    third = max(1, values.shape[1] // 3)
    ratios = boots[:, -third:].mean(axis=1) / boots[:, :third].mean(axis=1)
    rhos = _spearman_rows(boots)
    profile = values.mean(axis=0)
    return {
        "ratio": variance_ratio(profile),
        "ratio_low": float(np.quantile(ratios, 0.025)),
        "ratio_high": float(np.quantile(ratios, 0.975)),
        "spearman": spearman(profile),
        "spearman_low": float(np.quantile(rhos, 0.025)),
        "spearman_high": float(np.quantile(rhos, 0.975)),
        "n_sequences": n,
    }


def spearman(profile: np.ndarray) -> float:
    """Spearman correlation of a profile with its position (average ranks for ties; NaN for a
    constant profile, which has no rank order)."""
    return float(_spearman_rows(np.asarray(profile, dtype=float).reshape(1, -1))[0])


def _spearman_rows(rows: np.ndarray) -> np.ndarray:
    """The Spearman correlation of each row of `rows` [n, positions] with its position: the
    Pearson correlation of its average ranks with 0..positions-1, all rows at once."""
    from scipy.stats import rankdata

    ranks = rankdata(rows, axis=1)
    ranks -= ranks.mean(axis=1, keepdims=True)
    positions = np.arange(rows.shape[1], dtype=float) - (rows.shape[1] - 1) / 2
    scale = np.sqrt((ranks * ranks).sum(axis=1) * (positions * positions).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, np.clip((ranks @ positions) / scale, -1, 1), np.nan)
