"""The prompts a task's causal tests run on: fresh held-out test prompts, other held-out prompts
to fit the fitted interventions on, and the states those give at a layer."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from adjpos.capture import capture_residuals
from adjpos.interventions.curve.position import MIN_FIT
from adjpos.seeds import derived_generator
from adjpos.tasks import Task, TaskBatch
from adjpos.types import PromptStates
from adjpos.validation import UsageError, is_int


@dataclass(frozen=True)
class HeldOut:
    """Fresh test-split prompts: `fit` for the interventions that are fitted (the position
    subspace, LEACE), `test` for the measurements (no prompt in both)."""

    fit: TaskBatch
    test: TaskBatch


def held_out_prompts(
    task: Task, n_prompts: int, *, n_fit: int | None = None, seed: int = 0
) -> HeldOut:
    """`n_fit` (default `n_prompts`) fitting prompts and about `n_prompts` test prompts of the
    task's test split, distinct; test prompts whose (prompt, answer) lengths occur only once
    are dropped (so every prompt has a partner of its length: `norm_permute_control` takes
    norms from it), so slightly fewer may remain.

    Raises:
        ValueError: `n_prompts` is not an int >= 2, or no two test prompts share their lengths.
    """
    if not is_int(n_prompts) or n_prompts < 2:
        raise UsageError(f"n_prompts must be an int >= 2, got {n_prompts!r}")
    n_fit = n_prompts if n_fit is None else n_fit
    gen = derived_generator(seed, "held-out prompts")
    drawn = task.draw_prompts(3 * (n_fit + n_prompts), generator=gen, split="test")
    drawn = list(dict.fromkeys(drawn))  # distinct, in order
    fit, rest = drawn[:n_fit], drawn[n_fit : n_fit + n_prompts]
    if len(fit) < 2 or len(rest) < 2:
        raise UsageError(f"the {task.name} test split holds too few distinct prompts")
    shapes = [(len(p), len(task.solve(p))) for p in rest]
    count = Counter(shapes)
    test = [p for p, shape in zip(rest, shapes, strict=True) if count[shape] >= 2]
    if not test:
        raise UsageError(f"no two of the {len(rest)} test prompts share their lengths; draw more")
    return HeldOut(fit=task.encode_batch(fit), test=task.encode_batch(test))


def fit_states(model: Any, batch: TaskBatch, layer: int) -> tuple[Tensor, Tensor]:
    """Hidden states entering block `layer` at every real position of `batch`, and their
    positions (for fitting the position subspace and LEACE)."""
    acts = capture_residuals(model, batch.tokens, layers=[layer], progress=False)[0]
    real = torch.arange(acts.shape[1]) < batch.lengths[:, None]
    positions = torch.arange(acts.shape[1]).expand_as(real)
    return acts.cpu()[real], positions[real]


def fit_prompt_states(
    model: Any, task: Task, held: HeldOut, layer: int, *, seed: int = 0
) -> PromptStates:
    """The states entering block `layer` at every position of fitting prompts (the prompts
    alone, no answers), with their tokens, by prompt length (for `position_curves`): the
    prompts of ``held.fit``, and for each prompt length of ``held.test`` with fewer than
    `MIN_FIT` of them, more prompts of that length that are not test prompts (from the test
    split, then, for a length too rare there, the train split: these prompts only fit the
    curve, nothing is measured on them).

    Raises:
        ValueError: some test prompt length still has fewer than `MIN_FIT` fitting prompts.
    """
    by_length: dict[int, list[str]] = defaultdict(list)
    for prompt in held.fit.prompts:
        by_length[len(task.encode(prompt))].append(prompt)
    need = {len(task.encode(p)) for p in held.test.prompts}
    taken = set(held.test.prompts) | set(held.fit.prompts)
    gen = derived_generator(seed, "more fitting prompts")
    for split in ("test", "train"):  # a rare length may need the train split's prompts
        for _ in range(10):
            short = {n for n in need if len(by_length[n]) < MIN_FIT}
            if not short:
                break
            for prompt in task.draw_prompts(1000, generator=gen, split=split):
                n = len(task.encode(prompt))
                if n in short and prompt not in taken and len(by_length[n]) < MIN_FIT:
                    by_length[n].append(prompt)
                    taken.add(prompt)
    short = sorted(n for n in need if len(by_length[n]) < MIN_FIT)
    if short:
        raise UsageError(
            f"fewer than {MIN_FIT} fitting prompts of length {short} for the position curve"
        )
    out = {}
    for n, prompts in sorted(by_length.items()):
        tokens = torch.stack([task.encode(p) for p in prompts])
        states = capture_residuals(model, tokens, layers=[layer], progress=False)[0]
        out[n] = (states.cpu(), tokens)
    return out
