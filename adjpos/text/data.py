"""`TextTask`: windows of running text for `adjpos.train` (with ``loss="sequence"``).

A text "task" has no prompts and answers: a sample is `context` consecutive tokens cut at a
uniform random start from one split's token stream, and the loss is every next token. It
follows the part of the `Task` contract the trainer uses (``name``, ``to_dict``, ``max_len``,
``sample`` with an explicit generator), and evaluates itself (`evaluate`): mean next-token loss
and accuracy on fixed validation windows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from adjpos.tasks import TaskBatch
from adjpos.validation import UsageError, check_generator, check_positive_int

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True, eq=False)
class TextTask:
    """Windows of `context` tokens from token streams by split.

    Attributes:
        context: tokens per window (the training context).
        d_vocab: the tokenizer's vocabulary size (the model's d_vocab must be at least this).
        splits: one 1-d integer tensor of token ids per split (``"train"`` required;
            ``"validation"`` for evaluation).

    Example:
        >>> task = TextTask(4, 10, {"train": torch.arange(10), "validation": torch.arange(5)})
        >>> task.sample(2, generator=torch.Generator().manual_seed(0)).tokens.shape
        torch.Size([2, 4])
    """

    name = "text"
    context: int
    d_vocab: int
    splits: dict[str, Tensor] = field(repr=False)

    def __post_init__(self) -> None:
        check_positive_int("context", self.context)
        check_positive_int("d_vocab", self.d_vocab)
        if "train" not in self.splits:
            raise UsageError("a TextTask needs a 'train' split")
        for name, ids in self.splits.items():
            if name not in SPLITS:
                raise UsageError(f"unknown split {name!r}; allowed: {list(SPLITS)}")
            if ids.ndim != 1 or ids.numel() <= self.context:
                raise UsageError(
                    f"split {name!r} holds {ids.numel()} tokens; a window needs more than "
                    f"context={self.context}"
                )
            if int(ids.min()) < 0 or int(ids.max()) >= self.d_vocab:
                raise UsageError(f"split {name!r} holds token ids outside [0, {self.d_vocab})")

    @property
    def max_len(self) -> int:
        """Width of a sampled batch: the context."""
        return self.context

    def to_dict(self) -> dict[str, Any]:
        """What identifies the data (a resumed run must see the same): the context, the
        vocabulary size, and each split's token count and sha256."""
        splits = {name: _describe(ids) for name, ids in sorted(self.splits.items())}
        return {"context": self.context, "d_vocab": self.d_vocab, "splits": splits}

    def windows(self, n: int, *, generator: torch.Generator, split: str = "train") -> Tensor:
        """`n` windows of `context` tokens from `split`, each at a uniform random start."""
        check_positive_int("the number of windows", n)
        check_generator(generator)
        if split not in self.splits:
            raise UsageError(f"this TextTask has no {split!r} split; it has {list(self.splits)}")
        ids = self.splits[split]
        starts = torch.randint(0, ids.numel() - self.context + 1, (n,), generator=generator)
        return ids[starts[:, None] + torch.arange(self.context)].long()

    def sample(self, n: int, *, generator: torch.Generator, split: str = "train") -> TaskBatch:
        """`n` windows as a `TaskBatch`: every position real (lengths = context), loss mask
        on every position whose next token is in the window."""
        tokens = self.windows(n, generator=generator, split=split)
        mask = torch.ones_like(tokens, dtype=torch.bool)
        mask[:, -1] = False
        lengths = torch.full((n,), self.context)
        return TaskBatch(tokens, mask, lengths, (), ())

    def evaluate(self, model: Any, windows: Tensor, batch_size: int = 64) -> dict[str, float]:
        """Mean next-token cross-entropy (``loss``, nats) and accuracy of `model` over
        `windows`, every position after the first predicted."""
        total, correct, count = 0.0, 0, 0
        device = next(model.parameters()).device
        with torch.no_grad():
            for chunk in windows.split(batch_size):
                chunk = chunk.to(device)
                logits, target = model(chunk)[:, :-1], chunk[:, 1:]
                loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="sum")
                total += float(loss)
                correct += int((logits.argmax(-1) == target).sum())
                count += target.numel()
        return {"loss": total / count, "accuracy": correct / count}


def _describe(ids: Tensor) -> dict[str, Any]:
    digest = hashlib.sha256(ids.to(torch.int32).numpy().tobytes()).hexdigest()
    return {"tokens": int(ids.numel()), "sha256": digest}
