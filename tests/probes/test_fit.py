"""The scikit-learn probes: grouped folds, metrics and their chance baselines."""

import numpy as np
import pytest

from adjpos.probes import check_probes, cross_validate
from adjpos.probes.fit import _logistic_scores, _ridge_scores


def _data(n_seq=30, n_pos=10, informative=True, seed=0):
    rng = np.random.default_rng(seed)
    positions = np.tile(np.arange(n_pos), n_seq)
    groups = np.repeat(np.arange(n_seq), n_pos)
    noise = rng.normal(size=(len(positions), 3))
    if informative:
        noise[:, 0] += 5 * positions
    return noise, positions, groups


def test_an_informative_feature_is_read_perfectly():
    x, y, g = _data()
    ridge = cross_validate(x, y, g, probe="ridge", cv=5, seed=0)
    logistic = cross_validate(x, y, g, probe="logistic", cv=5, seed=0)
    assert ridge["r2"][0] > 0.95 and abs(ridge["r2"][1]) < 1e-9
    assert logistic["accuracy"][0] > 0.95 and logistic["mean_abs_distance"][0] < 0.05
    assert ridge["mae"][1] == pytest.approx(2.5)  # |k - 4.5| averaged over k = 0..9


def test_noise_scores_at_its_baselines():
    x, y, g = _data(informative=False)
    for probe in ("ridge", "logistic"):
        for metric, (value, chance) in cross_validate(x, y, g, probe=probe, cv=5, seed=1).items():
            tolerance = {"r2": 0.05, "mae": 0.15, "accuracy": 0.05, "mean_abs_distance": 0.5}
            assert abs(value - chance) < tolerance[metric], (probe, metric, value, chance)


def test_folds_are_grouped_by_sequence():
    """Each sequence has its own random 'position' and a feature naming the sequence: a probe
    can only memorise it, which helps only when a sequence sits in train and test at once."""
    rng = np.random.default_rng(0)
    n_seq, per_seq = 40, 8
    groups = np.repeat(np.arange(n_seq), per_seq)
    labels = np.repeat(rng.integers(0, 8, n_seq), per_seq)
    one_hot = np.eye(n_seq)[groups]
    scores = cross_validate(one_hot, labels, groups, probe="logistic", cv=4, seed=0)
    value, chance = scores["accuracy"]
    assert value <= chance + 0.05


def test_logistic_baseline_is_the_score_of_independent_guesses():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 6, 200)
    predicted = rng.integers(0, 6, 200)
    got = _logistic_scores(predicted, truth, truth)
    pairs = [(p, t) for p in predicted for t in truth]  # every guess against every truth
    assert got["accuracy"][1] == pytest.approx(np.mean([p == t for p, t in pairs]))
    assert got["mean_abs_distance"][1] == pytest.approx(np.mean([abs(p - t) for p, t in pairs]))
    n = 12  # a guess spread evenly over n positions: distance (n^2 - 1) / (3n), about n/3
    even = np.arange(n)
    assert _logistic_scores(even, even, even)["mean_abs_distance"][1] == pytest.approx(
        (n * n - 1) / (3 * n)
    )


def test_ridge_baseline_predicts_the_training_mean():
    scores = _ridge_scores(np.array([1.0, 2.0]), np.array([0.0, 4.0]), np.array([1.0, 3.0]))
    assert scores["mae"] == (pytest.approx(0.5), pytest.approx(1.0))
    assert scores["r2"][1] == pytest.approx(0.0)


def test_unknown_probe_names_the_allowed_ones():
    with pytest.raises(
        ValueError, match=r"unknown probes \['svm'\]; choose from \['ridge', 'logistic'\]"
    ):
        check_probes(["ridge", "svm"])
