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
    return parser


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


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    """One option per `ModelConfig` field; its help text is the field's own."""
    from adjpos.models import ModelConfig

    group = parser.add_argument_group("model (ModelConfig fields)")
    for field in dataclasses.fields(ModelConfig):
        flag = "--" + field.name.replace("_", "-")
        help_text = f"{field.metadata.get('help', '')} (default: {field.default})"
        if field.type in (bool, "bool"):
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=field.default, help=help_text
            )
        else:
            group.add_argument(
                flag, type=_parse_for(field), default=field.default, help=help_text, dest=field.name
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


def _config_values(args: argparse.Namespace) -> dict[str, Any]:
    from adjpos.models import ModelConfig

    return {f.name: getattr(args, f.name) for f in dataclasses.fields(ModelConfig)}


def _write_text(path: Path, text: str) -> None:
    from adjpos.models.checkpoint import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


if __name__ == "__main__":
    sys.exit(main())
