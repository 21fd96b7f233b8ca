"""Position and context parts of hidden states (Song and Zhong, 2024, arXiv 2310.04861).

Each hidden state h[c, t] (sequence c, position t < length_c) is split by mean effects:

    h[c, t] = mean + position[t] + context[c] + residual[c, t]

    mean        = the mean of h over every valid (c, t)
    position[t] = the mean over the sequences c that reach position t of h[c, t] - mean
    context[c]  = the mean over t < length_c of h[c, t] - mean - position[t]
    residual    = h[c, t] - mean - position[t] - context[c]   (zero at padding)

`position` is the curve every sequence shares, `context` what one sequence adds at all of its
positions. When every sequence has every position (the balanced case) the four parts are
orthogonal over the valid entries, so their sums of squares add up to that of the states (a
two-way analysis of variance without replication); with unequal lengths they need not be.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.metrics.adjacency import DEFAULT_TIES, adjacency_probability
from adjpos.metrics.checks import check_finite, check_lengths, check_ties
from adjpos.metrics.cosine import cosine_matrix
from adjpos.validation import UsageError, is_int

PARTS = ("mean", "position", "context", "residual")


@dataclass(frozen=True)
class Decomposition:
    """The four parts of a batch of hidden states (see `decompose`)."""

    mean: Float[Tensor, " d_model"]
    position: Float[Tensor, "pos d_model"]  # zero at positions no sequence reaches
    context: Float[Tensor, "batch d_model"]
    residual: Float[Tensor, "batch pos d_model"]  # zero at padding
    lengths: Int[Tensor, " batch"]

    @property
    def valid(self) -> Bool[Tensor, "batch pos"]:
        """Which (sequence, position) entries are real: position < length."""
        positions = torch.arange(self.residual.shape[1], device=self.lengths.device)
        return positions < self.lengths[:, None]

    @property
    def counts(self) -> Int[Tensor, " pos"]:
        """How many sequences reach each position (the weight of position[t])."""
        return self.valid.sum(dim=0)

    def reconstruct(self) -> Float[Tensor, "batch pos d_model"]:
        """mean + position[t] + context[c] + residual[c, t]: the states at every valid
        position, zeros at padding."""
        whole = self.mean + self.position + self.context[:, None] + self.residual
        return whole * self.valid[..., None].to(whole.dtype)

    def variance_shares(self) -> dict[str, float]:
        """Each part's sum of squares over the valid entries, divided by the sum of the four.

        The mean counts once per valid entry, position[t] once per sequence that reaches t,
        context[c] once per valid position of c. In the balanced case the parts are
        orthogonal, so each share is exactly the part's share of the states' total
        (uncentred) sum of squares; with unequal lengths they are not exactly orthogonal,
        and the shares are of the parts' total. They always sum to 1 (NaN for all-zero
        states).
        """
        squares = {
            "mean": self.lengths.sum() * self.mean.square().sum(),
            "position": (self.counts[:, None] * self.position.square()).sum(),
            "context": (self.lengths[:, None] * self.context.square()).sum(),
            "residual": self.residual.square().sum(),
        }
        total = sum(squares.values())
        return {part: float(value / total) for part, value in squares.items()}


def decompose(
    states: Float[Tensor, "batch pos d_model"], lengths: Int[Tensor, " batch"] | None = None
) -> Decomposition:
    """Split hidden states into mean, position, context and residual parts.

    h[c, t] = mean + position[t] + context[c] + residual[c, t], each part a mean effect over
    the valid entries (t < length_c): see the module's docstring for the formulas. The
    states are recovered exactly (`Decomposition.reconstruct`); half-precision states are
    upcast to float32 first.

    Args:
        states: hidden states of a batch of right-padded sequences.
        lengths: true length of each sequence (default: every sequence has all `pos`
            positions, the balanced case). Padding never enters a mean.

    Raises:
        ValueError: `states` is not [batch, pos, d_model] with every size at least 1 or holds
            NaN or inf; `lengths` is not one int per sequence in [1, pos].

    Example:
        >>> curve = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])  # sums to zero
        >>> states = curve + torch.tensor([[[2.0, 2.0]], [[0.0, 0.0]]])  # 2 sequences
        >>> parts = decompose(states)
        >>> parts.mean, parts.context
        (tensor([1., 1.]), tensor([[ 1.,  1.],
                [-1., -1.]]))
        >>> torch.equal(parts.position, curve), float(parts.residual.abs().max())
        (True, 0.0)
        >>> parts.variance_shares()
        {'mean': 0.375, 'position': 0.25, 'context': 0.375, 'residual': 0.0}
    """
    check_finite(states, "states")
    if states.ndim != 3 or 0 in states.shape:
        raise UsageError(
            "states must have shape [batch, pos, d_model] with every size at least 1, got "
            f"{tuple(states.shape)}"
        )
    batch, n, _ = states.shape
    lens = check_lengths(lengths, (batch,), n).to(states.device)
    h = states.float() if states.dtype in (torch.float16, torch.bfloat16) else states
    valid = (torch.arange(n, device=h.device) < lens[:, None])[..., None].to(h.dtype)
    mean = (h * valid).sum(dim=(0, 1)) / lens.sum()
    centred = (h - mean) * valid
    position = centred.sum(dim=0) / valid.sum(dim=0).clamp_min(1)
    context = (centred - position * valid).sum(dim=1) / lens[:, None]
    residual = centred - (position + context[:, None]) * valid
    return Decomposition(mean, position, context, residual, lens)


@dataclass(frozen=True)
class PositionCurvePCs:
    """The principal directions of the position curve, largest first (see
    `position_curve_pcs`)."""

    explained_variance_ratio: Float[Tensor, " k"]
    components: Float[Tensor, "k d_model"]


def position_curve_pcs(decomposition: Decomposition, k: int | None = None) -> PositionCurvePCs:
    """Principal components of the position curve position[t]: is it low-dimensional?

    Each position counts with the number of sequences that reach it, as in
    `Decomposition.variance_shares`, so the ratios split the position part's sum of squares
    (whose weighted mean over positions is zero by construction: no centring is needed).
    The ratios of all components sum to 1; they are NaN when the curve is zero.

    Args:
        decomposition: from `decompose`.
        k: how many components (default: all, min(pos, d_model)).

    Raises:
        ValueError: `k` is not an int in [1, min(pos, d_model)].

    Example:
        >>> t = torch.arange(6.0)[:, None]
        >>> offsets = torch.randn(4, 1, 3, generator=torch.Generator().manual_seed(0))
        >>> states = (t - 2.5) * torch.tensor([[1.0, 2.0, 0.0]]) + offsets  # a line, 4 sequences
        >>> position_curve_pcs(decompose(states), k=2).explained_variance_ratio.round(decimals=3)
        tensor([1., 0.])
    """
    n, d = decomposition.position.shape
    if k is None:
        k = min(n, d)
    if not is_int(k) or not 1 <= k <= min(n, d):
        raise UsageError(f"k must be an int in [1, {min(n, d)}] (min of pos, d_model), got {k!r}")
    weights = decomposition.counts.to(decomposition.position.dtype).sqrt()
    _, values, directions = torch.linalg.svd(
        decomposition.position * weights[:, None], full_matrices=False
    )
    squares = values.square()
    return PositionCurvePCs(squares[:k] / squares.sum(), directions[:k])


@dataclass(frozen=True)
class PositionContextAdjacency:
    """Adjacency scores of the parts of a decomposition (see `position_context_adjacency`)."""

    position: Float[Tensor, ""]  # the position curve, one score
    rest: Float[Tensor, " batch"]  # context + residual, per sequence
    whole: Float[Tensor, " batch"]  # position + context + residual, per sequence


def position_context_adjacency(
    decomposition: Decomposition, *, ties: str = DEFAULT_TIES
) -> PositionContextAdjacency:
    """The adjacency score of the position curve alone, and of the rest of each sequence.

    Every score is `adjacency_probability` of a self-cosine matrix (`cosine_matrix`), with
    the mean removed from all three so that they are comparable:

    - ``position``: the curve position[t] over the positions some sequence reaches, one
      score (a curve that rises smoothly with t scores near 1);
    - ``rest``: context[c] + residual[c, t], each sequence over its own positions: the
      states minus the mean and the position part;
    - ``whole``: position[t] + context[c] + residual[c, t], the states minus the mean.

    Args:
        decomposition: from `decompose`.
        ties: "strict" or "half" (see `adjacency_rows`).

    Raises:
        ValueError: a sequence is shorter than 3 positions (no defined adjacency row).

    Example:
        >>> t = torch.arange(8.0)[:, None]
        >>> curve = torch.cat([torch.cos(t / 4), torch.sin(t / 4)], dim=1)  # a smooth arc
        >>> noise = torch.randn(16, 8, 2, generator=torch.Generator().manual_seed(0))
        >>> scores = position_context_adjacency(decompose(curve + 0.1 * noise))
        >>> [round(float(s.mean()), 3) for s in (scores.position, scores.rest, scores.whole)]
        [0.946, 0.481, 0.854]
    """
    check_ties(ties)
    parts = decomposition
    reached = int(parts.lengths.max())
    curve = parts.position[:reached]
    rest = parts.context[:, None] + parts.residual
    score = adjacency_probability(cosine_matrix(curve), ties=ties)
    rest_score = adjacency_probability(cosine_matrix(rest), lengths=parts.lengths, ties=ties)
    whole = adjacency_probability(
        cosine_matrix(rest + parts.position), lengths=parts.lengths, ties=ties
    )
    return PositionContextAdjacency(score, rest_score, whole)
