"""`train`: one nanoGPT-style loop; progress goes to a tqdm bar, a callback and `logging`.

Every batch is drawn from a generator seeded by (seed, step), and the learning rate is a pure
function of the step, so a run resumed from its last checkpoint replays exactly the batches and
updates of an uninterrupted one. The output folder is an `adjpos.runs.RunFolder`; the
checkpoint is one file of plain state dicts, read back with ``weights_only=True``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from adjpos.models import is_bridge, is_position_free, save_model, save_snapshot
from adjpos.runs import RunFolder, atomic_write, write_json
from adjpos.seeds import derived_generator
from adjpos.tasks import VOCAB_SIZE, Task
from adjpos.text.data import TextTask
from adjpos.training.config import TrainConfig, TrainResult
from adjpos.training.decode import evaluate
from adjpos.validation import UsageError, resolve_device

log = logging.getLogger(__name__)
CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.json"


def train(
    model: Any,
    task: Task | TextTask,
    cfg: TrainConfig,
    *,
    out_dir: str | os.PathLike | None = None,
    resume: bool = False,
    on_step: Callable[[dict[str, float | int]], None] | None = None,
    progress: bool | None = None,
) -> TrainResult:
    """Train `model` in place on `task`, with the loss `cfg.loss` names.

    Args:
        model: a HookedTransformer (e.g. from `adjpos.build_model`) or a bridged Hugging
            Face model (`adjpos.load_hf`, e.g. of `adjpos.hf.task_config`) with d_vocab >= the
            task vocabulary and n_ctx >= ``task.max_len``.
        task: from `adjpos.get_task`, or windows of text (`adjpos.text.TextTask`, with
            ``cfg.loss="sequence"``; its evaluation is the next-token loss, ``val_loss`` in
            the history, and accuracy on fixed validation windows).
        cfg: the run's settings.
        out_dir: checkpoint folder (`adjpos.load_model` reads it, and with ``step=s`` the
            snapshots ``cfg.snapshots`` asks for), with ``metrics.json`` and ``checkpoint.pt``.
        resume: continue the run saved in `out_dir` (same config and task), or start one.
        on_step: called after every step with ``{"step", "loss", "lr"}`` (plus ``"accuracy"``
            after an evaluation).
        progress: show a progress bar (default: only on a terminal).
    """
    _check_fits(model, task, cfg)
    folder = Path(out_dir) if out_dir is not None else None
    device = resolve_device(cfg.device)
    if next(model.parameters()).device != device:
        model.to(device)
    was_free = is_position_free(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    run = {"step": 0, "seconds": 0.0, "history": [], "per_length": {}, "stopped_early": False}
    identity = {"train": cfg.to_dict(), "task": {"name": task.name, **task.to_dict()}}
    if hasattr(model, "adjpos_config"):
        identity["model"] = model.adjpos_config.to_dict()
    elif is_bridge(model):  # a Hugging Face model: its config decides the architecture
        config = model.original_model.config.to_dict()
        identity["model"] = {"hf": {k: v for k, v in config.items() if k != "transformers_version"}}
    if folder is not None:
        run = _start_or_resume(folder, resume, identity, model, opt, run)
    eval_gen = derived_generator(cfg.seed, "evaluation prompts")
    if isinstance(task, TextTask):  # fixed validation windows: next-token loss and accuracy
        eval_prompts = task.windows(cfg.eval_size, generator=eval_gen, split="validation")
    else:
        eval_prompts = task.draw_prompts(cfg.eval_size, generator=eval_gen, split="test")
    start = time.perf_counter() - run["seconds"]
    bar = tqdm(
        total=cfg.steps,
        initial=run["step"],
        desc=f"train {task.name}",
        disable=None if progress is None else not progress,
    )
    keep = cfg.snapshot_steps() if folder is not None else frozenset()
    if run["step"] == 0 and 0 in keep:
        save_snapshot(model, folder, 0)
    model.train()
    while run["step"] < cfg.steps and not run["stopped_early"]:
        step = run["step"]
        loss = _step(model, task, cfg, opt, step, device)
        run["step"] = step + 1
        info = {"step": step + 1, "loss": loss, "lr": cfg.lr_at(step)}
        if run["step"] % cfg.eval_every == 0 or run["step"] == cfg.steps:
            model.eval()
            if isinstance(task, TextTask):
                scores = task.evaluate(model, eval_prompts)
                accuracy, info["val_loss"] = scores["accuracy"], scores["loss"]
            else:
                accuracy, run["per_length"] = evaluate(model, task, eval_prompts)
            model.train()
            info["accuracy"] = accuracy
            run["seconds"] = time.perf_counter() - start
            run["history"].append({**info, "seconds": run["seconds"]})
            run["stopped_early"] = (
                cfg.target_accuracy is not None and accuracy >= cfg.target_accuracy
            )
            log.info("step %d loss %.4f accuracy %.4f", step + 1, loss, accuracy)
            if folder is not None:
                _save(folder, identity, model, opt, run)
        last = run["stopped_early"] or run["step"] == cfg.steps
        if run["step"] in keep or (keep and last):
            save_snapshot(model, folder, run["step"])
        bar.update(1)
        bar.set_postfix(
            loss=f"{loss:.3f}",
            acc=run["history"][-1]["accuracy"] if run["history"] else float("nan"),
        )
        if on_step is not None:
            on_step(info)
    bar.close()
    model.eval()
    free = is_position_free(model)
    if was_free and not free:
        raise RuntimeError("the model lost its NoPE property during training")
    last = run["history"][-1] if run["history"] else {"accuracy": float("nan")}
    return TrainResult(
        steps=run["step"],
        accuracy=last["accuracy"],
        per_length_accuracy={int(k): v for k, v in run["per_length"].items()},
        history=run["history"],
        seconds=run["seconds"],
        stopped_early=run["stopped_early"],
        position_free=free,
    )


def answer_loss(logits: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of next-token predictions at the masked (answer) positions."""
    picked = mask[:, :-1]
    return F.cross_entropy(logits[:, :-1][picked], tokens[:, 1:][picked])


def sequence_mask(lengths: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The loss mask of ``loss="sequence"``: True at t exactly where token t + 1 is a real
    token (t <= lengths - 2), so every token after the first is predicted and padding never.

    >>> sequence_mask(torch.tensor([3, 1]), torch.zeros(2, 4, dtype=torch.long)).tolist()
    [[True, True, False, False], [False, False, False, False]]
    """
    positions = torch.arange(tokens.shape[1])
    return positions[None, :] < (lengths[:, None] - 1)


def batch_generator(seed: int, step: int) -> torch.Generator:
    """The generator of the batch at `step`, a pure function of (seed, step) that no other
    (seed, step) shares. (The shipped models were trained with earlier batch seeds,
    ``seed * 1_000_000_007 + step``: their ``train.json`` command gives other weights.)"""
    return derived_generator(seed, "batch", step)


def _step(model, task, cfg, opt, step, device) -> float:
    batch = task.sample(cfg.batch_size, generator=batch_generator(cfg.seed, step))
    mask = batch.loss_mask if cfg.loss == "answer" else sequence_mask(batch.lengths, batch.tokens)
    tokens, mask = batch.tokens.to(device), mask.to(device)
    for group in opt.param_groups:
        group["lr"] = cfg.lr_at(step)
    loss = answer_loss(model(tokens), tokens, mask)
    loss.backward()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], cfg.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def _check_fits(model: Any, task: Task | TextTask, cfg: TrainConfig) -> None:
    if not isinstance(task, Task | TextTask):
        raise TypeError(
            "task must be an adjpos task (adjpos.get_task) or an adjpos.text.TextTask, got "
            f"{type(task).__name__}"
        )
    if isinstance(task, TextTask) and cfg.loss != "sequence":
        raise UsageError(f"text has no answers: train on it with loss='sequence', not {cfg.loss!r}")
    d_vocab = task.d_vocab if isinstance(task, TextTask) else VOCAB_SIZE
    if model.cfg.d_vocab < d_vocab:
        raise UsageError(
            f"the model's d_vocab={model.cfg.d_vocab} is below the task vocabulary size {d_vocab}"
        )
    if model.cfg.n_ctx < task.max_len:
        raise UsageError(
            f"the model's n_ctx={model.cfg.n_ctx} is below the task's longest "
            f"sequence ({task.max_len} tokens)"
        )


def _start_or_resume(folder, resume, identity, model, opt, run) -> dict:
    if RunFolder.exists(folder) and not resume:
        raise UsageError(
            f"{folder} already holds a training run; pass resume=True "
            "(--resume) to continue it, or choose another folder"
        )
    if not resume and folder.exists() and any(folder.iterdir()):
        raise UsageError(
            f"{folder} is not empty; pass resume=True to continue a run there, "
            "or choose an empty folder"
        )
    train_cfg = identity["train"]
    RunFolder.open(
        folder,
        kind="train",
        spec=_trajectory(identity),
        seed=train_cfg["seed"],
        device=train_cfg["device"],
    )
    path = folder / CHECKPOINT
    if not path.is_file():
        return run
    state = torch.load(path, map_location=next(model.parameters()).device, weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    run = state["run"]
    # A new target only decides where the same trajectory stops: a higher one continues it.
    target = train_cfg["target_accuracy"]
    last = run["history"][-1]["accuracy"] if run["history"] else float("nan")
    run["stopped_early"] = target is not None and last >= target
    return run


def _trajectory(identity: dict) -> dict:
    """What decides the weights step by step: everything but the early-stop target, the
    snapshots kept and the device (provenance: a run may resume on another)."""
    ignored = ("target_accuracy", "device", "snapshots")
    train = {k: v for k, v in identity["train"].items() if k not in ignored}
    if train.get("loss") == "answer":  # the default: runs from before the option resume
        del train["loss"]
    return {**identity, "train": train}


def _save(folder, identity, model, opt, run) -> None:
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "run": run}
    atomic_write(folder / CHECKPOINT, lambda tmp: torch.save(state, tmp))
    save_model(model, folder)
    metrics = {k: run[k] for k in ("step", "seconds", "history", "stopped_early")}
    metrics["per_length_accuracy"] = run["per_length"]
    write_json(folder / METRICS, {**identity, **metrics})
