"""The torch logistic probe against scikit-learn's: same predictions on random data, for both
solvers (Newton-CG up to WIDE features, whitened L-BFGS above), with padding and unseen
classes."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from adjpos.probes.logistic import LOGISTIC_C, WIDE, fit_predict_logistic


def _problem(seed, n, width, classes, signal):
    """Gaussian classes: class c has mean signal * m_c in every feature, m_c random."""
    gen = np.random.default_rng(seed)
    y = gen.integers(0, classes, n)
    means = gen.normal(size=(classes, width)) * signal
    x = means[y] + gen.normal(size=(n, width))
    return torch.tensor(x), torch.tensor(y)


def _sklearn(x, y, test, tol=1e-8):
    """scikit-learn's probe, solved tightly (newton-cholesky), so it is the optimum."""
    probe = LogisticRegression(C=LOGISTIC_C, solver="newton-cholesky", tol=tol, max_iter=500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = make_pipeline(StandardScaler(), probe).fit(x.numpy(), y.numpy())
    return torch.tensor(fitted.predict(test.numpy()))


@settings(max_examples=12)
@given(
    seed=st.integers(0, 10**6),
    width=st.sampled_from([1, 3, 12, WIDE, WIDE + 8]),
    classes=st.integers(2, 7),
    signal=st.sampled_from([0.3, 1.0]),
)
def test_predictions_match_scikit_learn(seed, width, classes, signal):
    """Accuracy within 0.01 of scikit-learn's on held-out rows, on overlapping classes (an
    optimum with finite weights: n well above the parameter count)."""
    x, y = _problem(seed, 900, width, classes, signal)
    train, test = slice(0, 600), slice(600, None)
    if len(y[train].unique()) < classes:
        return
    (ours,) = fit_predict_logistic([x[train]], [y[train]], [x[test]], n_classes=classes)
    theirs = _sklearn(x[train], y[train], x[test])
    truth = y[test]
    # in rows right, so that a gap of exactly 1% is not lost to float rounding
    gap = abs(int((ours == truth).sum()) - int((theirs == truth).sum()))
    assert gap <= 0.01 * len(truth), (gap, width, classes)
    assert (ours == theirs).double().mean() >= 0.97


@pytest.mark.parametrize("width", [2, WIDE + 4])
def test_batched_problems_are_independent_and_padding_is_ignored(width):
    """Problems of different sizes in one batch give what each gives alone."""
    sets = [_problem(s, n, width, 4, 0.7) for s, n in ((0, 300), (1, 220), (2, 410))]
    train = [(x[:-100], y[:-100]) for x, y in sets]
    tests = [x[-100:] for x, _ in sets]
    together = fit_predict_logistic(
        [a for a, _ in train], [b for _, b in train], tests, n_classes=4
    )
    for (a, b), t, got in zip(train, tests, together, strict=True):
        (alone,) = fit_predict_logistic([a], [b], [t], n_classes=4)
        assert (alone == got).double().mean() >= 0.99


def test_a_class_missing_from_training_is_never_predicted():
    x, y = _problem(3, 400, 3, 5, 2.0)
    keep = y != 2
    (predicted,) = fit_predict_logistic([x[keep]], [y[keep]], [x], n_classes=5)
    assert 2 not in predicted.tolist()
    assert (predicted == _sklearn(x[keep], y[keep], x)).double().mean() >= 0.98


def test_a_constant_column_is_left_alone():
    x, y = _problem(4, 300, 3, 3, 1.0)
    x[:, 1] = 7.0
    (predicted,) = fit_predict_logistic([x[:200]], [y[:200]], [x[200:]], n_classes=3)
    assert torch.equal(predicted, _sklearn(x[:200], y[:200], x[200:]))


@pytest.mark.usefixtures("user_errors")
def test_mismatched_problem_lists_are_refused():
    x, y = _problem(5, 50, 2, 2, 1.0)
    with pytest.raises(ValueError, match="one training set, label set and test set per problem"):
        fit_predict_logistic([x], [y, y], [x], n_classes=2)
