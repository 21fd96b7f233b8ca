"""Position and context parts of hidden states (Song and Zhong, 2024, arXiv 2310.04861).

Each hidden state h[c, t] (sequence c, position t < length_c) is split by mean effects:

    h[c, t] = mean + position[t] + context[c] + residual[c, t]

    mean        = the mean of h over every valid (c, t)
    position[t] = the mean over the sequences c that reach position t of h[c, t] - mean
    context[c]  = the mean over t < length_c of h[c, t] - mean - position[t]
    residual    = h[c, t] - mean - position[t] - context[c]   (zero at padding)

`position` is the curve every sequence shares; `context` is the per-sequence mean (what one
sequence adds at all of its positions, whatever its tokens: not a context in any other
sense). When every sequence has every position (the balanced case) the four parts are
orthogonal over the valid entries, so their sums of squares add up to that of the states (a
two-way analysis of variance without replication); with unequal lengths they need not be.

A part fitted and measured on the same states is partly their noise (with N sequences,
position[t] holds 1/N of the residual's variance even where no curve exists), so
`decomposition_shares` also reports the shares held out, the tokens' part among them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.metrics.adjacency import DEFAULT_TIES, adjacency_probability, states_precision
from adjpos.metrics.checks import check_finite, check_lengths, check_ties
from adjpos.metrics.cosine import cosine_matrix
from adjpos.seeds import derived_generator
from adjpos.validation import UsageError, is_int

PARTS = ("mean", "position", "context", "residual")
SHARE_PARTS = ("mean", "token", "position", "context", "residual")
DEFAULT_FOLDS = 5


@dataclass(frozen=True)
class Decomposition:
    """The four parts of a batch of hidden states (see `decompose`)."""

    mean: Float[Tensor, " d_model"]
    position: Float[Tensor, "pos d_model"]  # zero at positions no sequence reaches
    context: Float[Tensor, "batch d_model"]  # the per-sequence mean of h - mean - position
    residual: Float[Tensor, "batch pos d_model"]  # zero at padding
    lengths: Int[Tensor, " batch"]
    # the dtype the states were held in, which sets the tie tolerance of their scores
    precision: torch.dtype | None = None

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
        """Each part's sum of squares over the valid entries (the mean once per valid entry,
        position[t] once per sequence that reaches t, context[c] once per valid position of
        c), divided by the sum of the four: in the balanced case exactly the part's share of
        the states' (uncentred) sum of squares. They sum to 1 (NaN for all-zero states)."""
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
    """Split hidden states into mean, position, context and residual parts (the module's
    formulas), recovered exactly by `Decomposition.reconstruct`; half-precision states are
    upcast to float32 first. The parts are fitted on the states they split, so their shares
    are in sample (`decomposition_shares` gives them held out).

    Args:
        states: hidden states of a batch of right-padded sequences.
        lengths: true length of each sequence (default: every sequence has all `pos`
            positions, the balanced case). Padding never enters a mean.

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
    batch, n = _check_states(states)
    lens = check_lengths(lengths, (batch,), n).to(states.device)
    h = states.float() if states.dtype in (torch.float16, torch.bfloat16) else states
    valid = (torch.arange(n, device=h.device) < lens[:, None])[..., None].to(h.dtype)
    mean = (h * valid).sum(dim=(0, 1)) / lens.sum()
    centred = (h - mean) * valid
    position = centred.sum(dim=0) / valid.sum(dim=0).clamp_min(1)
    context = (centred - position * valid).sum(dim=1) / lens[:, None]
    residual = centred - (position + context[:, None]) * valid
    return Decomposition(mean, position, context, residual, lens, states_precision(states))


@dataclass(frozen=True)
class PositionCurvePCs:
    """The principal directions of the position curve, largest first (see
    `position_curve_pcs`)."""

    explained_variance_ratio: Float[Tensor, " k"]
    components: Float[Tensor, "k d_model"]


def position_curve_pcs(decomposition: Decomposition, k: int | None = None) -> PositionCurvePCs:
    """Principal components of the position curve position[t]: is it low-dimensional?

    Each position counts with the number of sequences that reach it, as in
    `Decomposition.variance_shares` (the weighted curve has mean zero: no centring needed).
    The ratios of all components sum to 1; they are NaN when the curve is zero.

    Args:
        decomposition: from `decompose`.
        k: how many components (default: all, min(pos, d_model)).

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
    decomposition: Decomposition,
    *,
    curve: Float[Tensor, "*batch pos d_model"] | None = None,
    ties: str = DEFAULT_TIES,
) -> PositionContextAdjacency:
    """The adjacency score of the position curve alone, and of the rest of each sequence:
    `adjacency_probability` of a self-cosine matrix, at the decomposed states' precision, the
    mean removed from all three:

    - ``position``: the curve position[t] over the positions some sequence reaches, one
      score (a curve that rises smoothly with t scores near 1);
    - ``rest``: each sequence over its own positions, the states minus the mean and minus
      `curve` (by default position[t], which leaves context[c] + residual[c, t]);
    - ``whole``: position[t] + context[c] + residual[c, t], the states minus the mean.

    A curve fitted on the same sequences holds 1/N of each one's own states; pass the curve
    fitted on the others (`DecompositionShares.held_out_curve`) to remove only what they share.

    Args:
        decomposition: from `decompose`.
        curve: the curve removed for ``rest``: one for every sequence [pos, d_model], or one
            per sequence [batch, pos, d_model] (default: the decomposition's own position).
        ties: "strict" or "half" (see `adjacency_rows`).

    Raises:
        ValueError: a sequence is shorter than 3 positions (no defined adjacency row), or
            `curve` has neither shape.

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
    rest = parts.context[:, None] + parts.residual
    whole = rest + parts.position
    if curve is not None:
        if tuple(curve.shape) not in (tuple(rest.shape), tuple(rest.shape[1:])):
            raise UsageError(
                f"curve must have shape {tuple(rest.shape[1:])} (one for every sequence) or "
                f"{tuple(rest.shape)} (one per sequence), got {tuple(curve.shape)}"
            )
        rest = rest + (parts.position - curve.to(rest))
    # the tolerance of the states the parts came from (their own dtype may be wider)
    tie = {"ties": ties, "precision": parts.precision}
    rest, whole = (
        adjacency_probability(cosine_matrix(x), lengths=parts.lengths, **tie) for x in (rest, whole)
    )
    position = adjacency_probability(cosine_matrix(parts.position[:reached]), **tie)
    return PositionContextAdjacency(position, rest, whole)


@dataclass(frozen=True)
class DecompositionShares:
    """Each part's share of the states' sum of squares (`SHARE_PARTS`), fitted on all the
    sequences (``in_sample``) and on the other folds (``held_out``); see
    `decomposition_shares`."""

    in_sample: dict[str, float]
    held_out: dict[str, float]
    folds: Int[Tensor, " batch"] = field(repr=False)  # each sequence's fold
    # The position curve each sequence lost held out, fitted on the other folds (zero at
    # padding, and where no other fold has the sequence's length).
    held_out_curve: Float[Tensor, "batch pos d_model"] = field(repr=False)


def decomposition_shares(
    states: Float[Tensor, "batch pos d_model"],
    tokens: Int[Tensor, "batch pos"] | None = None,
    *,
    lengths: Int[Tensor, " batch"] | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> DecompositionShares:
    """The shares of mean, token, position, context and residual, in sample and held out.

    The parts are removed one after another, each fitted by means over the valid entries:

        mean       the mean state;
        token      token_mean[v]: the mean of h - mean over the entries holding token v
                   (zero without `tokens`);
        position   position_L[t]: for the sequences of length L, the mean over them of
                   x = h - mean - token_mean at t, less its mean over t < L (the curve of
                   `adjpos.interventions.position_curves`);
        context    the per-sequence mean of what is left (always the sequence's own);
        residual   the rest.

    A part's share is how much removing it lowers the states' sum of squares, over their
    total: the shares sum to 1. In sample every part is fitted on all the sequences (never
    negative; without tokens and with one length, `Decomposition.variance_shares`). Held out,
    each of `folds` seeded folds loses the parts fitted on the other folds (a token or length
    they lack has no part there), so a part that only fits noise gets a share near 0 or below.
    The curve each sequence lost held out is kept (``held_out_curve``).

    Args:
        states, lengths: as in `decompose`.
        tokens: their token ids (for the token part).
        folds: how many folds (2 .. batch).
        seed: seed of the fold assignment (`adjpos.seeds.derive_seed`).

    Example:
        >>> noise = torch.randn(10, 6, 4, generator=torch.Generator().manual_seed(0))
        >>> shares = decomposition_shares(noise)  # no curve: in sample, the noise fits one
        >>> round(shares.in_sample["position"], 3), round(shares.held_out["position"], 3)
        (0.089, -0.113)
    """
    batch, n = _check_states(states)
    lens = check_lengths(lengths, (batch,), n)
    if tokens is not None and (tuple(tokens.shape) != (batch, n) or int(tokens.min()) < 0):
        raise UsageError(f"tokens must be ids >= 0 of shape {(batch, n)}, one per state")
    if not is_int(folds) or not 2 <= folds <= batch:
        raise UsageError(f"folds must be an int in [2, {batch}] (the sequences), got {folds!r}")
    h = states.detach().double().cpu()
    tok = torch.zeros(batch, n, dtype=torch.long) if tokens is None else tokens.long().cpu()
    order = torch.randperm(batch, generator=derived_generator(seed, "decomposition_folds"))
    fold = torch.empty(batch, dtype=torch.long)
    fold[order] = torch.arange(batch) % folds
    every = torch.ones(batch, dtype=torch.bool)
    in_sample = _drops(h, tok, lens, every, _fit_parts(h, tok, lens, every, tokens is not None))
    held, curve = 0, torch.zeros_like(h)
    for f in range(folds):
        fitted = _fit_parts(h, tok, lens, fold != f, tokens is not None)
        held = held + _drops(h, tok, lens, fold == f, fitted)
        for length, fitted_curve in fitted["position"].items():
            curve[(fold == f) & (lens == length), :length] = fitted_curve
    curve = curve.to(states.device, torch.promote_types(states.dtype, torch.float32))
    return DecompositionShares(_shares(in_sample), _shares(held), fold, curve)


def _check_states(states: Tensor) -> tuple[int, int]:
    """(batch, pos) of finite states [batch, pos, d_model] with every size at least 1."""
    check_finite(states, "states")
    if states.ndim != 3 or 0 in states.shape:
        raise UsageError(
            "states must have shape [batch, pos, d_model] with every size at least 1, got "
            f"{tuple(states.shape)}"
        )
    return states.shape[0], states.shape[1]


def _fit_parts(h: Tensor, tok: Tensor, lens: Tensor, rows: Tensor, use_tokens: bool) -> dict:
    """The mean, token means and per-length curves fitted on the sequences `rows`."""
    valid = (torch.arange(h.shape[1]) < lens[:, None]) & rows[:, None]
    mean = h[valid].mean(dim=0)
    vocab = int(tok.max()) + 1
    token_mean = torch.zeros(vocab, h.shape[2], dtype=h.dtype)
    if use_tokens:
        sums = token_mean.index_add(0, tok[valid], h[valid] - mean)
        token_mean = sums / torch.bincount(tok[valid], minlength=vocab).clamp_min(1)[:, None]
    curves = {}
    for length in lens[rows].unique().tolist():
        x = (h - mean - token_mean[tok])[rows & (lens == length), :length]
        curves[length] = x.mean(dim=0) - x.mean(dim=(0, 1))
    return {"mean": mean, "token": token_mean, "position": curves}


def _drops(h: Tensor, tok: Tensor, lens: Tensor, rows: Tensor, fitted: dict) -> Tensor:
    """[6] the sums of squares the states `rows` lose to each part in turn, the residual's,
    and their total."""
    out = torch.zeros(len(SHARE_PARTS) + 1, dtype=h.dtype)
    for length in lens[rows].unique().tolist():
        x = h[rows & (lens == length), :length]
        curve = fitted["position"].get(length, torch.zeros(length, h.shape[2], dtype=h.dtype))
        removed = [fitted["mean"], fitted["token"][tok[rows & (lens == length), :length]], curve]
        squares = [x.square().sum()]
        for part in removed:
            x = x - part
            squares.append(x.square().sum())
        x = x - x.mean(dim=1, keepdim=True)  # the per-sequence mean: context
        squares.append(x.square().sum())
        drops = [a - b for a, b in zip(squares[:-1], squares[1:], strict=True)]
        out += torch.stack([*drops, squares[-1], squares[0]])
    return out


def _shares(sums: Tensor) -> dict[str, float]:
    return {part: float(sums[i] / sums[-1]) for i, part in enumerate(SHARE_PARTS)}
