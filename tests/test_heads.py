"""head_similarity against a slow reference that computes every head's scores by hand from the
weights, on constructed heads whose answer is known, and its fast row reductions against
per-row loops on random inputs with ties and masked keys."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr, spearmanr

import adjpos
from adjpos.heads import (
    MIN_KEYS,
    head_similarity,
    score_similarity,
    uniform_mass,
    window_mass,
)
from adjpos.validation import UsageError
from factories import tiny_bridge, tiny_config
from reference import slow_cosine

COLUMNS = ["logit_cosine_pearson", "logit_cosine_spearman", "previous_mass", "self_mass"]


def distinct_tokens(batch: int, n: int, vocab: int = 20, seed: int = 0) -> torch.Tensor:
    """No token twice in a sequence: no two states of a sequence are equal, so no cosine ties
    hang on the last bit of one implementation's rounding."""
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(vocab, generator=gen)[:n] for _ in range(batch)])


def randomized(model, seed: int = 1):
    """`model` with random normalization weights and query/key biases (TL starts them at one
    and zero, which would hide a mix-up of the normalization's input and output)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("ln1.w", "ln1.b", "attn.b_Q", "attn.b_K")):
                noise = torch.randn(param.shape, generator=gen, dtype=param.dtype)
                param.copy_((1.0 if name.endswith("ln1.w") else 0.0) + 0.5 * noise)
    return model


# --- the slow reference ---------------------------------------------------------------------


def array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().double().numpy()


def slow_normalize(x: np.ndarray, kind: str | None, eps: float) -> np.ndarray:
    """One state [d] through the first normalization, before its weight and bias."""
    if kind is None:
        return x
    if kind.startswith("LN"):
        x = x - x.mean()
    return x / math.sqrt((x * x).mean() + eps)


def slow_head_table(model, tokens: torch.Tensor, window: int) -> dict:
    """{(layer, head): {column: value}} by loops over layers, heads, sequences and rows, the
    scores computed from W_Q, W_K, their biases and the normalization's weights; only the
    input of each block (resid_pre) is read from the model."""
    cfg = model.cfg
    _, cache = model.run_with_cache(tokens)
    kind, eps = cfg.normalization_type, cfg.eps
    table = {}
    for layer in range(cfg.n_layers):
        block = model.blocks[layer]
        resid = cache[f"blocks.{layer}.hook_resid_pre"].double().numpy()
        for head in range(cfg.n_heads):
            w_q, w_k, b_q, b_k = (
                array(getattr(block.attn, name)[head]) for name in ("W_Q", "W_K", "b_Q", "b_K")
            )
            pearsons, spearmans, previous, own = [], [], [], []
            for b, seq in enumerate(resid):
                normed = np.array([slow_normalize(x, kind, eps) for x in seq])
                read = normed
                if kind in ("LN", "RMS"):
                    read = normed * array(block.ln1.w)
                if kind == "LN":
                    read = read + array(block.ln1.b)
                q, k = read @ w_q + b_q, read @ w_k + b_k
                scores = q @ k.T / math.sqrt(cfg.d_head)
                model_scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][b, head]
                lower = np.tril_indices(len(seq))
                assert np.allclose(scores[lower], array(model_scores)[lower], atol=1e-9)
                cos = np.array(slow_cosine(normed.tolist()))
                for i in range(len(seq)):
                    row = np.exp(scores[i, : i + 1] - scores[i, : i + 1].max())
                    pattern = row / row.sum()
                    if i >= window:
                        previous.append(pattern[i - window : i].sum())
                        own.append(pattern[i])
                    s, c = scores[i, :i], cos[i, :i]
                    if i >= MIN_KEYS and np.ptp(s) > 0 and np.ptp(c) > 0:
                        pearsons.append(pearsonr(s, c).statistic)
                        spearmans.append(spearmanr(s, c).statistic)
            table[(layer, head)] = {
                "logit_cosine_pearson": np.mean(pearsons) if pearsons else math.nan,
                "logit_cosine_spearman": np.mean(spearmans) if spearmans else math.nan,
                "previous_mass": np.mean(previous),
                "self_mass": np.mean(own),
                "n_queries": len(previous),
                "n_correlated": len(pearsons),
            }
    return table


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"normalization_type": "RMS"},
        {"normalization_type": None, "attn_only": True},
        {"positional": "learned", "n_heads": 4, "d_head": 8},
    ],
    ids=["LN", "RMS", "none", "learned-positions"],
)
def test_agrees_with_scores_computed_by_hand_from_the_weights(overrides):
    model = randomized(adjpos.build_model(tiny_config(dtype="float64", **overrides), device="cpu"))
    tokens = distinct_tokens(4, 10)
    table = head_similarity(model, tokens, window=2)
    slow = slow_head_table(model, tokens, window=2)
    assert len(table) == model.cfg.n_layers * model.cfg.n_heads
    for row in table.itertuples():
        expected = slow[(row.layer, row.head)]
        assert row.n_queries == expected["n_queries"] == 4 * (10 - 2)
        assert row.n_correlated == expected["n_correlated"] == 4 * (10 - MIN_KEYS)
        for column in COLUMNS:
            assert getattr(row, column) == pytest.approx(expected[column], abs=1e-9), column


def test_a_head_that_scores_by_dot_product_correlates_with_the_cosine():
    # One block with three heads reading 16-wide states whole: W_Q = W_K = I gives scores
    # <x_i, x_j> / 4, and LayerNorm (weight 1, bias 0) gives every state the norm sqrt(16)
    # up to its eps, so the scores are 4 * cos: correlation 1. W_K = -I gives -1; W_Q = 0
    # gives constant scores, whose correlation is undefined.
    model = adjpos.build_model(
        tiny_config(n_layers=1, attn_only=True, n_heads=3, d_head=16, dtype="float64"),
        device="cpu",
    )
    eye = torch.eye(16, dtype=torch.float64)
    with torch.no_grad():
        attn = model.blocks[0].attn
        attn.W_Q[:] = torch.stack([eye, eye, 0 * eye])
        attn.W_K[:] = torch.stack([eye, -eye, eye])
    table = head_similarity(model, distinct_tokens(6, 12)).set_index("head")
    assert table.loc[0, "logit_cosine_pearson"] == pytest.approx(1.0, abs=1e-6)
    assert table.loc[0, "logit_cosine_spearman"] == pytest.approx(1.0, abs=1e-12)
    assert table.loc[1, "logit_cosine_pearson"] == pytest.approx(-1.0, abs=1e-6)
    assert table.loc[1, "logit_cosine_spearman"] == pytest.approx(-1.0, abs=1e-12)
    assert math.isnan(table.loc[2, "logit_cosine_pearson"]) and table.loc[2, "n_correlated"] == 0
    # Constant scores: uniform attention over the i + 1 visible keys.
    expected_self = np.mean([1 / (i + 1) for i in range(3, 12)])
    assert table.loc[2, "self_mass"] == pytest.approx(expected_self, abs=1e-12)
    uniform = (table.loc[2, "previous_mass"], table.loc[2, "self_mass"])
    assert uniform == pytest.approx(uniform_mass(12, window=3), abs=1e-12)
    with pytest.raises(UsageError, match="n_tokens must be an int above window=3, got 3"):
        uniform_mass(3, window=3)


def fixed_attention(offset: int):
    """A hook that makes every head attend only to key i - offset (key 0 where i < offset)."""

    def hook(scores, hook):
        n = scores.shape[-1]
        fixed = torch.full_like(scores, -torch.inf)
        rows = torch.arange(n)
        fixed[..., rows, (rows - offset).clamp_min(0)] = 0.0
        return fixed

    return hook


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
@pytest.mark.parametrize("window", [1, 2, 3])
def test_attention_set_to_one_earlier_position(offset, window):
    model = adjpos.build_model(tiny_config(), device="cpu")
    hooks = [(f"blocks.{layer}.attn.hook_attn_scores", fixed_attention(offset)) for layer in (0, 1)]
    with model.hooks(fwd_hooks=hooks):
        table = head_similarity(model, distinct_tokens(3, 8), window=window)
    # Query i sees key max(i - offset, 0) only; the masses average over the queries i >= window.
    targets = [(i, max(i - offset, 0)) for i in range(window, 8)]
    previous = np.mean([i - window <= key < i for i, key in targets])
    assert np.allclose(table["previous_mass"], previous, rtol=0, atol=1e-12)
    assert np.allclose(table["self_mass"], np.mean([key == i for i, key in targets]), atol=1e-12)
    # One visible key per row: no correlation anywhere.
    assert table["n_correlated"].eq(0).all() and table["logit_cosine_pearson"].isna().all()
    assert table["n_queries"].eq(3 * (8 - window)).all()


def test_masses_match_the_pattern_the_model_caches():
    model = adjpos.build_model(tiny_config(positional="rotary"), device="cpu")
    tokens = torch.randint(0, 20, (5, 9), generator=torch.Generator().manual_seed(3))
    table = head_similarity(model, tokens, window=3)
    _, cache = model.run_with_cache(tokens)
    for row in table.itertuples():
        pattern = cache[f"blocks.{row.layer}.attn.hook_pattern"][:, row.head].double()
        previous = [pattern[:, i, i - 3 : i].sum(-1) for i in range(3, 9)]
        own = [pattern[:, i, i] for i in range(3, 9)]
        assert row.previous_mass == pytest.approx(float(torch.stack(previous).mean()), abs=1e-6)
        assert row.self_mass == pytest.approx(float(torch.stack(own).mean()), abs=1e-6)


def test_one_pass_per_chunk_gives_the_same_table_whatever_the_chunks():
    # Distinct tokens in float64: a rank correlation flips with the rounding of a near-tie.
    model = adjpos.build_model(tiny_config(dtype="float64"), device="cpu")
    tokens = distinct_tokens(7, 10, seed=1)
    whole = head_similarity(model, tokens)
    for batch_size in (1, 3):
        chunked = head_similarity(model, tokens, batch_size=batch_size)
        assert chunked[["layer", "head", "n_queries", "n_correlated"]].equals(
            whole[["layer", "head", "n_queries", "n_correlated"]]
        )
        assert np.allclose(chunked[COLUMNS], whole[COLUMNS], atol=1e-9)
    one = head_similarity(model, tokens[0])
    assert np.allclose(one[COLUMNS], head_similarity(model, tokens[:1])[COLUMNS])
    assert list(whole.columns) == list(adjpos.heads.HEADS.names)


def test_refuses_bad_input(tiny_model, user_errors):
    tokens = torch.randint(0, 20, (2, 6), generator=torch.Generator().manual_seed(0))
    with pytest.raises(UsageError, match="window must be a positive int, got 0"):
        head_similarity(tiny_model, tokens, window=0)
    with pytest.raises(UsageError, match="at least 7 tokens .window=6 needs 7"):
        head_similarity(tiny_model, tokens, window=6)
    with pytest.raises(UsageError, match="at least 4 tokens"):
        head_similarity(tiny_model, tokens[:, :3], window=1)
    with pytest.raises(UsageError, match="batch_size must be a positive int"):
        head_similarity(tiny_model, tokens, batch_size=0)
    with pytest.raises(TypeError, match="integer tensor"):
        head_similarity(tiny_model, tokens.float())
    with pytest.raises(UsageError, match=r"token ids must lie in \[0, 19\]"):
        head_similarity(tiny_model, tokens + 20)
    tiny_model.cfg.use_split_qkv_input = True
    with pytest.raises(UsageError, match="per-head inputs"):
        head_similarity(tiny_model, tokens)


def test_refuses_a_bridge_whose_score_hook_holds_the_pattern():
    tokens = torch.randint(0, 20, (2, 6), generator=torch.Generator().manual_seed(0))
    with pytest.raises(UsageError, match="gives the softmax pattern there"):
        head_similarity(tiny_bridge(), tokens)


# --- the row reductions against loops, on random inputs ---------------------------------


@st.composite
def scores_and_cosines(draw):
    """Scores [batch, head, n, n] causally masked (some keys also masked inside the triangle,
    as local attention does) and cosines [batch, n, n], both with ties when `levels` is small."""
    batch, heads, n = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 9))
    levels = draw(st.sampled_from([1, 2, 1000]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    scores = torch.randint(-levels, levels + 1, (batch, heads, n, n), generator=gen).double()
    cosines = torch.randint(-levels, levels + 1, (batch, n, n), generator=gen) / levels
    hidden = torch.rand(scores.shape, generator=gen) < draw(st.sampled_from([0.0, 0.2]))
    hidden |= torch.ones(n, n, dtype=torch.bool).triu(1)
    hidden &= ~torch.eye(n, dtype=torch.bool)  # every query sees itself
    return scores.masked_fill(hidden, -torch.inf), cosines.double()


def slow_score_similarity(scores, cosines):
    sums = {"pearson": [], "spearman": [], "correlated": []}
    for h in range(scores.shape[1]):
        p = s = count = 0.0
        for b in range(scores.shape[0]):
            for i in range(scores.shape[2]):
                keys = [j for j in range(i) if math.isfinite(scores[b, h, i, j])]
                x = scores[b, h, i, keys].numpy()
                y = cosines[b, i, keys].numpy()
                if len(keys) >= MIN_KEYS and np.ptp(x) > 0 and np.ptp(y) > 0:
                    p += pearsonr(x, y).statistic
                    s += spearmanr(x, y).statistic
                    count += 1
        for name, value in zip(sums, (p, s, count), strict=True):
            sums[name].append(value)
    return sums


@settings(max_examples=60)
@given(scores_and_cosines())
def test_row_correlations_agree_with_scipy_row_by_row(inputs):
    scores, cosines = inputs
    fast = score_similarity(scores, cosines)
    slow = slow_score_similarity(scores, cosines)
    assert fast["correlated"].tolist() == slow["correlated"]
    for name in ("pearson", "spearman"):
        assert np.allclose(fast[name].numpy(), slow[name], atol=1e-9), name


@settings(max_examples=30)
@given(st.integers(1, 9), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_window_mass_agrees_with_loops(n, window, seed):
    pattern = torch.rand(2, 3, n, n, generator=torch.Generator().manual_seed(seed)).double()
    fast = window_mass(pattern, window)
    for h in range(3):
        rows = [(b, i) for b in range(2) for i in range(window, n)]
        previous = sum(float(pattern[b, h, i, i - window : i].sum()) for b, i in rows)
        own = sum(float(pattern[b, h, i, i]) for b, i in rows)
        assert float(fast["previous"][h]) == pytest.approx(previous, abs=1e-12)
        assert float(fast["self"][h]) == pytest.approx(own, abs=1e-12)


# --- the partial correlations against least squares, row by row -----------------------------


def slow_partial(x, y, design):
    """Pearson r of the residuals of x and y after a least-squares fit on `design` [keys, p],
    None where a residual is rounding (or the fit leaves fewer than 2 degrees of freedom)."""
    rank = np.linalg.matrix_rank(design)
    if len(x) - rank < MIN_KEYS - 1:
        return None
    out = []
    for v in (x, y):
        fit, *_ = np.linalg.lstsq(design, v, rcond=None)
        residual = v - design @ fit
        small = np.linalg.norm(residual) <= 1e-10 * np.linalg.norm(v - v.mean())
        if np.ptp(v) == 0 or small:
            return None
        out.append(residual)
    return pearsonr(*out).statistic


def slow_given(scores, cosines, tokens):
    """Per head: sums and counts of the partial correlations, by loops and least squares."""
    sums = {"given_distance": [], "n_given_distance": [], "given_token": [], "n_given_token": []}
    for h in range(scores.shape[1]):
        totals = dict.fromkeys(sums, 0.0)
        for b in range(scores.shape[0]):
            for i in range(scores.shape[2]):
                keys = [j for j in range(i) if math.isfinite(scores[b, h, i, j])]
                if not keys:
                    continue
                x, y = scores[b, h, i, keys].numpy(), cosines[b, i, keys].numpy()
                ones = np.ones((len(keys), 1))
                by_distance = np.hstack([ones, np.array([[i - j] for j in keys], float)])
                kinds = sorted({int(tokens[b, j]) for j in keys})
                by_token = np.array([[float(tokens[b, j] == t) for t in kinds] for j in keys])
                designs = {"distance": by_distance, "token": by_token}
                for name, design in designs.items():
                    if name == "distance" and len(keys) < MIN_KEYS + 1:
                        continue
                    r = slow_partial(x, y, design)
                    if r is not None:
                        totals[f"given_{name}"] += r
                        totals[f"n_given_{name}"] += 1
        for name, value in totals.items():
            sums[name].append(value)
    return sums


@settings(max_examples=60, deadline=None)
@given(scores_and_cosines(), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_partial_correlations_agree_with_least_squares_row_by_row(inputs, vocab, seed):
    scores, cosines = inputs
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, scores.shape[::2][:1] + scores.shape[-1:], generator=gen)
    fast = score_similarity(scores, cosines, tokens)
    slow = slow_given(scores, cosines, tokens)
    for name in ("n_given_distance", "n_given_token"):
        assert fast[name].tolist() == slow[name], name
    for name in ("given_distance", "given_token"):
        assert np.allclose(fast[name].numpy(), slow[name], atol=1e-7), name


def test_partialling_removes_what_distance_and_tokens_explain():
    """Scores and cosines that both follow distance alone (or token alone) correlate, and
    that correlation is gone once distance (or token) is partialled out."""
    n = 12
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(2, n, n, generator=gen, dtype=torch.float64)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    by_distance = -(i - j).double()
    scores = (by_distance + 0.01 * noise[0]).masked_fill(mask, -torch.inf)[None, None]
    cosines = (by_distance + 0.01 * noise[1])[None]
    tokens = torch.randint(0, 3, (1, n), generator=gen)
    sums = score_similarity(scores, cosines, tokens)
    assert float(sums["pearson"] / sums["correlated"]) > 0.99
    assert abs(float(sums["given_distance"] / sums["n_given_distance"])) < 0.5
    tokens = torch.tensor([[0, 1, 2] * 4])
    by_token = tokens[0, None, :].double().expand(n, n) * 3.0
    scores = (by_token + 0.01 * noise[0]).masked_fill(mask, -torch.inf)[None, None]
    cosines = (by_token + 0.01 * noise[1])[None]
    sums = score_similarity(scores, cosines, tokens)
    assert float(sums["pearson"] / sums["correlated"]) > 0.99
    assert abs(float(sums["given_token"] / sums["n_given_token"])) < 0.5


def test_the_table_reports_the_partial_correlations(tiny_model):
    tokens = torch.randint(0, 20, (4, 12), generator=torch.Generator().manual_seed(0))
    table = head_similarity(tiny_model, tokens)
    assert (table["n_given_distance"] <= table["n_correlated"]).all()
    # at layer 0 (the token embeddings, no position) the cosines are the tokens' alone:
    # nothing is left once the token is partialled out; a block later they are not
    first = table["layer"] == 0
    assert (table.loc[first, "n_given_token"] == 0).all()
    assert (table.loc[~first, "n_given_token"] > 0).all()
    given = table[["logit_cosine_given_distance", "logit_cosine_given_token"]]
    assert ((given.abs() <= 1) | given.isna()).all().all()
