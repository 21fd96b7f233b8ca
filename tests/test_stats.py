"""The bootstrap interval: exact where it must be, close to the normal interval where that is
known, and a clear error for bad input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.stats import bootstrap_interval, paired_share_difference


def test_constant_values_give_a_point():
    assert bootstrap_interval([0.3] * 50) == pytest.approx((0.3, 0.3))


def test_a_proportion_matches_the_normal_interval():
    rng = np.random.default_rng(0)
    hits = (rng.random(2000) < 0.3).astype(float)
    low, high = bootstrap_interval(hits, n_boot=4000)
    p = hits.mean()
    half = 1.96 * math.sqrt(p * (1 - p) / hits.size)
    assert low == pytest.approx(p - half, abs=0.004)
    assert high == pytest.approx(p + half, abs=0.004)


def test_weights_give_the_pooled_ratio():
    """Per-prompt accuracies weighted by their token counts resample the pooled accuracy:
    with one prompt per draw the interval is the range of the per-prompt values."""
    low, high = bootstrap_interval([0.5, 1.0], [2, 6], n_boot=4000, level=0.5)
    pooled = (0.5 * 2 + 1.0 * 6) / 8
    assert low <= pooled <= high
    assert 0.5 <= low <= high <= 1.0


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=30), st.integers(0, 5))
def test_the_interval_lies_within_the_values_and_is_ordered(values, seed):
    low, high = bootstrap_interval(values, n_boot=200, seed=seed)
    assert min(values) - 1e-9 <= low <= high <= max(values) + 1e-9
    assert bootstrap_interval(values, n_boot=200, seed=seed) == (low, high)  # seeded


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([],), {}, "at least one value"),
        (([1.0, 2.0], [1.0]), {}, "differ in length: 2 and 1"),
        (([1.0, float("nan")],), {}, "finite"),
        (([1.0],), {"level": 1.0}, r"level must be in \(0, 1\)"),
        (([1.0],), {"n_boot": 0}, "n_boot must be a positive int"),
    ],
)
def test_bad_input_is_named(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(*args, **kwargs)


def test_variance_ratio_against_the_thirds_by_hand():
    from adjpos.stats import variance_ratio

    assert variance_ratio([2.0, 1.0]) == 0.5  # a third is at least one position
    values = [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.5]  # thirds of 2 positions
    assert variance_ratio(values) == pytest.approx((1.0 + 0.5) / (6.0 + 5.0))
    with pytest.raises(ValueError, match="at least 2 finite values, got 1"):
        variance_ratio([1.0])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda rows: st.lists(
            st.lists(st.sampled_from([0.0, 1.0, 2.5, -3.0, 7.0]), min_size=4, max_size=4),
            min_size=rows,
            max_size=rows,
        )
    )
)
def test_the_spearman_of_many_rows_is_scipys_row_by_row(rows):
    """Ties and constant rows included: the bootstrap's vectorised path against scipy."""
    from scipy.stats import spearmanr

    from adjpos.stats import spearman_rows

    got = spearman_rows(np.array(rows))
    for row, value in zip(rows, got, strict=True):
        expected = spearmanr(row, np.arange(len(row))).statistic
        if np.isnan(expected):
            assert np.isnan(value)
        else:
            assert value == pytest.approx(expected, abs=1e-12)


def _slow_paired(a, b, summary, n_boot, seed):
    """The paired bootstrap by hand: draw the resampled units one by one (the same draws as
    `paired_difference`: a multinomial count per unit), recompute both sides, subtract."""
    n = len(a)
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)
    diffs = []
    for row in counts:
        units = np.repeat(np.arange(n), row)
        diffs.append(summary(a[units].mean(axis=0)) - summary(b[units].mean(axis=0)))
    return np.quantile(diffs, [0.025, 0.975])


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 30), st.integers(1, 6), st.integers(0, 10_000))
def test_the_paired_interval_is_the_slow_paired_bootstrap(n, width, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, width)) + 0.5, rng.random((n, width)) + 0.5
    from adjpos.stats import paired_difference, variance_ratio

    def ratios(rows):
        return np.array([variance_ratio(r) if len(r) > 1 else r[0] for r in rows])

    value, low, high = paired_difference(a, b, ratios, n_boot=200, seed=seed)
    slow = _slow_paired(a, b, lambda r: ratios(r[None])[0], 200, seed)
    assert value == pytest.approx(ratios(a.mean(0)[None])[0] - ratios(b.mean(0)[None])[0])
    assert (low, high) == pytest.approx(tuple(slow))


def test_the_paired_interval_cancels_what_the_units_share():
    """Two models scored on the same sequences: sequence-to-sequence spread is shared, so the
    paired interval of the difference is far narrower than the unpaired intervals."""
    from adjpos.stats import paired_difference

    rng = np.random.default_rng(0)
    shared = rng.normal(0, 1, 300)
    a, b = shared + 0.1 + rng.normal(0, 0.01, 300), shared + rng.normal(0, 0.01, 300)
    value, low, high = paired_difference(a, b)
    assert 0.09 < low < value < high < 0.11
    unpaired = [bootstrap_interval(x) for x in (a, b)]
    assert unpaired[0][0] < unpaired[1][1]  # the separate intervals overlap


def test_the_paired_difference_drops_units_missing_on_either_side():
    from adjpos.stats import paired_difference

    a, b = np.array([1.0, np.nan, 3.0]), np.array([0.0, 5.0, np.nan])
    assert paired_difference(a, b) == pytest.approx((1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="same shape"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="at least one unit"):
        paired_difference([np.nan], [1.0])


def test_the_seed_interval_is_students_t():
    from scipy import stats

    from adjpos.stats import seed_interval

    values = [0.2, 0.5, 0.3, 0.9]
    mean, low, high = seed_interval(values)
    expected = stats.t.interval(0.95, 3, loc=np.mean(values), scale=stats.sem(values))
    assert (low, high) == pytest.approx(expected)
    assert mean == pytest.approx(np.mean(values))
    one = seed_interval([0.4])
    assert one[0] == 0.4 and math.isnan(one[1]) and math.isnan(one[2])


def test_the_variance_difference_is_each_summary_minus_the_other():
    from adjpos.stats import variance_difference, variance_summary

    rng = np.random.default_rng(3)
    a = rng.random((40, 9)) * np.linspace(2, 1, 9)  # shrinking with position
    b = rng.random((40, 9))
    out = variance_difference(a, b, n_boot=300)
    mine, theirs = variance_summary(a), variance_summary(b)
    for key in ("ratio", "spearman"):
        assert out[key] == pytest.approx(mine[key] - theirs[key])
        assert out[f"{key}_low"] <= out[key] <= out[f"{key}_high"]
    assert out["ratio_high"] < 0  # a shrinks, b does not: paired, the gap is clear


def _score_test_set(k: int, n: int, z: float) -> tuple[float, float]:
    """The proportions p the score test does not reject, |k/n - p| <= z sqrt(p(1-p)/n), found
    on a fine grid: the Wilson interval by its definition."""
    p = np.linspace(0, 1, 200_001)
    kept = p[np.abs(k / n - p) <= z * np.sqrt(p * (1 - p) / n)]
    return float(kept.min()), float(kept.max())


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_wilson_interval_is_the_set_the_score_test_keeps(case):
    from adjpos.stats import wilson_interval

    k, n = case
    low, high = wilson_interval(k, n)
    ref_low, ref_high = _score_test_set(k, n, 1.959963984540054)
    assert low == pytest.approx(ref_low, abs=2e-5) and high == pytest.approx(ref_high, abs=2e-5)
    assert 0 <= low <= k / n <= high <= 1


def test_every_prompt_right_is_not_a_point():
    """64 of 64 right: a bootstrap collapses to 1.000-1.000, the Wilson interval does not."""
    from adjpos.stats import wilson_interval

    assert bootstrap_interval([1.0] * 64) == (1.0, 1.0)
    low, high = wilson_interval(64, 64)
    assert high == 1.0 and low < 0.99  # 64 prompts cannot show a rate above 0.99
    assert wilson_interval(2000, 2000)[0] > wilson_interval(64, 64)[0]


@pytest.mark.parametrize(
    ("args", "message"), [((3, 0), "n must be"), ((5, 4), "successes must"), ((-1, 4), "successes")]
)
def test_wilson_bad_input_is_named(args, message):
    from adjpos.stats import wilson_interval

    with pytest.raises(ValueError, match=message):
        wilson_interval(*args)


def slow_share_difference(hits_a, totals_a, hits_b, totals_b, n_boot, seed):
    """`paired_share_difference`'s resamples, by loops over prompts."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(hits_a), size=(n_boot, len(hits_a)))
    boots = []
    for row in picks:
        a = sum(hits_a[i] for i in row) / sum(totals_a[i] for i in row)
        b = sum(hits_b[i] for i in row) / sum(totals_b[i] for i in row)
        boots.append(a - b)
    return np.quantile(boots, [0.025, 0.975])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 15))
def test_the_paired_share_difference_matches_a_loop(seed, n):
    rng = np.random.default_rng(seed)
    totals_a, totals_b = rng.integers(1, 5, size=n), rng.integers(1, 5, size=n)
    hits_a, hits_b = rng.binomial(totals_a, 0.6), rng.binomial(totals_b, 0.3)
    got = paired_share_difference(hits_a, totals_a, hits_b, totals_b, n_boot=60, seed=seed)
    assert got.value == pytest.approx(hits_a.sum() / totals_a.sum() - hits_b.sum() / totals_b.sum())
    want = slow_share_difference(hits_a, totals_a, hits_b, totals_b, 60, seed)
    assert (got.low, got.high) == pytest.approx(tuple(want))
    empty = paired_share_difference([0, 0], [0, 0], [1, 0], [1, 1])
    assert np.isnan(empty.value) and np.isnan(empty.low)
    with pytest.raises(ValueError, match="1-d over the same prompts"):
        paired_share_difference([1, 2], [2, 2], [1], [1])
