"""``adjpos reproduce``: the whole study on built-in defaults, as results, figures and a report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from adjpos.cli._options import add_engine_args
from adjpos.study.pipeline import STAGES, ReproduceConfig
from adjpos.validation import DEVICES


def add_reproduce_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "reproduce",
        help="run the whole study: results, figures and a report",
        description="Load the four shipped trained NoPE models (or train them with --train), "
        "build random-init controls, and measure everything: self-cosine heatmaps, adjacency "
        "by layer, variance by position, position probes and order reconstruction, the "
        "random-init sweep and the first-layer theory. Writes DIR/results (CSV/JSON), "
        "DIR/figures (HTML; PNG when static export works), DIR/report.md and DIR/report.html. "
        f"Stages: {', '.join(STAGES)}. Re-running the same command resumes.",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: minutes on a CPU")
    parser.add_argument("--out", type=Path, default=Path("adjpos-reproduce"), help="output folder")
    parser.add_argument(
        "--device", choices=DEVICES, default="auto", help="where the models run (auto: cuda if any)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes, or CPUs of a local Ray, for the probing, causal and sweep stages "
        "(default: CPU cores; 0 runs in-process)",
    )
    add_engine_args(parser)
    parser.add_argument(
        "--train",
        action="store_true",
        help="train the task models with the shipped recipes instead of loading them "
        "(hours on a CPU; a few steps with --quick)",
    )
    parser.set_defaults(run=_run_reproduce)


def _run_reproduce(args: argparse.Namespace) -> int:
    from adjpos.study.pipeline import reproduce

    cfg = ReproduceConfig(
        size="quick" if args.quick else "full",
        device=args.device,
        workers=args.workers,
        engine=args.engine,
        address=args.address,
        train=args.train,
    )

    def announce(name: str, index: int, total: int, skipped: bool) -> None:
        note = " (done earlier, skipped)" if skipped else ""
        print(f"[{index + 1}/{total}] {name}{note}", file=sys.stderr, flush=True)

    result = reproduce(args.out, cfg, on_stage=announce)
    if result.png_skipped:
        print(f"figures: HTML only. {result.png_skipped}", file=sys.stderr)
    print(f"{len(result.figures)} figure files in {args.out / 'figures'}")
    print(f"results in {args.out / 'results'}")
    print(f"report: {result.report} and {args.out / 'report.html'} ({result.seconds:.0f} s)")
    return 0
