"""Model-level scores: capture each layer (or read it from a cache), then apply the pure metrics."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.capture import SITES, check_tokens, hook_name, iter_residuals, n_capture_layers
from adjpos.metrics import adjacency_probability, center_states, cosine_matrix
from adjpos.metrics.checks import check_lengths, check_scorable, check_ties
from adjpos.types import TokenInput
from adjpos.validation import UsageError


def adjacency_score(
    model_or_cache: Any,
    tokens: TokenInput | None = None,
    *,
    lengths: Int[Tensor, " batch"] | None = None,
    site: str = "resid_post",
    batch_size: int | None = None,
    progress: bool | None = None,
    ties: str = "strict",
    center: bool = False,
    rows: Bool[Tensor, "batch pos"] | None = None,
    per_sequence: bool = False,
) -> Float[Tensor, " layer"] | Float[Tensor, "layer batch"]:
    """The model's adjacency score at every layer: the mean matrix score over sequences.

    Works on any TransformerLens model, or on the `ActivationCache` of a run you already
    made: ``adjacency_score(model.run_with_cache(tokens)[1])`` equals
    ``adjacency_score(model, tokens)``. A model's layers are streamed, so memory does not
    grow with depth. With ``site="resid_post"`` there are n_layers + 1 values (layer 0 =
    embeddings: ``blocks.0.hook_resid_pre``, then ``blocks.{l}.hook_resid_post``); the other
    sites have one value per block (``blocks.{l}.hook_{site}``).

    Each sequence b gets the matrix score S_b (the mean of its selected defined rows s_k, see
    `adjpos.adjacency_probability`); the layer's score is the plain mean of S_b over the
    sequences that have one, each sequence weighing the same whatever its length.

    Args:
        model_or_cache: a TransformerLens model, or an `ActivationCache` holding every layer
            of `site` (a cache whose model was dropped is scored on the blocks it holds).
        tokens: token ids [batch, pos], right-padded when `lengths` is given; with a model
            only (a cache already holds its run).
        lengths: true length of each sequence; the result equals scoring each truncated
            sequence alone (causal attention never lets padding reach earlier positions).
        site: which hook site to score (see `adjpos.capture_residuals`).
        batch_size: sequences per forward pass (default: all at once); with a model only.
        progress: show a progress bar (default: only on a terminal).
        ties: "strict" (the study's definition: a tied pair is not ordered, so chance is
            below 0.5 where tokens repeat) or "half" (a tied pair counts one half; chance 0.5
            on any data). See `adjpos.adjacency_rows`.
        center: subtract each sequence's mean hidden state (over its real positions) before
            the cosine, so a direction every state shares (random-init states point nearly
            the same way) does not enter the similarities.
        rows: [batch, pos] mask of the rows k to score, e.g. a task's prompt rows or its
            answer rows (`TaskBatch.answer_rows`); each row still looks at every earlier
            position. Sequences with no selected row are left out of the mean.
        per_sequence: return S_b itself, one score per layer and sequence, to bootstrap an
            interval over the sequences (`adjpos.stats.bootstrap_interval`). NaN marks a
            sequence without a selected defined row (possible only with `rows`). The default
            result is exactly ``adjacency_score(..., per_sequence=True).nanmean(dim=1)``.

    Returns:
        Float64 tensor [layer] on the CPU; [layer, batch] with `per_sequence`.

    Raises:
        ValueError: a sequence is shorter than 3 tokens, bad tokens or lengths, non-finite
            activations, or a cache without the hooks of `site` (the message names them).
        TypeError: a model without tokens, or a cache with tokens or a batch_size; a
            `center` or `per_sequence` that is not a bool.
    """
    check_ties(ties)
    stream, batch, n = _layer_stream(model_or_cache, tokens, site, batch_size, progress)
    lens = check_lengths(lengths, (batch,), n)
    check_scorable(lens)
    check_rows(rows, batch, n)
    for name, flag in (("center", center), ("per_sequence", per_sequence)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    scores = {}
    for layer, acts in stream:
        try:
            scores[layer] = sequence_scores(acts, lens, ties=ties, center=center, rows=rows)
        except UsageError as err:
            raise UsageError(f"layer {layer} ({site}): {err}") from None
    stacked = torch.stack([scores[layer] for layer in sorted(scores)])
    return stacked if per_sequence else stacked.nanmean(dim=1)


def sequence_scores(
    states: Float[Tensor, "batch pos d_model"],
    lengths: Int[Tensor, " batch"],
    *,
    ties: str = "strict",
    center: bool = False,
    rows: Bool[Tensor, "batch pos"] | None = None,
) -> Float[Tensor, " batch"]:
    """The adjacency score S_b of each sequence of one layer's `states`, float64 on the CPU:
    centred first with `center` (`adjpos.metrics.center_states`), then the mean of the rows
    that `rows` selects (NaN for a sequence with none). The step `adjacency_score` and
    `adjpos.measure_layers` apply to every layer."""
    if center:
        states = center_states(states, lengths.to(states.device))
    sim = cosine_matrix(states)
    mask = None if rows is None else rows.to(sim.device)
    score = adjacency_probability(sim, lengths=lengths.to(sim.device), ties=ties, rows=mask)
    return score.double().cpu()


def check_rows(rows: Tensor | None, batch: int, n: int) -> None:
    """`rows` is None or a boolean mask of shape (batch, n), one flag per token."""
    if rows is not None and (rows.dtype != torch.bool or tuple(rows.shape) != (batch, n)):
        raise UsageError(
            f"rows must be a boolean mask of shape {(batch, n)} (one flag per token), got "
            f"{rows.dtype} {tuple(rows.shape)}"
        )


def _layer_stream(
    model_or_cache: Any,
    tokens: TokenInput | None,
    site: str,
    batch_size: int | None,
    progress: bool | None,
) -> tuple[Iterable[tuple[int, Tensor]], int, int]:
    """``(layer, activations)`` of every layer of `site`, from a cache or streamed from a
    model's forward passes, and the batch and sequence sizes."""
    if _is_cache(model_or_cache):
        if tokens is not None or batch_size is not None:
            raise TypeError(
                "adjacency_score(cache) reads the activations from the cache: pass no tokens "
                "and no batch_size (the run that made the cache decided them)"
            )
        layers = _cached_layers(model_or_cache, site)
        batch, n = layers[0][1].shape[:2]
        return iter(layers), batch, n
    if tokens is None:
        raise TypeError(
            "adjacency_score(model) needs tokens: adjacency_score(model, tokens), or pass "
            "the ActivationCache of model.run_with_cache(tokens) alone"
        )
    model = model_or_cache
    tokens = check_tokens(model, tokens)
    n_capture_layers(model, site)  # checks the site before any forward pass
    stream = iter_residuals(model, tokens, site=site, batch_size=batch_size, progress=progress)
    return stream, *tokens.shape


def _is_cache(obj: Any) -> bool:
    from transformer_lens import ActivationCache

    return isinstance(obj, ActivationCache)


def _cached_layers(cache: Any, site: str) -> list[tuple[int, Tensor]]:
    """``(layer, activations[batch, pos, d_model])`` of every layer of `site` in `cache`."""
    model = getattr(cache, "model", None)
    if getattr(model, "cfg", None) is not None:
        n = n_capture_layers(model, site)
    else:  # the cache's model was dropped: score the blocks the cache holds
        if site not in SITES:
            raise UsageError(f"site={site!r} is not allowed; choose one of {list(SITES)}")
        n = _blocks_in(cache.cache_dict) + (site == "resid_post")
    names = [hook_name(site, layer) for layer in range(n)]
    missing = [name for name in names if name not in cache.cache_dict]
    if missing or not names:
        raise UsageError(
            f"the cache lacks the hooks of site={site!r}: missing {missing or names}; run "
            "model.run_with_cache(tokens) without a names_filter or stop_at_layer that drops "
            "them (or score the model itself)"
        )
    acts = [cache.cache_dict[name].detach() for name in names]
    if not cache.has_batch_dim:
        acts = [a[None] for a in acts]
    return list(enumerate(acts))


def _blocks_in(keys: Iterable[str]) -> int:
    found = [int(m.group(1)) for k in keys if (m := re.match(r"blocks\.(\d+)\.", k))]
    return max(found) + 1 if found else 0
