"""The position curve: the part of a prompt state shared by every prompt of its length at its
position, with each token's mean state removed.

Song and Zhong's decomposition (`adjpos.decompose`) splits a state into a mean, a position
curve position[t] (shared by every sequence of one length), a context part and a residual. On
task prompts the mean state at a position also holds the format's fixed tokens (the "=" of an
addition sits at a fixed place for a given length), so the curve is fitted after removing each
token's mean state (over the fitting prompts of every length, where the fixed tokens occur at
many positions): position_L is the position part of h - token_mean[token]. The arms
(`adjpos.interventions.curve.arms`) change it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from adjpos.metrics import decompose
from adjpos.types import PromptStates
from adjpos.validation import UsageError

MIN_FIT = 4  # fitting prompts a length needs for its curve


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
