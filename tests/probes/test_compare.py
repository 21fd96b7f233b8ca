"""Fair comparisons of two feature sets: a slow reference, common positions and folds, the
paired interval, bad input."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos import build_model, capture_residuals, compare_feature_sets
from adjpos.probes import (
    COMPARISON_TABLE,
    compare_scores,
    order_scores,
    reconstruct_order,
    score_sequences,
)
from adjpos.probes.features import position_features
from adjpos.probes.fit import make_probe
from adjpos.probes.order import ORDER_METHODS
from factories import tiny_config

ONE_NUMBER_PAIRS = [
    ("cosine_first", "variance"),
    ("cosine_previous", "norm"),
    ("variance", "norm"),
    ("shuffled:cosine_first", "variance"),
]
WIDE_PAIRS = [("cosine_profile", "variance"), ("resid", "cosine_first"), ("token_identity", "norm")]


def _model(seed=0, **overrides):
    cfg = tiny_config(d_model=16, d_vocab=24, n_ctx=16, seed=seed, **overrides)
    return build_model(cfg, device="cpu")


def _tokens(n_seq=12, n_pos=8, seed=0):
    return torch.randint(0, 24, (n_seq, n_pos), generator=torch.Generator().manual_seed(seed))


def _slow_oof(x, y, groups, folds, probe):
    """Out-of-fold predictions, one scikit-learn pipeline per fold."""
    predicted = np.empty(len(y))
    for fold in range(folds.max() + 1):
        test = np.isin(groups, np.flatnonzero(folds == fold))
        model = make_probe(probe).fit(x[~test], y[~test])
        predicted[test] = model.predict(x[test])
    return predicted


def _slow_samples(acts, tokens, names, seed):
    """Rows (features of each set, position, sequence) of every (sequence, position) where every
    set of `names` has finite features, in a plain loop."""
    feats = [position_features(acts, n, seed=seed, tokens=tokens, d_vocab=24) for n in names]
    rows = {n: [] for n in names}
    positions, sequences = [], []
    for i in range(acts.shape[0]):
        for k in range(acts.shape[1]):
            if all(bool(f[i, k].isfinite().all()) for f in feats):
                for n, f in zip(names, feats, strict=True):
                    rows[n].append(f[i, k].double().numpy())
                positions.append(k)
                sequences.append(i)
    return {n: np.array(r) for n, r in rows.items()}, np.array(positions), np.array(sequences)


def _slow_r2(y, predicted):
    from sklearn.metrics import r2_score

    return r2_score(y, predicted)


def slow_compare(model, tokens, a, b, *, probe, layer, cv, seed, n_boot, level):
    """The R^2 difference a - b at one layer and its paired percentile bootstrap interval,
    straight from the definitions: common samples, one GroupKFold split of the sequences,
    one scikit-learn probe per fold, sklearn's r2_score of the pooled predictions of each
    bootstrap draw of sequences (the draws of `adjpos.stats.paired_difference`)."""
    from sklearn.model_selection import GroupKFold

    acts = capture_residuals(model, tokens, layers=[layer])[0]
    features, y, groups = _slow_samples(acts, tokens, [a, b], seed)
    split = GroupKFold(cv, shuffle=True, random_state=seed)
    folds = np.empty(tokens.shape[0], dtype=int)
    for fold, (_, test) in enumerate(split.split(y, y, groups)):
        folds[np.unique(groups[test])] = fold
    predicted = {n: _slow_oof(features[n], y, groups, folds, probe) for n in (a, b)}
    value = _slow_r2(y, predicted[a]) - _slow_r2(y, predicted[b])
    n = tokens.shape[0]
    draws = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)
    differences = []
    for counts in draws:
        rows = np.concatenate(
            [np.flatnonzero(groups == i) for i in np.repeat(np.arange(n), counts)]
        )
        differences.append(
            _slow_r2(y[rows], predicted[a][rows]) - _slow_r2(y[rows], predicted[b][rows])
        )
    tail = (1 - level) / 2
    low, high = np.quantile(differences, [tail, 1 - tail])
    return value, low, high, f"{y.min()}..{y.max()}"


@settings(max_examples=8)
@given(
    model_seed=st.integers(0, 100),
    data_seed=st.integers(0, 100),
    pair_probe=st.sampled_from(
        [(p, "spline") for p in ONE_NUMBER_PAIRS] + [(p, "ridge") for p in WIDE_PAIRS]
    ),
    n_pos=st.integers(4, 9),
    cv=st.integers(2, 4),
)
def test_matches_a_slow_reference(model_seed, data_seed, pair_probe, n_pos, cv):
    (a, b), probe = pair_probe
    model, tokens = _model(model_seed), _tokens(n_seq=10, n_pos=n_pos, seed=data_seed)
    table = compare_feature_sets(
        model, tokens, [(a, b)], probe=probe, layers=[1], cv=cv, seed=data_seed, n_boot=60
    )
    row = table[table["metric"] == "r2"].iloc[0]
    value, low, high, positions = slow_compare(
        model, tokens, a, b, probe=probe, layer=1, cv=cv, seed=data_seed, n_boot=60, level=0.95
    )
    assert row["difference"] == pytest.approx(value, abs=1e-9)
    assert (row["low"], row["high"]) == pytest.approx((low, high), abs=1e-9)
    assert row["positions"] == positions and row["n_sequences"] == 10


def test_the_best_layer_is_chosen_in_every_draw():
    model, tokens = _model(), _tokens(n_seq=16)
    pairs = [("cosine_first", "variance")]
    each = compare_feature_sets(model, tokens, pairs, probe="spline", cv=2, n_boot=200)
    best = compare_feature_sets(
        model, tokens, pairs, probe="spline", cv=2, n_boot=200, best_layer=True
    )
    for metric, pick in (("r2", "idxmax"), ("mae", "idxmin")):
        rows, row = each[each["metric"] == metric], best[best["metric"] == metric].iloc[0]
        top_a = rows.loc[getattr(rows["value_a"], pick)()]
        top_b = rows.loc[getattr(rows["value_b"], pick)()]
        assert (row["layer"], row["layer_b"]) == (top_a["layer"], top_b["layer"])
        assert row["difference"] == pytest.approx(top_a["value_a"] - top_b["value_b"])
        assert row["low"] <= row["high"]
    assert len(best) == 2 and list(best.columns) == COMPARISON_TABLE.names


def test_both_sets_are_scored_on_the_same_positions_and_folds():
    model, tokens = _model(), _tokens(n_seq=10, n_pos=8)
    groups = [("cosine_first", "variance"), ("variance", "norm"), ("shuffled:cosine_first", "norm")]
    scores = score_sequences(model, tokens, groups, probe="spline", layers=[1, 2], cv=2)
    first, plain, shuffled = scores
    counts = {k: v.sums[..., 0] for k, v in first.items()}  # samples per sequence and layer
    assert (counts["cosine_first"] == 7).all() and (counts["variance"] == 7).all()
    assert first["variance"].positions == first["cosine_first"].positions == "1..7"
    assert (plain["variance"].sums[..., 0] == 8).all() and plain["norm"].positions == "0..7"
    # The shuffled set misses a random slot of each sequence; the norm is scored without it.
    assert (shuffled["norm"].sums[..., 0] == 7).all()
    assert shuffled["norm"].sums[..., 1].sum() != plain["norm"].sums[..., 1].sum() * 7 / 8
    # variance alone, and variance beside cosine_first: only the positions differ.
    assert not np.allclose(first["variance"].sums, plain["variance"].sums)


@pytest.mark.parametrize(("name", "probe"), [("variance", "spline"), ("resid", "logistic")])
def test_identical_sets_differ_by_zero_with_a_zero_width_interval(name, probe):
    table = compare_feature_sets(_model(), _tokens(), [(name, name)], probe=probe, cv=3, n_boot=100)
    assert (table["difference"] == 0).all() and (table["low"] == 0).all()
    assert (table["high"] == 0).all() and (table["value_a"] == table["value_b"]).all()


def test_a_model_against_its_copy_on_the_same_tokens():
    """Two models scored on the same tokens are paired; other tokens are refused."""
    tokens = _tokens(n_seq=10)
    (mine,), (theirs,) = (
        score_sequences(m, tokens, [("cosine_first",)], probe="spline", cv=2)
        for m in (_model(0), _model(1))
    )
    (row,) = compare_scores(
        mine["cosine_first"], theirs["cosine_first"], metric="r2", best_layer=True, n_boot=50
    )
    assert row["positions"] == "1..7" and row["low"] <= row["high"]
    (other,) = score_sequences(
        _model(0), _tokens(n_seq=8), [("cosine_first",)], probe="spline", cv=2
    )
    with pytest.raises(ValueError, match="were not scored alike"):
        compare_scores(mine["cosine_first"], other["cosine_first"], metric="r2")


def test_order_scores_are_the_per_sequence_taus_of_reconstruct_order():
    model, tokens = _model(), _tokens(n_seq=6, n_pos=7)
    result = reconstruct_order(model, tokens, seed=3)
    scores = order_scores(model, tokens, seed=3)
    for method, s in scores.items():
        for i, layer in enumerate(s.layers):
            expected = result.value(layer, ORDER_METHODS[method], method, "abs_kendall_tau")
            assert s.values("abs_kendall_tau")[i] == pytest.approx(expected)
    fair = order_scores(model, tokens, seed=3, drop_first=True)
    assert fair["variance_sort"].positions == fair["first_similarity_sort"].positions == "1..6"
    assert scores["variance_sort"].positions == "0..6"
    assert np.array_equal(fair["first_similarity_sort"].sums, scores["first_similarity_sort"].sums)


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("pairs", "kwargs", "message"),
    [
        ([], {}, "pairs must be a non-empty list"),
        ("variance", {}, "pairs must be a non-empty list"),
        ([("variance",)], {}, r"each pair must be two feature-set names"),
        ([("variance", "cosine")], {}, r"unknown feature sets \['cosine'\]"),
        ([("cosine_profile", "variance")], {"probe": "spline"}, "spline probe reads one-number"),
        ([("variance", "norm")], {"probe": ["ridge"]}, "give one probe name"),
        ([("variance", "norm")], {"probe": "svm"}, r"unknown probes \['svm'\]"),
        ([("variance", "norm")], {"n_boot": 0}, "n_boot must be a positive int"),
        ([("variance", "norm")], {"level": 1.5}, r"level must be in \(0, 1\)"),
        ([("variance", "norm")], {"cv": 7}, "6 sequences are too few for cv=7"),
        ([("variance", "norm")], {"layers": [3]}, r"layers must be .* in \[0, 2\]"),
    ],
)
def test_bad_input_fails_before_any_forward_pass(
    tiny_model, tokens, pairs, kwargs, message, monkeypatch
):
    from adjpos.validation import UsageError

    def no_capture(*args, **kwargs):
        raise AssertionError("ran the model before checking the input")

    monkeypatch.setattr("adjpos.probes.compare.iter_residuals", no_capture)
    with pytest.raises(UsageError, match=message):
        compare_feature_sets(tiny_model, tokens, pairs, **{"cv": 2, **kwargs})


@pytest.mark.usefixtures("user_errors")
def test_a_metric_the_sums_cannot_give_is_refused():
    (scores,) = score_sequences(_model(), _tokens(), [("variance",)], probe="ridge", cv=2)
    with pytest.raises(ValueError, match=r"variance \(ridge\) has no metric 'abs_kendall_tau'"):
        scores["variance"].values("abs_kendall_tau")
    order = order_scores(_model(), _tokens())["variance_sort"]
    assert order.probe == "order" and order.values("abs_kendall_tau").shape == (3,)
