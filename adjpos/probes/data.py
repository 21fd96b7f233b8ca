"""Probe inputs from a synthetic task: distinct sequences of one length, no padding.

Task sequences (prompt + answer + EOS) have mixed lengths, and the cosine feature sets and
order reconstruction need one length, so probing a task takes one length at a time.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.validation import UsageError, check_positive_int, is_int

_STALE_ROUNDS = 3


def sequences_of_length(
    task: Any,
    n: int,
    *,
    length: int | None = None,
    generator: torch.Generator,
    split: str = "test",
) -> Int[Tensor, "n length"]:
    """`n` distinct sequences of `task` (prompt, answer, EOS), all `length` tokens long.

    Prompts are drawn from `split` ("test" or "train") with `generator` in rounds until `n`
    distinct sequences of the length have been seen (a repeated sequence could sit in both a
    training and a test fold). `length` counts the EOS; its default is the length with the
    most distinct sequences in the first round (on a tie, the longer). A split with fewer than
    `n` raises `ValueError` giving the lengths seen and how many each had.

    Example:
        >>> from adjpos.tasks import get_task
        >>> gen = torch.Generator().manual_seed(0)
        >>> sequences_of_length(get_task("reversal"), 4, length=29, generator=gen).shape
        torch.Size([4, 29])
    """
    check_positive_int("n", n)
    if length is not None and not (is_int(length) and 1 <= length <= task.max_len):
        raise UsageError(
            f"length must be an int in [1, {task.max_len}] for {task.name}, got {length!r}"
        )
    seen: dict[int, dict[tuple[int, ...], None]] = {}
    found, stale = 0, 0
    while stale < _STALE_ROUNDS:
        batch = task.sample(max(4 * n, 256), generator=generator, split=split)
        for row, size in zip(batch.tokens.tolist(), batch.lengths.tolist(), strict=True):
            seen.setdefault(size, {})[tuple(row[:size])] = None
        if length is None:  # short lengths repeat (10 one-digit reversals): count distinct ones
            length = max(seen, key=lambda size: (len(seen[size]), size))
        if len(seen.get(length, ())) >= n:
            return torch.tensor(list(seen[length])[:n])
        # A length with few distinct sequences stops growing: give up after a few dry rounds.
        stale = stale + 1 if len(seen.get(length, ())) == found else 0
        found = len(seen.get(length, ()))
    available = {size: len(rows) for size, rows in sorted(seen.items())}
    raise UsageError(
        f"the {split!r} split of {task.name} gave only {len(seen.get(length, ()))} distinct "
        f"sequences of length {length} (wanted {n}); distinct sequences seen per length: "
        f"{available}"
    )
