"""Fair comparisons of two feature sets on one model: the same positions, the same folds, and a
paired interval over sequences.

A probe score depends on which positions it is asked about and on the folds, and most of its
uncertainty comes from which sequences were drawn. Two feature sets a and b are compared so:

1. **The same positions**: the (sequence, position) pairs both have features for (a pair with
   ``cosine_first`` or ``cosine_previous`` is scored on positions 1..n-1 for both sets).
2. **The same folds**: `GroupKFold` over the sequences with one seed.
3. **Pooled out-of-fold predictions** (`adjpos.probes.fit.predict_out_of_fold`): a set's
   score is the metric of all its predictions pooled. Each sequence keeps the sums the
   metrics need (`STATISTICS`), so the score of any multiset of sequences is a ratio of sums.
4. **A paired bootstrap over sequences** (`adjpos.stats.paired_difference`): both sets'
   scores are recomputed on the same draw of sequences. The probes are not refitted in a draw:
   the interval covers the sampling of the scored sequences given the fitted folds.

With ``best_layer=True`` each side is read at its own best layer, chosen again in every draw.
The difference is a - b as measured: positive is better for R^2 and accuracy, worse for the
errors (``mae``, ``mean_abs_distance``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.capture import check_layers, check_tokens, iter_residuals
from adjpos.metrics.checks import check_finite, check_lengths
from adjpos.probes.features import ONE_NUMBER_SETS, base_name, check_feature_sets
from adjpos.probes.fit import METRICS, check_probes, predict_out_of_fold
from adjpos.probes.positions import _check_counts, _check_lengths_fit, _Data
from adjpos.probes.result import LOWER_IS_BETTER
from adjpos.stats import LEVEL, N_BOOT, check_bootstrap, paired_difference
from adjpos.tables import Table
from adjpos.types import TokenInput
from adjpos.validation import UsageError

# The sums each sequence keeps of a probe's out-of-fold predictions (y: the true position).
STATISTICS = ("count", "sum_y", "sum_y2", "squared_error", "absolute_error", "correct")
# The columns of `compare_feature_sets`: one row per pair (and layer) and metric.
COMPARISON_TABLE = Table(
    layer="int64",
    layer_b="int64",
    a="string",
    b="string",
    probe="string",
    metric="string",
    value_a="float64",
    value_b="float64",
    difference="float64",
    low="float64",
    high="float64",
    positions="string",
    n_sequences="int64",
)


@dataclass(frozen=True, eq=False)
class SequenceScores:
    """One feature set's scores kept per sequence: at each layer, each sequence's sums of the
    probe's out-of-fold predictions (`STATISTICS`), or of another per-sequence score
    (``abs_kendall_tau`` for order reconstruction)."""

    features: str
    probe: str
    layers: tuple[int, ...]
    positions: str  # the positions scored, "first..last"
    statistics: tuple[str, ...]
    sums: np.ndarray  # [sequence, layer, statistic]

    @property
    def n_sequences(self) -> int:
        return self.sums.shape[0]

    def values(self, metric: str, sums: np.ndarray | None = None) -> np.ndarray:
        """`metric` at each layer of the pooled `sums` [..., layer, statistic] (default: of
        every sequence): R^2 = 1 - squared_error / (sum_y2 - sum_y^2 / count), an error or
        the accuracy (correct) per count, or a mean per-sequence score (a `UsageError` lists
        the metrics these sums can give)."""
        available = [m for m, needs in _NEEDS.items() if set(needs) <= set(self.statistics)]
        if metric not in available:
            raise UsageError(
                f"{self.features} ({self.probe}) has no metric {metric!r}; it has {available}"
            )
        sums = self.sums.sum(axis=0) if sums is None else sums
        total = {name: sums[..., i] for i, name in enumerate(self.statistics)}
        count, first = total["count"], total[_NEEDS[metric][1]]
        with np.errstate(divide="ignore", invalid="ignore"):
            if metric == "r2":
                return 1 - total["squared_error"] / (total["sum_y2"] - first**2 / count)
            return first / count


# The sums each metric reads (count, then the one it divides by count; R^2 reads more).
_NEEDS = {
    "r2": ("count", "sum_y", "sum_y2", "squared_error"),
    "mae": ("count", "absolute_error"),
    "mean_abs_distance": ("count", "absolute_error"),
    "accuracy": ("count", "correct"),
    "abs_kendall_tau": ("count", "abs_kendall_tau"),
}


def compare_feature_sets(
    model: Any,
    tokens: TokenInput,
    pairs: Sequence[tuple[str, str]],
    *,
    probe: str = "ridge",
    lengths: Int[Tensor, " batch"] | None = None,
    layers: Sequence[int] | None = None,
    best_layer: bool = False,
    cv: int = 5,
    seed: int = 0,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    batch_size: int | None = None,
) -> Any:
    """Each pair of feature sets (a, b) compared on the same positions and folds, with a paired
    bootstrap interval over sequences of the difference a - b (see this module's docstring).

    Args:
        pairs: (a, b) feature-set names (`adjpos.probes.FEATURE_SETS`); a == b gives 0.
        probe: "ridge", "logistic" or "spline" (spline: one-number sets only).
        model, tokens, lengths, layers, batch_size: as in `adjpos.probe_positions`.
        best_layer: one row per pair, each side at its best layer among `layers`, chosen
            again in every bootstrap draw; otherwise one row per layer.
        cv: folds grouped by sequence (the same for both sets).
        seed: seed of the folds, of the shuffles of ``shuffled:`` sets and of the bootstrap.
        n_boot, level: bootstrap draws, and the percentile interval's confidence level.

    Returns:
        a frame of `COMPARISON_TABLE`, a row per pair (and layer) and metric: ``layer_b`` is
        b's layer, ``value_a``, ``value_b`` the pooled out-of-fold scores, ``difference``
        their difference with its interval ``low``, ``high``.

    Raises:
        UsageError: bad pairs, a set the probe cannot read, or bad counts, layers or lengths;
            all checked before any forward pass.

    Example:
        >>> import adjpos
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=1, d_model=16, n_heads=2))
        >>> tokens = torch.randint(0, 64, (12, 10), generator=torch.Generator().manual_seed(0))
        >>> table = compare_feature_sets(
        ...     model, tokens, [("cosine_first", "variance")], probe="spline", cv=3, n_boot=200
        ... )
        >>> r2 = table[table["metric"] == "r2"]
        >>> r2["layer"].tolist(), r2["positions"].tolist(), r2["n_sequences"].tolist()
        ([0, 1], ['1..9', '1..9'], [12, 12])
    """
    pairs = _check_pairs(pairs)
    check_bootstrap(level, n_boot)
    scores = score_sequences(
        model, tokens, pairs, probe=probe, lengths=lengths, layers=layers, cv=cv, seed=seed,
        batch_size=batch_size,
    )  # fmt: skip
    rows = []
    for (a, b), group in zip(pairs, scores, strict=True):
        for metric in METRICS[probe]:
            rows += compare_scores(
                group[a], group[b], metric=metric, best_layer=best_layer, n_boot=n_boot,
                level=level, seed=seed,
            )  # fmt: skip
    return COMPARISON_TABLE.frame(rows)


def score_sequences(
    model: Any,
    tokens: TokenInput,
    groups: Sequence[Sequence[str]],
    *,
    probe: str,
    lengths: Int[Tensor, " batch"] | None = None,
    layers: Sequence[int] | None = None,
    cv: int = 5,
    seed: int = 0,
    batch_size: int | None = None,
) -> list[dict[str, SequenceScores]]:
    """Per group of feature sets, each set's `SequenceScores`, every set of a group scored on
    the positions all of them have and on the same folds; one forward pass for every group.
    Two models' scores on the same tokens are paired too (for `compare_scores`).

    Args:
        groups: tuples of feature-set names, e.g. ``[("cosine_first", "variance")]``.
        probe, lengths, layers, cv, seed, batch_size: as in `compare_feature_sets`.
    """
    tokens = check_tokens(model, tokens)
    if isinstance(groups, str) or not isinstance(groups, Sequence) or not groups:
        raise UsageError(f"groups must be a non-empty list of tuples of sets, got {groups!r}")
    groups = [_check_group(group, probe) for group in groups]
    names = list(dict.fromkeys(name for group in groups for name in group))
    layers = check_layers(model, "resid_post", layers)
    lens = check_lengths(lengths, (tokens.shape[0],), tokens.shape[1])
    _check_counts(tokens.shape[0], cv, 1)
    _check_lengths_fit(names, lens)
    tokens = tokens[:, : int(lens.max())]
    data = _Data(tokens, lens, model.cfg.d_vocab)
    fit = {"probe": probe, "cv": cv, "seed": seed}
    per_layer = []  # per layer, per group: {name: (sums [sequence, statistic], positions)}
    stream = iter_residuals(model, tokens, layers=layers, batch_size=batch_size, progress=False)
    for layer, acts in stream:
        check_finite(acts, f"layer {layer}: activations")
        samples = {name: data.samples(acts, name, seed) for name in names}
        per_layer.append(_score_layer(samples, groups, tokens.shape, **fit))
    return [
        {
            name: SequenceScores(
                name,
                probe,
                tuple(layers),
                per_layer[0][g][name][1],
                STATISTICS,
                np.stack([found[g][name][0] for found in per_layer], axis=1),
            )  # fmt: skip
            for name in group
        }
        for g, group in enumerate(groups)
    ]


def _score_layer(samples: dict, groups: list, shape: tuple[int, int], **fit: Any) -> list[dict]:
    """One layer's sums of every set of every group, each set on its group's common samples;
    a set with the same samples in two groups is fitted once."""
    fitted: dict[tuple[str, bytes], tuple[np.ndarray, str]] = {}
    found = []
    for group in groups:
        common = _common(samples, group, *shape)
        found.append({})
        for name in group:
            key = (name, common.numpy().tobytes())
            if key not in fitted:
                kept = common[_keys(samples[name], shape[1])].to(samples[name][0].device)
                subset = tuple(part[kept] for part in samples[name])
                fitted[key] = _fit_sums(subset, n_seq=shape[0], **fit)
            found[-1][name] = fitted[key]
    return found


def compare_scores(
    a: SequenceScores,
    b: SequenceScores,
    *,
    metric: str,
    best_layer: bool = False,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The difference a - b of `metric` with its paired bootstrap interval over the sequences
    (one row per layer, or one at each side's best layer): the rows of `COMPARISON_TABLE`.
    A `UsageError` when the two were not scored alike."""
    alike = [(s.sums.shape, s.statistics, s.positions, s.layers) for s in (a, b)]
    if alike[0] != alike[1]:
        raise UsageError(
            f"{a.features} and {b.features} were not scored alike ({a.n_sequences} and "
            f"{b.n_sequences} sequences, positions {a.positions} and {b.positions}, layers "
            f"{list(a.layers)} and {list(b.layers)}); score them together (one group of "
            "score_sequences) or on the same tokens with the same settings"
        )
    check_bootstrap(level, n_boot)
    sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
    values_a, values_b = a.values(metric), b.values(metric)
    common = {"a": a.features, "b": b.features, "probe": a.probe, "metric": metric}
    common |= {"positions": a.positions, "n_sequences": a.n_sequences}
    draws = {"n_boot": n_boot, "level": level, "seed": seed}
    if best_layer:
        n_seq, n_layers = a.sums.shape[:2]

        def best(sums: np.ndarray) -> np.ndarray:  # [draw, layer x statistic] -> [draw]
            values = a.values(metric, sums.reshape(len(sums), n_layers, -1))
            return sign * np.max(sign * values, axis=1)

        x, y = a.sums.reshape(n_seq, -1), b.sums.reshape(n_seq, -1)
        best_a, best_b = int(np.argmax(sign * values_a)), int(np.argmax(sign * values_b))
        found = [(best_a, best_b, paired_difference(x, y, best, **draws))]
    else:
        per_layer = partial(a.values, metric)
        found = [
            (i, i, paired_difference(a.sums[:, i], b.sums[:, i], per_layer, **draws))
            for i in range(len(a.layers))
        ]
    return [
        {"layer": a.layers[la], "layer_b": b.layers[lb], **common}
        | {"value_a": float(values_a[la]), "value_b": float(values_b[lb])}
        | dict(zip(("difference", "low", "high"), interval, strict=True))
        for la, lb, interval in found
    ]


def _fit_sums(samples, *, probe: str, cv: int, seed: int, n_seq: int) -> tuple[np.ndarray, str]:
    """Each sequence's `STATISTICS` of the out-of-fold predictions, and the positions scored."""
    _, y, groups = samples
    predicted = predict_out_of_fold(samples, probe=probe, cv=cv, seed=seed)
    truth, owner = y.cpu().numpy().astype(float), groups.cpu().numpy()
    error = predicted - truth
    columns = (np.ones_like(truth), truth, truth**2, error**2, np.abs(error), error == 0)
    sums = np.stack([np.bincount(owner, c, minlength=n_seq) for c in columns], axis=1)
    return sums, f"{int(truth.min())}..{int(truth.max())}"


def _common(samples: dict, group: Sequence[str], n_seq: int, n_pos: int) -> Tensor:
    """A mask over the (sequence, position) keys: True where every set of `group` has a
    sample."""
    common = torch.ones(n_seq * n_pos, dtype=torch.bool)
    for name in group:
        present = torch.zeros_like(common)
        present[_keys(samples[name], n_pos)] = True
        common &= present
    return common


def _keys(samples, n_pos: int) -> Tensor:
    """One number per sample naming its (sequence, position)."""
    _, positions, groups = samples
    return groups.cpu() * n_pos + positions.cpu()


def _check_group(group: Any, probe: str) -> tuple[str, ...]:
    if isinstance(group, str) or not isinstance(group, Sequence) or not group:
        raise UsageError(f"each group must be a tuple of feature-set names, got {group!r}")
    names = tuple(check_feature_sets(list(group)))
    if not isinstance(probe, str):
        raise UsageError(f"give one probe name, got {probe!r}")
    check_probes(probe)
    wide = [n for n in names if base_name(n) not in ONE_NUMBER_SETS]
    if probe == "spline" and wide:
        raise UsageError(
            f"the spline probe reads one-number sets {list(ONE_NUMBER_SETS)}; {wide} have more"
        )
    return names


def _check_pairs(pairs: Any) -> list[tuple[str, str]]:
    if isinstance(pairs, str) or not isinstance(pairs, Sequence) or not pairs:
        raise UsageError(f"pairs must be a non-empty list of (a, b) feature sets, got {pairs!r}")
    for pair in pairs:
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise UsageError(f"each pair must be two feature-set names (a, b), got {pair!r}")
        check_feature_sets(list(pair))
    return [(a, b) for a, b in pairs]
