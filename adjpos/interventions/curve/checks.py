"""Manipulation checks of the position-curve arms (`arms`): what a change did to the thing
its name says it changes, one number each. They are numbers only: the study judges them
(`adjpos.study.rules.check_passed`, thresholds in `adjpos.study.claim.Criteria`), and a row
whose change did not do what its name says is reported and not counted. They read the curve
(its distances, `curve_distance_change`; where its changed points sit on the unchanged curve,
`curve_offset`; its locality, `curve_adjacency`), the changed states (their adjacency,
`prompt_adjacency`; as seen from the read-out, `readout_similarity_spearman`) and a position
probe (`probe_accuracy`, `probe_offset`).
Every adjacency here uses the library's one tie rule (`adjpos.metrics.adjacency_probability`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.scoring import sequence_scores
from adjpos.stats import spearman_rows
from adjpos.validation import UsageError


def curve_distance_change(
    curve: Float[Tensor, "pos d_model"],
    new_curve: Float[Tensor, "pos d_model"],
    changed: Bool[Tensor, " pos"],
) -> float:
    """||D' - D|| / ||D|| (Frobenius) with D[i, j] = ||c[i] - c[j]|| over the pairs of
    changed positions (0 when the curves of the changed positions keep every distance; NaN
    for fewer than two changed positions or a constant curve)."""
    index = changed.nonzero().flatten()
    before = torch.cdist(curve[index].double(), curve[index].double())
    after = torch.cdist(new_curve[index].double(), new_curve[index].double())
    scale = float(before.norm())
    if len(index) < 2 or scale == 0:
        return float("nan")
    return float((after - before).norm()) / scale


def curve_offset(
    curve: Float[Tensor, "pos d_model"],
    new_curve: Float[Tensor, "pos d_model"],
    changed: Bool[Tensor, " pos"],
    *,
    absolute: bool = False,
) -> float:
    """The mean over the changed positions t of s(t) - t, s(t) the position whose point of
    the unchanged curve is nearest c'[t] (-k after a full shift by k away from the clamp; 0
    for a change that leaves each point nearest its own); with `absolute`, of |s(t) - t|: how
    far the changed points moved along the unchanged curve. NaN without a changed position."""
    index = changed.nonzero().flatten()
    moves = (torch.cdist(new_curve[index].double(), curve.double()).argmin(dim=1) - index).double()
    return (moves.abs() if absolute else moves).mean().item()


def curve_adjacency(curve: Float[Tensor, "pos d_model"], changed: Bool[Tensor, " pos"]) -> float:
    """The locality of the curve itself over the changed positions: the adjacency score
    (`adjpos.metrics.adjacency_probability`) of minus the distances between its points, how
    often a nearer position's point is nearer; 1 for a curve whose distances grow with the
    gap between positions, about 0.5 for scattered points. Distances, not cosines: the curve
    is centred over positions, so its cosines depend on where that centre falls. NaN for
    fewer than 3 changed positions."""
    index = changed.nonzero().flatten()
    if len(index) < 3:
        return float("nan")
    points = curve[index].double()
    return float(adjacency_probability(-torch.cdist(points, points)))


def varying_positions(tokens: Int[Tensor, "n pos"]) -> Bool[Tensor, " pos"]:
    """The positions whose token differs between prompts of one length. At a position that
    always holds the same token (a prompt format's ``rev(``) the token's mean state takes the
    position's too, so the curve there is a point shared by every such position, and
    locality is measured without them."""
    return (tokens != tokens[:1]).any(dim=0).cpu()


def prompt_adjacency(
    states: Float[Tensor, "batch pos d_model"], changed: Bool[Tensor, " pos"]
) -> Float[Tensor, " batch"]:
    """Each sequence's adjacency score over the rows of its changed positions (each row
    looking at every earlier position), by `adjpos.scoring.sequence_scores`; NaN for a
    sequence without a defined changed row (fewer than 3 positions)."""
    batch, pos, _ = states.shape
    rows = changed.to(torch.bool).expand(batch, pos).clone()
    lengths = torch.full((batch,), pos, dtype=torch.long)
    return sequence_scores(states.double(), lengths, rows=rows)


def readout_similarity_spearman(
    states: Float[Tensor, "batch pos d_model"], readout: int
) -> np.ndarray:
    """[batch] for each sequence, the Spearman correlation between cos(h[readout], h[j]) and
    the distance readout - j over the earlier positions j < readout (negative when nearer
    states are more similar; NaN with fewer than 2 earlier positions or constant cosines)."""
    if not 0 <= readout < states.shape[1]:
        raise UsageError(f"readout must be a position in [0, {states.shape[1] - 1}]")
    if readout < 2:
        return np.full(states.shape[0], np.nan)
    similarity = cosine_matrix(states.double())[:, readout, :readout].numpy()
    # spearman() correlates with the index j; the distance readout - j runs the other way
    return -spearman_rows(similarity)


def probe_accuracy(
    probe: Any, states: Float[Tensor, "batch pos d_model"], changed: Bool[Tensor, " pos"]
) -> float:
    """The share of the changed states whose position `probe` (anything with
    ``predict(X) -> positions``, fitted on unchanged states) reads right."""
    predicted, true = _probe_read(probe, states, changed)
    return float((predicted == true).mean())


def probe_offset(
    probe: Any, states: Float[Tensor, "batch pos d_model"], changed: Bool[Tensor, " pos"]
) -> float:
    """The mean of predicted minus true position over the changed states (-k for states that
    carry the curve of position t - k and a probe that reads it)."""
    predicted, true = _probe_read(probe, states, changed)
    return float((predicted - true).mean())


def _probe_read(probe: Any, states: Tensor, changed: Tensor) -> tuple[np.ndarray, np.ndarray]:
    index = changed.nonzero().flatten()
    x = states[:, index].reshape(-1, states.shape[-1]).double().cpu().numpy()
    true = index.repeat(states.shape[0]).numpy()
    return np.asarray(probe.predict(x)).reshape(-1).astype(float), true.astype(float)
