"""``adjpos train``: train a model on a synthetic task, with checkpoints and resume."""

from __future__ import annotations

import argparse
from typing import Any

from adjpos.cli._options import (
    add_config_args,
    add_device_arg,
    add_model_arg,
    add_out_arg,
    add_task_args,
    config_values,
    resolve_model,
    task_from_args,
)


def add_train_parser(commands: Any) -> None:
    from adjpos.training import TrainConfig

    train = commands.add_parser(
        "train",
        help="train a model on a synthetic task, with checkpoints and resume",
        description="Train a model on one task: a fresh NoPE model by default, or the weights "
        "that --model names. d_vocab and n_ctx default to what the task needs. Writes "
        "DIR/model.safetensors, config.json, metrics.json, train.json (the command and its "
        "result), run.json and checkpoint.pt (for --resume).",
    )
    add_task_args(train, required=True)
    add_out_arg(train)
    train.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_model_arg(train, "PATH and pretrained:TASK start training from those weights.")
    add_device_arg(train)
    add_config_args(
        train,
        title="random model (ModelConfig fields; used with --model random only)",
        overrides={"d_vocab": None, "n_ctx": None},
    )
    add_config_args(
        train,
        TrainConfig,
        title="training (TrainConfig fields)",
        rename={"seed": "data_seed"},
        exclude=("device",),
    )
    train.set_defaults(run=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    import shlex

    from adjpos.runs import RUN_FILE, RunFolder
    from adjpos.training import TrainConfig, train
    from adjpos.validation import UsageError, resolve_device

    device = resolve_device(args.device)
    if args.resume and not RunFolder.exists(args.out):
        raise UsageError(
            f"--resume: {args.out} holds no training run to continue (no {RUN_FILE}); leave "
            "--resume out to start one there"
        )
    task = task_from_args(args)
    cfg = TrainConfig(**config_values(args, TrainConfig, {"seed": "data_seed"}))
    values = config_values(args)
    model, _ = resolve_model(args.model, device=device, config_values=values, task=task)
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
