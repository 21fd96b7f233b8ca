"""Variance of each hidden state over its coordinates (Chi et al.'s position carrier)."""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor

from adjpos.metrics.checks import check_finite
from adjpos.validation import UsageError


def position_variance(x: Float[Tensor, "*batch pos d_model"]) -> Float[Tensor, "*batch pos"]:
    """Population variance over d_model of each position's hidden state: mean((x - mean x)^2).

    Example:
        >>> import torch
        >>> position_variance(torch.tensor([[1.0, -1.0], [2.0, 2.0]]))
        tensor([1., 0.])
    """
    check_finite(x, "activations")
    if x.ndim < 2:
        raise UsageError(f"x must have shape [*batch, pos, d_model], got {tuple(x.shape)}")
    return x.var(dim=-1, correction=0)
