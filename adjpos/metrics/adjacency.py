"""The adjacency probability: how often similarity to a token rises toward it.

Row k (0-indexed) of a self-cosine matrix C, over the earlier positions only:

    s_k = #{(i, j) : 0 <= i < j < k and C[k, i] < C[k, j] - t} / C(k, 2),   k >= 2,

the study's strict `<` with the tie tolerance t = `tie_tolerance`: two similarities at most t
apart are a tie, which is not ordered (chance is then below 0.5 where a row holds ties, as a
repeated token's do; ``ties="half"`` counts a tie as half ordered, chance 0.5 on any data). The
matrix score is the mean of s_k over the defined rows k = 2 .. len-1. Counting is exact: on
the CPU a compiled merge sort per row, O(n^2 log n) per matrix; on another device (a GPU) every
pair compared in torch where the matrices are, O(n^3) but in parallel.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.metrics._count import count_ordered_pairs
from adjpos.metrics.checks import check_lengths, check_scorable, check_square, check_ties
from adjpos.validation import UsageError

# The one default tie rule of every adjacency score adjpos computes: strict, the paper's
# definition, so a number means the same thing wherever it was computed. "half" stays an
# option everywhere (docs/concepts.md says when each fits).
DEFAULT_TIES = "strict"

# The tie tolerance in machine epsilons of the states' dtype (`tie_tolerance` says why 4).
TIE_EPSILONS = 4


def tie_tolerance(precision: torch.dtype) -> float:
    """The widest gap between two similarities that still counts as a tie: `TIE_EPSILONS`
    machine epsilons of `precision`, the dtype of the states the similarities come from
    (float32: 4.8e-7; float64: 8.9e-16; float16: 3.9e-3; bfloat16: 3.1e-2).

    Why 4: rounding a state to its dtype moves its cosine with any vector by at most u =
    eps / 2, so a cosine of two rounded states, computed exactly (or in float64 from float32
    states), is within eps of the exact one whatever the width, and two cosines equal in exact
    arithmetic land at most 2 eps apart: 4 eps covers that twice. On the shipped task models
    the near-ties float noise makes lie below 2 eps, and 4 eps ties some 24 distinct pairs of
    15 million. A cosine summed in float32 carries more rounding (up to 7.6 eps at d = 64):
    hence `adjpos.scoring.SCORE_DTYPE`.

    Example:
        >>> tie_tolerance(torch.float32) == 4 * torch.finfo(torch.float32).eps
        True
    """
    if not isinstance(precision, torch.dtype) or not precision.is_floating_point:
        raise UsageError(
            f"precision must be a floating-point torch dtype (the states' dtype, e.g. "
            f"torch.float32), got {precision!r}"
        )
    return TIE_EPSILONS * torch.finfo(precision).eps


def states_precision(x: Tensor) -> torch.dtype:
    """The dtype whose rounding the values of `x` carry, for `tie_tolerance`: `x`'s own, or
    float32's for float64 values that are all float32 values (widened float32 states).

    Example:
        >>> x = torch.randn(2, 3)
        >>> states_precision(x.double()), states_precision(x.double() / 3)
        (torch.float32, torch.float64)
    """
    if x.dtype == torch.float64 and bool((x.float().double() == x).all()):
        return torch.float32
    return x.dtype


def adjacency_rows(
    sim: Float[Tensor, "*batch pos pos"],
    *,
    lengths: Int[Tensor, "*batch"] | None = None,
    ties: str = DEFAULT_TIES,
    precision: torch.dtype | None = None,
) -> Float[Tensor, "*batch pos"]:
    """Row adjacency probabilities s_k of each similarity matrix (see the module docstring).

    Args:
        sim: square similarity matrices (usually `cosine_matrix` output, in [-1, 1], the scale
            the tie tolerance is set for).
        lengths: true length of each right-padded sequence (default: all `pos`). Positions at
            or beyond a sequence's length are ignored.
        ties: "strict" (a tied pair is not ordered; the study's definition) or "half".
        precision: the dtype of the states the similarities come from, which sets the tie
            tolerance (default: `sim`'s own; pass the states' when they were widened first).

    Returns:
        s_k per row, NaN where undefined: rows 0 and 1 and rows k >= length.

    Example:
        >>> sim = torch.tensor([[1.0, 0.0, 0.0, 0.0],
        ...                     [0.5, 1.0, 0.0, 0.0],
        ...                     [0.1, 0.9, 1.0, 0.0],
        ...                     [0.2, 0.2, 0.7, 1.0]])
        >>> adjacency_rows(sim)
        tensor([   nan,    nan, 1.0000, 0.6667])
        >>> adjacency_rows(sim, ties="half")  # row 3: the tie 0.2 = 0.2 counts 1/2
        tensor([   nan,    nan, 1.0000, 0.8333])
    """
    half = check_ties(ties) == "half"
    check_square(sim)
    tol = tie_tolerance(sim.dtype if precision is None else precision)
    *batch, n, _ = sim.shape
    lens = check_lengths(lengths, tuple(batch), n)
    k = torch.arange(n)
    defined = (k >= 2) & (k < lens[..., None])  # [*batch, pos]
    prefix = torch.where(defined, k, 0).reshape(-1)
    # float64 holds every float type exactly, and the tolerance's window is computed in it
    counts = _count(sim.detach().double().reshape(-1, n), prefix, tol).double()
    ordered = counts[:, 0] + (0.5 * counts[:, 1] if half else 0.0)
    pairs = (k * (k - 1) // 2).clamp_min(1).double()
    rows = ordered.reshape(*batch, n) / pairs
    rows = torch.where(defined, rows, torch.nan)
    return rows.to(device=sim.device, dtype=sim.dtype)


def adjacency_probability(
    sim: Float[Tensor, "*batch pos pos"],
    *,
    lengths: Int[Tensor, "*batch"] | None = None,
    ties: str = DEFAULT_TIES,
    rows: Bool[Tensor, "*batch pos"] | None = None,
    precision: torch.dtype | None = None,
) -> Float[Tensor, "*batch"]:
    """The matrix adjacency score: mean of the defined rows s_k, one value per matrix. 0.5 is
    chance (see `adjacency_rows` for ties); 1.0 means similarity to every token rises
    monotonically toward it.

    Args:
        sim, lengths, ties, precision: as in `adjacency_rows`.
        rows: which rows k to average (e.g. a task's answer rows; each row still looks at
            every earlier position). A matrix with no selected defined row scores NaN.

    Raises:
        ValueError: a sequence is shorter than 3 tokens, so it has no defined row; or `rows`
            is not a boolean mask of the matrices' rows.

    Example:
        >>> sim = torch.tensor([[1.0, 0.0, 0.0],
        ...                     [0.5, 1.0, 0.0],
        ...                     [0.1, 0.9, 1.0]])
        >>> adjacency_probability(sim)
        tensor(1.)
    """
    check_square(sim)
    *batch, n, _ = sim.shape
    check_scorable(check_lengths(lengths, tuple(batch), n))
    scores = adjacency_rows(sim, lengths=lengths, ties=ties, precision=precision)
    if rows is not None:
        if rows.dtype != torch.bool or tuple(rows.shape) != tuple(scores.shape):
            raise UsageError(
                f"rows must be a boolean mask of shape {tuple(scores.shape)} (one flag per "
                f"matrix row), got {rows.dtype} {tuple(rows.shape)}"
            )
        scores = torch.where(rows.to(scores.device), scores, torch.nan)
    return scores.nanmean(dim=-1)


def _count(values: Tensor, prefix: Tensor, tol: float) -> Tensor:
    """[rows, 2] ordered and tied pairs per row prefix: compiled on the CPU, in torch where the
    values are otherwise (only the counts, two integers per row, come back to the host)."""
    if values.device.type == "cpu":
        return torch.from_numpy(_count_pairs(values.contiguous().numpy(), prefix.numpy(), tol))
    return count_pairs_torch(values, prefix.to(values.device), tol=tol).cpu()


def count_pairs_torch(
    values: Float[Tensor, "rows n"],
    prefix: Int[Tensor, " rows"],
    *,
    tol: float = 0.0,
    chunk: int = 2**24,
) -> Int[Tensor, "rows 2"]:
    """#{(i, j) : i < j < prefix[r], values[r, i] < values[r, j] - tol} per row, and beside it
    the tied pairs (neither below nor above values[r, j]'s window +- tol): the count behind
    `adjacency_rows` on a non-CPU device, rows in groups of at most `chunk` comparisons, in
    float64 as the compiled count compares them. 0.0 and -0.0 are a tie.

    Example:
        >>> count_pairs_torch(torch.tensor([[0.1, 0.3, 0.1, 9.0]]), torch.tensor([3]))
        tensor([[1, 1]])
    """
    rows, n = values.shape
    values = values.double()
    idx = torch.arange(n, device=values.device)
    before = idx[:, None] < idx[None, :]  # i < j
    step = max(1, chunk // max(n * n, 1))
    counts = []
    for start in range(0, rows, step):
        v, m = values[start : start + step], prefix[start : start + step]
        inside = before & (idx < m[:, None, None])  # j < m, so i < j < m
        below = (v[:, :, None] < (v - tol)[:, None, :]) & inside
        above = (v[:, :, None] > (v + tol)[:, None, :]) & inside
        ordered = below.sum(dim=(1, 2))
        tied = inside.sum(dim=(1, 2)) - ordered - above.sum(dim=(1, 2))
        counts.append(torch.stack([ordered, tied], dim=-1))
    if not counts:
        return torch.zeros(0, 2, dtype=torch.int64, device=values.device)
    return torch.cat(counts)


def _count_pairs(values: np.ndarray, prefix: np.ndarray, tol: float) -> np.ndarray:
    """The compiled count on no more threads than torch may use (`torch.set_num_threads` is
    the one knob: a worker set to one thread must not start more), both counts left as found
    (numba's first parallel call resets torch's, through the libgomp they share)."""
    threads = torch.get_num_threads()
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, before))
    try:
        return count_ordered_pairs(values, prefix, tol)
    finally:
        numba.set_num_threads(before)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
