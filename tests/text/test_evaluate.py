"""Held-out losses of the text models (`adjpos.text.evaluate`): the per-token losses against a
window-by-window reference, the factors scoring the same tokens, and the paired differences
agreeing with the losses they pair."""

import numpy as np
import pytest
import torch

import adjpos
from adjpos.text.evaluate import (
    chunk_losses,
    evaluate_layouts,
    held_out_chunks,
    token_losses,
)
from adjpos.text.recipe import layout_config

TINY = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 40, "n_ctx": 32}


def tiny(layout: str, seed: int):
    return adjpos.build_model(layout_config(layout, **TINY, seed=seed), device="cpu").eval()


def reference_losses(model, chunks, context):
    """Each window run alone, each token's loss read from its own log-softmax."""
    out = torch.full(chunks.shape, float("nan"), dtype=torch.float64)
    for i, chunk in enumerate(chunks):
        for start in range(0, chunks.shape[1], context):
            window = chunk[start : start + context]
            logp = model(window[None])[0].double().log_softmax(-1)
            for k in range(1, context):
                out[i, start + k] = -logp[k - 1, window[k]]
    return out


@pytest.mark.parametrize("layout", ["nope", "rope"])
def test_token_losses_match_a_window_by_window_reference(layout):
    model = tiny(layout, 0)
    chunks = torch.randint(0, 40, (3, 16), generator=torch.Generator().manual_seed(1))
    for context in (4, 8, 16):
        found = token_losses(model, chunks, context, batch_size=2)
        expected = reference_losses(model, chunks, context)
        assert torch.equal(found.isnan(), expected.isnan())
        assert torch.allclose(found.nan_to_num(), expected.nan_to_num(), atol=1e-5)


def test_a_longer_context_changes_no_loss_inside_the_first_window():
    model, chunks = tiny("rope", 1), torch.randint(0, 40, (2, 16))
    short, long = token_losses(model, chunks, 8), token_losses(model, chunks, 16)
    assert torch.allclose(short[:, 1:8], long[:, 1:8], atol=1e-5)  # causal: the same prefix
    with pytest.raises(ValueError, match="must divide the chunk length"):
        token_losses(model, chunks, 6)


def test_every_factor_scores_the_same_tokens():
    losses = torch.arange(32.0).repeat(2, 1)
    assert chunk_losses(losses, 8).tolist() == [np.mean([p for p in range(32) if p % 8])] * 2
    beyond = [p for p in range(8, 32) if p % 8]
    assert chunk_losses(losses, 8, "beyond").tolist() == [np.mean(beyond)] * 2
    with pytest.raises(ValueError, match="allowed"):
        chunk_losses(losses, 8, "some")


def test_paired_differences_agree_with_the_losses_they_pair():
    models = {(layout, s): tiny(layout, s) for layout in ("nope", "rope") for s in (0, 1)}
    models.pop(("rope", 1))  # a seed missing from one layout is paired where both have it
    ids = torch.randint(0, 40, (900,), generator=torch.Generator().manual_seed(2))
    splits = {"validation": ids[:400], "test": ids[400:]}
    losses, differences = evaluate_layouts(
        models, splits, train_context=8, factors=(1, 2), max_chunks=6, n_boot=200
    )
    loss = losses.set_index(["layout", "seed", "split", "factor", "scored"])["loss"]
    assert set(losses["n_chunks"]) == {6}
    assert set(losses.query("split == 'validation'")["factor"]) == {1}
    rows = differences.query("a_layout == 'nope' and b_layout == 'rope' and a_factor == 2")
    per_seed = rows[rows["seed"].notna()]
    assert per_seed["seed"].tolist() == [0, 0]  # scored all and beyond, seed 0 only
    for _, r in per_seed.iterrows():
        expected = loss["nope", 0, "test", 2, r.scored] - loss["rope", 0, "test", 2, r.scored]
        assert r.difference == pytest.approx(expected)
        assert r.low <= r.difference <= r.high
    extrapolated = differences.query("a_layout == 'nope' and b_layout == 'nope'")
    over = extrapolated[extrapolated["seed"].isna() & (extrapolated["scored"] == "all")].iloc[0]
    seeds = [loss["nope", s, "test", 2, "all"] - loss["nope", s, "test", 1, "all"] for s in (0, 1)]
    assert (over.difference, over.n) == (pytest.approx(np.mean(seeds)), 2)


def test_chunks_need_enough_tokens():
    with pytest.raises(ValueError, match="holds no chunk of 8"):
        held_out_chunks(torch.arange(5), 8)
