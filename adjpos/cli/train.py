"""``adjpos train``: train a model on a synthetic task, or a small language model on a text file
(``--text FILE --layout nope|rope|hybrid``), with checkpoints and resume."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from adjpos.cli._options import (
    add_config_args,
    add_device_arg,
    add_model_arg,
    add_out_arg,
    add_task_args,
    config_values,
    for_option,
    read_text_file,
    resolve_model,
    task_from_args,
)
from adjpos.models import build_model, layer_kinds
from adjpos.models.config import POSITIONAL
from adjpos.text.recipe import LAYOUTS
from adjpos.validation import UsageError, resolve_device


def add_train_parser(commands: Any) -> None:
    from adjpos.training import TrainConfig

    train = commands.add_parser(
        "train",
        help="train a model on a synthetic task or a text file, with checkpoints and resume",
        description="Train a model on one task (--task), or a language model on a UTF-8 text "
        "file (--text; the loss is then every next token): a fresh NoPE model by default, or "
        "the weights that --model names. d_vocab and n_ctx default to what the task needs "
        "(with --text: the tokenizer's vocabulary and 128 tokens, the training context). Writes "
        "DIR/model.safetensors, config.json, metrics.json, train.json (the command and its "
        "result), run.json and checkpoint.pt (for --resume); with --text also tokenizer.json.",
    )
    add_task_args(train, default="--text")
    train.add_argument(
        "--text",
        type=Path,
        metavar="FILE",
        help="train a language model on this UTF-8 text file instead of a task: a byte-level BPE "
        "tokenizer of --vocab-size tokens is trained on 90%% of it (chunks of 40 lines, held out "
        "by hash) and the rest is the validation text; windows of n_ctx tokens",
    )
    train.add_argument(
        "--layout",
        choices=LAYOUTS,
        help="with --text and --model random only: nope (no positional encoding; the default), "
        "rope (rotary in every layer) or hybrid (rotary, every 4th layer NoPE: SmolLM3's rule)",
    )
    train.add_argument(
        "--vocab-size", type=int, default=2048, help="with --text: the tokenizer's vocabulary"
    )
    add_out_arg(train)
    train.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_model_arg(train, "PATH and pretrained:TASK start training from those weights.")
    add_device_arg(train)
    add_config_args(train, overrides={"d_vocab": None, "n_ctx": None})
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

    from adjpos.runs import RUN_FILE, RunFolder, write_json
    from adjpos.text import save_tokenizer
    from adjpos.training import TrainConfig, train

    device = resolve_device(args.device)
    if args.resume and not RunFolder.exists(args.out):
        raise UsageError(
            f"--resume: {args.out} holds no training run to continue (no {RUN_FILE}); leave "
            "--resume out to start one there"
        )
    cfg = TrainConfig(**config_values(args, TrainConfig, {"seed": "data_seed"}))
    if args.text is not None:  # text has no answers: every next token is the loss
        cfg = dataclasses.replace(cfg, loss="sequence")
    values = config_values(args)
    if args.text is not None:
        task, model, tokenizer = _text_task_and_model(args, values, device)
    else:
        if args.task is None:
            raise UsageError("adjpos train needs --task TASK or --text FILE")
        if args.layout is not None:
            raise UsageError(
                f"--layout {args.layout}: applies with --text and --model random (a fresh "
                "language model); with --task a random model's positions come from --positional "
                f"(one of {', '.join(POSITIONAL)})"
            )
        task = task_from_args(args)
        model, _ = resolve_model(args.model, device=device, config_values=values, task=task)
    result = train(model, task, cfg, out_dir=args.out, resume=args.resume, progress=True)
    if args.text is not None:  # written last: the run folder must be empty when it starts
        save_tokenizer(tokenizer, args.out)
    last = result.history[-1] if result.history else {}
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
    if args.text is not None:
        summary.update(val_loss=last.get("val_loss"), layer_kinds=layer_kinds(model))
    write_json(args.out / "train.json", summary)
    if args.text is not None:
        print(
            f"text {args.text}: {result.steps} steps, validation loss {last.get('val_loss'):.4f} "
            f"nats/token and next-token accuracy {result.accuracy:.4f} on {cfg.eval_size} "
            f"windows, {result.seconds:.0f} s; saved to {args.out}"
        )
        return 0
    print(
        f"{task.name}: {result.steps} steps, held-out exact match {result.accuracy:.4f} "
        f"on {cfg.eval_size} prompts, {result.seconds:.0f} s; saved to {args.out}"
    )
    for length, accuracy in result.per_length_accuracy.items():
        print(f"  prompt length {length:>2}: {accuracy:.4f}")
    return 0


def _text_task_and_model(args: argparse.Namespace, values: dict, device: Any) -> tuple:
    """--text: the windows of the file, the model (a fresh one of --layout, or --model's
    weights) and the tokenizer (trained on the file, or the one in --out when resuming a
    finished run; an interrupted run trains it again, the same)."""
    from adjpos.text import file_task, layout_config, load_tokenizer
    from adjpos.text.tokenizer import TOKENIZER_FILE

    if args.task is not None:
        raise UsageError("pass either --task or --text, not both")
    if values["positional"] != "none" and args.model == "random":
        raise UsageError("with --text, --layout decides the positions; drop --positional")
    if args.layout is not None and args.model != "random":
        raise UsageError(
            f"--layout {args.layout}: applies with --model random (a fresh model); --model "
            f"{args.model} brings its own positions, so leave --layout out"
        )
    context = values["n_ctx"] or 128
    check_text_file(args.text, context)
    saved = args.out / TOKENIZER_FILE
    tokenizer = load_tokenizer(saved) if args.resume and saved.is_file() else None
    task, tokenizer = for_option(
        f"--text {args.text}",
        lambda path: file_task(path, context, vocab_size=args.vocab_size, tokenizer=tokenizer),
        args.text,
    )
    if args.model == "random":
        values = {k: v for k, v in values.items() if k != "positional"}
        values.update(d_vocab=task.d_vocab, n_ctx=context)
        model = build_model(layout_config(args.layout or "nope", **values), device=device)
    else:
        model, _ = resolve_model(args.model, device=device)
    return task, model, tokenizer


def check_text_file(path: Path, context: int) -> None:
    """``--text FILE``: UTF-8 text with a train and a validation part (`split_by_chunk_hash`),
    checked before the tokenizer is trained; a part shorter than a window of `context`
    tokens is found once the text is tokenized."""
    from adjpos.text.prepare import CHUNK_LINES, VALIDATION_SHARE, split_by_chunk_hash

    text = read_text_file(path, "--text")  # a binary or missing file named before any work
    if not text.strip():
        what = "is empty" if not text else "holds only whitespace"
        raise UsageError(
            f"--text {path}: the file {what}; give a UTF-8 text to train on, of a few "
            f"hundred lines at least ({VALIDATION_SHARE}% of its chunks of {CHUNK_LINES} lines "
            f"are held out for validation, and each part needs more than --n-ctx {context} "
            "tokens)"
        )
    parts = split_by_chunk_hash(text)
    missing = [name for name in ("train", "validation") if not parts[name]]
    if missing:
        lines = len(text.splitlines())
        chunks = -(-lines // CHUNK_LINES)
        raise UsageError(
            f"--text {path}: no {missing[0]} part: of its {_count(chunks, 'chunk')} of "
            f"{CHUNK_LINES} lines ({_count(lines, 'line')}), {VALIDATION_SHARE}% by hash are "
            f"held out for validation, here {'all' if missing[0] == 'train' else 'none'}; give "
            "a longer file"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
