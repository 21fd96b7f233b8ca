"""What uniform causal attention over independent random value vectors predicts: the closed
form of the idealised first layer (`predicted_cosine`, derived in its docstring), draws of that
layer at a finite width, where the cosine is noisy (`simulate_first_layer`), and the adjacency
scores of those draws (`predicted_adjacency`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.scoring import SCORE_DTYPE
from adjpos.validation import UsageError, check_generator, check_positive_int, is_int


def predicted_cosine(n: int, *, residual_ratio: float = 0.0) -> Float[Tensor, "pos pos"]:
    """The first-layer prediction of the self-cosine matrix of n positions.

    With near-uniform causal attention over independent random value vectors v_i and a residual
    vector e_k per token (independent of the values, E|e|^2 = rho * E|v|^2, rho the
    `residual_ratio`), the hidden state h_k = e_k + (1/(k+1)) sum_{i<=k} v_i has, in
    expectation (in units of E|v|^2), <h_j, h_k> = 1/(k+1) for j < k (only the j+1 shared values
    survive, each weighted 1/((j+1)(k+1))) and |h_k|^2 = rho + 1/(k+1). Hence, for j < k,

        cos(h_j, h_k) = (1/(k+1)) / sqrt((rho + 1/(j+1)) * (rho + 1/(k+1))),

    which is sqrt((j+1)/(k+1)) without a residual (rho = 0). For every rho it rises strictly
    with j towards k, so at infinite width the adjacency score is exactly 1; a larger rho
    flattens the rise, so at a finite width the noise (`predicted_adjacency`) reorders more.

    Args:
        n: number of positions (>= 1).
        residual_ratio: rho = E|e|^2 / E|v|^2 (>= 0); 0 is the attention output alone.

    Returns:
        C[j, k] in float64.

    Example:
        >>> predicted_cosine(3).round(decimals=4)
        tensor([[1.0000, 0.7071, 0.5774],
                [0.7071, 1.0000, 0.8165],
                [0.5774, 0.8165, 1.0000]], dtype=torch.float64)
        >>> predicted_cosine(3, residual_ratio=1.0)[2, 1].round(decimals=4)
        tensor(0.2357, dtype=torch.float64)
    """
    check_positive_int("n", n)
    rho = _check_ratio(residual_ratio)
    share = 1.0 / torch.arange(1, n + 1, dtype=torch.float64)  # 1/(k+1): E<h_j, h_k>, j <= k
    shared = torch.minimum(share[:, None], share[None, :])
    norm = (rho + share).sqrt()
    cos = shared / (norm[:, None] * norm[None, :])
    return cos.fill_diagonal_(1.0)


def simulate_first_layer(
    n: int,
    *,
    d_model: int,
    residual_ratio: float = 0.0,
    n_samples: int = 512,
    generator: torch.Generator,
) -> Float[Tensor, "sample pos d_model"]:
    """Draw hidden states of the idealised first layer at a finite width.

    Each sample has n independent value vectors v_i ~ N(0, I/d_model) and residual vectors
    e_k ~ N(0, rho I/d_model), and h_k = e_k + (1/(k+1)) sum_{i<=k} v_i (uniform causal
    attention). Only `generator` is drawn from; the global RNG is left alone.

    Args:
        n, residual_ratio: as in `predicted_cosine`.
        d_model: width of the hidden states (>= 1).
        n_samples: number of independent sequences (>= 1).
        generator: a CPU `torch.Generator`.

    Returns:
        h [sample, pos, d_model], float32 on the CPU.

    Example:
        >>> gen = torch.Generator().manual_seed(0)
        >>> simulate_first_layer(5, d_model=8, n_samples=2, generator=gen).shape
        torch.Size([2, 5, 8])
    """
    check_positive_int("n", n)
    check_positive_int("d_model", d_model)
    check_positive_int("n_samples", n_samples)
    rho = _check_ratio(residual_ratio)
    check_generator(generator)
    shape = (n_samples, n, d_model)
    values = torch.randn(shape, generator=generator) / math.sqrt(d_model)
    counts = torch.arange(1, n + 1, dtype=values.dtype)[:, None]
    hidden = values.cumsum(dim=1) / counts
    if rho > 0:
        hidden += torch.randn(shape, generator=generator) * math.sqrt(rho / d_model)
    return hidden


def predicted_adjacency(
    lengths: int | Sequence[int],
    *,
    d_model: int,
    residual_ratio: float = 0.0,
    n_samples: int = 512,
    generator: torch.Generator,
) -> Float[Tensor, " length"]:
    """Predicted adjacency score by sequence length, at a finite width, by Monte Carlo.

    Draws `n_samples` sequences of the idealised first layer (`simulate_first_layer`) at the
    longest length and scores the first L positions of each, for each L in `lengths`
    (exact: a position never sees later ones), as the mean `adjpos.adjacency_probability` of
    the self-cosine matrices. The noise of a finite width reorders pairs whose predicted
    cosines are close (far-apart pairs late in long sequences, all pairs when the residual is
    large). The standard error is about 0.1 / sqrt(n_samples) or less.

    Args:
        lengths: one sequence length or several (each >= 3).
        d_model, residual_ratio, n_samples, generator: as in `simulate_first_layer`.

    Returns:
        One score per length, float64, in the order given.

    Example:
        >>> gen = torch.Generator().manual_seed(0)
        >>> scores = predicted_adjacency([8, 32], d_model=512, n_samples=64, generator=gen)
        >>> bool(scores[0] > scores[1] > 0.9)
        True
    """
    lengths = _check_lengths(lengths)
    hidden = simulate_first_layer(
        max(lengths),
        d_model=d_model,
        residual_ratio=residual_ratio,
        n_samples=n_samples,
        generator=generator,
    )
    # As `adjpos.adjacency_score` scores a layer (`adjpos.scoring.sequence_scores`): float64
    # cosines, the default tie rule at the simulated states' precision; one matrix, cut to
    # each length.
    sim = cosine_matrix(hidden.to(SCORE_DTYPE))
    scores = [adjacency_probability(sim[:, :n, :n], precision=hidden.dtype).mean() for n in lengths]
    return torch.stack(scores)


def _check_ratio(value: object) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise UsageError(
            f"residual_ratio must be a finite number >= 0 (E|e|^2 / E|v|^2), got {value!r}"
        )
    return float(value)


def _check_lengths(lengths: object) -> list[int]:
    lengths = [lengths] if isinstance(lengths, int) else list(lengths)
    bad = [x for x in lengths if not is_int(x) or x < 3]
    if bad or not lengths:
        raise UsageError(
            "lengths must be one int or a non-empty list of ints, each >= 3 (the adjacency "
            f"score needs rows k >= 2 with two earlier positions); got {lengths!r}"
        )
    return lengths
