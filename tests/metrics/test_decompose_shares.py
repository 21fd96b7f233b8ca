"""`decomposition_shares`: in sample and held out, against a loop-by-loop reference, and what
holding out is for (a curve fitted to noise has no held-out share)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.metrics import (
    adjacency_probability,
    cosine_matrix,
    decompose,
    position_context_adjacency,
)
from adjpos.metrics.decompose import SHARE_PARTS, decomposition_shares
from adjpos.validation import UsageError


def add(a, b, sign=1.0):
    return [x + sign * y for x, y in zip(a, b, strict=True)]


def slow_parts(states, tokens, lengths, fit_rows, use_tokens):
    """The mean, token means and per-length curves fitted on `fit_rows`, one entry at a time
    (nested lists)."""
    d = len(states[0][0])
    entries = [(c, t) for c in fit_rows for t in range(lengths[c])]
    mean = [sum(states[c][t][i] for c, t in entries) / len(entries) for i in range(d)]
    token_mean = {}
    if use_tokens:
        for v in {tokens[c][t] for c, t in entries}:
            at = [(c, t) for c, t in entries if tokens[c][t] == v]
            token_mean[v] = [
                sum(states[c][t][i] - mean[i] for c, t in at) / len(at) for i in range(d)
            ]
    zero = [0.0] * d
    curves = {}
    for length in {lengths[c] for c in fit_rows}:
        rows = [c for c in fit_rows if lengths[c] == length]
        x = {
            (c, t): add(add(states[c][t], mean, -1), token_mean.get(tokens[c][t], zero), -1)
            for c in rows
            for t in range(length)
        }
        at = [[sum(x[c, t][i] for c in rows) / len(rows) for i in range(d)] for t in range(length)]
        centre = [sum(at[t][i] for t in range(length)) / length for i in range(d)]
        curves[length] = [add(at[t], centre, -1) for t in range(length)]
    return mean, token_mean, curves


def slow_shares(states, tokens, lengths, fit_rows, eval_rows, use_tokens):
    """[drop of each part..., residual, total] over `eval_rows`, the parts fitted on
    `fit_rows` (`slow_parts`)."""
    d = len(states[0][0])
    zero = [0.0] * d
    mean, token_mean, curves = slow_parts(states, tokens, lengths, fit_rows, use_tokens)

    def squares(vectors):
        return sum(v * v for vec in vectors for v in vec)

    totals = [0.0] * (len(SHARE_PARTS) + 1)
    for c in eval_rows:
        n = lengths[c]
        x = [states[c][t] for t in range(n)]
        steps = [squares(x)]
        x = [add(v, mean, -1) for v in x]
        steps.append(squares(x))
        x = [add(v, token_mean.get(tokens[c][t], zero), -1) for t, v in enumerate(x)]
        steps.append(squares(x))
        curve = curves.get(n, [zero] * n)
        x = [add(v, curve[t], -1) for t, v in enumerate(x)]
        steps.append(squares(x))
        context = [sum(v[i] for v in x) / n for i in range(d)]
        x = [add(v, context, -1) for v in x]
        steps.append(squares(x))
        for k in range(4):
            totals[k] += steps[k] - steps[k + 1]
        totals[4] += steps[4]
        totals[5] += steps[0]
    return totals


@st.composite
def cases(draw):
    batch, n, d = draw(st.integers(4, 8)), draw(st.integers(2, 6)), draw(st.integers(1, 3))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    states = torch.randn(batch, n, d, generator=gen, dtype=torch.float64) + draw(st.floats(-2, 2))
    tokens = torch.randint(0, draw(st.integers(1, 5)), (batch, n), generator=gen)
    lengths = torch.randint(1, n + 1, (batch,), generator=gen) if draw(st.booleans()) else None
    folds = draw(st.integers(2, batch))
    return states, tokens, lengths, folds, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(cases(), st.integers(0, 100))
def test_shares_match_the_slow_reference_in_sample_and_held_out(case, seed):
    states, tokens, lengths, folds, use_tokens = case
    got = decomposition_shares(
        states, tokens if use_tokens else None, lengths=lengths, folds=folds, seed=seed
    )
    lens = [states.shape[1]] * states.shape[0] if lengths is None else lengths.tolist()
    nested, ids = states.tolist(), tokens.tolist()
    everyone = list(range(len(lens)))
    want = slow_shares(nested, ids, lens, everyone, everyone, use_tokens)
    held = [0.0] * len(want)
    for f in range(folds):
        fit = [c for c in everyone if got.folds[c] != f]
        test = [c for c in everyone if got.folds[c] == f]
        held = [
            a + b
            for a, b in zip(
                held, slow_shares(nested, ids, lens, fit, test, use_tokens), strict=True
            )
        ]
    for i, part in enumerate(SHARE_PARTS):
        assert got.in_sample[part] == pytest.approx(want[i] / want[-1], abs=1e-9)
        assert got.held_out[part] == pytest.approx(held[i] / held[-1], abs=1e-9)
    for c, length in enumerate(lens):  # the curve each sequence lost held out
        others = [x for x in everyone if got.folds[x] != got.folds[c]]
        curves = slow_parts(nested, ids, lens, others, use_tokens)[2]
        want_curve = curves.get(length, [[0.0] * states.shape[2]] * length)
        np.testing.assert_allclose(got.held_out_curve[c, :length], want_curve, atol=1e-9)
        assert not got.held_out_curve[c, length:].any()
    assert sum(got.in_sample.values()) == pytest.approx(1.0)
    assert sum(got.held_out.values()) == pytest.approx(1.0)
    assert min(got.in_sample.values()) >= -1e-12  # each in-sample share is a sum of squares
    assert sorted(torch.bincount(got.folds).tolist()) in (
        sorted([len(lens) // folds + (k < len(lens) % folds) for k in range(folds)]),
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 7), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_in_sample_without_tokens_is_the_balanced_anova(batch, n, d, seed):
    states = torch.randn(batch, n, d, generator=torch.Generator().manual_seed(seed)).double()
    got = decomposition_shares(states, folds=2).in_sample
    want = decompose(states).variance_shares()
    assert got["token"] == 0.0
    for part in ("mean", "position", "context", "residual"):
        assert got[part] == pytest.approx(want[part], abs=1e-9)


def _planted(batch, scale, seed):
    """`batch` sequences of 8 positions over 5 tokens: each token's embedding, a smooth
    position curve of size `scale` (none at 0), a per-sequence offset and noise."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(8.0, dtype=torch.float64)[:, None]
    curve = torch.cat([torch.cos(t / 3), torch.sin(t / 3), t / 8, torch.zeros(8, 3)], dim=1)
    tokens = torch.randint(0, 5, (batch, 8), generator=gen)
    embed = torch.randn(5, 6, generator=gen, dtype=torch.float64)
    offset = 0.5 * torch.randn(batch, 1, 6, generator=gen, dtype=torch.float64)
    noise = torch.randn(batch, 8, 6, generator=gen, dtype=torch.float64)
    return scale * (curve - curve.mean(dim=0)) + embed[tokens] + offset + noise, tokens


@pytest.mark.parametrize("seed", range(3))
def test_a_planted_curve_keeps_its_share_held_out_as_the_sequences_grow(seed):
    gaps = []
    for batch in (16, 200):
        shares = decomposition_shares(*_planted(batch, 2.0, seed), seed=seed)
        gaps.append(max(abs(shares.held_out[p] - shares.in_sample[p]) for p in SHARE_PARTS))
        assert shares.held_out["position"] > 0.5 * shares.in_sample["position"] > 0.05
    assert gaps[1] < 0.01 and gaps[1] < gaps[0]


@pytest.mark.parametrize("seed", range(3))
def test_without_a_curve_the_position_share_is_positive_in_sample_only(seed):
    """Fitted and measured on the same sequences, a curve of noise holds about 1/N of the
    rest; held out it holds nothing (its own estimation noise makes it slightly negative),
    and the held-out share goes to 0 as the sequences grow."""
    few = decomposition_shares(*_planted(16, 0.0, seed), seed=seed)
    assert few.in_sample["position"] > 0.01 and few.held_out["position"] < 0.0
    many = decomposition_shares(*_planted(200, 0.0, seed), seed=seed)
    assert 0 < many.in_sample["position"] < few.in_sample["position"]
    assert abs(many.held_out["position"]) < 0.005


def test_the_rest_without_the_held_out_curve_is_the_states_less_that_curve():
    states, tokens = _planted(12, 2.0, 0)
    lengths = torch.tensor([8, 8, 8, 8, 8, 8, 5, 5, 5, 5, 5, 5])
    shares = decomposition_shares(states, tokens, lengths=lengths, folds=3)
    parts = decompose(states, lengths)
    own = position_context_adjacency(parts)
    assert torch.equal(position_context_adjacency(parts, curve=parts.position).rest, own.rest)
    held = position_context_adjacency(parts, curve=shares.held_out_curve)
    rest = states - parts.mean - shares.held_out_curve
    for c, length in enumerate(lengths.tolist()):
        cosines = cosine_matrix(rest[c, :length])
        assert float(held.rest[c]) == pytest.approx(float(adjacency_probability(cosines)))
    assert torch.equal(held.whole, own.whole) and torch.equal(held.position, own.position)
    with pytest.raises(UsageError, match=r"curve must have shape \(8, 6\)"):
        position_context_adjacency(parts, curve=torch.zeros(7, 6))


def test_the_token_part_is_its_own_share():
    """States that are a token's embedding plus noise: the token part holds them, not the
    position curve, whose fixed tokens (a format) would otherwise pose as position."""
    gen = torch.Generator().manual_seed(0)
    embed = 3 * torch.randn(5, 8, generator=gen, dtype=torch.float64)
    tokens = torch.randint(0, 5, (30, 7), generator=gen)
    tokens[:, 0] = 4  # a fixed token at position 0, as a prompt's format has
    states = embed[tokens] + 0.1 * torch.randn(30, 7, 8, generator=gen, dtype=torch.float64)
    with_tokens = decomposition_shares(states, tokens)
    without = decomposition_shares(states)
    assert with_tokens.held_out["token"] > 0.5
    assert abs(with_tokens.held_out["position"]) < 0.01
    assert without.held_out["position"] > 10 * abs(with_tokens.held_out["position"])


def test_bad_input_is_refused():
    states = torch.zeros(4, 3, 2)
    with pytest.raises(UsageError, match=r"folds must be an int in \[2, 4\]"):
        decomposition_shares(states, folds=5)
    with pytest.raises(UsageError, match="tokens must be ids"):
        decomposition_shares(states, torch.full((4, 3), -1))
    with pytest.raises(UsageError, match="NaN or inf"):
        decomposition_shares(torch.full((4, 3, 2), math.nan))
