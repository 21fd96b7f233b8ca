"""`decomposition_shares`: in sample and held out, against a loop-by-loop reference, and what
holding out is for (a curve fitted to noise has no held-out share)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.metrics import decompose
from adjpos.metrics.decompose import SHARE_PARTS, decomposition_shares
from adjpos.validation import UsageError


def slow_shares(states, tokens, lengths, fit_rows, eval_rows, use_tokens):
    """[drop of each part..., residual, total] over `eval_rows`, the parts fitted on
    `fit_rows`, one entry at a time (nested lists)."""
    d = len(states[0][0])

    def add(a, b, sign=1.0):
        return [x + sign * y for x, y in zip(a, b, strict=True)]

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


def test_a_curve_fitted_to_noise_has_no_held_out_share_and_a_real_one_keeps_it():
    gen = torch.Generator().manual_seed(1)
    noise = [decomposition_shares(torch.randn(12, 8, 6, generator=gen), seed=s) for s in range(8)]
    in_sample = sum(s.in_sample["position"] for s in noise) / 8
    held_out = sum(s.held_out["position"] for s in noise) / 8
    assert in_sample > 0.05 and held_out < 0.0
    t = torch.arange(8.0)[:, None]
    curve = torch.cat([torch.cos(t / 2), torch.sin(t / 2), t / 8 - 0.5], dim=1)
    curve = torch.nn.functional.pad(curve - curve.mean(dim=0), (0, 3))
    real = decomposition_shares(3 * curve + 0.3 * torch.randn(12, 8, 6, generator=gen))
    assert real.held_out["position"] == pytest.approx(real.in_sample["position"], abs=0.02)
    assert real.in_sample["position"] > 0.8


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
