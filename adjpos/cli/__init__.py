"""The ``adjpos`` command line. Argument parsing, printing, files and exit codes live here only.

    adjpos score   the adjacency score per layer of a random-init, saved or shipped model
    adjpos train   train a model on a synthetic task (checkpoints, resume)
    adjpos probe   layer-wise position probes
    adjpos intervene   causal tests: change one carrier of position, measure the task
    adjpos sweep   random-init sweeps over a grid of hyperparameters
    adjpos reproduce   the whole study: results, figures and a report
    adjpos convert-gguf   a GGUF model file written as a Hugging Face folder

One module per command; `_options` holds what they share. Bad input (an
`adjpos.validation.UsageError` or an `OSError`) exits with code 2 and
``adjpos COMMAND: error: ...``; any other exception is a bug and shows its traceback. Ctrl-C
ends a command with one line saying how to go on (exit code 130).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from adjpos import __version__
from adjpos.cli._options import HelpFormatter, check_output_folder
from adjpos.cli.convert_gguf import add_convert_gguf_parser
from adjpos.cli.intervene import add_intervene_parser
from adjpos.cli.probe import add_probe_parser
from adjpos.cli.reproduce import add_reproduce_parser
from adjpos.cli.score import add_score_parser
from adjpos.cli.sweep import add_sweep_parser
from adjpos.cli.train import add_train_parser
from adjpos.validation import UsageError

# How to go on after Ctrl-C: the commands that write a run folder keep what they finished.
_RESUME = "run the same command to resume"
ON_INTERRUPT = {
    "train": "run the same command with --resume to continue",
    "probe": "run the same command to start again",
    "intervene": _RESUME,
    "sweep": _RESUME,
    "reproduce": _RESUME,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``adjpos`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if isinstance(getattr(args, "out", None), Path):  # every command's output folder
            check_output_folder(args.out)
        return args.run(args)
    except (UsageError, OSError) as err:
        print(f"adjpos {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from tqdm.std import tqdm

        for bar in list(tqdm._instances):  # Ctrl-C left them open: the message gets its own line
            bar.close()
        hint = ON_INTERRUPT.get(args.command)
        print(f"adjpos {args.command}: interrupted{'; ' + hint if hint else ''}", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adjpos",
        description="Measure how causal transformers without positional encodings know where "
        "each token is.",
    )
    parser.add_argument("--version", action="version", version=f"adjpos {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_score_parser(commands)
    add_train_parser(commands)
    add_probe_parser(commands)
    add_intervene_parser(commands)
    add_sweep_parser(commands)
    add_reproduce_parser(commands)
    add_convert_gguf_parser(commands)
    for command in commands.choices.values():
        command.formatter_class = HelpFormatter  # one help style, set here for every command
        # No abbreviations: a removed option must be refused, not read as a longer one
        # (``sweep --seed 3`` would otherwise mean ``--seeds 3``).
        command.allow_abbrev = False
    return parser
