"""`TrainConfig`: everything that decides a training run, frozen; `TrainResult`: what it gives."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from adjpos.validation import DEVICES, UsageError, check_choice, check_positive_int, known_fields
from adjpos.validation import help_field as _help

LOSSES = ("answer", "sequence")


@dataclass(frozen=True)
class TrainConfig:
    """AdamW with linear warm-up and cosine decay, answer-only loss (or, with
    ``loss="sequence"``, every next token), periodic exact-match eval.

    Example:
        >>> cfg = TrainConfig(steps=100, warmup_steps=9)
        >>> cfg.lr_at(0), cfg.lr_at(9), TrainConfig(warmup_steps=0).lr_at(0)
        (0.0001, 0.001, 0.001)
    """

    steps: int = _help("optimiser steps (at most; early stop may end sooner)", 20_000)
    batch_size: int = _help("sequences per step", 128)
    lr: float = _help("peak learning rate", 1e-3)
    weight_decay: float = _help("AdamW weight decay", 0.1)
    warmup_steps: int = _help("steps of linear warm-up from 0 to lr", 200)
    min_lr_ratio: float = _help("final lr as a fraction of lr (cosine decay)", 0.1)
    grad_clip: float = _help("max global gradient norm (0 = no clipping)", 1.0)
    eval_every: int = _help("steps between exact-match evaluations and checkpoints", 500)
    eval_size: int = _help("held-out test prompts per evaluation", 1000)
    target_accuracy: float | None = _help(
        "stop once eval accuracy reaches this (None: never)", 0.999
    )
    loss: str = _help(
        "which next-token predictions the loss averages: 'answer' (the answer characters and "
        "EOS) or 'sequence' (every real token after the first: prompt, answer and EOS; never "
        "padding)",
        "answer",
    )
    seed: int = _help("seed of the training batches and the evaluation prompts", 0)
    snapshots: str = _help(
        "steps whose weights are kept in snapshots/: 'log' (step 0, every power of two from "
        "32, and the last step), 'none', or comma-separated steps such as '0,100,1000'",
        "log",
    )
    device: str = _help(f"one of {DEVICES}; auto = cuda when available", "auto")

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_every", "eval_size"):
            check_positive_int(name, getattr(self, name))
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise UsageError(f"warmup_steps must be an int >= 0, got {self.warmup_steps!r}")
        for name in ("lr", "weight_decay", "grad_clip"):
            if not isinstance(getattr(self, name), (int, float)) or getattr(self, name) < 0:
                raise UsageError(f"{name} must be a number >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise UsageError(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio!r}")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise UsageError(
                f"target_accuracy must lie in (0, 1] or be None, got {self.target_accuracy!r}"
            )
        check_choice("device", self.device, DEVICES)
        check_choice("loss", self.loss, LOSSES)
        self.snapshot_steps()

    def snapshot_steps(self) -> frozenset[int]:
        """The steps whose weights `train` keeps (the last step taken is kept as well unless
        snapshots is 'none').

        Example:
            >>> sorted(TrainConfig(steps=300).snapshot_steps())
            [0, 32, 64, 128, 256, 300]
            >>> sorted(TrainConfig(snapshots="0, 10").snapshot_steps())
            [0, 10]
        """
        spec = self.snapshots.strip() if isinstance(self.snapshots, str) else None
        if spec == "none":
            return frozenset()
        if spec == "log":
            powers = {2**k for k in range(5, self.steps.bit_length()) if 2**k <= self.steps}
            return frozenset({0, self.steps} | powers)
        try:
            steps = frozenset(int(part) for part in spec.split(",")) if spec else None
        except ValueError:
            steps = None
        if not steps or min(steps) < 0:
            raise UsageError(
                "snapshots must be 'log', 'none' or comma-separated steps >= 0 such as "
                f"'0,100,1000', got {self.snapshots!r}"
            )
        return steps

    def lr_at(self, step: int) -> float:
        """Learning rate of 0-based `step`: linear warm-up, then cosine decay to min_lr_ratio."""
        import math

        if step < self.warmup_steps:
            return self.lr * (step + 1) / (self.warmup_steps + 1) if self.warmup_steps else self.lr
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        floor = self.min_lr_ratio
        return self.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict; unknown keys are warned about (`adjpos.validation.known_fields`)."""
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class TrainResult:
    """What `train` did.

    Attributes:
        steps: optimiser steps taken in all (across resumes).
        accuracy: exact-match accuracy on the held-out prompts at the last evaluation.
        per_length_accuracy: that accuracy by prompt length in characters.
        history: one dict per evaluation (step, loss, lr, accuracy, seconds).
        seconds: training wall time in all (across resumes), evaluation included.
        stopped_early: the target accuracy was reached before `steps`.
        position_free: the model is position-free after training (checked, not assumed).
    """

    steps: int
    accuracy: float
    per_length_accuracy: dict[int, float]
    history: list[dict[str, float | int]]
    seconds: float
    stopped_early: bool
    position_free: bool
