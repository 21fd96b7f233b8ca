"""``adjpos reproduce``: the whole study on built-in defaults, as results, figures and a report."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from adjpos.cli._inputs import check_ray_address
from adjpos.cli._options import add_device_arg, add_engine_args, add_out_arg, add_workers_arg
from adjpos.study.claims import NAMES
from adjpos.study.pipeline import ReproduceConfig
from adjpos.study.sizes import SIZES
from adjpos.validation import UsageError


def add_reproduce_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "reproduce",
        help="run the whole study: results, figures and a report",
        description="Load the four shipped trained NoPE models (or train them with --train), "
        "build random-init controls, and measure everything: self-cosine heatmaps, adjacency "
        "by layer, variance by position, position probes and order reconstruction, the "
        "random-init sweep and the first-layer theory. Writes DIR/results (CSV/JSON), "
        "DIR/figures (HTML; PNG when static export works), DIR/report.md and DIR/report.html. "
        f"Stages: {', '.join(NAMES)}. Re-running the same command resumes.",
    )
    size = next(f for f in dataclasses.fields(ReproduceConfig) if f.name == "size")
    parser.add_argument(
        "--size",
        choices=list(SIZES),
        help=f"{size.metadata['help']} (default: {size.default})",
    )
    parser.add_argument("--quick", action="store_true", help="short for --size quick")
    add_out_arg(parser, default=Path("adjpos-reproduce"))
    add_device_arg(parser)
    add_workers_arg(parser)
    add_engine_args(parser)
    parser.add_argument(
        "--train",
        action="store_true",
        help="train the task models with the shipped recipes instead of loading them "
        "(hours on a CPU; a few steps with --size quick or tiny)",
    )
    parser.add_argument(
        "--no-png",
        dest="png",
        action="store_false",
        help="write the figures as HTML only (PNG export takes about 10 s per run; it needs "
        "kaleido and a Chrome)",
    )
    parser.set_defaults(run=_run_reproduce)


def _run_reproduce(args: argparse.Namespace) -> int:
    from adjpos.study.pipeline import reproduce

    check_ray_address(args.engine, args.address)
    if args.quick and args.size not in (None, "quick"):
        raise UsageError(f"--quick means --size quick, but --size {args.size} was given too")
    cfg = ReproduceConfig(
        size="quick" if args.quick else args.size or ReproduceConfig.size,
        device=args.device,
        workers=args.workers,
        engine=args.engine,
        address=args.address,
        train=args.train,
        png=args.png,
    )

    def announce(name: str, index: int, total: int, skipped: bool) -> None:
        note = " (done earlier, skipped)" if skipped else ""
        print(f"[{index + 1}/{total}] {name}{note}", file=sys.stderr, flush=True)

    result = reproduce(args.out, cfg, on_stage=announce)
    if result.png_skipped and args.png:
        print(f"figures: HTML only. {result.png_skipped}", file=sys.stderr)
    print(f"{len(result.figures)} figure files in {args.out / 'figures'}")
    print(f"results in {args.out / 'results'}")
    print(f"report: {result.report} and {args.out / 'report.html'} ({result.seconds:.0f} s)")
    return 0
