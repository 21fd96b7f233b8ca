"""Model-level scores: each layer scored inside its hook during one forward pass (or read from a
cache), with the pure metrics."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any, no_type_check

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.capture import SITES, check_tokens, hook_name, n_capture_layers, reduce_residuals
from adjpos.metrics import (
    DEFAULT_TIES,
    adjacency_probability,
    center_states,
    cosine_matrix,
    states_precision,
)
from adjpos.metrics.checks import TIES, check_lengths, check_scorable, check_ties
from adjpos.types import TokenInput
from adjpos.validation import UsageError, check_choice, check_model, is_int

# Every layer's states are scored in float64, whatever dtype the model runs in: a cosine
# summed in float32 carries a rounding error that grows with d_model (several float32
# epsilons at d_model = 64, more on a language model's width), beyond the tie tolerance,
# while in float64 it carries only the states' own rounding, which the tolerance covers
# (`adjpos.metrics.tie_tolerance`). The cost on the CPU is in docs/benchmarks.md.
SCORE_DTYPE = torch.float64


def adjacency_score(
    model_or_cache: Any,
    tokens: TokenInput | None = None,
    *,
    lengths: Int[Tensor, " batch"] | None = None,
    site: str = "resid_post",
    batch_size: int | None = None,
    progress: bool | None = None,
    ties: str = DEFAULT_TIES,
    center: bool = False,
    rows: Bool[Tensor, "batch pos"] | None = None,
    per_sequence: bool = False,
    skip_first: int = 0,
) -> Float[Tensor, " layer"] | Float[Tensor, "layer batch"]:
    """The model's adjacency score at every layer: the mean matrix score over sequences.

    Works on any TransformerLens model, or on the `ActivationCache` of a run you already
    made: ``adjacency_score(model.run_with_cache(tokens)[1])`` equals
    ``adjacency_score(model, tokens)``. A model is run once (per `batch_size` chunk): each
    layer is scored inside its hook (`adjpos.capture.reduce_residuals`), so time is one
    forward pass and memory one layer deep, whatever the depth. One value per layer of `site`,
    numbered as in `adjpos.capture_residuals` (n_layers + 1 for resid_post, 0 = embeddings).

    The layer's score is the plain mean over the sequences of their matrix scores S_b
    (`adjpos.adjacency_probability`), each sequence weighing the same whatever its length.

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
        ties: "strict" (the study's definition) or "half" (see `adjpos.adjacency_rows`).
        center: subtract each sequence's mean hidden state (over its real positions) before
            the cosine, so a direction every state shares does not enter the similarities.
        rows: [batch, pos] mask of the rows k to score (e.g. `TaskBatch.answer_rows`); each
            row still looks at every earlier position. Sequences with no selected row are
            left out of the mean.
        per_sequence: return S_b itself, [layer, batch] (NaN for a sequence without a
            selected row), e.g. to bootstrap an interval over the sequences.
        skip_first: score each sequence as if it began at position K (an attention sink such
            as a BOS token left out), so it needs at least K + 3 tokens.

    Returns:
        Float64 tensor [layer] on the CPU; [layer, batch] with `per_sequence`.

    Raises:
        ValueError: too short sequences, bad tokens or lengths, non-finite activations, or a
            cache without the hooks of `site`.
        TypeError: a model without tokens, a cache with tokens or a batch_size, or a
            `center` or `per_sequence` that is not a bool.
    """
    check_ties(ties)
    for name, flag in (("center", center), ("per_sequence", per_sequence)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    options = {"ties": ties, "center": center, "skip_first": skip_first}
    from transformer_lens import ActivationCache

    if isinstance(model_or_cache, ActivationCache):
        cached = _cached_layers(model_or_cache, site, tokens, batch_size)
        lens = _check_batch(cached[0][1].shape[:2], lengths, rows, skip_first)
        scores = [_layer_scores(x, site, acts, lens, rows, options) for x, acts in cached]
    else:
        tokens = _model_tokens(model_or_cache, tokens, site)
        lens = _check_batch(tokens.shape, lengths, rows, skip_first)

        @no_type_check  # made at every call: kept out of the tests' type checker
        def score(layer: int, acts: Tensor, seqs: slice) -> Tensor:
            picked = None if rows is None else rows[seqs]
            return _layer_scores(layer, site, acts, lens[seqs], picked, options)

        parts = reduce_residuals(
            model_or_cache, tokens, score, site=site, batch_size=batch_size, progress=progress
        )
        scores = [torch.cat(chunks) for chunks in parts.values()]
    stacked = torch.stack(scores)
    return stacked if per_sequence else stacked.nanmean(dim=1)


def sequence_scores(
    states: Float[Tensor, "batch pos d_model"],
    lengths: Int[Tensor, " batch"],
    *,
    ties: str = DEFAULT_TIES,
    center: bool = False,
    rows: Bool[Tensor, "batch pos"] | None = None,
    skip_first: int = 0,
) -> Float[Tensor, " batch"]:
    """The adjacency score S_b of each sequence of one layer's `states`, float64 on the CPU:
    the step `adjacency_score` and `adjpos.measure_layers` apply to every layer. The states
    are taken to float64 (`SCORE_DTYPE`) where they are, the first `skip_first` positions
    dropped, centred with `center` (`adjpos.metrics.center_states`), then the mean of the rows
    that `rows` selects (NaN for a sequence with none). Ties are decided at the states' own
    precision (`adjpos.metrics.states_precision`), so rescaling a state leaves the score as it
    was.

    Example:
        >>> states = torch.randn(4, 10, 16, generator=torch.Generator().manual_seed(0))
        >>> sequence_scores(states, torch.tensor([10, 10, 7, 3])).shape
        torch.Size([4])
    """
    precision = states_precision(states)
    states = states.to(SCORE_DTYPE)
    if skip_first:
        states, lengths = states[:, skip_first:], lengths - skip_first
        rows = None if rows is None else rows[:, skip_first:]
    if center:
        states = center_states(states, lengths.to(states.device))
    sim = cosine_matrix(states)
    mask = None if rows is None else rows.to(sim.device)
    lengths = lengths.to(sim.device)
    score = adjacency_probability(sim, lengths=lengths, ties=ties, rows=mask, precision=precision)
    return score.double().cpu()


VIEW_ROWS = ("all", "prompt", "answer")


def sequence_views(
    model: Any, tokens: Tensor, lengths: Tensor, masks: dict[str, Tensor | None]
) -> Iterator[tuple[int, dict[tuple[str, bool, str], Any], dict[bool, Any]]]:
    """Per layer of `model` on `tokens`: each sequence's adjacency in every (rows, centred,
    ties) view (`sequence_scores`, rows from `masks` {"all", "prompt", "answer": mask or None};
    NaN where a sequence has no row of the view), and each sequence's mean cosine between two
    different real positions, as they are and centred (numpy arrays)."""
    from adjpos.capture import iter_residuals

    n = tokens.shape[1]
    k = torch.arange(n)
    real_pairs = (k[None, :] < k[:, None]) & (k[:, None] < lengths[:, None, None])  # i < k
    for layer, acts in iter_residuals(model, tokens, progress=False):
        acts, views, cosines = acts.double(), {}, {}
        for centred in (False, True):
            states = center_states(acts, lengths.to(acts.device)) if centred else acts
            sim, pairs = cosine_matrix(states), real_pairs.to(acts.device)
            cosines[centred] = ((sim * pairs).sum((1, 2)) / pairs.sum((1, 2))).cpu().numpy()
            for ties, rows in itertools.product(TIES, VIEW_ROWS):
                views[rows, centred, ties] = sequence_scores(
                    acts, lengths, ties=ties, center=centred, rows=masks[rows]
                ).numpy()
        yield layer, views, cosines


def check_rows(rows: Tensor | None, batch: int, n: int) -> None:
    """`rows` is None or a boolean mask of shape (batch, n), one flag per token."""
    if rows is not None and (rows.dtype != torch.bool or tuple(rows.shape) != (batch, n)):
        raise UsageError(
            f"rows must be a boolean mask of shape {(batch, n)} (one flag per token), got "
            f"{rows.dtype} {tuple(rows.shape)}"
        )


def check_skip_first(skip_first: Any, lengths: Tensor) -> int:
    """`skip_first` is an int K >= 0 that leaves every sequence at least 3 positions."""
    if not is_int(skip_first) or skip_first < 0:
        raise UsageError(
            f"skip_first must be an int >= 0 (positions to leave out), got {skip_first!r}"
        )
    shortest = int(lengths.min())
    if skip_first and shortest - skip_first < 3:
        raise UsageError(
            f"skip_first={skip_first} leaves {shortest - skip_first} positions of the shortest "
            f"sequence ({shortest} tokens); the adjacency score needs at least 3: use "
            f"skip_first <= {max(shortest - 3, 0)} or longer sequences"
        )
    return int(skip_first)


def _layer_scores(layer, site, acts, lengths, rows, options) -> Tensor:
    """`sequence_scores` of one layer, its errors naming the layer."""
    try:
        return sequence_scores(acts, lengths, rows=rows, **options)
    except UsageError as err:
        raise UsageError(f"layer {layer} ({site}): {err}") from None


def _check_batch(shape: Any, lengths: Tensor | None, rows: Tensor | None, skip: Any) -> Tensor:
    """The lengths of a [batch, n] run, checked with `rows` and `skip_first`, before any
    forward pass."""
    batch, n = shape
    lens = check_lengths(lengths, (batch,), n)
    check_scorable(lens)
    check_rows(rows, batch, n)
    check_skip_first(skip, lens)
    return lens


def _model_tokens(model: Any, tokens: TokenInput | None, site: str) -> Tensor:
    """The tokens to score `model` on, checked with `site` before any forward pass."""
    if tokens is None:
        raise TypeError(
            "adjacency_score(model) needs tokens: adjacency_score(model, tokens), or pass "
            "the ActivationCache of model.run_with_cache(tokens) alone"
        )
    check_model(model, "model_or_cache", cache=True)
    tokens = check_tokens(model, tokens)
    n_capture_layers(model, site)
    return tokens


def _cached_layers(
    cache: Any, site: str, tokens: Any, batch_size: int | None
) -> list[tuple[int, Tensor]]:
    """``(layer, activations[batch, pos, d_model])`` of every layer of `site` in `cache`."""
    if tokens is not None or batch_size is not None:
        raise TypeError(
            "adjacency_score(cache) reads the activations from the cache: pass no tokens "
            "and no batch_size (the run that made the cache decided them)"
        )
    model = getattr(cache, "model", None)
    if getattr(model, "cfg", None) is not None:
        n = n_capture_layers(model, site)
    else:  # the cache's model was dropped: score the blocks the cache holds
        check_choice("site", site, SITES)
        found = [int(m[1]) for k in cache.cache_dict if (m := re.match(r"blocks\.(\d+)\.", k))]
        n = (max(found) + 1 if found else 0) + (site == "resid_post")
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
