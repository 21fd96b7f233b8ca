"""Synthetic tasks (addition, reversal, indexing, ordering) over one shared vocabulary.

Example:
    >>> import torch
    >>> task = get_task("reversal", max_digits=8)
    >>> batch = task.sample(4, generator=torch.Generator().manual_seed(0))
    >>> batch.tokens.shape, batch.tokens.shape[1] == task.max_len
    (torch.Size([4, 23]), True)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from adjpos.tasks.addition import Addition
from adjpos.tasks.base import Task, TaskBatch
from adjpos.tasks.indexing import Indexing
from adjpos.tasks.ordering import Ordering
from adjpos.tasks.reversal import Reversal
from adjpos.tasks.split import SPLITS, TEST_FRACTION, split_of
from adjpos.tasks.vocab import (
    EOS,
    EOS_ID,
    PAD,
    PAD_ID,
    VOCAB,
    VOCAB_SIZE,
    decode,
    encode,
    show_tokens,
)
from adjpos.validation import UsageError

_REGISTRY: dict[str, type[Task]] = {
    cls.name: cls for cls in (Addition, Reversal, Indexing, Ordering)
}
TASKS = tuple(_REGISTRY)


def get_task(name: str, **params: Any) -> Task:
    """The task called `name`, built with `params` (its dataclass fields).

    Raises:
        ValueError: `name` is not one of `TASKS`, a parameter is unknown (the message lists
            the task's parameters) or has an invalid value.

    Example:
        >>> get_task("addition", max_digits=3)
        Addition(min_digits=1, max_digits=3, max_prompt_len=9)
    """
    if name not in _REGISTRY:
        raise UsageError(f"unknown task {name!r}; choose one of {list(TASKS)}")
    cls = _REGISTRY[name]
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise UsageError(f"unknown parameters {unknown} for task {name!r}; allowed: {allowed}")
    return cls(**params)


__all__ = [
    "EOS",
    "EOS_ID",
    "PAD",
    "PAD_ID",
    "SPLITS",
    "TASKS",
    "TEST_FRACTION",
    "VOCAB",
    "VOCAB_SIZE",
    "Addition",
    "Indexing",
    "Ordering",
    "Reversal",
    "Task",
    "TaskBatch",
    "decode",
    "encode",
    "get_task",
    "show_tokens",
    "split_of",
]
