"""``adjpos sweep``: random-init sweeps over a grid, with figures from the CSV."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from adjpos.cli._inputs import check_ray_address
from adjpos.cli._options import (
    add_config_args,
    add_device_arg,
    add_engine_args,
    add_out_arg,
    add_workers_arg,
    comma_ints,
    config_values,
    parse_for,
    positive_int,
    read_text_file,
    sequence_length,
)
from adjpos.validation import UsageError, is_int

# The base config has no --seed: each model takes its seed from --seeds.
NO_OPTION = ("seed",)


def add_sweep_parser(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="adjacency score of random-init models over a grid of hyperparameters",
        description="Score random-init models for every combination of the grid x seeds, in "
        "worker processes; re-running the same command resumes. Writes DIR/sweep.csv, "
        "DIR/run.json and figures (HTML sharing one plotly.min.js, and PNG when static export "
        "works). With neither --grid nor --param, runs the default grid (init scale x width, "
        "depth x normalization, positional scheme x init scale).",
    )
    sweep.add_argument("--grid", type=Path, help="a JSON file: {field: [values]} or a list of them")
    sweep.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="one grid axis, a ModelConfig field (repeatable; axes combine)",
    )
    add_out_arg(sweep)
    sweep.add_argument(
        "--seeds", type=comma_ints, default=[0, 1, 2], help="model seeds, comma-separated"
    )
    add_device_arg(sweep)
    sweep.add_argument(
        "--n-sequences", type=positive_int, default=32, help="random sequences per cell"
    )
    sweep.add_argument("--seq-len", type=sequence_length, default=32, help="tokens per sequence")
    add_workers_arg(sweep)
    add_engine_args(sweep)
    sweep.add_argument(
        "--layer",
        type=int,
        default=None,
        help="layer of the heatmaps and histogram (default: the deepest)",
    )
    sweep.add_argument(
        "--png",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also write PNG figures when static export works",
    )
    add_config_args(
        sweep, title="base model (ModelConfig fields; the grid overrides them)", exclude=NO_OPTION
    )
    sweep.set_defaults(run=_run_sweep)


def _run_sweep(args: argparse.Namespace) -> int:
    from adjpos.figures import save_figures, sweep_heatmap, sweep_histogram, sweep_layer_lines
    from adjpos.sweep import DEFAULT_GRID, last_layer_rows, rows_of_subgrid, sweep

    check_ray_address(args.engine, args.address)
    if args.grid is not None and args.param:
        raise UsageError("give --grid FILE or --param NAME=..., not both")
    if args.grid is not None:
        grid = _read_grid(args.grid)
    else:
        grid = _grid_from_params(args.param) if args.param else list(DEFAULT_GRID)
    base = _base_config(args)
    result = sweep(
        grid,
        seeds=args.seeds,
        n_sequences=args.n_sequences,
        seq_len=args.seq_len,
        out_dir=args.out,
        workers=args.workers,
        base=base,
        device=args.device,
        progress=True,
        engine=args.engine,
        address=args.address,
    )
    table = result.table
    figures = {"sweep_histogram": sweep_histogram(table, layer=args.layer)}
    for sub in [grid] if isinstance(grid, dict) else grid:
        names, rows = list(sub), rows_of_subgrid(table, sub, base)
        if len(names) >= 2:
            figures[f"sweep_{names[0]}_by_{names[1]}"] = sweep_heatmap(
                rows, names[0], names[1], layer=args.layer
            )
        for name in names:
            figures[f"sweep_layers_by_{name}"] = sweep_layer_lines(rows, name)
    saved = save_figures(figures, args.out, png=args.png)
    if saved.png_skipped and args.png:
        print(saved.png_skipped)
    if args.layer is None:
        scores, last = last_layer_rows(table)["adjacency"], "each model's last layer"
    else:
        scores, last = table.loc[table["layer"] == args.layer, "adjacency"], f"layer {args.layer}"
    print(
        f"{len(table)} rows ({result.ran} cells x seeds computed now) in {args.out}/sweep.csv; "
        f"{len(figures)} figures"
    )
    print(
        f"adjacency at {last} over {len(scores)} models: min {scores.min():.3f}, "
        f"median {scores.median():.3f}, max {scores.max():.3f}"
    )
    return 0


def _base_config(args: argparse.Namespace) -> Any:
    """The config every cell starts from, its seed ModelConfig's default, or the one recorded
    in a folder made when sweeps took ``--seed`` (it changed no row), so that folder resumes."""
    from adjpos.models import ModelConfig
    from adjpos.runs import RunFolder, read_run

    base = ModelConfig(**config_values(args, exclude=NO_OPTION))
    recorded = read_run(args.out) if RunFolder.exists(args.out) else {}
    if recorded.get("kind") == "sweep":
        seed = recorded["spec"]["base"].get("seed")
        base = base.with_changes(seed=seed) if is_int(seed) else base
    return base


def _read_grid(path: Path) -> Any:
    """The grid in JSON file `path`: ``{field: [values]}`` or a list of them."""
    import json

    text = read_text_file(path, "--grid")
    try:
        grid = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"--grid {path} is not valid JSON: {err}") from None
    if not isinstance(grid, dict | list):
        raise UsageError(
            f"--grid {path} must hold {{field: [values]}} or a list of them, not "
            f"{json.dumps(grid)[:60]}"
        )
    return grid


def _grid_from_params(items: list[str]) -> dict[str, list[Any]]:
    from adjpos.models import ModelConfig

    fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise UsageError(f"--param takes NAME=V1,V2,..., got {item!r}")
        if name not in fields or name == "seed":
            allowed = [n for n in fields if n != "seed"]
            raise UsageError(f"--param {name!r} is not a ModelConfig field; allowed: {allowed}")
        parse = parse_for(fields[name])
        try:
            grid[name] = [parse(v.strip()) for v in values.split(",")]
        except ValueError:
            raise UsageError(
                f"--param {name}: cannot read {values!r} as {parse.__name__} values"
            ) from None
    return grid
