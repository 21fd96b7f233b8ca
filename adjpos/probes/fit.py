"""scikit-learn probes of token position, cross-validated by sequence, beside chance baselines.

- ``ridge``: standardise, then ridge regression of the position (alpha chosen inside each
  training fold by `RidgeCV` from 1e-3 to 1e3). Scored by R^2 and mean absolute error (MAE).
  Baseline: predicting the training folds' mean position (R^2 about 0, a little below).
- ``logistic``: standardise, then multinomial logistic regression over the positions, with weak
  L2 regularisation (C = 100): a one-number feature (variance, norm) needs large weights to
  cut its line into n ordered intervals, and C = 1 would hold it back (on clean synthetic
  data, accuracy 0.63 at C = 1 against 0.97 at C = 100). Scored by accuracy and the mean
  absolute distance |predicted - true| (Haviv et al.). Baseline: the same predictions paired
  with the true positions at random, i.e. the expected score of a guess drawn from the
  probe's own output frequencies, independent of the truth (computed exactly per fold). For
  a guess spread evenly over n positions this is accuracy 1/n and distance (n^2 - 1)/(3n),
  about n/3. The probe's own frequencies matter: a probe with no information that piles its
  guesses on the middle positions scores a distance near n/4, and one that piles them on the
  ends near n/2, so no fixed number is the chance level.

Folds are `GroupKFold` with the sequence as the group: no sequence is in both train and test.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# scikit-learn is imported inside the functions: the command line imports this module for
# its names (PROBES) and should not pay for scikit-learn on every command.

PROBES = ("ridge", "logistic")
METRICS = {"ridge": ("r2", "mae"), "logistic": ("accuracy", "mean_abs_distance")}
RIDGE_ALPHAS = tuple(10.0**k for k in range(-3, 4))
LOGISTIC_C = 100.0
LOGISTIC_MAX_ITER = 2000


def check_probes(names: str | tuple[str, ...] | list[str]) -> list[str]:
    """Validate probe names (one or several); returns them as a list.

    Raises:
        ValueError: an unknown name (the message lists the allowed ones) or an empty list.
    """
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in PROBES]
    if unknown or not names:
        raise ValueError(f"unknown probes {unknown or names}; choose from {list(PROBES)}")
    return list(dict.fromkeys(names))


def make_probe(name: str) -> Any:
    """A fresh, unfitted scikit-learn pipeline for probe `name`."""
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    check_probes(name)
    if name == "ridge":
        return make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS))
    return make_pipeline(
        StandardScaler(), LogisticRegression(C=LOGISTIC_C, max_iter=LOGISTIC_MAX_ITER)
    )


def cross_validate(
    features: np.ndarray,
    positions: np.ndarray,
    groups: np.ndarray,
    *,
    probe: str,
    cv: int,
    seed: int,
) -> dict[str, tuple[float, float]]:
    """Mean over `cv` grouped folds of each metric of `probe`, and of its baseline.

    Args:
        features: [samples, features] probe inputs.
        positions: [samples] the target position of each sample.
        groups: [samples] the sequence each sample comes from.
        probe: "ridge" or "logistic".
        cv: number of folds.
        seed: shuffles which sequences go to which fold.

    Returns:
        ``{metric: (value, baseline)}`` for the probe's two metrics.
    """
    from sklearn.model_selection import GroupKFold

    folds = GroupKFold(n_splits=cv, shuffle=True, random_state=seed)
    per_fold = []
    for train, test in folds.split(features, positions, groups):
        model = make_probe(probe).fit(features[train], positions[train])
        predicted = model.predict(features[test])
        per_fold.append(_SCORERS[probe](predicted, positions[train], positions[test]))
    return {
        metric: tuple(float(np.mean([fold[metric][i] for fold in per_fold])) for i in (0, 1))
        for metric in METRICS[probe]
    }


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


_SCORERS = {"ridge": _ridge_scores, "logistic": _logistic_scores}
