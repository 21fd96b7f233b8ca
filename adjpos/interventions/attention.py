"""An intervention on the attention pattern: block l's pattern replaced by uniform causal
attention, the first-layer theory's idealisation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.validation import UsageError, is_int


@dataclass(frozen=True)
class UniformAttention:
    """Block l's attention pattern replaced by uniform causal attention: position k attends
    1 / (k + 1) to each of positions 0..k. `heads`: which heads (default: all)."""

    heads: tuple[int, ...] | None = None
    site = "pattern"

    def check(self, model: Any) -> None:
        """Every head index is in range for `model`."""
        n_heads = model.cfg.n_heads
        bad = [h for h in self.heads or () if not is_int(h) or not 0 <= h < n_heads]
        if bad:
            raise UsageError(f"heads {bad} are out of range; the model has {n_heads} heads")

    def __call__(
        self, pattern: Float[Tensor, "batch head query key"], readout: Any = None
    ) -> Tensor:
        q, k = pattern.shape[-2:]
        causal = torch.ones(q, k, device=pattern.device, dtype=pattern.dtype).tril()
        uniform = causal / causal.sum(dim=-1, keepdim=True)
        if self.heads is None:
            return uniform.expand_as(pattern).clone()
        out = pattern.clone()
        out[:, list(self.heads)] = uniform
        return out
