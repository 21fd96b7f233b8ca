"""``adjpos train``: train a model on a synthetic task, with checkpoints and resume."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adjpos.cli._options import (
    add_config_args,
    config_values,
    task_params,
)


def add_train_parser(commands: Any) -> None:
    from adjpos.tasks import TASKS
    from adjpos.training import TrainConfig

    train = commands.add_parser(
        "train",
        help="train a model on a synthetic task, with checkpoints and resume",
        description="Train a model (NoPE by default) on one task. d_vocab and n_ctx default to "
        "what the task needs. Writes DIR/model.safetensors, config.json, metrics.json, "
        "train.json (the command and its result) and resume.safetensors.",
    )
    train.add_argument("--task", required=True, choices=TASKS, help="the task")
    train.add_argument(
        "--task-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a task parameter, e.g. max_digits=8 (repeatable)",
    )
    train.add_argument("--out", required=True, type=Path, help="checkpoint folder")
    train.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_config_args(train, overrides={"d_vocab": None, "n_ctx": None})
    add_config_args(
        train,
        TrainConfig,
        title="training (TrainConfig fields)",
        rename={"seed": "data_seed", "device": "device"},
    )
    train.set_defaults(run=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    import shlex

    from adjpos import build_model
    from adjpos.models import ModelConfig
    from adjpos.tasks import VOCAB_SIZE, get_task
    from adjpos.training import TrainConfig, train

    task = get_task(args.task, **task_params(args.task_param))
    values = config_values(args)
    values["d_vocab"] = values["d_vocab"] or VOCAB_SIZE
    values["n_ctx"] = values["n_ctx"] or task.max_len
    model = build_model(ModelConfig(**values))
    cfg = TrainConfig(**config_values(args, TrainConfig, {"seed": "data_seed"}))
    result = train(model, task, cfg, out_dir=args.out, resume=args.resume, progress=True)
    summary = {
        "command": "adjpos " + shlex.join(args.argv),
        "task": task.name,
        "steps": result.steps,
        "accuracy": result.accuracy,
        "eval_size": cfg.eval_size,
        "seconds": round(result.seconds, 1),
        "stopped_early": result.stopped_early,
        "position_free": result.position_free,
        "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }
    from adjpos.runs import write_json

    write_json(args.out / "train.json", summary)
    print(
        f"{task.name}: {result.steps} steps, held-out exact match {result.accuracy:.4f} "
        f"on {cfg.eval_size} prompts, {result.seconds:.0f} s; saved to {args.out}"
    )
    for length, accuracy in result.per_length_accuracy.items():
        print(f"  prompt length {length:>2}: {accuracy:.4f}")
    return 0
