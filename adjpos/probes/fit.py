"""Probes of token position, cross-validated by sequence, beside chance baselines.

- ``ridge``: standardise, then ridge regression of the position (alpha chosen inside each
  training fold by `RidgeCV` from 1e-3 to 1e3). Scored by R^2 and mean absolute error (MAE).
  Baseline: predicting the training folds' mean position (R^2 about 0, a little below).
- ``spline``: for one-number feature sets only (variance, norm, cosine_mean, cosine_first,
  cosine_previous): a cubic B-spline basis of the number (knots at quantiles), then the same
  ridge. A line through one number can only read a position that grows or falls linearly
  with it; the spline reads any smooth, monotone or not, relation, so two single numbers
  are compared under one flexible probe. Scored and baselined as ridge.
- ``logistic``: standardise, then multinomial logistic regression over the positions, with weak
  L2 regularisation (C = 100): a one-number feature needs large weights to cut its line into
  n ordered intervals (on clean synthetic data, accuracy 0.63 at C = 1 against 0.97 at
  C = 100). Fitted in torch, every fold of every repeat at once (`adjpos.probes.logistic`).
  Scored by accuracy and the mean absolute distance |predicted - true| (Haviv et al.).
  Baseline: the expected score of a guess drawn from the probe's own output frequencies,
  independent of the truth (exact per fold; accuracy 1/n and distance about n/3 for a guess
  spread evenly, but a blind probe that piles its guesses on the middle scores near n/4).

Folds are `GroupKFold` with the sequence as the group: no sequence is in both train and test.
`cross_validate` scores each fold; `predict_out_of_fold` returns every sample's prediction by
the probe of the fold that held its sequence out (what `adjpos.probes.compare` pools).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from adjpos.probes.logistic import LOGISTIC_C, fit_predict_logistic
from adjpos.validation import UsageError

# scikit-learn is imported inside the functions: the command line imports this module for
# its names (PROBES) and should not pay for scikit-learn on every command.

PROBES = ("ridge", "logistic", "spline")
METRICS = {
    "ridge": ("r2", "mae"),
    "logistic": ("accuracy", "mean_abs_distance"),
    "spline": ("r2", "mae"),
}
# Probes that read one number only; other feature sets are not probed with them.
ONE_NUMBER_PROBES = ("spline",)
RIDGE_ALPHAS = tuple(10.0**k for k in range(-3, 4))
SPLINE_KNOTS = 8
# A tuple (features, positions, groups) of one repeat: [samples, features], [samples] and the
# sequence of each sample.
Samples = tuple[Tensor, Tensor, Tensor]


def check_names(
    what: str, names: str | Sequence[str], allowed: Sequence[str], listed: str | None = None
) -> list[str]:
    """`names` (one name or several) as a list in order, repeats dropped, each one of `allowed`;
    else a `UsageError` naming `what` they are and listing `listed` (default: `allowed`)."""
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        choose = listed if listed is not None else str(list(allowed))
        raise UsageError(f"unknown {what} {unknown or names}; choose from {choose}")
    return list(dict.fromkeys(names))


def check_probes(names: str | Sequence[str]) -> list[str]:
    """Probe names (one or several) as a list, each one of `PROBES` (else `UsageError`)."""
    return check_names("probes", names, PROBES)


def probe_applies(probe: str, n_features: int) -> bool:
    """Whether `probe` reads a feature set of `n_features` numbers (spline: one only)."""
    return probe not in ONE_NUMBER_PROBES or n_features == 1


def make_probe(name: str) -> Any:
    """A fresh, unfitted scikit-learn pipeline for the regression probes (ridge, spline)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import SplineTransformer, StandardScaler

    if name == "ridge":
        return make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS))
    if name == "spline":
        basis = SplineTransformer(n_knots=SPLINE_KNOTS, knots="quantile", extrapolation="linear")
        return make_pipeline(StandardScaler(), basis, RidgeCV(alphas=RIDGE_ALPHAS))
    raise UsageError(f"make_probe builds 'ridge' or 'spline', got {name!r}")


def cross_validate(
    samples: Sequence[Samples], *, probe: str, cv: int, seeds: Sequence[int]
) -> list[dict[str, tuple[float, float, float]]]:
    """Mean over `cv` grouped folds of each metric of `probe`, and of its baseline, per seed.

    Args:
        samples: per seed, ``(features, positions, groups)`` tensors: [samples, features]
            probe inputs, [samples] the target position of each sample, [samples] the
            sequence each sample comes from. One entry serves every seed.
        probe: "ridge", "logistic" or "spline" (one-number features only).
        cv: number of folds.
        seeds: one run per seed; a seed shuffles which sequences go to which fold.

    Returns:
        Per seed, ``{metric: (value, baseline, sem)}`` for the probe's two metrics: the mean
        over the folds, its baseline, and the standard error of that mean over the folds
        (their std / sqrt(cv); an approximation, as folds share training data). The logistic
        probe solves every fold of every seed at once.
    """
    check_probes(probe)
    samples = list(samples) * len(seeds) if len(samples) == 1 else list(samples)
    if len(samples) != len(seeds):
        raise UsageError(
            f"give one sample set, or one per seed; got {len(samples)} for {len(seeds)}"
        )
    folds = []  # (seed index, x, y, train, test)
    for index, (sample, seed) in enumerate(zip(samples, seeds, strict=True)):
        folds += _folds(index, sample, probe=probe, cv=cv, seed=seed)
    predictions = _PREDICTORS[probe](probe, folds)
    per_seed: list[list[dict]] = [[] for _ in seeds]
    for (index, _, y, train, test), predicted in zip(folds, predictions, strict=True):
        truth = y.cpu().numpy()
        per_seed[index].append(_SCORERS[probe](predicted, truth[train], truth[test]))
    return [{m: _fold_summary([f[m] for f in runs]) for m in METRICS[probe]} for runs in per_seed]


def predict_out_of_fold(samples: Samples, *, probe: str, cv: int, seed: int) -> np.ndarray:
    """The out-of-fold prediction of every sample: each is predicted by the probe fitted on the
    folds that do not hold its sequence (the folds of `cross_validate` with this seed).

    Args:
        samples: ``(features, positions, groups)``, one sample set of `cross_validate`.
        probe, cv: as in `cross_validate`.
        seed: shuffles which sequences go to which fold.

    Returns:
        float array [samples]: the predicted position of each sample (a class for logistic).

    Example:
        >>> x = torch.arange(12.0)[:, None]
        >>> y, groups = torch.arange(12), torch.arange(12) // 3
        >>> predict_out_of_fold((x, y, groups), probe="ridge", cv=2, seed=0).round(2)
        array([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11.])
    """
    check_probes(probe)
    folds = _folds(0, samples, probe=probe, cv=cv, seed=seed)
    predicted = np.empty(len(samples[1]), dtype=float)
    for (*_, test), values in zip(folds, _PREDICTORS[probe](probe, folds), strict=True):
        predicted[test.numpy()] = values
    return predicted


def _folds(index: int, samples: Samples, *, probe: str, cv: int, seed: int) -> list[tuple]:
    """(index, x, y, train, test) of each of `cv` folds grouped by sequence: the split depends
    only on the sequences present and the seed, so two sample sets of the same sequences get
    the same folds."""
    from sklearn.model_selection import GroupKFold

    x, y, groups = samples
    if not probe_applies(probe, x.shape[1]):
        raise UsageError(f"the {probe} probe reads one number; got {x.shape[1]} features")
    split = GroupKFold(n_splits=cv, shuffle=True, random_state=seed)
    return [
        (index, x, y, torch.as_tensor(train), torch.as_tensor(test))
        for train, test in split.split(x.cpu().numpy(), y.cpu().numpy(), groups.cpu().numpy())
    ]


def _fold_summary(folds: list[tuple[float, float]]) -> tuple[float, float, float]:
    values = np.array([value for value, _ in folds])
    sem = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")
    return float(values.mean()), float(np.mean([chance for _, chance in folds])), sem


def _regression_predictions(probe: str, folds: list) -> list[np.ndarray]:
    out = []
    for _, x, y, train, test in folds:
        xs, ys = x.cpu().double().numpy(), y.cpu().numpy()
        out.append(make_probe(probe).fit(xs[train], ys[train]).predict(xs[test]))
    return out


def _logistic_predictions(probe: str, folds: list) -> list[np.ndarray]:
    classes = int(max(int(y.max()) for _, _, y, _, _ in folds)) + 1
    train_x = [x[train.to(x.device)] for _, x, _, train, _ in folds]
    train_y = [y[train.to(y.device)] for _, _, y, train, _ in folds]
    test_x = [x[test.to(x.device)] for _, x, _, _, test in folds]
    predicted = fit_predict_logistic(train_x, train_y, test_x, n_classes=classes, C=LOGISTIC_C)
    return [p.cpu().numpy() for p in predicted]


def _ridge_scores(predicted, train_y, test_y) -> dict[str, tuple[float, float]]:
    from sklearn.metrics import r2_score

    mean = np.full(test_y.shape, train_y.mean(), dtype=float)
    return {
        "r2": (r2_score(test_y, predicted), r2_score(test_y, mean)),
        "mae": (np.abs(predicted - test_y).mean(), np.abs(mean - test_y).mean()),
    }


def _logistic_scores(predicted, train_y, test_y) -> dict[str, tuple[float, float]]:
    guesses, guess_counts = np.unique(predicted, return_counts=True)
    truths, truth_counts = np.unique(test_y, return_counts=True)
    # Joint frequency of (guess, truth) if the two were independent.
    joint = np.outer(guess_counts, truth_counts) / len(test_y) ** 2
    chance_accuracy = (joint * (guesses[:, None] == truths)).sum()
    chance_distance = (joint * np.abs(guesses[:, None] - truths)).sum()
    return {
        "accuracy": ((predicted == test_y).mean(), chance_accuracy),
        "mean_abs_distance": (np.abs(predicted - test_y).mean(), chance_distance),
    }


_PREDICTORS = {
    "ridge": _regression_predictions,
    "spline": _regression_predictions,
    "logistic": _logistic_predictions,
}
_SCORERS = {"ridge": _ridge_scores, "spline": _ridge_scores, "logistic": _logistic_scores}
