"""Order reconstruction: recover a sequence's token order from its hidden states alone.

The leak-free form of the claim that nearby similarity lets a model reconstruct positions. Each
sequence's hidden states are first put in a random order (so no method can fall back on the
index, not even to break a tie), then ranked by

- ``spectral_seriation`` of the cosine matrix: the order of the Fiedler vector of the graph
  Laplacian L = D - W, W = (C + 1) / 2 (Atkins, Boman and Hendrickson, 1998), exact when
  similarity falls away from the diagonal; the self-similarity cancels in D - W. It uses all
  pairs, later tokens included.
- ``variance_sort``: the states sorted by their variance over d_model (Chi et al.).
- ``first_similarity_sort``: the states sorted by their cosine similarity to the first
  state, the backward-only variant of the seriation, scored over the other n - 1 states.

Each order is known only up to reversal, so the score is |tau|, Kendall's tau between the
recovered and the true order in absolute value; chance is E|tau| over random orders,
computed exactly by `expected_abs_tau` (about 0.1 for 32 tokens, not 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.capture import check_layers, check_tokens, iter_residuals
from adjpos.engines import small_work_threads
from adjpos.metrics import cosine_matrix, position_variance
from adjpos.probes.compare import SequenceScores
from adjpos.probes.features import random_orders, shuffle_positions
from adjpos.probes.result import ProbeResult, ProbeScore
from adjpos.types import TokenInput
from adjpos.validation import UsageError, check_model

ORDER_METHODS = {
    "spectral_seriation": "cosine_matrix",
    "variance_sort": "variance",
    "first_similarity_sort": "cosine_first",
}
BACKWARD_METHODS = ("variance_sort", "first_similarity_sort")
ORDER_METRIC = "abs_kendall_tau"


def spectral_order(sim: Float[Tensor, "*batch pos pos"]) -> Int[Tensor, "*batch pos"]:
    """Rank of each position along the Fiedler vector of W = (sim + 1) / 2 (spectral seriation).

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.4], [0.5, 0.9], [0.0, 1.0]])
        >>> rank = spectral_order(cosine_matrix(x)[[2, 0, 3, 1]][:, [2, 0, 3, 1]])
        >>> rank.tolist() in ([2, 0, 3, 1], [1, 3, 0, 2])
        True
    """
    weights = (sim.double() + 1) / 2
    laplacian = torch.diag_embed(weights.sum(dim=-1)) - weights
    _, vectors = torch.linalg.eigh(laplacian)
    return _ranks(vectors[..., 1])


def variance_order(acts: Float[Tensor, "*batch pos d_model"]) -> Int[Tensor, "*batch pos"]:
    """Rank of each position by decreasing variance over d_model (ties: the earlier index)."""
    return _ranks(-position_variance(acts).double())


def kendall_tau(
    ranks: Int[Tensor, "*batch pos"], truth: Int[Tensor, "*batch pos"]
) -> Float[Tensor, "*batch"]:
    """Kendall's tau between two orderings of the same positions (tau-a; no ties expected).

    Example:
        >>> kendall_tau(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 3, 2]))
        tensor(0.6667, dtype=torch.float64)
    """
    n = ranks.shape[-1]
    a = torch.sign(ranks[..., :, None] - ranks[..., None, :])
    b = torch.sign(truth[..., :, None] - truth[..., None, :])
    return (a * b).sum(dim=(-1, -2)).double() / (n * (n - 1))


def expected_abs_tau(n: int) -> float:
    """E|tau| between a fixed order of `n` items and a uniformly random one, exactly.

    The number of inversions of a random permutation has the Mahonian distribution, built
    here one item at a time; tau = 1 - 4 * inversions / (n (n - 1)).

    Example:
        >>> round(expected_abs_tau(3), 4)  # taus 1, 1/3, 1/3, -1/3, -1/3, -1: mean |tau| 5/9
        0.5556
    """
    if not isinstance(n, int) or n < 2:
        raise UsageError(f"n must be an int >= 2, got {n!r}")
    probs = np.ones(1)
    for m in range(2, n + 1):  # adding item m adds 0..m-1 inversions, uniformly
        cumulative = np.concatenate([[0.0], np.cumsum(probs)])
        size = len(probs) + m - 1
        upper = np.minimum(np.arange(size) + 1, len(probs))
        lower = np.maximum(np.arange(size) - m + 1, 0)
        probs = (cumulative[upper] - cumulative[lower]) / m
    taus = 1 - 4 * np.arange(len(probs)) / (n * (n - 1))
    return float((probs * np.abs(taus)).sum())


def reconstruct_order(
    model: Any,
    tokens: TokenInput,
    *,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    model_name: str = "model",
    batch_size: int | None = None,
    progress: bool | None = None,
) -> ProbeResult:
    """|Kendall's tau| of the order recovered from shuffled hidden states, per layer.

    Args:
        tokens: token ids [batch, pos]: sequences of one length, at least 3 tokens.
        seed: seed of the per-sequence shuffles.
        model, layers, model_name, batch_size, progress: as in `adjpos.probe_positions`.

    Returns:
        A `ProbeResult`, features and probe from `ORDER_METHODS`, metric "abs_kendall_tau":
        the mean over the sequences, their std and sem, baseline `expected_abs_tau`.
    """
    with small_work_threads(check_model(model)):
        tokens, layers = _check_order(model, tokens, layers)
        batch, n = tokens.shape
        baselines = {
            m: expected_abs_tau(n - 1 if m == "first_similarity_sort" else n) for m in ORDER_METHODS
        }
        scores = []
        for layer, taus in _layer_taus(model, tokens, layers, seed, batch_size, progress):
            for method, tau in taus.items():
                std = float(tau.std()) if batch > 1 else math.nan
                keys = (layer, ORDER_METHODS[method], method, ORDER_METRIC)
                backward, sem = method in BACKWARD_METHODS, std / math.sqrt(batch)
                score = ProbeScore(*keys, float(tau.mean()), baselines[method], std, backward, sem)
                scores.append(score)
        return ProbeResult(model_name, tuple(scores), batch, n, cv=0, seeds=(seed,))


def order_scores(
    model: Any,
    tokens: TokenInput,
    *,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    drop_first: bool = False,
    batch_size: int | None = None,
) -> dict[str, SequenceScores]:
    """Each method's |Kendall's tau| per sequence and layer, for paired comparisons
    (`adjpos.probes.compare.compare_scores`): every method ranks the same shuffled states of
    the same sequences.

    Args:
        model, tokens, layers, seed, batch_size: as in `reconstruct_order`.
        drop_first: every method ranks only the n - 1 states the first-similarity sort ranks
            (position 0 left out), so all are compared on the same positions.

    Returns:
        ``{method: SequenceScores}`` (features: the method's name, probe: "order", metric
        "abs_kendall_tau"), one entry per `ORDER_METHODS` method.
    """
    tokens, layers = _check_order(model, tokens, layers)
    taus: dict[str, list[np.ndarray]] = {method: [] for method in ORDER_METHODS}
    found = []
    stream = _layer_taus(model, tokens, layers, seed, batch_size, False, drop_first)
    for layer, per_method in stream:
        found.append(layer)
        for method, tau in per_method.items():
            taus[method].append(tau.numpy())
    first = {method: 1 if drop_first else 0 for method in ORDER_METHODS}
    first["first_similarity_sort"] = 1
    scores = {}
    for method, values in taus.items():
        per_layer = np.stack(values, axis=1)  # [sequence, layer]
        sums = np.stack([np.ones_like(per_layer), per_layer], axis=-1)
        positions = f"{first[method]}..{tokens.shape[1] - 1}"
        statistics = ("count", ORDER_METRIC)
        scores[method] = SequenceScores(method, "order", tuple(found), positions, statistics, sums)
    return scores


def _layer_taus(model, tokens, layers, seed, batch_size, progress, drop_first=False):
    """(layer, {method: |tau| of each sequence}) for every layer, from one forward pass."""
    batch, n = tokens.shape
    truth = random_orders(batch, n, seed=seed)
    # The first-similarity sort ranks the n - 1 states that are not the first one.
    # Their slots, in slot order (random), so a tie is not broken by the true position.
    others = (truth == 0).int().argsort(dim=1, stable=True)[:, :-1]
    rows = torch.arange(batch)
    stream = iter_residuals(model, tokens, layers=layers, batch_size=batch_size, progress=progress)
    for layer, acts in stream:
        shuffled = shuffle_positions(acts.cpu(), seed=seed)  # slot s holds position truth[s]
        sim = cosine_matrix(shuffled)
        first = truth.argmin(dim=1)  # the slot holding position 0
        to_first = sim[rows, first].gather(1, others)
        ranked, true_rank = (shuffled, sim), truth
        if drop_first:
            kept = others[..., None]
            rows_kept = sim.gather(1, kept.expand(-1, -1, n))
            ranked = (
                shuffled.gather(1, kept.expand(-1, -1, shuffled.shape[-1])),
                rows_kept.gather(2, others[:, None, :].expand(-1, n - 1, -1)),
            )
            true_rank = truth.gather(1, others)
        ranks = {
            "spectral_seriation": (spectral_order(ranked[1]), true_rank),
            "variance_sort": (variance_order(ranked[0]), true_rank),
            "first_similarity_sort": (_ranks(-to_first.double()), truth.gather(1, others)),
        }
        yield layer, {m: kendall_tau(r, t).abs() for m, (r, t) in ranks.items()}


def _check_order(model: Any, tokens: TokenInput, layers: Sequence[int] | None):
    """The checked tokens and layers: sequences of one length, at least 3 tokens."""
    tokens = check_tokens(model, tokens)
    layers = check_layers(model, "resid_post", layers)
    if tokens.shape[1] < 3:
        raise UsageError(
            f"order reconstruction needs sequences of at least 3 tokens, got {tokens.shape[1]}"
        )
    return tokens, layers


def _ranks(values: Tensor) -> Tensor:
    return values.argsort(dim=-1, stable=True).argsort(dim=-1)
