"""Interventions on the states' norms: each state keeps its direction and takes another norm
(the norm of another position, or a size-matched control's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.interventions.hooks import partner_positions
from adjpos.metrics.norms import EPS, with_norms
from adjpos.seeds import derived_generator
from adjpos.validation import UsageError


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
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        order = partner_positions(resid, self.seed, mirrored=self.mirrored)
        norms = resid.norm(dim=-1, keepdim=True)
        return with_norms(resid, norms.gather(1, order[..., None]))


@dataclass(frozen=True)
class NormPermuteControl:
    """Each state keeps its direction and takes the norm of the same position in the next
    sequence of the batch (cyclically): norms change, position information does not move."""

    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        if resid.shape[0] < 2:
            raise UsageError("NormPermuteControl needs at least 2 sequences in the batch")
        norms = resid.norm(dim=-1, keepdim=True)
        return with_norms(resid, norms.roll(-1, dims=0))


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
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        norms, ratios, free = _permutation_ratios(resid, self.seed, self.mirrored, readout)
        gen = derived_generator(self.seed, "norm scale control", resid.shape[1], self.draw)
        pool = ratios[free]
        shuffled = pool[torch.randperm(pool.numel(), generator=gen).to(resid.device)]
        ratios = ratios.masked_scatter(free, shuffled)
        return with_norms(resid, (norms * ratios)[..., None])


@dataclass(frozen=True)
class NormCommonScale:
    """The common-rescaling control of `NormPermute`: every norm of a sequence multiplied by
    one factor, exp(mean |log ratio|) of the permutation's log-norm changes in that sequence (a
    change of the same mean size that keeps the norms' order over positions). Read-out
    positions, where given, keep the permutation's own ratio (as `NormScaleControl`)."""

    seed: int = 0
    mirrored: bool = False
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        norms, ratios, free = _permutation_ratios(resid, self.seed, self.mirrored, readout)
        logs = ratios.clamp_min(EPS).log().abs() * free
        factor = (logs.sum(dim=1) / free.sum(dim=1).clamp_min(1)).exp()
        ratios = torch.where(free, factor[:, None].expand_as(ratios), ratios)
        return with_norms(resid, (norms * ratios)[..., None])


def _permutation_ratios(
    resid: Tensor, seed: int, mirrored: bool, readout: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """Each state's norm [batch, pos], the ratio ||x_pi(k)|| / ||x_k|| the permutation
    (`NormPermute` with this seed and `mirrored`) would apply to it, and [batch, pos] True at
    the positions that are not read out (all, without `readout`)."""
    norms = resid.norm(dim=-1)
    order = partner_positions(resid, seed, mirrored=mirrored)
    free = torch.ones_like(norms, dtype=torch.bool) if readout is None else ~readout
    return norms, norms.gather(1, order) / norms.clamp_min(EPS), free.expand_as(norms)
