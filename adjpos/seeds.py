"""Derived randomness: one seed per (seed, labels), never arithmetic on seeds.

Every generator that is not the user's own seed (a control's draws, a held-out split, the
evaluation prompts of a training run) takes its seed from `derive_seed`, so two derived
streams never collide by accident (``seed * 1_000_003 + k`` does for some seeds and offsets)
and each stream is named by what it is for.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch


def derive_seed(seed: int, *labels: int | str, bits: int = 63) -> int:
    """A seed for a derived generator, from the run's `seed` (a non-negative int) and the
    `labels` that name the stream (names and indices, mixed by numpy's `SeedSequence`):
    equal arguments give equal seeds, any other seed, label or order an unrelated one.

    Returns a non-negative int below 2**`bits`: 63, or 32 for a seed that reaches numpy's
    legacy seeding (scikit-learn's `random_state`, `adjpos.ModelConfig`'s seed). A negative
    int, a label that is not an int or str, or other `bits` raise `ValueError`.

    Example:
        >>> derive_seed(0, "draw", 3) == derive_seed(0, "draw", 3)
        True
        >>> derive_seed(0, "draw", 3) == derive_seed(1, "draw", 3)
        False
    """
    if bits not in (63, 32):
        raise ValueError(f"bits must be 63 or 32, got {bits!r}")
    key = [_label(seed, "seed")] + [_label(label, "label") for label in labels]
    state = np.random.SeedSequence(entropy=key[0], spawn_key=tuple(key[1:])).generate_state(
        2, np.uint32
    )
    if bits == 32:
        return int(state[0])
    return int((int(state[0]) << 31) ^ int(state[1])) & (2**63 - 1)


def derived_generator(seed: int, *labels: int | str, device: str | torch.device = "cpu"):
    """A `torch.Generator` on `device` seeded with ``derive_seed(seed, *labels)``."""
    return torch.Generator(device=device).manual_seed(derive_seed(seed, *labels))


def _label(value: object, what: str) -> int:
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8"))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"a {what} must be a non-negative int, got {value}")
        return int(value)
    raise ValueError(f"a {what} must be an int or a str, got {type(value).__name__} {value!r}")
