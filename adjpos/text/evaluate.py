"""What each layout learns: held-out next-token loss per layout and seed, at the training
context and beyond it (length extrapolation), and the layouts against each other paired by
seed.

The unit is a *chunk*: `length` consecutive tokens of a held-out split (`held_out_chunks`).
At a context of c tokens a chunk is cut into length / c windows, each run on its own, so
every factor (c = 1, 2 or 4 times the training context) reads the same chunks. A token is
scored (`SCORED`: "all") when it is predicted at every factor, i.e. it is not the first of a
window of the training context (position p with p % context != 0); so the factors differ
only in how much context each prediction sees. "beyond" keeps the scored tokens at
positions >= the training context, the ones a longer window predicts from more context than
training ever showed.

Intervals: per (layout, seed) the chunk losses are bootstrapped over chunks. A difference
(layout a - layout b at one factor, or one layout at factor f - at 1x) is paired by chunk
within a seed (`adjpos.stats.paired_difference`); over seeds, each seed's difference is one
value and their mean gets a Student-t interval over the seeds (`adjpos.stats.seed_interval`,
n - 1 degrees of freedom: wide with three seeds), reported beside every seed's own interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.stats import bootstrap_interval, paired_difference, seed_interval
from adjpos.tables import Table
from adjpos.validation import UsageError, check_positive_int

FACTORS = (1, 2, 4)
SCORED = ("all", "beyond")
LOSSES = Table(layout="string", seed="int64", split="string", factor="int64", context="int64")
LOSSES += Table(scored="string", loss="float64", loss_low="float64", loss_high="float64")
LOSSES += Table(n_chunks="int64")
# One row per difference a - b: per seed (paired over chunks) and over seeds (seed <NA>).
DIFFERENCES = Table(split="string", scored="string", a_layout="string", a_factor="int64")
DIFFERENCES += Table(b_layout="string", b_factor="int64", seed="Int64", difference="float64")
DIFFERENCES += Table(low="float64", high="float64", n="int64")


def held_out_chunks(
    ids: Int[Tensor, " tokens"], length: int, max_chunks: int | None = None
) -> Int[Tensor, "chunk length"]:
    """Consecutive, non-overlapping chunks of `length` tokens from a split's token stream;
    with `max_chunks`, that many spread evenly over the stream (the first among them).

    >>> held_out_chunks(torch.arange(10), 3).tolist()
    [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    >>> held_out_chunks(torch.arange(10), 3, max_chunks=2).tolist()
    [[0, 1, 2], [6, 7, 8]]
    """
    check_positive_int("length", length)
    n = ids.numel() // length
    if n < 1:
        raise UsageError(f"a split of {ids.numel()} tokens holds no chunk of {length}")
    chunks = ids[: n * length].reshape(n, length).long()
    if max_chunks is not None and max_chunks < n:
        check_positive_int("max_chunks", max_chunks)
        chunks = chunks[np.linspace(0, n - 1, max_chunks).round().astype(int)]
    return chunks


def token_losses(
    model: Any, chunks: Int[Tensor, "chunk length"], context: int, *, batch_size: int = 16
) -> Float[Tensor, "chunk length"]:
    """Next-token loss (nats) of every token of every chunk read in windows of `context`
    tokens, NaN for a token no window predicts (the first of each window).

    Raises:
        ValueError: `context` does not divide the chunk length or exceeds the model's n_ctx.
    """
    check_positive_int("context", context)
    n, length = chunks.shape
    if length % context or context > model.cfg.n_ctx:
        raise UsageError(
            f"context {context} must divide the chunk length {length} and be at most the "
            f"model's n_ctx {model.cfg.n_ctx} (load it with n_ctx=...)"
        )
    windows = chunks.reshape(-1, context)
    out = torch.full(windows.shape, float("nan"), dtype=torch.float64)
    device = next(model.parameters()).device
    with torch.inference_mode():
        for start in range(0, len(windows), batch_size):
            part = windows[start : start + batch_size].to(device)
            logits = model(part)[:, :-1].double()
            nll = F.cross_entropy(logits.transpose(1, 2), part[:, 1:], reduction="none")
            out[start : start + len(part), 1:] = nll.cpu()
    return out.reshape(n, length)


def chunk_losses(
    losses: Float[Tensor, "chunk length"], train_context: int, scored: str = "all"
) -> np.ndarray:
    """Each chunk's mean loss over its scored tokens (see the module doc): every position p
    with p % train_context != 0 ("all"), and only those >= train_context ("beyond")."""
    if scored not in SCORED:
        raise UsageError(f"unknown scored {scored!r}; allowed: {list(SCORED)}")
    p = torch.arange(losses.shape[1])
    keep = (p % train_context != 0) & ((p >= train_context) if scored == "beyond" else True)
    return losses[:, keep].mean(dim=1).numpy()


def evaluate_layouts(
    models: Mapping[tuple[str, int], Any],
    splits: Mapping[str, Int[Tensor, " tokens"]],
    *,
    train_context: int,
    factors: Sequence[int] = FACTORS,
    extrapolate: str = "test",
    max_chunks: int | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    on_model: Any = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Held-out losses of every model (keyed by (layout, seed), each able to run
    ``max(factors) * train_context`` tokens) and their paired differences.

    Every split in `splits` is read at the training context (factor 1); the split
    `extrapolate` at every factor of `factors` too. Chunks are ``max(factors) *
    train_context`` tokens (at most `max_chunks` per split), the same for every model.

    Returns:
        (losses, differences): frames with the columns of `LOSSES` and `DIFFERENCES`: every
        layout against every other at each factor, and each layout at each factor > 1
        against itself at 1x; per seed, and over the seeds present in both.
    """
    length, draws = max(factors) * train_context, {"n_boot": n_boot, "level": level}
    chunks = {name: held_out_chunks(ids, length, max_chunks) for name, ids in splits.items()}
    per_chunk, rows = {}, []
    for (layout, model_seed), model in models.items():
        for split, split_chunks in chunks.items():
            for factor in factors if split == extrapolate else (1,):
                losses = token_losses(model, split_chunks, factor * train_context)
                for scored in SCORED if split == extrapolate else ("all",):
                    values = chunk_losses(losses, train_context, scored)
                    key = (layout, model_seed, split, factor, scored)
                    per_chunk[key] = values
                    low, high = bootstrap_interval(values, **draws, seed=seed)
                    rows.append(dict(zip(LOSSES.names[:4], key[:4], strict=True)))
                    rows[-1] |= {"context": factor * train_context, "scored": scored}
                    rows[-1] |= {"loss": float(values.mean()), "loss_low": low}
                    rows[-1] |= {"loss_high": high, "n_chunks": len(values)}
        if on_model is not None:
            on_model(layout, model_seed)
    return LOSSES.frame(rows), _differences(per_chunk, draws, seed, level)


def _differences(per_chunk: dict, draws: dict, seed: int, level: float) -> pd.DataFrame:
    """Every layout pair at each (split, factor, scored), and each layout's factor > 1
    against its 1x (on the tokens of the same `scored`): per seed and over seeds."""
    layouts = list(dict.fromkeys(key[0] for key in per_chunk))
    cells = {(s, f, sc) for _, _, s, f, sc in per_chunk}
    pairs = []
    for split, factor, scored in sorted(cells):
        for i, a in enumerate(layouts):
            pairs += [((split, scored), (a, factor), (b, factor)) for b in layouts[i + 1 :]]
            if factor > 1:
                pairs.append(((split, scored), (a, factor), (a, 1)))
    rows = []
    for (split, scored), (a, fa), (b, fb) in pairs:
        base = {"split": split, "scored": scored, "a_layout": a, "a_factor": fa}
        base |= {"b_layout": b, "b_factor": fb}
        values = []
        mine = [s for (layout, s, *cell) in per_chunk if (layout, *cell) == (a, split, fa, scored)]
        for s in sorted(s for s in mine if (b, s, split, fb, scored) in per_chunk):
            x, y = per_chunk[a, s, split, fa, scored], per_chunk[b, s, split, fb, scored]
            d, low, high = paired_difference(x, y, **draws, seed=seed)
            rows.append(base | {"seed": s, "difference": d, "low": low, "high": high, "n": len(x)})
            values.append(d)
        if values:
            mean, low, high = seed_interval(values, level=level)
            rows.append(base | {"seed": None, "difference": mean, "low": low, "high": high})
            rows[-1]["n"] = len(values)
    return DIFFERENCES.frame(rows)
