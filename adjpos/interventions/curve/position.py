"""An intervention on the adjacency pattern itself: each prompt state's position curve moved.

Song and Zhong's decomposition (`adjpos.decompose`) splits a state into a mean, a position
curve position[t] (shared by every sequence of one length), a context part and a residual.
`PositionMeanSwap` replaces position[t] of each prompt state by position[pi(t)] and keeps the
rest (and, by default, the state's norm):

    h'[c, t] = h[c, t] - position_L[t] + position_L[pi(t)],   rescaled to ||h[c, t]||

with position_L fitted on other prompts of the same length L (`fit_prompt_states`). On task
prompts the mean state at a position also holds the format's fixed tokens (the "=" of an
addition sits at a fixed place for a given length), so the curve is fitted after removing each
token's mean state (over the fitting prompts of every length, where the fixed tokens occur at
many positions): position_L is the position part of h - token_mean[token].

Two orders pi over the prompt positions before the read-out position (the read-out position
itself is always kept, so these act with ``keep_readout=True`` only: they are handed the n
positions before the read-out of a prompt of length L = n + 1):
- ``position_mean_mirror``, the control: t -> n - 1 - t over the n positions before the
  read-out. The mirror keeps every distance |t - t'| between the curves two states carry, so
  nearby states stay as similar as before, while every state (but a middle one) carries
  another position's curve.
- ``position_mean_swap``: a seeded permutation that scatters neighbours (no two neighbours
  stay neighbours and no position keeps its own curve, where the length allows), chosen per
  length among `CANDIDATES` such draws as the one that changes the fitting prompts' states as
  much as the mirror does (mean ||h' - h|| / ||h||): "nearby states are similar" is destroyed
  in the position curve, by a change of the mirror's size.

Both move every state's position curve to another position, so both damage a read-out of
absolute position from the curve; only the swap breaks the similarity of neighbours. A swap
that breaks the task beyond the mirror says the model reads the adjacency pattern; a swap and
a mirror that break it alike say it reads the curve as absolute position (or that the change
is too large to tell), and two harmless changes say the curve is not read at this layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.metrics import decompose
from adjpos.metrics.norms import relative_change, with_norms
from adjpos.seeds import derived_generator
from adjpos.types import PromptStates
from adjpos.validation import UsageError

MIN_FIT = 4  # fitting prompts a length needs for its curve
CANDIDATES = 64  # scattering permutations drawn per length, to match the mirror's size


@dataclass(frozen=True, eq=False)
class PositionMeanSwap:
    """Each prompt state's position curve replaced by that of another position (see the
    module doc). Build it with `PositionMeanSwap.fit` (the swap, ``orders`` set) or
    `PositionMeanSwap.mirror` (its control).

    Args:
        curves: {prompt length L: [L, d_model]} the position curve of each length.
        orders: {L: [L - 1]} the swap's permutation of the positions before the read-out, per
            length (None: the mirror).
        keep_norm: rescale each changed state to its own norm.
    """

    curves: dict[int, Tensor]
    orders: dict[int, Tensor] | None = None
    keep_norm: bool = True
    site = "resid_pre"

    @classmethod
    def mirror(cls, prompts: PromptStates, *, keep_norm: bool = True) -> PositionMeanSwap:
        """The control: the curves of every length with at least `MIN_FIT` prompts, mirrored.

        Raises:
            ValueError: no length has `MIN_FIT` prompts.
        """
        return cls(curves=position_curves(prompts), keep_norm=keep_norm)

    @classmethod
    def fit(cls, prompts: PromptStates, *, seed: int = 0, keep_norm: bool = True) -> Any:
        """The swap: per length, among `CANDIDATES` seeded permutations that scatter
        neighbours (`scattering_permutations`), the one whose mean change of the fitting
        states is closest to the mirror's.

        Raises:
            ValueError: no length has `MIN_FIT` prompts.
        """
        mirror = cls.mirror(prompts, keep_norm=keep_norm)
        orders = {}
        for length in mirror.curves:
            states = prompts[length][0].double()
            target = _change(mirror, states)
            best = None
            for perm in scattering_permutations(length - 1, seed):
                size = _change(cls(mirror.curves, {length: perm}, keep_norm), states)
                if best is None or abs(size - target) < best[0]:
                    best = (abs(size - target), perm)
            orders[length] = best[1]
        return cls(mirror.curves, orders, keep_norm)

    def order(self, length: int) -> Tensor:
        """[length - 1] the position whose curve each position before the read-out takes, in a
        prompt of `length` tokens."""
        n = length - 1
        return torch.arange(n - 1, -1, -1) if self.orders is None else self.orders[length]

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        n = resid.shape[1]
        if readout is None or bool(readout.any()):
            raise UsageError(
                f"{type(self).__name__} acts on the prompt positions before the read-out, the "
                "read-out kept (intervene(..., keep_readout=True), readout='kept')"
            )
        length = n + 1
        if length not in self.curves or (self.orders is not None and length not in self.orders):
            raise UsageError(
                f"{type(self).__name__} has no position curve for prompts of {length} tokens; "
                f"fitted: {sorted(self.curves)}"
            )
        curve = self.curves[length][:n].to(device=resid.device, dtype=resid.dtype)
        order = self.order(length).to(resid.device)
        moved = resid + (curve[order] - curve)
        return with_norms(moved, resid.norm(dim=-1, keepdim=True)) if self.keep_norm else moved


def position_curves(prompts: PromptStates) -> dict[int, Tensor]:
    """{L: [L, d_model]} the position part (`adjpos.decompose`) of each length's prompt
    states after removing each token's mean state over the prompts of every length.

    Raises:
        ValueError: no length has `MIN_FIT` prompts.
    """
    fitted = {length: pair for length, pair in prompts.items() if pair[0].shape[0] >= MIN_FIT}
    if not fitted:
        raise UsageError(f"position curves need {MIN_FIT} prompts of one length; got none")
    states = torch.cat([s.double().reshape(-1, s.shape[-1]) for s, _ in prompts.values()])
    tokens = torch.cat([t.reshape(-1) for _, t in prompts.values()]).long()
    vocab = int(tokens.max()) + 1
    sums = torch.zeros(vocab, states.shape[1], dtype=torch.float64).index_add_(0, tokens, states)
    counts = torch.bincount(tokens, minlength=vocab).clamp_min(1)
    token_mean = sums / counts[:, None]
    return {
        length: decompose(s.double() - token_mean[t.long()]).position
        for length, (s, t) in sorted(fitted.items())
    }


def scattering_permutations(n: int, seed: int) -> list[Tensor]:
    """Up to `CANDIDATES` distinct seeded permutations of range(n) under which no two
    neighbours stay neighbours and no position stays in place; where the length allows none
    (n < 5 for neighbours), the draws with the fewest such pairs."""
    gen = derived_generator(seed, "scattering permutations", n)
    drawn = {}
    for _ in range(8 * CANDIDATES):
        perm = torch.randperm(n, generator=gen)
        kept = int(((perm[1:] - perm[:-1]).abs() == 1).sum() + (perm == torch.arange(n)).sum())
        drawn.setdefault(tuple(perm.tolist()), kept)
    fewest = min(drawn.values(), default=0)
    best = [torch.tensor(p, dtype=torch.long) for p, k in drawn.items() if k == fewest]
    return best[:CANDIDATES] or [torch.arange(n)]


def _change(intervention: PositionMeanSwap, states: Tensor) -> float:
    """Mean relative change of the prompt states before the read-out position."""
    before = states[:, :-1]
    after = intervention(before, readout=torch.zeros(before.shape[1], dtype=torch.bool))
    return float(relative_change(before, after))
