"""Model-level scores: capture each layer, then apply the pure metrics."""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.capture import check_tokens, iter_residuals, n_capture_layers
from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.metrics.checks import check_lengths, check_scorable
from adjpos.types import TokenInput


def adjacency_score(
    model: Any,
    tokens: TokenInput,
    *,
    lengths: Int[Tensor, " batch"] | None = None,
    site: str = "resid_post",
    batch_size: int | None = None,
    progress: bool | None = None,
) -> Float[Tensor, " layer"]:
    """The model's adjacency score at every layer: the mean matrix score over sequences.

    Works on any TransformerLens model. Layers are streamed, so memory does not grow with
    depth. With ``site="resid_post"`` there are n_layers + 1 values (layer 0 = embeddings).

    Args:
        model: a TransformerLens model.
        tokens: token ids [batch, pos], right-padded when `lengths` is given.
        lengths: true length of each sequence; the result equals scoring each truncated
            sequence alone (causal attention never lets padding reach earlier positions).
        site: which hook site to score (see `adjpos.capture_residuals`).
        batch_size: sequences per forward pass (default: all at once).
        progress: show a progress bar (default: only on a terminal).

    Returns:
        Float tensor [layer] on the CPU.

    Raises:
        ValueError: a sequence is shorter than 3 tokens, bad tokens or lengths, or
            non-finite activations.
    """
    tokens = check_tokens(model, tokens)
    lens = check_lengths(lengths, (tokens.shape[0],), tokens.shape[1])
    check_scorable(lens)
    scores = torch.full((n_capture_layers(model, site),), torch.nan, dtype=torch.float64)
    stream = iter_residuals(model, tokens, site=site, batch_size=batch_size, progress=progress)
    for layer, acts in stream:
        try:
            sim = cosine_matrix(acts)
        except ValueError as err:
            raise ValueError(f"layer {layer} ({site}): {err}") from None
        scores[layer] = adjacency_probability(sim, lengths=lens.to(sim.device)).double().mean()
    return scores
