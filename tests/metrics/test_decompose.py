"""`decompose` against a loop-by-loop reference; its shares, principal components and the
adjacency of its parts."""

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from adjpos.metrics import (
    adjacency_probability,
    cosine_matrix,
    decompose,
    position_context_adjacency,
    position_curve_pcs,
)
from adjpos.validation import UsageError
from reference import slow_adjacency_probability, slow_cosine, slow_decompose


@st.composite
def states_and_lengths(draw, padded=None, min_len=1):
    """Random float64 states [batch, pos, d] (ties included: values on a coarse grid), and
    lengths (always when `padded`, never when False, either when None)."""
    batch, n, d = draw(st.integers(1, 5)), draw(st.integers(min_len, 7)), draw(st.integers(1, 4))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    levels = draw(st.sampled_from([1, 3, 1000]))
    states = torch.randint(-levels, levels + 1, (batch, n, d), generator=gen).double() / levels
    states = states + draw(st.floats(-3, 3))  # a shared offset: the mean part
    if padded if padded is not None else draw(st.booleans()):
        lengths = torch.randint(min_len, n + 1, (batch,), generator=gen)
    else:
        lengths = None
    return states, lengths


def _lengths(states, lengths):
    return [states.shape[1]] * states.shape[0] if lengths is None else lengths.tolist()


def _anova_shares(states):
    """Balanced two-way analysis of variance without replication, from numpy means alone."""
    h = states.numpy()
    mu = h.mean(axis=(0, 1))
    by_position, by_sequence = h.mean(axis=0), h.mean(axis=1)  # [pos, d], [batch, d]
    batch, n, _ = h.shape
    squares = {
        "mean": batch * n * (mu**2).sum(),
        "position": batch * ((by_position - mu) ** 2).sum(),
        "context": n * ((by_sequence - mu) ** 2).sum(),
        "residual": ((h - by_position - by_sequence[:, None] + mu) ** 2).sum(),
    }
    return {k: v / (h**2).sum() for k, v in squares.items()}


@settings(max_examples=80, deadline=None)
@given(states_and_lengths())
def test_parts_match_the_slow_reference(case):
    states, lengths = case
    parts = decompose(states, lengths)
    expected = slow_decompose(states.tolist(), _lengths(states, lengths))
    for got, want in zip(
        (parts.mean, parts.position, parts.context, parts.residual), expected, strict=True
    ):
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64))
    assert parts.lengths.tolist() == _lengths(states, lengths)


@settings(max_examples=80, deadline=None)
@given(states_and_lengths())
def test_reconstruction_is_exact_and_the_shares_sum_to_one(case):
    states, lengths = case
    parts = decompose(states, lengths)
    valid = parts.valid[..., None]  # the reconstruction is zero at padding
    torch.testing.assert_close(parts.reconstruct(), states * valid, rtol=0, atol=1e-12)
    assert (parts.residual[~parts.valid] == 0).all()
    assume((states * valid).square().sum() > 0)  # shares of no variance are undefined (NaN)
    shares = parts.variance_shares()
    assert list(shares) == ["mean", "position", "context", "residual"]
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(0.0 <= v <= 1.0 for v in shares.values())


def test_all_zero_states_have_nan_shares():
    shares = decompose(torch.zeros(2, 3, 4, dtype=torch.float64)).variance_shares()
    assert list(shares) == ["mean", "position", "context", "residual"]
    assert all(np.isnan(v) for v in shares.values())


@settings(max_examples=60, deadline=None)
@given(states_and_lengths(padded=False))
def test_balanced_shares_are_the_analysis_of_variance_shares(case):
    states, _ = case
    assume(states.square().sum() > 0)  # no shares where every square is 0 (see below)
    parts = decompose(states)
    for part, share in _anova_shares(states).items():
        assert parts.variance_shares()[part] == pytest.approx(share, abs=1e-12)
    # Orthogonal parts: their sums of squares add up to the states' own.
    squares = (
        states.shape[0] * states.shape[1] * parts.mean.square().sum()
        + states.shape[0] * parts.position.square().sum()
        + states.shape[1] * parts.context.square().sum()
        + parts.residual.square().sum()
    )
    torch.testing.assert_close(squares, states.square().sum())


def test_unequal_lengths_parts_need_not_be_orthogonal():
    states = torch.tensor([[[1.0], [5.0], [2.0]], [[3.0], [0.0], [0.0]]], dtype=torch.float64)
    parts = decompose(states, torch.tensor([3, 1]))
    squares = (
        3 * 4 * parts.mean.square().sum()
        + (parts.counts[:, None] * parts.position.square()).sum()
        + (parts.lengths[:, None] * parts.context.square()).sum()
        + parts.residual.square().sum()
    )
    assert float(squares) != pytest.approx(1 + 25 + 4 + 9)  # the valid entries' sum of squares
    assert sum(parts.variance_shares().values()) == pytest.approx(1.0)


def test_a_mean_and_a_position_curve_alone_are_all_mean_and_position():
    gen = torch.Generator().manual_seed(0)
    curve = torch.randn(9, 6, generator=gen, dtype=torch.float64)
    curve = curve - curve.mean(dim=0)  # a position part sums to zero over positions
    states = curve.expand(5, 9, 6)
    shares = decompose(states).variance_shares()
    assert shares["position"] == pytest.approx(1.0, abs=1e-12)
    offset = torch.randn(6, generator=gen, dtype=torch.float64)
    parts = decompose(states + offset)
    shares = parts.variance_shares()
    assert shares["context"] == pytest.approx(0.0, abs=1e-12)
    assert shares["residual"] == pytest.approx(0.0, abs=1e-12)
    expected = curve.square().sum() / (curve.square().sum() + 9 * offset.square().sum())
    assert shares["position"] == pytest.approx(float(expected), abs=1e-12)
    torch.testing.assert_close(parts.mean, offset)


def test_padding_never_enters_a_part():
    gen = torch.Generator().manual_seed(1)
    states, lengths = torch.randn(4, 6, 3, generator=gen), torch.tensor([6, 3, 5, 4])
    filled = states.clone()
    filled[~(torch.arange(6) < lengths[:, None])] = 1e6
    a, b = decompose(states, lengths), decompose(filled, lengths)
    for x, y in ((a.mean, b.mean), (a.position, b.position), (a.context, b.context)):
        torch.testing.assert_close(x, y)
    torch.testing.assert_close(a.residual, b.residual)


def test_half_precision_is_upcast():
    states = torch.randn(3, 5, 4).bfloat16()
    parts = decompose(states)
    assert parts.mean.dtype == torch.float32
    torch.testing.assert_close(parts.residual, decompose(states.float()).residual)


def test_position_pcs_are_the_weighted_pca_of_the_curve():
    gen = torch.Generator().manual_seed(2)
    states, lengths = torch.randn(6, 7, 5, generator=gen, dtype=torch.float64), None
    for lengths in (None, torch.tensor([7, 2, 5, 7, 3, 6])):
        parts = decompose(states, lengths)
        pcs = position_curve_pcs(parts)
        # Each position repeated once per sequence that reaches it: a plain PCA (numpy).
        rows = np.repeat(parts.position.numpy(), parts.counts.numpy(), axis=0)
        assert np.allclose(rows.mean(axis=0), 0.0)  # centred by construction
        eigen = np.sort(np.linalg.eigvalsh(rows.T @ rows))[::-1]
        np.testing.assert_allclose(pcs.explained_variance_ratio.numpy(), eigen / eigen.sum())
        assert float(pcs.explained_variance_ratio.sum()) == pytest.approx(1.0)
        torch.testing.assert_close(
            pcs.components @ pcs.components.T, torch.eye(5, dtype=torch.float64)
        )
    top = position_curve_pcs(parts, k=2)
    assert top.explained_variance_ratio.shape == (2,) and top.components.shape == (2, 5)


def test_a_curve_on_a_line_has_one_component():
    t = torch.arange(8.0, dtype=torch.float64)[:, None]
    direction = torch.tensor([[3.0, 0.0, 4.0]], dtype=torch.float64) / 5
    states = t * direction + torch.randn(5, 1, 3, dtype=torch.float64)  # + per-sequence offsets
    pcs = position_curve_pcs(decompose(states), k=3)
    torch.testing.assert_close(
        pcs.explained_variance_ratio, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    )
    assert float((pcs.components[0] @ direction[0]).abs()) == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(3, 7), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_adjacency_of_the_parts_scores_the_right_vectors(batch, n, d, seed):
    """Against the slow cosine and count on the parts' own vectors (continuous values: the
    parts are checked against the reference above, and a tie broken by rounding is not)."""
    gen = torch.Generator().manual_seed(seed)
    states = torch.randn(batch, n, d, generator=gen, dtype=torch.float64)
    lengths = torch.randint(3, n + 1, (batch,), generator=gen)
    parts = decompose(states, lengths)
    scores = position_context_adjacency(parts, ties="half")
    curve = parts.position[: int(lengths.max())].tolist()
    expected = slow_adjacency_probability(slow_cosine(curve), len(curve), "half")
    assert float(scores.position) == pytest.approx(expected, abs=1e-12)
    rest = parts.context[:, None] + parts.residual
    for c, length in enumerate(lengths.tolist()):
        for got, vectors in ((scores.rest, rest), (scores.whole, rest + parts.position)):
            want = slow_adjacency_probability(
                slow_cosine(vectors[c, :length].tolist()), length, "half"
            )
            assert float(got[c]) == pytest.approx(want, abs=1e-12)


def test_the_position_curve_carries_a_shared_pattern_and_the_rest_does_not():
    t = torch.arange(10.0, dtype=torch.float64)[:, None]
    curve = torch.cat([torch.cos(t / 5), torch.sin(t / 5), t / 10], dim=1)
    noise = torch.randn(64, 10, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    parts = decompose(curve + 0.2 * noise)
    scores = position_context_adjacency(parts)
    assert float(scores.position) > 0.9
    assert abs(float(scores.rest.mean()) - 0.5) < 0.05  # noise: chance
    states = (curve + 0.2 * noise) - parts.mean
    torch.testing.assert_close(
        scores.whole, adjacency_probability(cosine_matrix(states))
    )  # position + context + residual: the states less their mean


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("states", "lengths", "error", "match"),
    [
        (torch.randn(4, 3), None, UsageError, r"\[batch, pos, d_model\].*got \(4, 3\)"),
        (torch.randn(2, 4, 3, 5), None, UsageError, r"got \(2, 4, 3, 5\)"),
        (torch.randn(0, 4, 3), None, UsageError, "every size at least 1"),
        (torch.randn(2, 0, 3), None, UsageError, "every size at least 1"),
        (torch.randn(2, 4, 0), None, UsageError, "every size at least 1"),
        (torch.randn(2, 4, 3), torch.tensor([0, 4]), UsageError, r"lengths must lie in \[1, 4\]"),
        (torch.randn(2, 4, 3), torch.tensor([2, 5]), UsageError, r"lengths must lie in \[1, 4\]"),
        (torch.randn(2, 4, 3), torch.tensor([2, 3, 4]), UsageError, r"batch shape \(2,\)"),
        (torch.randn(2, 4, 3), torch.tensor([2.0, 3.0]), TypeError, "integer tensor"),
        (torch.full((2, 4, 3), torch.nan), None, UsageError, "NaN or inf"),
        (torch.arange(24).reshape(2, 4, 3), None, TypeError, "floating-point"),
    ],
)
def test_bad_input(states, lengths, error, match):
    with pytest.raises(error, match=match):
        decompose(states, lengths)


@pytest.mark.usefixtures("user_errors")
def test_bad_options_of_the_part_measures():
    parts = decompose(torch.randn(3, 4, 2))
    for k in (0, 3, 1.5, True):
        with pytest.raises(UsageError, match=r"k must be an int in \[1, 2\]"):
            position_curve_pcs(parts, k=k)
    with pytest.raises(UsageError, match="ties='both' is not allowed"):
        position_context_adjacency(parts, ties="both")
    short = decompose(torch.randn(3, 4, 2), torch.tensor([4, 2, 4]))
    with pytest.raises(UsageError, match="shorter than 3 tokens"):
        position_context_adjacency(short)
