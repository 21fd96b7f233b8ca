"""The interventions and the one context manager that applies them (see the package doc)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.validation import is_int

_EPS = 1e-12  # a zero state keeps norm 0: no direction to rescale


@dataclass(frozen=True)
class NoIntervention:
    """The baseline: the states pass unchanged, through the same hook."""

    name = "none"
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"]) -> Tensor:
        return resid


@dataclass(frozen=True)
class NormPermute:
    """Each state keeps its direction and takes the norm of another position of its sequence.

    Args:
        seed: seed of the permutation of positions (one per sequence; the same for every call
            with the same shape, so greedy decoding sees a fixed rule per length).
        mirrored: give position k the norm of position n - 1 - k instead.
    """

    seed: int = 0
    mirrored: bool = False
    name = "norm_permute"
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"]) -> Tensor:
        batch, pos, _ = resid.shape
        if self.mirrored:
            order = torch.arange(pos - 1, -1, -1).expand(batch, pos)
        else:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + pos)
            order = torch.rand(batch, pos, generator=gen).argsort(dim=1)
        norms = resid.norm(dim=-1, keepdim=True)
        return _with_norms(resid, norms.gather(1, order.to(resid.device)[..., None]))


@dataclass(frozen=True)
class NormPermuteControl:
    """Each state keeps its direction and takes the norm of the same position in the next
    sequence of the batch (cyclically): norms change, position information does not move."""

    name = "norm_permute_control"
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"]) -> Tensor:
        if resid.shape[0] < 2:
            raise ValueError("norm_permute_control needs at least 2 sequences in the batch")
        norms = resid.norm(dim=-1, keepdim=True)
        return _with_norms(resid, norms.roll(-1, dims=0))


@dataclass(frozen=True)
class UniformAttention:
    """Block l's attention pattern replaced by uniform causal attention: position k attends
    1 / (k + 1) to each of positions 0..k. `heads`: which heads (default: all)."""

    heads: tuple[int, ...] | None = None
    name = "uniform_attention"
    site = "pattern"

    def __call__(self, pattern: Float[Tensor, "batch head query key"]) -> Tensor:
        q, k = pattern.shape[-2:]
        causal = torch.ones(q, k, device=pattern.device, dtype=pattern.dtype).tril()
        uniform = causal / causal.sum(dim=-1, keepdim=True)
        if self.heads is None:
            return uniform.expand_as(pattern).clone()
        out = pattern.clone()
        out[:, list(self.heads)] = uniform
        return out


INTERVENTIONS = {
    cls.name: cls for cls in (NoIntervention, NormPermute, NormPermuteControl, UniformAttention)
}


@contextmanager
def intervene(model: Any, intervention: Any, *, layer: int) -> Iterator[Any]:
    """Apply `intervention` at `layer` of `model` for the duration of the block.

    Example:
        >>> import adjpos
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, d_model=16, n_heads=2))
        >>> tokens = torch.randint(0, 64, (3, 8), generator=torch.Generator().manual_seed(0))
        >>> with intervene(model, NoIntervention(), layer=1):
        ...     same = model(tokens)
        >>> torch.equal(same, model(tokens))
        True

    Raises:
        ValueError: a layer outside 0 .. n_layers - 1, an unknown intervention, or heads out
            of range.
    """
    n_layers = model.cfg.n_layers
    if not is_int(layer) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be an int in [0, {n_layers - 1}], got {layer!r}")
    if type(intervention) not in INTERVENTIONS.values():
        raise ValueError(
            f"unknown intervention {intervention!r}; choose from {list(INTERVENTIONS)}"
        )
    name = f"blocks.{layer}.hook_resid_pre"
    if intervention.site == "pattern":
        name = f"blocks.{layer}.attn.hook_pattern"
        _check_heads(intervention.heads or (), model.cfg.n_heads)
    with model.hooks(fwd_hooks=[(name, lambda acts, hook: intervention(acts))]):
        yield model


def _with_norms(resid: Tensor, norms: Tensor) -> Tensor:
    own = resid.norm(dim=-1, keepdim=True)
    return resid * (norms / own.clamp_min(_EPS))


def _check_heads(heads: Sequence[int], n_heads: int) -> None:
    """Every head index in range (for `UniformAttention`)."""
    bad = [h for h in heads if not is_int(h) or not 0 <= h < n_heads]
    if bad:
        raise ValueError(f"heads {bad} are out of range; the model has {n_heads} heads")
