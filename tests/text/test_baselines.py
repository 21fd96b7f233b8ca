"""The n-gram baselines (`adjpos.text.baselines`) against counts made by hand in loops, their
strengths chosen as a loop over the grid chooses them, and the tokens they score those the
models are scored on."""

import math
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.text.baselines import STRENGTHS, BigramModel, UnigramModel
from adjpos.text.evaluate import chunk_losses, held_out_chunks

V = 6
streams = st.lists(st.integers(0, V - 1), min_size=2, max_size=60).map(torch.tensor)
strengths = st.sampled_from([0.05, 1.0, 30.0])


def slow_log_prob(train: list[int], previous: int, target: int, a: float, b: float | None):
    """log p(target | previous) by the module's formulas, counted token by token."""
    counts = Counter(train)
    unigram = (counts[target] + a / V) / (len(train) + a)
    if b is None:
        return math.log(unigram)
    pairs = Counter(zip(train, train[1:], strict=False))
    starts = sum(n for (v, _), n in pairs.items() if v == previous)
    return math.log((pairs[previous, target] + b * unigram) / (starts + b))


def slow_loss(train: list[int], held: list[int], a: float, b: float | None = None) -> float:
    pairs = list(zip(held, held[1:], strict=False))
    return -sum(slow_log_prob(train, v, w, a, b) for v, w in pairs) / len(pairs)


@settings(max_examples=40)
@given(streams, streams, strengths, strengths)
def test_log_probs_match_counts_made_by_hand(train, held, a, b):
    unigram = UnigramModel(V, strength=a).fit(train)
    bigram = BigramModel(V, strength=b, unigram_strength=a).fit(train)
    t, h = train.tolist(), held.tolist()
    for model, b_or_none in ((unigram, None), (bigram, b)):
        found = model.log_probs(held[:-1], held[1:]).tolist()
        expected = [slow_log_prob(t, v, w, a, b_or_none) for v, w in zip(h, h[1:], strict=False)]
        assert found == pytest.approx(expected, rel=1e-12)


@settings(max_examples=40)
@given(streams)
def test_unigram_at_strength_zero_scores_its_own_stream_at_its_entropy(ids):
    model = UnigramModel(V, strength=0.0).fit(ids)
    p = np.bincount(ids.numpy(), minlength=V) / len(ids)
    entropy = -sum(x * math.log(x) for x in p if x > 0)
    assert -float(model.log_probs(ids, ids).mean()) == pytest.approx(entropy, abs=1e-12)


@settings(max_examples=40)
@given(streams)
def test_bigram_at_strength_zero_scores_its_own_stream_no_worse_than_the_unigram(ids):
    bigram = BigramModel(V, strength=0.0, unigram_strength=0.0).fit(ids)
    targets = (ids[:-1], ids[1:])
    assert -bigram.log_probs(*targets).mean() <= -bigram.unigram_.log_probs(*targets).mean() + 1e-12


def test_strengths_are_chosen_on_validation_as_a_loop_over_the_grid_chooses_them():
    gen = torch.Generator().manual_seed(0)
    train, held = (
        torch.randint(0, V, (80,), generator=gen),
        torch.randint(0, V, (40,), generator=gen),
    )
    bigram = BigramModel(V).fit(train, held)
    t, h = train.tolist(), held.tolist()
    a = min(STRENGTHS, key=lambda s: slow_loss(t, h, s))
    assert bigram.unigram_.strength_ == a
    assert bigram.strength_ == min(STRENGTHS, key=lambda s: slow_loss(t, h, a, s))
    # Random tokens: the pairs carry nothing, so the bigram leans on its unigram.
    assert bigram.strength_ > 1 and BigramModel(V).fit(train, train).strength_ == STRENGTHS[0]


def test_token_losses_score_the_tokens_the_models_are_scored_on():
    ids = torch.randint(0, V, (200,), generator=torch.Generator().manual_seed(1))
    bigram = BigramModel(V, strength=2.0, unigram_strength=0.5).fit(ids[:100])
    chunks = held_out_chunks(ids[100:], 16)
    losses = bigram.token_losses(chunks)
    assert losses.shape == chunks.shape and losses[:, 0].isnan().all()
    t = ids[:100].tolist()
    expected = [
        np.mean([-slow_log_prob(t, c[p - 1], c[p], 0.5, 2.0) for p in range(16) if p % 8])
        for c in chunks.tolist()
    ]
    assert chunk_losses(losses, 8) == pytest.approx(expected, rel=1e-12)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="needs a validation split"):
        UnigramModel(V).fit(torch.arange(V))
    with pytest.raises(ValueError, match=r"must lie in \[0, 6\)"):
        UnigramModel(V, strength=1.0).fit(torch.arange(V + 1))
    with pytest.raises(ValueError, match="strength must be >= 0"):
        BigramModel(V, strength=-1.0)
