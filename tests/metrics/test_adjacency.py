import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.metrics import adjacency_probability, adjacency_rows
from reference import slow_adjacency_probability, slow_adjacency_rows

BATCH_SHAPES = st.sampled_from([(), (3,), (2, 3)])


@st.composite
def sim_and_lengths(draw, min_len=1):
    """Random [*batch, n, n] matrices, with many ties when values come from a small set."""
    batch = draw(BATCH_SHAPES)
    n = draw(st.integers(min_value=max(min_len, 1), max_value=11))
    levels = draw(st.sampled_from([3, 7, 1000]))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    sim = torch.randint(0, levels, (*batch, n, n), generator=gen).double() / levels - 0.5
    if draw(st.booleans()):
        lengths = torch.randint(min_len, n + 1, batch, generator=gen)
    else:
        lengths = None
    return sim, lengths


def _flat(sim, lengths):
    n = sim.shape[-1]
    mats = sim.reshape(-1, n, n)
    lens = [n] * len(mats) if lengths is None else lengths.reshape(-1).tolist()
    return mats, lens


@settings(max_examples=150, deadline=None)
@given(sim_and_lengths())
def test_rows_match_slow_reference(case):
    sim, lengths = case
    rows = adjacency_rows(sim, lengths=lengths)
    assert rows.shape == sim.shape[:-1]
    mats, lens = _flat(sim, lengths)
    expected = torch.tensor(
        [slow_adjacency_rows(m.tolist(), L) for m, L in zip(mats, lens, strict=True)]
    )
    torch.testing.assert_close(rows.reshape(expected.shape), expected.double(), equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(sim_and_lengths(min_len=3))
def test_probability_matches_slow_reference(case):
    sim, lengths = case
    score = adjacency_probability(sim, lengths=lengths)
    assert score.shape == sim.shape[:-2]
    mats, lens = _flat(sim, lengths)
    expected = torch.tensor(
        [slow_adjacency_probability(m.tolist(), L) for m, L in zip(mats, lens, strict=True)]
    )
    torch.testing.assert_close(score.reshape(expected.shape), expected.double())


@settings(max_examples=50, deadline=None)
@given(sim_and_lengths(min_len=3))
def test_padding_is_ignored(case):
    """Scoring with lengths equals scoring each truncated matrix alone, whatever the padding."""
    sim, lengths = case
    if lengths is None:
        return
    noisy = sim.clone()
    n = sim.shape[-1]
    pad = torch.arange(n) >= lengths[..., None]
    noisy.masked_fill_(pad[..., None, :] | pad[..., :, None], 123.0)
    mats, lens = _flat(noisy, lengths)
    alone = torch.stack([adjacency_probability(m[:L, :L]) for m, L in zip(mats, lens, strict=True)])
    together = adjacency_probability(noisy, lengths=lengths).reshape(-1)
    torch.testing.assert_close(together, alone)


def test_float32_agrees_with_reference_on_random_matrix():
    sim = torch.randn(40, 40, generator=torch.Generator().manual_seed(1))
    expected = slow_adjacency_probability(sim.tolist(), 40)
    assert math.isclose(float(adjacency_probability(sim)), expected, rel_tol=1e-6)


def test_known_extremes():
    n = 9
    i = torch.arange(n).float()
    rising = -(i[:, None] - i[None, :]).abs()  # similarity grows toward the diagonal
    assert float(adjacency_probability(rising)) == 1.0
    assert float(adjacency_probability(-rising)) == 0.0
    assert float(adjacency_probability(torch.ones(n, n))) == 0.0  # all ties: none ordered


def test_rows_undefined_are_nan():
    rows = adjacency_rows(torch.randn(2, 6, 6), lengths=torch.tensor([6, 4]))
    nan = torch.isnan(rows)
    assert nan[:, :2].all() and not nan[0, 2:].any()
    assert not nan[1, 2:4].any() and nan[1, 4:].all()


def test_large_matrix_matches_numpy_count():
    """A vectorised O(n^3) count on a 200-token matrix, a second independent check."""
    sim = torch.randn(200, 200, generator=torch.Generator().manual_seed(2)).double()
    s = sim.numpy()
    expected = []
    for k in range(2, 200):
        v = s[k, :k]
        expected.append(np.triu(v[:, None] < v[None, :], 1).sum() / (k * (k - 1) / 2))
    torch.testing.assert_close(adjacency_rows(sim)[2:], torch.tensor(expected))


@pytest.mark.parametrize(
    ("sim", "lengths", "error", "match"),
    [
        (torch.zeros(3, 4), None, ValueError, "pos, pos"),
        (torch.zeros(5), None, ValueError, "pos, pos"),
        (torch.full((4, 4), float("nan")), None, ValueError, "NaN or inf"),
        (torch.zeros(4, 4, dtype=torch.long), None, TypeError, "floating-point"),
        (torch.zeros(2, 4, 4), torch.tensor([4]), ValueError, "batch shape"),
        (torch.zeros(2, 4, 4), torch.tensor([4, 5]), ValueError, r"\[1, 4\]"),
        (torch.zeros(2, 4, 4), torch.tensor([4, 0]), ValueError, r"\[1, 4\]"),
        (torch.zeros(2, 4, 4), torch.tensor([4.0, 3.0]), TypeError, "integer"),
        (torch.zeros(2, 4, 4), torch.tensor([4, 2]), ValueError, "shorter than 3"),
        (torch.zeros(2, 2), None, ValueError, "shorter than 3"),
    ],
)
@pytest.mark.usefixtures("user_errors")
def test_bad_input(sim, lengths, error, match):
    with pytest.raises(error, match=match):
        adjacency_probability(sim, lengths=lengths)
