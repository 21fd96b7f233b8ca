"""Order reconstruction: exact chance level, Kendall's tau, seriation, and models."""

import itertools

import pytest
import torch
from scipy.stats import kendalltau

from adjpos import build_model, cosine_matrix, reconstruct_order
from adjpos.probes import expected_abs_tau, kendall_tau, spectral_order, variance_order
from factories import tiny_config


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_expected_abs_tau_matches_enumeration(n):
    taus = [kendalltau(range(n), perm).statistic for perm in itertools.permutations(range(n))]
    assert expected_abs_tau(n) == pytest.approx(sum(abs(t) for t in taus) / len(taus))


def test_expected_abs_tau_shrinks_with_length():
    assert 0.09 < expected_abs_tau(32) < 0.11 and expected_abs_tau(64) < expected_abs_tau(32)


def test_kendall_tau_matches_scipy():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(5, 9, generator=gen).argsort(-1), torch.rand(5, 9, generator=gen).argsort(-1)
    expected = [kendalltau(x, y).statistic for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    torch.testing.assert_close(kendall_tau(a, b), torch.tensor(expected, dtype=torch.float64))


def test_seriation_and_variance_sort_recover_clean_orders():
    """States along an arc (a Robinson cosine matrix) with shrinking variance."""
    n = 12
    angle = torch.linspace(0, 2.0, n)[:, None]
    states = torch.cat([angle.cos(), angle.sin(), -angle.cos(), -angle.sin()], dim=-1)
    states = states * torch.linspace(3, 1, n)[:, None]  # zero-mean rows: variance = scale^2 / 2
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    shuffled = states[perm]
    assert kendall_tau(spectral_order(cosine_matrix(shuffled)), perm).abs() == 1
    assert kendall_tau(variance_order(shuffled), perm).abs() == 1


def test_embeddings_are_at_chance_and_later_layers_above_it():
    model = build_model(tiny_config(d_model=32, n_heads=2, d_vocab=48, n_ctx=32), device="cpu")
    tokens = torch.randint(0, 48, (200, 16), generator=torch.Generator().manual_seed(0))
    result = reconstruct_order(model, tokens, model_name="tiny")
    for method in ("spectral_seriation", "variance_sort", "first_similarity_sort"):
        chance = expected_abs_tau(15 if method == "first_similarity_sort" else 16)
        scores = [s for s in result.scores if s.probe == method]
        assert [s.layer for s in scores] == [0, 1, 2]
        assert all(s.baseline == chance for s in scores)
        assert all(s.backward_only == (method != "spectral_seriation") for s in scores)
        assert abs(scores[0].value - chance) < 0.03  # 200 sequences: standard error about 0.01
    chance = expected_abs_tau(16)
    assert result.value(2, "cosine_matrix", "spectral_seriation", "abs_kendall_tau") > 2 * chance


def test_ties_cannot_leak_the_order():
    """Identical states (a repeated token at layer 0) tie; ties must fall in a random order."""
    model = build_model(tiny_config(), device="cpu")
    tokens = torch.full((300, 10), 3)
    result = reconstruct_order(model, tokens, layers=[0])
    for score in result.scores:
        assert abs(score.value - score.baseline) < 0.03


@pytest.mark.usefixtures("user_errors")
def test_bad_input(tiny_model):
    with pytest.raises(ValueError, match="at least 3 tokens"):
        reconstruct_order(tiny_model, torch.zeros(4, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"layers must be .* in \[0, 2\]"):
        reconstruct_order(tiny_model, torch.zeros(4, 6, dtype=torch.long), layers=[3])
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        expected_abs_tau(1)
