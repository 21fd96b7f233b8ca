"""The probes: grouped folds, metrics and their chance baselines."""

import numpy as np
import pytest
import torch

from adjpos.probes import check_probes, cross_validate
from adjpos.probes.fit import _logistic_scores, _ridge_scores


def _data(n_seq=30, n_pos=10, informative=True, seed=0):
    rng = np.random.default_rng(seed)
    positions = np.tile(np.arange(n_pos), n_seq)
    groups = np.repeat(np.arange(n_seq), n_pos)
    noise = rng.normal(size=(len(positions), 3))
    if informative:
        noise[:, 0] += 5 * positions
    return torch.tensor(noise), torch.tensor(positions), torch.tensor(groups)


def _cv(x, y, g, *, probe, cv=5, seed=0):
    return cross_validate([(x, y, g)], probe=probe, cv=cv, seeds=[seed])[0]


def test_an_informative_feature_is_read_perfectly():
    x, y, g = _data()
    ridge = _cv(x, y, g, probe="ridge")
    logistic = _cv(x, y, g, probe="logistic")
    spline = _cv(x[:, :1], y, g, probe="spline")
    assert ridge["r2"][0] > 0.95 and abs(ridge["r2"][1]) < 1e-9
    assert logistic["accuracy"][0] > 0.95 and logistic["mean_abs_distance"][0] < 0.05
    assert ridge["mae"][1] == pytest.approx(2.5)  # |k - 4.5| averaged over k = 0..9
    assert spline["r2"][0] > 0.95


def test_the_spline_reads_a_bent_relation_the_line_misses():
    """Position is an exact but bent, monotone function of one number (its exponential, as a
    variance that grows fast with position): the line misses it, the spline does not."""
    x, y, g = _data()
    number = torch.exp(y.double())[:, None]
    line, spline = _cv(number, y, g, probe="ridge"), _cv(number, y, g, probe="spline")
    assert spline["r2"][0] > 0.99
    assert line["r2"][0] < 0.8


def test_repeats_batch_and_match_one_at_a_time():
    x, y, g = _data(seed=3)
    x[:, 0] = x[:, 0] / 10  # a noisy reading, so folds differ
    together = cross_validate([(x, y, g)], probe="logistic", cv=3, seeds=[0, 1])
    alone = [_cv(x, y, g, probe="logistic", cv=3, seed=s) for s in (0, 1)]
    for a, b in zip(together, alone, strict=True):
        assert a["accuracy"] == pytest.approx(b["accuracy"], abs=0.01)


def test_noise_scores_at_its_baselines():
    x, y, g = _data(informative=False)
    for probe in ("ridge", "logistic", "spline"):
        inputs = x[:, :1] if probe == "spline" else x
        for metric, (value, chance, sem) in _cv(inputs, y, g, probe=probe, seed=1).items():
            assert sem > 0
            tolerance = {"r2": 0.05, "mae": 0.15, "accuracy": 0.05, "mean_abs_distance": 0.5}
            assert abs(value - chance) < tolerance[metric], (probe, metric, value, chance)


@pytest.mark.usefixtures("user_errors")
def test_spline_refuses_more_than_one_number():
    x, y, g = _data()
    with pytest.raises(ValueError, match="spline probe reads one number; got 3"):
        _cv(x, y, g, probe="spline")


def test_folds_are_grouped_by_sequence():
    """Each sequence has its own random 'position' and a feature naming the sequence: a probe
    can only memorise it, which helps only when a sequence sits in train and test at once."""
    rng = np.random.default_rng(0)
    n_seq, per_seq = 40, 8
    groups = np.repeat(np.arange(n_seq), per_seq)
    labels = np.repeat(rng.integers(0, 8, n_seq), per_seq)
    one_hot = torch.eye(n_seq, dtype=torch.float64)[groups]
    scores = _cv(one_hot, torch.tensor(labels), torch.tensor(groups), probe="logistic", cv=4)
    value, chance, _ = scores["accuracy"]
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
        ValueError, match=r"unknown probes \['svm'\]; choose from \['ridge', 'logistic', 'spline'\]"
    ):
        check_probes(["ridge", "svm"])


def test_out_of_fold_predictions_score_like_the_folds():
    """Each sample predicted by the probe of the fold that held its sequence out: scored fold
    by fold, the predictions give cross_validate's mean error."""
    from sklearn.model_selection import GroupKFold

    from adjpos.probes import predict_out_of_fold

    x, y, g = _data(seed=2)
    x[:, 0] = x[:, 0] / 10
    for probe, inputs in (("ridge", x), ("spline", x[:, :1]), ("logistic", x)):
        predicted = predict_out_of_fold((inputs, y, g), probe=probe, cv=3, seed=4)
        split = GroupKFold(3, shuffle=True, random_state=4).split(inputs, y, g)
        errors = [np.abs(predicted[test] - y.numpy()[test]).mean() for _, test in split]
        metric = "mae" if probe != "logistic" else "mean_abs_distance"
        expected = _cv(inputs, y, g, probe=probe, cv=3, seed=4)[metric][0]
        assert np.mean(errors) == pytest.approx(expected, abs=1e-9)
