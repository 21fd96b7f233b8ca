"""Greedy decoding and exact-match evaluation on a task."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor

from adjpos.capture import check_tokens
from adjpos.engines import small_work_threads
from adjpos.tasks import EOS_ID, Task
from adjpos.validation import UsageError


def predict(model: Any, task: Task, prompts: Sequence[str]) -> list[str]:
    """Answer each prompt by greedy decoding until the end-of-answer token, prompts of one
    length together (no padding ever enters the model); `ValueError` for a malformed prompt.
    """
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings, not one string")
    with small_work_threads(model):
        return _by_length(task, prompts, lambda group: _greedy(model, task, group))


def predict_cached(
    model: Any, task: Task, prompts: Sequence[str], *, prompt_pass: Any = None
) -> list[str]:
    """`predict` with a key-value cache on a HookedTransformer: each prompt runs once, inside
    the context manager `prompt_pass()` when given (e.g. an intervention with
    ``keep_readout=True``), then each new token runs alone, outside it. It equals `predict`
    with the change active at every step when the change of a position does not depend on the
    tokens after it; a test checks it on every intervention.
    """
    from transformer_lens import HookedTransformer

    if not isinstance(model, HookedTransformer):
        raise UsageError(f"predict_cached needs a HookedTransformer, got {type(model).__name__}")
    with small_work_threads(model):
        return _by_length(
            task, prompts, lambda group: _greedy_cached(model, task, group, prompt_pass)
        )


def _by_length(task: Task, prompts: Sequence[str], answer: Any) -> list[str]:
    """`answer(group)` of each group of equal-length prompts (checked first), in the
    prompts' order."""
    for prompt in prompts:
        task.check(prompt)
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, prompt in enumerate(prompts):
        by_length[len(prompt)].append(i)
    answers = [""] * len(prompts)
    for indices in by_length.values():
        for i, text in zip(indices, answer([prompts[i] for i in indices]), strict=True):
            answers[i] = text
    return answers


def evaluate(
    model: Any, task: Task, prompts: Sequence[str], *, per_prompt: bool = False
) -> tuple[float, dict[int, float]] | list[bool]:
    """Exact-match accuracy (the greedy answer equals ``task.solve(p)``) overall and by prompt
    length in characters: ``(accuracy, {length: accuracy})``, each prompt decoded once.

    With `per_prompt`, each prompt's hit instead (a list of bools in the order of `prompts`,
    whose mean is that accuracy), e.g. for an interval over the prompts
    (``adjpos.stats.wilson_interval(sum(hits), len(hits))``).

    Example:
        >>> import adjpos, torch
        >>> model, task = adjpos.load_pretrained("reversal")
        >>> prompts = task.draw_prompts(6, generator=torch.Generator().manual_seed(0))
        >>> hits = adjpos.evaluate(model, task, prompts, per_prompt=True)
        >>> sum(hits) / len(hits) == adjpos.evaluate(model, task, prompts)[0]
        True
    """
    answers = predict(model, task, prompts)
    hits = [answer == task.solve(p) for p, answer in zip(prompts, answers, strict=True)]
    if per_prompt:
        return hits
    by_length: dict[int, list[bool]] = defaultdict(list)
    for prompt, hit in zip(prompts, hits, strict=True):
        by_length[len(prompt)].append(hit)
    total = sum(hits) / len(prompts)
    return total, {n: sum(v) / len(v) for n, v in sorted(by_length.items())}


def _greedy_cached(model: Any, task: Task, prompts: list[str], prompt_pass: Any) -> list[str]:
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

    tokens = check_tokens(model, torch.stack([task.encode(p) for p in prompts]))
    batch, length = tokens.shape
    cache = TransformerLensKeyValueCache.init_cache(model.cfg, tokens.device, batch)
    done = torch.zeros(batch, dtype=torch.bool, device=tokens.device)
    out = []
    with torch.inference_mode():
        with prompt_pass() if prompt_pass is not None else nullcontext():
            logits = model(tokens, past_kv_cache=cache, attention_mask=torch.ones_like(tokens))
        for _ in range(task.max_answer_len + 1):
            if length >= model.cfg.n_ctx or bool(done.all()):
                break
            nxt = torch.where(done, EOS_ID, logits[:, -1].argmax(-1))
            done |= nxt == EOS_ID
            out.append(nxt)
            length += 1
            step = nxt[:, None]
            logits = model(step, past_kv_cache=cache, attention_mask=torch.ones_like(step))
    return _answers(task, out, batch)


def _answers(task: Task, out: list[Tensor], batch: int) -> list[str]:
    """The answer of each row from its generated tokens (up to the end-of-answer token)."""
    generated = torch.stack(out, dim=1).cpu() if out else torch.zeros(batch, 0)
    answers = []
    for row in generated.long():
        ids = row.tolist()
        ids = ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
        answers.append(task.decode(torch.tensor(ids, dtype=torch.long)))
    return answers


def _greedy(model: Any, task: Task, prompts: list[str]) -> list[str]:
    tokens = check_tokens(model, torch.stack([task.encode(p) for p in prompts]))
    done = torch.zeros(len(prompts), dtype=torch.bool, device=tokens.device)
    out = []
    with torch.inference_mode():
        for _ in range(task.max_answer_len + 1):
            if tokens.shape[1] >= model.cfg.n_ctx or bool(done.all()):
                break
            nxt = model(tokens)[:, -1].argmax(-1)
            nxt = torch.where(done, EOS_ID, nxt)
            done |= nxt == EOS_ID
            out.append(nxt)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return _answers(task, out, len(prompts))
