"""Input checks shared by the metrics: clear errors before any computation."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from adjpos.validation import UsageError


def check_finite(x: Tensor, what: str) -> None:
    """Raise if `x` holds NaN or inf, saying how many entries are bad."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{what} must be a floating-point tensor, got dtype {x.dtype}")
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        raise UsageError(
            f"{what} contains {int(bad.sum())} NaN or inf values out of {x.numel()}; "
            "activations must be finite (check the model's weights and dtype)"
        )


def check_square(sim: Tensor) -> None:
    """Raise unless `sim` is a finite stack of square matrices [*batch, pos, pos]."""
    check_finite(sim, "similarity matrix")
    if sim.ndim < 2 or sim.shape[-1] != sim.shape[-2]:
        raise UsageError(
            f"similarity matrices must have shape [*batch, pos, pos], got {tuple(sim.shape)}"
        )


def check_lengths(lengths: Tensor | None, batch_shape: tuple[int, ...], n: int) -> Tensor:
    """Per-sequence lengths checked against [*batch] and pos=n (None means all n), as an int64
    tensor of shape `batch_shape` on the CPU."""
    if lengths is None:
        return torch.full(batch_shape, n, dtype=torch.int64)
    if not isinstance(lengths, Tensor):
        lengths = torch.as_tensor(lengths)
    if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
        raise TypeError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if tuple(lengths.shape) != tuple(batch_shape):
        raise UsageError(
            f"lengths must have the batch shape {tuple(batch_shape)}, got {tuple(lengths.shape)}"
        )
    lengths = lengths.detach().to("cpu", torch.int64)
    if lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > n):
        raise UsageError(
            f"lengths must lie in [1, {n}] (the padded sequence length), "
            f"got values from {int(lengths.min())} to {int(lengths.max())}"
        )
    return lengths


def check_scorable(lengths: Tensor) -> None:
    """Raise when any sequence is too short to have a defined adjacency row (needs >= 3)."""
    short = lengths < 3
    if bool(short.any()):
        raise UsageError(
            f"{int(short.sum())} of {lengths.numel()} sequences are shorter than 3 tokens "
            f"(shortest: {int(lengths.min())}); the adjacency score needs at least 3 positions "
            "(rows k >= 2 compare two earlier positions)"
        )


TIES = ("strict", "half")


def check_ties(ties: Any) -> str:
    """How the adjacency count treats tied pairs: "strict" (not ordered) or "half", else a
    `UsageError` listing them."""
    if ties not in TIES:
        raise UsageError(f"ties={ties!r} is not allowed; choose from {list(TIES)}")
    return ties
