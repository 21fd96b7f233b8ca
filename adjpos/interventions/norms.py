"""Interventions on the states' norms: each state keeps its direction and takes another norm
(the norm of another position, or a size-matched control's), and the helpers they share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.validation import UsageError

_EPS = 1e-12  # a zero state keeps norm 0: no direction to rescale


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

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        order = _partners(resid, self.seed, mirrored=self.mirrored)
        norms = resid.norm(dim=-1, keepdim=True)
        return _with_norms(resid, norms.gather(1, order[..., None]))

    @property
    def label(self) -> str:
        return "norm_permute_mirrored" if self.mirrored else "norm_permute"


@dataclass(frozen=True)
class NormPermuteControl:
    """Each state keeps its direction and takes the norm of the same position in the next
    sequence of the batch (cyclically): norms change, position information does not move."""

    name = "norm_permute_control"
    site = "resid_pre"
    label = name

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        if resid.shape[0] < 2:
            raise UsageError("norm_permute_control needs at least 2 sequences in the batch")
        norms = resid.norm(dim=-1, keepdim=True)
        return _with_norms(resid, norms.roll(-1, dims=0))


@dataclass(frozen=True)
class NormScaleControl:
    """The size-matched control of `NormPermute`: each state keeps its direction and its norm
    is multiplied by a ratio drawn at random (without replacement) from the ratios
    ||x_pi(k)|| / ||x_k|| that `NormPermute` with the same seed and `mirrored` would apply to
    this batch. The log-norm changes are the permutation's, exactly as a set, but no state
    takes the norm another position had; they land at random places.

    Matched position by position at the read-out positions: where the hook is told which
    positions are read out (``readout``, see `intervene`), those keep the permutation's own
    ratio, and only the other ratios are shuffled, among the other states. So the control
    changes the read-out states exactly as the permutation does (or, with the read-out kept,
    neither changes them).

    Args:
        seed, mirrored: the permutation whose ratios are used (as `NormPermute`).
        draw: which random placement (one control distribution: draws 0, 1, ...).
    """

    seed: int = 0
    mirrored: bool = False
    draw: int = 0
    name = "norm_scale_control"
    site = "resid_pre"

    @property
    def label(self) -> str:
        return "norm_scale_control_mirrored" if self.mirrored else "norm_scale_control"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        batch, pos, _ = resid.shape
        norms, ratios = _permutation_ratios(resid, self.seed, self.mirrored)
        free = _free_mask(readout, batch, pos, resid.device)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + pos + 7 + 7_919 * self.draw)
        pool = ratios[free]
        shuffled = pool[torch.randperm(pool.numel(), generator=gen).to(resid.device)]
        ratios = ratios.masked_scatter(free, shuffled)
        return _with_norms(resid, (norms * ratios)[..., None])


@dataclass(frozen=True)
class NormCommonScale:
    """The common-rescaling control of `NormPermute`: every norm of a sequence multiplied by
    one factor, exp(mean |log ratio|) of the permutation's log-norm changes in that sequence (a
    change of the same mean size that keeps the norms' order over positions). Read-out
    positions, where given, keep the permutation's own ratio (as `NormScaleControl`)."""

    seed: int = 0
    mirrored: bool = False
    name = "norm_common_scale"
    site = "resid_pre"

    @property
    def label(self) -> str:
        return "norm_common_scale_mirrored" if self.mirrored else "norm_common_scale"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        batch, pos, _ = resid.shape
        norms, ratios = _permutation_ratios(resid, self.seed, self.mirrored)
        free = _free_mask(readout, batch, pos, resid.device)
        logs = ratios.clamp_min(_EPS).log().abs() * free
        factor = (logs.sum(dim=1) / free.sum(dim=1).clamp_min(1)).exp()
        ratios = torch.where(free, factor[:, None].expand_as(ratios), ratios)
        return _with_norms(resid, (norms * ratios)[..., None])


def relative_change(before: Tensor, after: Tensor) -> Tensor:
    """Mean ||after - before|| / ||before|| over the states (zero states count 0)."""
    own = before.norm(dim=-1)
    return ((after - before).norm(dim=-1) / own.clamp_min(_EPS)).mean()


def _partners(resid: Tensor, seed: int, *, mirrored: bool = False) -> Tensor:
    """[batch, pos] partner position of each state: a seeded random permutation of each
    sequence's positions, fixed per (seed, length), or the mirror k -> n - 1 - k."""
    batch, pos, _ = resid.shape
    if mirrored:
        order = torch.arange(pos - 1, -1, -1).expand(batch, pos)
    else:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + pos)
        order = torch.rand(batch, pos, generator=gen).argsort(dim=1)
    return order.to(resid.device)


def _permutation_ratios(resid: Tensor, seed: int, mirrored: bool) -> tuple[Tensor, Tensor]:
    """Each state's norm [batch, pos] and the ratio ||x_pi(k)|| / ||x_k|| the permutation
    (`NormPermute` with this seed and `mirrored`) would apply to it."""
    norms = resid.norm(dim=-1)
    order = _partners(resid, seed, mirrored=mirrored)
    return norms, norms.gather(1, order) / norms.clamp_min(_EPS)


def _free_mask(readout: Tensor | None, batch: int, pos: int, device: Any) -> Tensor:
    """[batch, pos] True at the positions that are not read out (all, without `readout`)."""
    if readout is None:
        return torch.ones(batch, pos, dtype=torch.bool, device=device)
    return (~readout).expand(batch, pos)


def _with_norms(resid: Tensor, norms: Tensor) -> Tensor:
    own = resid.norm(dim=-1, keepdim=True)
    return resid * (norms / own.clamp_min(_EPS))
