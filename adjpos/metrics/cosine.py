"""Self-cosine matrices of hidden states."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.metrics.checks import check_finite
from adjpos.validation import UsageError


def cosine_matrix(x: Float[Tensor, "*batch pos d_model"]) -> Float[Tensor, "*batch pos pos"]:
    """Self-cosine matrix C[i, j] = <x_i, x_j> / (|x_i| |x_j|) of each sequence.

    A zero vector has similarity 0 to everything, itself included. Computed in at least
    float32. Identical states (a repeated token's embedding) get identical similarities,
    exactly, whatever order the matrix product summed them in. NaN or inf raise `ValueError`.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
        >>> cosine_matrix(x).round(decimals=4)
        tensor([[1.0000, 0.7071, 0.0000],
                [0.7071, 1.0000, 0.0000],
                [0.0000, 0.0000, 0.0000]])
    """
    if not isinstance(x, Tensor) or not x.is_floating_point():
        check_finite(x, "activations")  # raises the type error
    if x.ndim < 2:
        raise UsageError(f"x must have shape [*batch, pos, d_model], got {tuple(x.shape)}")
    x = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    # One product gives every dot product and, on its diagonal, the squared norms: no
    # normalised copy of the states. A NaN or inf anywhere in x reaches that diagonal, so
    # checking the diagonal checks x (read in full only to word the error).
    gram = x @ x.mT
    squares = gram.diagonal(dim1=-2, dim2=-1)
    if not bool(torch.isfinite(squares).all()):
        check_finite(x, "activations")
        raise UsageError(
            f"activations are too large to square in {x.dtype} (largest |value| "
            f"{float(x.abs().max()):.3g}); pass them as float64"
        )
    norms = squares.sqrt()
    scale = norms[..., :, None] * norms[..., None, :]
    return _tie_identical_states(torch.where(scale > 0, gram / scale, 0.0), x)


# Odd 64-bit multipliers for the fingerprint of a state's bits (wrapping integer arithmetic:
# exact, so identical states get identical fingerprints whatever the order of the sum).
_MIX = 0x9E3779B97F4A7C15 - 2**64


def _tie_identical_states(
    sim: Float[Tensor, "*batch pos pos"], x: Float[Tensor, "*batch pos d_model"]
) -> Float[Tensor, "*batch pos pos"]:
    """`sim` with the column of each state replaced by that of the first identical state of
    its sequence: a matrix product does not promise equal sums for equal inputs (MKL's does
    not), and one ulp turns a tie into an order."""
    n, d = x.shape[-2:]
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}[x.dtype]
    bits = (x + 0.0).view(ints).long()  # + 0.0 turns -0.0 into 0.0: equal values, equal bits
    weights = (torch.arange(1, d + 1, device=x.device, dtype=torch.long) * _MIX) | 1
    prints = (bits * weights).sum(-1)
    same = prints[..., :, None] == prints[..., None, :]
    first = same.to(torch.uint8).argmax(dim=-1)  # the first state with the same fingerprint
    position = torch.arange(n, device=x.device)
    if bool((first == position).all()):
        return sim
    alike = (x.gather(-2, first[..., None].expand_as(x)) == x).all(dim=-1)
    first = torch.where(alike, first, position)  # a fingerprint collision: keep the column
    return sim.gather(-1, first[..., None, :].expand_as(sim))


def center_states(
    x: Float[Tensor, "batch pos d_model"], lengths: Int[Tensor, " batch"]
) -> Float[Tensor, "batch pos d_model"]:
    """Each sequence minus the mean of its real positions (padding, at positions >= its
    length, is left out of the mean): a direction every state shares leaves the cosines.

    Example:
        >>> x = torch.tensor([[[1.0, 2.0], [3.0, 2.0], [9.0, 9.0]]])
        >>> center_states(x, torch.tensor([2]))
        tensor([[[-1.,  0.],
                 [ 1.,  0.],
                 [ 7.,  7.]]])
    """
    real = (torch.arange(x.shape[1], device=x.device) < lengths[:, None])[..., None]
    mean = (x * real).sum(dim=1, keepdim=True) / lengths[:, None, None].to(x.dtype)
    return x - mean
