"""Variance of each hidden state over its coordinates (Chi et al.'s position carrier)."""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor

from adjpos.metrics.checks import check_finite


def position_variance(x: Float[Tensor, "*batch pos d_model"]) -> Float[Tensor, "*batch pos"]:
    """Population variance over d_model of each position's hidden state: mean((x - mean x)^2).

    Example:
        >>> import torch
        >>> position_variance(torch.tensor([[1.0, -1.0], [2.0, 2.0]]))
        tensor([1., 0.])
    """
    check_finite(x, "activations")
    if x.ndim < 2:
        raise ValueError(f"x must have shape [*batch, pos, d_model], got {tuple(x.shape)}")
    return x.var(dim=-1, correction=0)


def variance_ratio(variance: Float[Tensor, "*batch pos"]) -> Float[Tensor, "*batch"]:
    """Mean variance over the last third of the positions divided by the first third (a
    third is at least one position): below 1, variance shrinks with position.

    Example:
        >>> import torch
        >>> variance_ratio(torch.tensor([4.0, 4.0, 3.0, 2.0, 1.0, 1.0]))
        tensor(0.2500)
    """
    check_finite(variance, "variances")
    if variance.ndim < 1 or variance.shape[-1] < 2:
        raise ValueError(f"variance needs at least 2 positions, got shape {tuple(variance.shape)}")
    third = max(1, variance.shape[-1] // 3)
    return variance[..., -third:].mean(dim=-1) / variance[..., :third].mean(dim=-1)
