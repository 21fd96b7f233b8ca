import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos import adjacency_score, build_model
from factories import tiny_config
from reference import slow_adjacency_probability, slow_cosine, slow_tie_tolerance

# The tie tolerances of the states scored here: float64 models, float32 states.
TOL64, TOL32 = slow_tie_tolerance(torch.float64), slow_tie_tolerance(torch.float32)


def _slow_score(model, tokens, lengths, ties="strict"):
    """Layer by layer from TL's own cache and the loop references, one sequence at a time."""
    scores = []
    names = ["blocks.0.hook_resid_pre"] + [
        f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)
    ]
    for name in names:
        per_seq = []
        for seq, n in zip(tokens, lengths, strict=True):
            with torch.no_grad():
                _, cache = model.run_with_cache(seq[None, :n])
            sim = slow_cosine(cache[name][0].tolist())
            per_seq.append(slow_adjacency_probability(sim, n, ties, TOL64))
        scores.append(sum(per_seq) / len(per_seq))
    return torch.tensor(scores, dtype=torch.float64)


def test_matches_slow_reference_with_padding():
    model = build_model(tiny_config(dtype="float64"))
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 20, (5, 14), generator=gen)
    lengths = torch.tensor([14, 3, 9, 12, 5])
    got = adjacency_score(model, tokens, lengths=lengths, batch_size=2)
    assert got.shape == (3,)
    torch.testing.assert_close(got, _slow_score(model, tokens, lengths.tolist()))


def test_random_nope_model_shows_the_pattern():
    """The README's claim: embeddings at chance, later layers above it (default init)."""
    model = build_model(tiny_config(d_model=64, n_heads=4, n_layers=3, d_vocab=64, n_ctx=64))
    tokens = torch.randint(0, 64, (32, 32), generator=torch.Generator().manual_seed(0))
    scores = adjacency_score(model, tokens)
    assert abs(float(scores[0]) - 0.5) < 0.03
    assert (scores[1:] > 0.6).all()


def test_sites_give_one_value_per_block(tiny_model, tokens):
    assert adjacency_score(tiny_model, tokens, site="attn_out").shape == (2,)


@pytest.mark.usefixtures("user_errors")
def test_bad_input(tiny_model, tokens):
    with pytest.raises(ValueError, match="shorter than 3"):
        adjacency_score(tiny_model, tokens[:, :2])
    with pytest.raises(ValueError, match="shorter than 3"):
        adjacency_score(tiny_model, tokens, lengths=torch.tensor([12, 12, 2, 12, 12, 12]))
    with pytest.raises(ValueError, match="batch shape"):
        adjacency_score(tiny_model, tokens, lengths=torch.tensor([12]))
    with pytest.raises(ValueError, match=r"\[1, 12\]"):
        adjacency_score(tiny_model, tokens, lengths=torch.full((6,), 13))
    with torch.no_grad():
        tiny_model.blocks[1].attn.W_O.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"parameter blocks\.1\.attn\.W_O holds 256 NaN"):
        adjacency_score(tiny_model, tokens)
    with torch.no_grad():
        tiny_model.blocks[1].attn.W_O.fill_(3e38)  # finite weights, infinite activations
    with pytest.raises(ValueError, match="layer 2 .*NaN or inf"):
        adjacency_score(tiny_model, tokens)


# An ActivationCache in place of (model, tokens)


@pytest.mark.parametrize("site", ["resid_post", "resid_mid", "attn_out", "mlp_out"])
def test_a_cache_scores_like_the_model_on_its_tokens(site, tiny_model, tokens):
    with torch.no_grad():
        _, cache = tiny_model.run_with_cache(tokens)
    lengths = torch.tensor([12, 3, 9, 12, 5, 7])
    for kwargs in ({}, {"lengths": lengths}):
        expected = adjacency_score(tiny_model, tokens, site=site, **kwargs)
        torch.testing.assert_close(
            adjacency_score(cache, site=site, **kwargs), expected, atol=1e-6, rtol=0
        )


def test_a_cache_without_its_model_or_batch_dimension(tiny_model, tokens):
    with torch.no_grad():
        _, cache = tiny_model.run_with_cache(tokens[:1])
    expected = adjacency_score(tiny_model, tokens[:1])
    cache.model = None  # as TransformerLens suggests, to free the model
    torch.testing.assert_close(adjacency_score(cache), expected, atol=1e-6, rtol=0)
    cache.remove_batch_dim()
    torch.testing.assert_close(adjacency_score(cache), expected, atol=1e-6, rtol=0)


@pytest.mark.usefixtures("user_errors")
def test_bad_cache_input(tiny_model, tokens):
    with torch.no_grad():
        _, partial = tiny_model.run_with_cache(tokens, names_filter=lambda n: "resid_pre" in n)
        _, stopped = tiny_model.run_with_cache(tokens, stop_at_layer=1)
    missing = r"missing \['blocks.0.hook_resid_post', 'blocks.1.hook_resid_post'\]"
    with pytest.raises(ValueError, match=missing):
        adjacency_score(partial)
    with pytest.raises(ValueError, match=r"missing \['blocks.1.hook_resid_post'\]"):
        adjacency_score(stopped)
    with pytest.raises(TypeError, match="pass no tokens"):
        adjacency_score(partial, tokens)
    with pytest.raises(TypeError, match="needs tokens"):
        adjacency_score(tiny_model)
    with pytest.raises(ValueError, match="choose one of"):
        adjacency_score(partial, site="resid_pre")


def test_ties_as_half_reach_the_model_score():
    """Repeated tokens tie at layer 0 (identical embeddings): strict scores them below 0.5,
    half at 0.5 exactly. At every layer the score is the slow count over the same cosine
    matrices, with the float64 model's tie tolerance: repeated contexts give states equal in
    exact arithmetic whose cosines land a few float64 epsilons apart, which both tie."""
    from adjpos import capture_residuals, cosine_matrix

    model = build_model(tiny_config(dtype="float64"))
    tokens = torch.randint(0, 3, (4, 10), generator=torch.Generator().manual_seed(0))
    strict = adjacency_score(model, tokens)
    half = adjacency_score(model, tokens, ties="half")
    sims = cosine_matrix(capture_residuals(model, tokens))  # [layer, batch, pos, pos]
    expected = [
        sum(slow_adjacency_probability(m.tolist(), 10, "half", TOL64) for m in layer) / len(layer)
        for layer in sims
    ]
    torch.testing.assert_close(half, torch.tensor(expected, dtype=torch.float64))
    # Chance: over many exchangeable sequences, half centres on 0.5 and strict falls below.
    many = torch.randint(0, 3, (400, 10), generator=torch.Generator().manual_seed(1))
    layer0 = adjacency_score(model, many, ties="half")[0]
    assert abs(layer0 - 0.5) < 0.02 and strict[0] < 0.4
    with pytest.raises(ValueError, match="ties='none' is not allowed"):
        adjacency_score(model, tokens, ties="none")


def test_centring_matches_the_slow_reference_with_padding():
    """center=True: each sequence minus the mean of its real positions, then the usual score."""
    model = build_model(tiny_config(dtype="float64"))
    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, 20, (4, 12), generator=gen)
    lengths = torch.tensor([12, 4, 9, 7])
    got = adjacency_score(model, tokens, lengths=lengths, center=True, batch_size=3)
    names = ["blocks.0.hook_resid_pre"] + [
        f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)
    ]
    expected = []
    for name in names:
        per_seq = []
        for seq, n in zip(tokens, lengths.tolist(), strict=True):
            with torch.no_grad():
                _, cache = model.run_with_cache(seq[None, :n])
            states = cache[name][0].tolist()
            mean = [sum(col) / n for col in zip(*states, strict=True)]
            centred = [[x - m for x, m in zip(row, mean, strict=True)] for row in states]
            per_seq.append(slow_adjacency_probability(slow_cosine(centred), n, tol=TOL64))
        expected.append(sum(per_seq) / len(per_seq))
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))
    plain = adjacency_score(model, tokens, lengths=lengths)
    assert not torch.allclose(got, plain)  # the shared direction did enter the plain score


@pytest.mark.usefixtures("user_errors")
def test_center_takes_a_bool():
    model = build_model(tiny_config())
    with pytest.raises(TypeError, match="center must be True or False"):
        adjacency_score(model, torch.zeros(2, 5, dtype=torch.long), center="yes")


def test_rows_score_the_prompt_and_the_answer_apart():
    """rows=mask averages only the chosen rows of each matrix (each row still looks at every
    earlier position), as the slow reference restricted to those rows; all rows = default."""
    import math

    from adjpos import capture_residuals, cosine_matrix, get_task
    from reference import slow_adjacency_rows

    task = get_task("addition")
    batch = task.sample(6, generator=torch.Generator().manual_seed(0))
    model = build_model(tiny_config(dtype="float64", d_vocab=25, n_ctx=32))
    answer = batch.answer_rows
    real = torch.arange(batch.tokens.shape[1]) < batch.lengths[:, None]
    assert torch.equal(answer.sum(dim=1), torch.tensor([len(a) + 1 for a in batch.answers]))
    kwargs = dict(lengths=batch.lengths)
    everything = adjacency_score(model, batch.tokens, rows=real, **kwargs)
    torch.testing.assert_close(everything, adjacency_score(model, batch.tokens, **kwargs))
    got = adjacency_score(model, batch.tokens, rows=answer, **kwargs)
    sims = cosine_matrix(capture_residuals(model, batch.tokens))
    expected = []
    for layer in sims:
        per_seq = []
        for sim, n, mask in zip(layer, batch.lengths.tolist(), answer, strict=True):
            rows = slow_adjacency_rows(sim.tolist(), n, tol=TOL64)
            picked = [r for r, keep in zip(rows, mask.tolist(), strict=True) if keep]
            picked = [r for r in picked if not math.isnan(r)]
            if picked:
                per_seq.append(sum(picked) / len(picked))
        expected.append(sum(per_seq) / len(per_seq))
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.usefixtures("user_errors")
def test_rows_must_be_a_mask_of_the_tokens():
    model = build_model(tiny_config())
    tokens = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"rows must be a boolean mask of shape \(2, 5\)"):
        adjacency_score(model, tokens, rows=torch.ones(2, 4, dtype=torch.bool))


# per_sequence=True: one score per layer and sequence, to bootstrap over


def _slow_sequence_scores(model, tokens, lengths, rows=None, ties="strict", center=False, skip=0):
    """[layer][sequence] from TL's own cache, one truncated sequence at a time, and the loop
    references: the first `skip` states dropped, optionally centred, the mean of the selected
    defined rows (NaN if none)."""
    import math

    from reference import slow_adjacency_rows

    names = ["blocks.0.hook_resid_pre"] + [
        f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)
    ]
    out = [[] for _ in names]
    for b, (seq, n) in enumerate(zip(tokens, lengths, strict=True)):
        with torch.no_grad():
            _, cache = model.run_with_cache(seq[None, :n])
        for layer, name in enumerate(names):
            states = cache[name][0].tolist()[skip:]
            if center:
                mean = [sum(col) / (n - skip) for col in zip(*states, strict=True)]
                states = [[x - m for x, m in zip(row, mean, strict=True)] for row in states]
            scores = slow_adjacency_rows(slow_cosine(states), n - skip, ties, TOL64)
            keep = [True] * (n - skip) if rows is None else rows[b][skip:n].tolist()
            picked = [s for s, k in zip(scores, keep, strict=True) if k and not math.isnan(s)]
            out[layer].append(sum(picked) / len(picked) if picked else math.nan)
    return torch.tensor(out, dtype=torch.float64)


_FLOAT64_MODEL = build_model(tiny_config(dtype="float64"))


@settings(max_examples=8)
@given(
    seed=st.integers(0, 2**16),
    ties=st.sampled_from(["strict", "half"]),
    center=st.booleans(),
    masked=st.booleans(),
)
def test_per_sequence_scores_match_the_slow_reference(seed, ties, center, masked):
    """Random tokens, padding and row masks: every sequence's score is the loop reference's,
    and the default score is their mean over the defined ones. The tokens of a sequence are
    distinct: a repeated context makes states equal in exact arithmetic, and which of their
    cosines then ties depends on the last bit of each implementation's rounding."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.stack([torch.randperm(20, generator=gen)[:9] for _ in range(4)])
    lengths = torch.randint(3, 10, (4,), generator=gen)
    rows = torch.rand(4, 9, generator=gen) < 0.5 if masked else None
    kwargs = dict(lengths=lengths, ties=ties, center=center, rows=rows)
    got = adjacency_score(_FLOAT64_MODEL, tokens, per_sequence=True, batch_size=3, **kwargs)
    assert got.shape == (3, 4) and got.dtype == torch.float64
    expected = _slow_sequence_scores(_FLOAT64_MODEL, tokens, lengths.tolist(), rows, ties, center)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert torch.equal(adjacency_score(_FLOAT64_MODEL, tokens, **kwargs), got.nanmean(dim=1))


def test_per_sequence_mean_is_the_default_score_and_marks_unscored_sequences(tiny_model, tokens):
    lengths = torch.tensor([12, 3, 9, 12, 5, 7])
    rows = torch.zeros(6, 12, dtype=torch.bool)
    rows[:, 4] = True  # row 4: beyond the length of sequence 1 (3 tokens)
    for kwargs in ({}, {"lengths": lengths}, {"lengths": lengths, "rows": rows}):
        each = adjacency_score(tiny_model, tokens, per_sequence=True, **kwargs)
        assert each.shape == (3, 6)
        assert torch.equal(adjacency_score(tiny_model, tokens, **kwargs), each.nanmean(dim=1))
    assert each[:, 1].isnan().all() and not each[:, [0, 2, 3, 4, 5]].isnan().any()
    with torch.no_grad():
        _, cache = tiny_model.run_with_cache(tokens)
    torch.testing.assert_close(
        adjacency_score(cache, per_sequence=True, site="attn_out"),
        adjacency_score(tiny_model, tokens, per_sequence=True, site="attn_out"),
        atol=1e-6,
        rtol=0,
    )


@pytest.mark.usefixtures("user_errors")
def test_per_sequence_takes_a_bool(tiny_model, tokens):
    with pytest.raises(TypeError, match="per_sequence must be True or False"):
        adjacency_score(tiny_model, tokens, per_sequence=1)


# One forward pass: the numbers of the old per-layer path, on any model


def _per_layer_path(model, tokens, batch_size, **kwargs):
    """The old path: each layer captured by its own run(s), then scored."""
    from adjpos.capture import capture_residuals, n_capture_layers
    from adjpos.scoring import sequence_scores

    lengths = kwargs.pop("lengths", None)
    lengths = torch.full((len(tokens),), tokens.shape[1]) if lengths is None else lengths
    out = []
    for layer in range(n_capture_layers(model, "resid_post")):
        acts = capture_residuals(model, tokens, layers=[layer], batch_size=batch_size)[0]
        out.append(sequence_scores(acts, lengths, **kwargs))
    return torch.stack(out)


_BRIDGES = {}


def _bridge(kind):
    import adjpos
    from factories import tiny_bridge

    if kind not in _BRIDGES:
        config = adjpos.hf_config("smollm3", {"num_hidden_layers": 4})
        _BRIDGES[kind] = {"hf": lambda: adjpos.load_hf(config), "native": tiny_bridge}[kind]()
    return _BRIDGES[kind]


@settings(max_examples=10)
@given(
    seed=st.integers(0, 2**16),
    ties=st.sampled_from(["strict", "half"]),
    center=st.booleans(),
    padded=st.booleans(),
    batch_size=st.sampled_from([None, 2, 3]),
    kind=st.sampled_from(["hf", "native"]),
)
def test_one_pass_gives_the_per_layer_numbers_on_a_bridge(
    seed, ties, center, padded, batch_size, kind
):
    model = _bridge(kind)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, 20, (5, 10), generator=gen)  # repeats: ties count too
    lengths = torch.randint(3, 11, (5,), generator=gen) if padded else None
    kwargs = dict(ties=ties, center=center, lengths=lengths)
    got = adjacency_score(model, tokens, per_sequence=True, batch_size=batch_size, **kwargs)
    assert torch.equal(got, _per_layer_path(model, tokens, batch_size, **kwargs))


def test_a_bridge_is_run_once_per_chunk():
    model = _bridge("hf")
    entries = []
    handle = model.blocks[0].register_forward_pre_hook(lambda *args: entries.append(1))
    adjacency_score(model, torch.randint(3, 20, (5, 10)), batch_size=2)
    handle.remove()
    assert len(entries) == 3


def _same(a, b):
    """Equal to the last bit, NaN where NaN."""
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@settings(max_examples=10)
@given(
    seed=st.integers(0, 2**16),
    skip=st.integers(0, 4),
    center=st.booleans(),
    masked=st.booleans(),
)
def test_skip_first_scores_the_states_from_position_k_on(seed, skip, center, masked):
    """Leaving K positions out is scoring the states (not the tokens: the context stays)
    from K on, as sequences K shorter; the loop reference says the same."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.stack([torch.randperm(20, generator=gen)[:10] for _ in range(4)])
    lengths = torch.randint(skip + 3, 11, (4,), generator=gen)
    rows = torch.rand(4, 10, generator=gen) < 0.5 if masked else None
    kwargs = dict(lengths=lengths, ties="half", center=center, rows=rows)
    got = adjacency_score(_FLOAT64_MODEL, tokens, per_sequence=True, skip_first=skip, **kwargs)
    with torch.no_grad():
        _, cache = _FLOAT64_MODEL.run_with_cache(tokens)
    _same(adjacency_score(cache, per_sequence=True, skip_first=skip, **kwargs), got)
    expected = []
    names = ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    for name in names:
        states = cache[name][:, skip:]
        sliced = None if rows is None else rows[:, skip:]
        from adjpos.scoring import sequence_scores

        expected.append(
            sequence_scores(states, lengths - skip, ties="half", center=center, rows=sliced)
        )
    _same(got, torch.stack(expected))
    if skip == 0:
        _same(got, adjacency_score(_FLOAT64_MODEL, tokens, per_sequence=True, **kwargs))
    slow = _slow_sequence_scores(
        _FLOAT64_MODEL, tokens, lengths.tolist(), rows, "half", center, skip
    )
    torch.testing.assert_close(got, slow, equal_nan=True)


@pytest.mark.usefixtures("user_errors")
def test_skip_first_must_leave_three_positions(tiny_model, tokens):
    with pytest.raises(ValueError, match=r"skip_first=10 leaves 2 positions .* <= 9"):
        adjacency_score(tiny_model, tokens, skip_first=10)
    with pytest.raises(ValueError, match=r"leaves 1 positions of the shortest sequence \(5"):
        adjacency_score(tiny_model, tokens, lengths=torch.tensor([12, 5, 9, 9, 9, 9]), skip_first=4)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="skip_first must be an int >= 0"):
            adjacency_score(tiny_model, tokens, skip_first=bad)


# float64 cosines: crowded cosines carry only the states' own rounding


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), ties=st.sampled_from(["strict", "half"]))
def test_near_ties_in_float32_states_are_scored_as_the_slow_count(seed, ties):
    """float32 states like a language model's: one large shared direction, and a small causal
    running mean on top, so the cosines of a row differ in their 7th digit or later, around
    the float32 tie tolerance. The score is the slow count's (float64 cosines of the same
    float32 states, the float32 tolerance), through `sequence_scores` and through
    `adjacency_score` of a cache; cosines summed in float32 carry a rounding error of a few
    epsilons, which moves some pairs across the tolerance."""
    from transformer_lens import ActivationCache

    from adjpos import adjacency_probability, cosine_matrix
    from adjpos.scoring import sequence_scores

    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(4, 16, 8, generator=gen, dtype=torch.float64)
    states = (1.0 + 3e-3 * noise.cumsum(1) / torch.arange(1, 17)[:, None]).float()
    lengths = torch.tensor([16, 16, 11, 5])
    expected = torch.tensor(
        [
            slow_adjacency_probability(slow_cosine(s[:n].tolist()), n, ties, TOL32)
            for s, n in zip(states, lengths.tolist(), strict=True)
        ],
        dtype=torch.float64,
    )
    got = sequence_scores(states, lengths, ties=ties)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    assert torch.equal(sequence_scores(states.double(), lengths, ties=ties), got)
    in_float32 = adjacency_probability(cosine_matrix(states), lengths=lengths, ties=ties)
    assert float((in_float32.double() - expected).abs().max()) > 0  # across the tolerance
    full = states[:2]
    cache = ActivationCache(
        {"blocks.0.hook_resid_pre": full, "blocks.0.hook_resid_post": full}, None
    )
    torch.testing.assert_close(
        adjacency_score(cache, ties=ties), expected[:2].mean().repeat(2), atol=1e-12, rtol=0
    )


# Rescaling: each state times a positive factor leaves every cosine, so every score, as it was


def _rescaled(states, seed):
    """Each state multiplied by its own factor in [0.25, 4), in the states' dtype (the product
    rounds each coordinate: cosines move by about a tenth of an epsilon)."""
    gen = torch.Generator().manual_seed(seed)
    factors = 4 ** (2 * torch.rand(*states.shape[:-1], 1, generator=gen) - 1)
    return states * factors.to(states.dtype)


def _cosines(states):
    from adjpos import cosine_matrix

    return cosine_matrix(states.double())


def _trained_like_states(seed, batch=6, pos=16, d_model=32):
    """float32 states as a trained model gives them: a shared direction, a causal running
    mean, and exact repeats (a state copied to later positions of its sequence, as a repeated
    context gives), so some cosines tie exactly."""
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(batch, pos, d_model, generator=gen)
    states = 2.0 + noise.cumsum(1) / torch.arange(1, pos + 1)[:, None]
    for b in range(batch):
        source = torch.randint(0, pos - 1, (4,), generator=gen)
        for s in source.tolist():
            targets = torch.randint(s + 1, pos, (2,), generator=gen)
            states[b, targets] = states[b, s].clone()
    return states.float()


@pytest.mark.parametrize("seed", range(4))
def test_rescaling_each_state_leaves_the_scores_exactly(seed):
    from transformer_lens import ActivationCache

    from adjpos.scoring import sequence_scores

    states = _trained_like_states(seed)
    lengths = torch.tensor([16, 16, 9, 12, 5, 16])
    scaled = _rescaled(states, seed + 100)
    assert not torch.equal(_cosines(scaled), _cosines(states))  # the rounding is there
    for ties in ("strict", "half"):
        for widened in (False, True):  # float32 states, or the same taken to float64 first
            as_given = (lambda x: x.double()) if widened else (lambda x: x)
            before = sequence_scores(as_given(states), lengths, ties=ties)
            assert torch.equal(sequence_scores(as_given(scaled), lengths, ties=ties), before)
        names = ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post"]
        caches = [ActivationCache(dict.fromkeys(names, x), None) for x in (states, scaled)]
        scores = [adjacency_score(c, ties=ties, per_sequence=True) for c in caches]
        assert torch.equal(scores[0], scores[1])


@pytest.fixture(scope="module")
def addition_states():
    """Layer 1 (and the cache) of the shipped addition model, seed 0, on 16 test prompts."""
    from adjpos import load_pretrained

    model, task = load_pretrained("addition", seed=0)
    batch = task.sample(16, generator=torch.Generator().manual_seed(0), split="test")
    tokens = batch.tokens[:, : int(batch.lengths.max())]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return cache, batch.lengths


def test_rescaling_a_trained_models_states_leaves_its_scores_exactly(addition_states):
    """The real case: a trained model's states repeat (tied cosines); rescaled, by random
    factors or by `NormPermute` (each state takes another position's norm), the layer's
    score and every layer of `adjacency_score` stay exactly where they were."""
    from transformer_lens import ActivationCache

    from adjpos.interventions import NormPermute
    from adjpos.scoring import sequence_scores

    cache, lengths = addition_states
    layer1 = cache["blocks.0.hook_resid_post"]
    before = sequence_scores(layer1, lengths)
    for scaled in (_rescaled(layer1, 0), NormPermute()(layer1)):
        assert not torch.equal(_cosines(scaled), _cosines(layer1))
        assert torch.equal(sequence_scores(scaled, lengths), before)
    sites = [n for n in cache.cache_dict if n.endswith(("resid_pre", "resid_post"))]
    scaled = {n: _rescaled(cache[n], i) for i, n in enumerate(sites)}
    got = adjacency_score(ActivationCache(scaled, cache.model), lengths=lengths)
    assert torch.equal(got, adjacency_score(cache, lengths=lengths))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), ties=st.sampled_from(["strict", "half"]))
def test_repeated_and_rescaled_states_score_as_the_slow_count(seed, ties):
    """Exact repeats, then each state rescaled (the repeats' cosines now a few float32
    rounding steps apart): `sequence_scores` is the slow count's with the float32 tolerance."""
    from adjpos.scoring import sequence_scores

    states = _rescaled(_trained_like_states(seed, batch=3, pos=10, d_model=8), seed)
    lengths = torch.tensor([10, 7, 4])
    expected = torch.tensor(
        [
            slow_adjacency_probability(slow_cosine(s[:n].tolist()), n, ties, TOL32)
            for s, n in zip(states, lengths.tolist(), strict=True)
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(sequence_scores(states, lengths, ties=ties), expected)
