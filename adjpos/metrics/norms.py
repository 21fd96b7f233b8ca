"""Norm bookkeeping the interventions share: a state rescaled to a given norm, and the relative
size of a change (pure tensor functions; a zero state keeps norm 0, with no direction to
rescale)."""

from __future__ import annotations

from torch import Tensor

EPS = 1e-12  # a zero state keeps norm 0: no direction to rescale


def with_norms(resid: Tensor, norms: Tensor) -> Tensor:
    """Each state rescaled to `norms` [..., 1], its direction kept."""
    own = resid.norm(dim=-1, keepdim=True)
    return resid * (norms / own.clamp_min(EPS))


def relative_change(before: Tensor, after: Tensor) -> Tensor:
    """Mean ||after - before|| / ||before|| over the states (zero states count 0)."""
    own = before.norm(dim=-1)
    return ((after - before).norm(dim=-1) / own.clamp_min(EPS)).mean()
