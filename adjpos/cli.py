"""The ``adjpos`` command line. Argument parsing, printing, files and exit codes live here only.

adjpos score [--n-layers 4 --d-model 64 ... | --model CHECKPOINT] [--csv FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adjpos import __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``adjpos`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"adjpos {args.command}: error: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adjpos", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"adjpos {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser(
        "score",
        help="adjacency score per layer of a random-init (default) or saved model",
        description="Score a model on random tokens and print the adjacency score per layer. "
        "With no options: a 4-layer random-init NoPE model, 64 sequences of 32 tokens.",
    )
    _add_config_args(score)
    score.add_argument("--model", type=Path, help="a checkpoint folder (overrides the config)")
    score.add_argument("--n-sequences", type=int, default=64, help="random sequences to score")
    score.add_argument("--seq-len", type=int, default=32, help="tokens per sequence")
    score.add_argument("--data-seed", type=int, default=0, help="seed of the random tokens")
    score.add_argument("--site", default="resid_post", help="hook site to score")
    score.add_argument("--batch-size", type=int, default=None, help="sequences per forward pass")
    score.add_argument("--csv", type=Path, help="also write the table to this CSV file")
    score.set_defaults(run=_run_score)
    _add_train_parser(commands)
    return parser


def _add_train_parser(commands: Any) -> None:
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
    _add_config_args(train, overrides={"d_vocab": None, "n_ctx": None})
    _add_config_args(
        train,
        TrainConfig,
        title="training (TrainConfig fields)",
        rename={"seed": "data_seed", "device": "device"},
    )
    train.set_defaults(run=_run_train)


def _run_score(args: argparse.Namespace) -> int:
    import torch

    from adjpos import adjacency_score, build_model, is_position_free, load_model
    from adjpos.models import ModelConfig

    if args.model is not None:
        model = load_model(args.model, device="cpu")
    else:
        model = build_model(ModelConfig(**_config_values(args)), device="cpu")
    gen = torch.Generator().manual_seed(args.data_seed)
    tokens = torch.randint(0, model.cfg.d_vocab, (args.n_sequences, args.seq_len), generator=gen)
    scores = adjacency_score(model, tokens, site=args.site, batch_size=args.batch_size)
    kind = model.cfg.positional_embedding_type.replace("standard", "learned-position")
    kind = "NoPE" if is_position_free(model) else kind
    print(f"adjacency score per layer ({kind} model, {args.n_sequences} x {args.seq_len} tokens)")
    print(f"{'layer':>5}  {'adjacency':>9}")
    for layer, value in enumerate(scores.tolist()):
        print(f"{layer:>5}  {value:>9.4f}")
    if args.csv is not None:
        _write_text(
            args.csv,
            "layer,adjacency\n"
            + "".join(f"{layer},{value!r}\n" for layer, value in enumerate(scores.tolist())),
        )
    return 0


def _add_config_args(
    parser: argparse.ArgumentParser,
    cls: Any = None,
    *,
    title: str = "model (ModelConfig fields)",
    overrides: dict[str, Any] | None = None,
    rename: dict[str, str] | None = None,
) -> None:
    """One option per field of a config dataclass; its help text is the field's own.

    `overrides` changes defaults (None: decided later); `rename` maps field -> option name
    (the parsed value lands under the new name).
    """
    if cls is None:
        from adjpos.models import ModelConfig as cls
    overrides, rename = overrides or {}, rename or {}
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        name = rename.get(field.name, field.name)
        default = overrides.get(field.name, field.default)
        shown = "fits the task" if field.name in overrides else default
        help_text = f"{field.metadata.get('help', '')} (default: {shown})"
        flag = "--" + name.replace("_", "-")
        if field.type in (bool, "bool"):
            group.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=help_text,
                dest=name,
            )
        else:
            group.add_argument(
                flag, type=_parse_for(field), default=default, help=help_text, dest=name
            )


def _parse_for(field: dataclasses.Field) -> Any:
    kinds = {"int": int, "float": float, "str": str}
    names = str(field.type).replace(" ", "").split("|")
    base = next((kinds[n] for n in names if n in kinds), str)

    def parse(text: str) -> Any:
        if "None" in names and text.lower() == "none" and field.name != "positional":
            return None
        return base(text)

    parse.__name__ = base.__name__
    return parse


def _config_values(
    args: argparse.Namespace, cls: Any = None, rename: dict[str, str] | None = None
) -> dict[str, Any]:
    if cls is None:
        from adjpos.models import ModelConfig as cls
    rename = rename or {}
    return {f.name: getattr(args, rename.get(f.name, f.name)) for f in dataclasses.fields(cls)}


def _run_train(args: argparse.Namespace) -> int:
    import shlex

    from adjpos import build_model
    from adjpos.models import ModelConfig
    from adjpos.tasks import VOCAB_SIZE, get_task
    from adjpos.training import TrainConfig, train

    task = get_task(args.task, **_task_params(args.task_param))
    values = _config_values(args)
    values["d_vocab"] = values["d_vocab"] or VOCAB_SIZE
    values["n_ctx"] = values["n_ctx"] or task.max_len
    model = build_model(ModelConfig(**values))
    cfg = TrainConfig(**_config_values(args, TrainConfig, {"seed": "data_seed"}))
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
    from adjpos.models.checkpoint import write_json

    write_json(args.out / "train.json", summary)
    print(
        f"{task.name}: {result.steps} steps, held-out exact match {result.accuracy:.4f} "
        f"on {cfg.eval_size} prompts, {result.seconds:.0f} s; saved to {args.out}"
    )
    for length, accuracy in result.per_length_accuracy.items():
        print(f"  prompt length {length:>2}: {accuracy:.4f}")
    return 0


def _task_params(items: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--task-param takes NAME=VALUE, got {item!r}")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    return params


def _write_text(path: Path, text: str) -> None:
    from adjpos.models.checkpoint import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


if __name__ == "__main__":
    sys.exit(main())
