import math

import pytest
import torch

from adjpos import build_model, capture_residuals
from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.theory import (
    compare_first_layer,
    estimate_residual_ratio,
    predicted_adjacency,
    predicted_cosine,
    simulate_first_layer,
)
from factories import tiny_config

RATIOS = [0.0, 0.1, 1.0, 10.0]


def _slow_predicted_cosine(n, rho):
    """Entry by entry from the expectations E<h_j, h_k> and E|h_k|^2 (units of E|v|^2)."""
    out = [[0.0] * n for _ in range(n)]
    for j in range(n):
        for k in range(n):
            lo, hi = min(j, k), max(j, k)
            dot = rho * (lo == hi) + (lo + 1) / ((lo + 1) * (hi + 1))
            out[j][k] = dot / math.sqrt((rho + 1 / (j + 1)) * (rho + 1 / (k + 1)))
    return torch.tensor(out, dtype=torch.float64)


def _below(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1)


def _distinct_tokens(n_seq, n, d_vocab, seed):
    """Each row a random draw of n tokens without replacement, so value vectors are independent."""
    keys = torch.rand(n_seq, d_vocab, generator=torch.Generator().manual_seed(seed))
    return keys.argsort(dim=1)[:, :n]


def _uniform_attention_model(**overrides):
    """One attention-only block with W_Q = W_K = 0: every query attends uniformly to 0..k."""
    fields = dict(n_layers=1, attn_only=True, d_model=256, n_heads=4, d_vocab=2048, n_ctx=32)
    model = build_model(tiny_config(**{**fields, **overrides}), device="cpu")
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()
        model.blocks[0].attn.W_K.zero_()
    return model


# The closed form


def test_without_residual_it_is_the_square_root_of_the_prefix_ratio():
    n = 12
    j, k = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    lo, hi = torch.minimum(j, k), torch.maximum(j, k)
    expected = ((lo + 1) / (hi + 1)).double().sqrt()
    torch.testing.assert_close(predicted_cosine(n), expected)


@pytest.mark.parametrize("rho", RATIOS)
def test_closed_form_matches_the_expectations(rho):
    torch.testing.assert_close(
        predicted_cosine(9, residual_ratio=rho), _slow_predicted_cosine(9, rho)
    )


@pytest.mark.parametrize("rho", RATIOS)
def test_symmetric_with_unit_diagonal_and_rising_toward_k(rho):
    cos = predicted_cosine(16, residual_ratio=rho)
    torch.testing.assert_close(cos, cos.T)
    torch.testing.assert_close(cos.diagonal(), torch.ones(16, dtype=torch.float64))
    for k in range(2, 16):
        assert (cos[k, 1:k] > cos[k, : k - 1]).all(), f"row {k} does not rise with j"
    assert ((cos > 0) & (cos <= 1)).all()


def test_a_larger_residual_lowers_every_off_diagonal_entry():
    below = _below(10)
    stack = torch.stack([predicted_cosine(10, residual_ratio=r)[below] for r in RATIOS])
    assert (stack[1:] < stack[:-1]).all()


def test_one_position():
    assert predicted_cosine(1).tolist() == [[1.0]]


# The idealised model at a finite width


@pytest.mark.parametrize("rho", [0.0, 1.0])
def test_simulated_mean_cosine_matches_the_prediction(rho):
    """Wide enough that the O(1/d) bias of a mean cosine (< 1e-4) is far below the
    standard error; the test then allows 5 standard errors per entry (the largest of 66)."""
    n, n_samples = 12, 256
    gen = torch.Generator().manual_seed(1)
    hidden = simulate_first_layer(
        n, d_model=4096, residual_ratio=rho, n_samples=n_samples, generator=gen
    )
    sim = cosine_matrix(hidden).double()
    sem = sim.std(dim=0) / math.sqrt(n_samples)
    error = sim.mean(dim=0) - predicted_cosine(n, residual_ratio=rho)
    below = _below(n)
    assert (error[below].abs() <= 5 * sem[below]).all()
    assert error[below].abs().mean() <= 1.5 * sem[below].mean()  # 0.8 expected, not a bias


def test_simulation_draws_only_from_its_generator():
    before = torch.random.get_rng_state()
    first = simulate_first_layer(6, d_model=8, n_samples=3, generator=torch.Generator())
    assert torch.equal(torch.random.get_rng_state(), before)
    again = simulate_first_layer(6, d_model=8, n_samples=3, generator=torch.Generator())
    assert torch.equal(first, again)


def test_predicted_adjacency_scores_truncated_simulations():
    kwargs = dict(d_model=16, residual_ratio=0.3, n_samples=32)
    got = predicted_adjacency([10, 4], **kwargs, generator=torch.Generator().manual_seed(5))
    sim = cosine_matrix(
        simulate_first_layer(10, **kwargs, generator=torch.Generator().manual_seed(5))
    )
    expected = [adjacency_probability(sim[:, :n, :n]).double().mean() for n in (10, 4)]
    torch.testing.assert_close(got, torch.stack(expected))


def test_predicted_adjacency_falls_with_the_residual_and_rises_with_width():
    def score(d, rho):
        gen = torch.Generator().manual_seed(0)
        return float(predicted_adjacency(24, d_model=d, residual_ratio=rho, generator=gen)[0])

    assert score(1024, 0.0) > 0.99  # infinite width: exactly 1
    assert score(64, 0.0) > score(64, 0.1) > score(64, 1.0) > 0.5
    assert score(256, 0.1) > score(64, 0.1)


# A real model with exactly uniform attention


def test_uniform_attention_output_matches_the_prediction():
    """The attention output alone (no residual) of a TransformerLens block whose attention is
    exactly uniform. Tolerance: 4 standard errors per entry plus the finite-width bias of a
    mean cosine, which is O(1/d_eff) with d_eff about d_model/3 here (the value vectors pass
    through W_V W_O, a product of two random matrices); 1/d_model bounds it."""
    model = _uniform_attention_model()
    tokens = _distinct_tokens(1024, 16, 2048, seed=0)
    cmp = compare_first_layer(model, tokens, site="attn_out")
    below = _below(16)
    assert cmp.residual_ratio == 0.0
    torch.testing.assert_close(cmp.attention_entropy, cmp.uniform_entropy, atol=1e-5, rtol=0)
    assert cmp.attention_logit_var == 0.0
    assert cmp.entropy_ratio == pytest.approx(1.0, abs=1e-5)
    assert (cmp.error[below].abs() <= 4 * cmp.measured_sem[below] + 1 / 256).all()
    assert cmp.mean_abs_error < 0.01
    assert cmp.measured_adjacency > 0.98
    # The ratio of expectations (what the closed form is) has no finite-width bias, only an
    # O(1/sequences) one: batch means over 16 groups of sequences give its standard error.
    acts = capture_residuals(model, tokens, site="attn_out", layers=[0])[0].double()
    gram = torch.einsum(
        "gbjd,gbkd->gjk", acts.reshape(16, 64, 16, -1), acts.reshape(16, 64, 16, -1)
    )
    cos = _gram_cosine(gram.sum(0))
    per_group = torch.stack([_gram_cosine(g) for g in gram])
    sem = per_group.std(dim=0) / 4
    gap = (cos - predicted_cosine(16))[below]
    assert (gap.abs() <= 5 * sem[below]).all()


def _gram_cosine(gram):
    norm = gram.diagonal().sqrt()
    return gram / (norm[:, None] * norm[None, :])


def test_uniform_attention_with_a_residual_matches_the_prediction():
    """Scaling W_E by c leaves the value vectors alone (LayerNorm comes first; its eps aside)
    and multiplies the residual ratio by c^2: here about 1, so the residual term matters."""
    model = _uniform_attention_model()
    tokens = _distinct_tokens(1024, 16, 2048, seed=1)
    small = estimate_residual_ratio(model, tokens)
    with torch.no_grad():
        model.embed.W_E.mul_(1 / math.sqrt(small))
    cmp = compare_first_layer(model, tokens)
    assert cmp.residual_ratio == pytest.approx(1.0, rel=0.01)
    below = _below(16)
    assert (cmp.error[below].abs() <= 4 * cmp.measured_sem[below] + 1 / 256).all()
    # and it is far from the no-residual prediction
    assert (cmp.measured[below] < predicted_cosine(16).float()[below] - 0.05).all()


def test_residual_ratio_from_the_weights():
    """Slow reference: LayerNorm, W_V, W_O by hand for every token occurrence."""
    model = build_model(tiny_config(n_layers=1, d_model=32, n_heads=4, d_vocab=40), device="cpu")
    tokens = torch.randint(0, 40, (3, 7), generator=torch.Generator().manual_seed(2))
    attn, ln = model.blocks[0].attn, model.blocks[0].ln1
    with torch.no_grad():
        embed = model.W_E[tokens.reshape(-1)].double()
        centred = embed - embed.mean(-1, keepdim=True)
        normed = centred / (centred.square().mean(-1, keepdim=True) + ln.eps).sqrt()
        normed = normed * ln.w.double() + ln.b.double()
        values = torch.einsum("td,hde->the", normed, attn.W_V.double()) + attn.b_V.double()
        out = torch.einsum("the,hed->td", values, attn.W_O.double()) + attn.b_O.double()
    expected = embed.square().sum(-1).mean() / out.square().sum(-1).mean()
    assert estimate_residual_ratio(model, tokens) == pytest.approx(float(expected), rel=1e-4)


def test_comparison_layout_and_no_hooks_left(tiny_model, tokens):
    cmp = compare_first_layer(tiny_model, tokens, site="resid_mid")
    n = tokens.shape[1]
    assert cmp.measured.shape == cmp.predicted.shape == cmp.error.shape == (n, n)
    assert cmp.error[_below(n)].isfinite().all() and cmp.error[~_below(n)].isnan().all()
    torch.testing.assert_close(
        cmp.predicted, predicted_cosine(n, residual_ratio=cmp.residual_ratio).float()
    )
    assert cmp.uniform_entropy[0] == 0 and cmp.attention_entropy.shape == (n,)
    assert (cmp.attention_entropy <= cmp.uniform_entropy + 1e-5).all()
    assert all(not hp._forward_hooks for hp in tiny_model.hook_dict.values())
    with torch.no_grad():
        _, cache = tiny_model.run_with_cache(tokens)
    scores = cache["blocks.0.attn.hook_attn_scores"]
    slow_var = [
        scores[b, h, k, : k + 1].var() for b in range(6) for h in range(2) for k in range(1, n)
    ]
    assert cmp.attention_logit_var == pytest.approx(float(torch.stack(slow_var).mean()), rel=1e-5)


def test_large_init_gives_peaked_attention_far_from_the_prediction():
    model = build_model(tiny_config(n_layers=1, d_model=64, n_heads=4, d_vocab=64, init_range=1.0))
    cmp = compare_first_layer(model, _distinct_tokens(32, 24, 64, seed=3), site="attn_out")
    assert cmp.entropy_ratio < 0.2
    assert cmp.attention_logit_var > 10
    assert cmp.mean_abs_error > 0.3


def test_the_caller_may_vouch_for_a_model_adjpos_cannot_check(tokens):
    """A rotary model counts as not position-free; position_free=True measures it anyway, the
    same way as a NoPE model (here: the cosines of layer 1 as captured)."""
    model = build_model(tiny_config(positional="rotary"), device="cpu")
    with pytest.raises(ValueError, match="position_free=True"):
        compare_first_layer(model, tokens)
    cmp = compare_first_layer(model, tokens, position_free=True)
    acts = capture_residuals(model, tokens, layers=[1])[0]
    torch.testing.assert_close(cmp.measured, cosine_matrix(acts).mean(dim=0))
    assert cmp.residual_ratio == pytest.approx(estimate_residual_ratio(model, tokens))
    with pytest.raises(ValueError, match="position_free=False"):
        compare_first_layer(build_model(tiny_config(), device="cpu"), tokens, position_free=False)


# Bad input


@pytest.mark.usefixtures("user_errors")
def test_bad_arguments_for_the_prediction():
    gen = torch.Generator()
    with pytest.raises(ValueError, match="n must be a positive int"):
        predicted_cosine(4.0)
    with pytest.raises(ValueError, match="n must be a positive int"):
        predicted_cosine(0)
    with pytest.raises(ValueError, match="residual_ratio must be a finite number >= 0"):
        predicted_cosine(4, residual_ratio=-0.1)
    with pytest.raises(ValueError, match="residual_ratio"):
        predicted_cosine(4, residual_ratio=float("nan"))
    with pytest.raises(ValueError, match=r"each >= 3.*\[5, 2\]"):
        predicted_adjacency([5, 2], d_model=8, generator=gen)
    with pytest.raises(ValueError, match="non-empty"):
        predicted_adjacency([], d_model=8, generator=gen)
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        predicted_adjacency(5, d_model=0, generator=gen)
    with pytest.raises(ValueError, match="residual_ratio"):
        predicted_adjacency(5, d_model=8, residual_ratio=-1.0, generator=gen)
    with pytest.raises(TypeError, match="generator must be a CPU torch.Generator"):
        simulate_first_layer(5, d_model=8, generator=None)


@pytest.mark.usefixtures("user_errors")
def test_bad_arguments_for_the_comparison(tiny_model, tokens):
    with pytest.raises(ValueError, match="choose one of"):
        compare_first_layer(tiny_model, tokens, site="mlp_out")
    with pytest.raises(ValueError, match="shorter than 3"):
        compare_first_layer(tiny_model, tokens[:, :2])
    with pytest.raises(ValueError, match="positional='none'"):
        compare_first_layer(build_model(tiny_config(positional="learned")), tokens)
    attn_only = build_model(tiny_config(attn_only=True))
    with pytest.raises(ValueError, match="does not exist in this model"):
        compare_first_layer(attn_only, tokens, site="resid_mid")


def test_effective_width_is_the_participation_ratio_of_the_value_vectors():
    """(sum lambda)^2 / sum lambda^2 of the covariance of each token's attention output when
    it stands alone, by eigenvalues in numpy; rank-limited value vectors give a lower width."""
    import numpy as np

    from adjpos import ModelConfig, build_model
    from adjpos.theory import effective_width

    cfg = ModelConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=50, n_ctx=16)
    model = build_model(cfg)
    tokens = torch.arange(50).reshape(5, 10)
    _, cache = model.run_with_cache(tokens.reshape(-1, 1), names_filter="blocks.0.hook_attn_out")
    values = cache["blocks.0.hook_attn_out"][:, 0].double().numpy()
    eig = np.linalg.eigvalsh(np.cov(values, rowvar=False))
    expected = eig.sum() ** 2 / (eig**2).sum()
    assert effective_width(model, tokens) == pytest.approx(expected, rel=1e-9)
    with torch.no_grad():  # value vectors confined to 2 directions
        model.blocks[0].attn.W_O[:, :, 2:] = 0.0
        model.blocks[0].attn.b_O[2:] = 0.0
    assert effective_width(model, tokens) <= 2.0 + 1e-9
