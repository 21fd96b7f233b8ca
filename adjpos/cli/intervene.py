"""``adjpos intervene``: causal tests of which carrier of position a trained model reads,
written as CSV, JSON and a figure into a run folder; an interrupted run resumes."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from typing import Any

from adjpos.cli._options import (
    PRETRAINED,
    add_device_arg,
    add_out_arg,
    add_task_args,
    comma_ints,
    comma_list,
    for_option,
    task_from_args,
)
from adjpos.validation import UsageError


def add_intervene_parser(commands: Any) -> None:
    from adjpos.interventions import DEFAULT_INTERVENTIONS, NAMES
    from adjpos.interventions.measure import (
        DEFAULT_DRAWS,
        DEFAULT_PROMPTS,
        DEFAULT_RANK,
        DEFAULT_READOUTS,
    )
    from adjpos.tasks import TASKS

    parser = commands.add_parser(
        "intervene",
        help="causal tests: exact match with one carrier of position changed at one layer",
        description="Change one carrier of position (the norms, the position subspace, all "
        "linear position information, the attention pattern) at one layer of a trained model, "
        "each beside its matched control, and measure exact match (greedy decoding, the hook "
        "active at every step), teacher-forced token accuracy and what the change did to the "
        "adjacency score and the variance ratio, with 95%% bootstrap intervals over fresh "
        "held-out prompts. Writes DIR/interventions.csv, DIR/interventions.json (the settings) "
        "and a figure of exact match by layer, DIR/interventions.html (and .png when static "
        "export works). DIR is a run folder: an interrupted run resumes where it stopped.",
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="pretrained:TASK|PATH",
        help=f"a shipped model ({', '.join(PRETRAINED + t for t in TASKS)}) or a folder "
        "written by adjpos train",
    )
    add_task_args(parser, default="the one the model was trained on")
    add_out_arg(parser)
    parser.add_argument(
        "--layers",
        type=comma_ints,
        help="comma-separated layers to intervene at (default: all, 0 .. n_layers - 1; layer l "
        "is the input of block l, 0 = the token embeddings)",
    )
    parser.add_argument(
        "--interventions",
        type=comma_list,
        default=",".join(DEFAULT_INTERVENTIONS),
        help=f"comma-separated, from {list(NAMES)}",
    )
    parser.add_argument(
        "--n-prompts",
        type=int,
        default=DEFAULT_PROMPTS,
        help="fresh test-split prompts to measure on (as many again fit the position subspace "
        "and LEACE)",
    )
    parser.add_argument(
        "--rank", type=int, default=DEFAULT_RANK, help="rank of the position subspace"
    )
    parser.add_argument(
        "--readouts",
        type=comma_list,
        default=",".join(DEFAULT_READOUTS),
        help="comma-separated read-out variants: 'kept' leaves the read-out positions (the last "
        "prompt position and every answer position) untouched, 'changed' changes them like the "
        "others (decoded without a cache, so slower); the default is the variant the study's "
        "verdicts use, 'kept,changed' runs both",
    )
    parser.add_argument(
        "--control-draws",
        type=int,
        default=DEFAULT_DRAWS,
        help="draws of each random control (the size-matched norm rescalings, the "
        "variance-matched random subspaces, the size-matched random erasures)",
    )
    parser.add_argument(
        "--data-seed",
        type=int,
        default=0,
        help="seed of the prompts, of the random draws (permutations, random subspaces) and "
        "of the bootstrap",
    )
    add_device_arg(parser)
    parser.set_defaults(run=_run_intervene)


def _run_intervene(args: argparse.Namespace) -> int:
    from adjpos.figures import plot_interventions, save_figure
    from adjpos.interventions import INTERVENTION_TABLE, intervention_table
    from adjpos.interventions.measure import check_interventions
    from adjpos.runs import RunFolder, write_json

    names = for_option("--interventions", check_interventions, args.interventions)
    model, task = _model_and_task(args)
    n_layers = model.cfg.n_layers
    layers = args.layers if args.layers is not None else list(range(n_layers))
    bad = [x for x in layers if not 0 <= x < n_layers]
    if bad or not layers:
        raise UsageError(f"--layers {bad or layers}: layers must be in [0, {n_layers - 1}]")
    if args.n_prompts < 2:
        raise UsageError(f"--n-prompts must be at least 2, got {args.n_prompts}")
    from adjpos.interventions.measure import KEPT_ONLY, READOUTS

    if not args.readouts or set(args.readouts) - set(READOUTS):
        raise UsageError(f"--readouts {args.readouts}: choose from {list(READOUTS)}")
    kept_only = sorted(set(names) & set(KEPT_ONLY))
    if kept_only and "kept" not in args.readouts:
        raise UsageError(
            f"--interventions {kept_only} run with the read-out kept: add --readouts kept"
        )
    if args.control_draws < 1:
        raise UsageError(f"--control-draws must be at least 1, got {args.control_draws}")
    if not 1 <= args.rank <= model.cfg.d_model:
        raise UsageError(f"--rank must be in [1, {model.cfg.d_model}] (d_model), got {args.rank}")
    config = getattr(model, "adjpos_config", None)
    spec = {
        "model": args.model,
        "model_config": config.to_dict() if config is not None else None,
        "task": {"name": task.name, **dataclasses.asdict(task)},
        "layers": layers,
        "interventions": names,
        "n_prompts": args.n_prompts,
        "rank": args.rank,
        "readouts": args.readouts,
        "control_draws": args.control_draws,
        # intervention_table's `seed`; under the key that folders made with --seed hold
        "seed": args.data_seed,
    }
    command = "adjpos " + shlex.join(args.argv)
    folder = RunFolder.open(
        args.out,
        kind="intervene",
        spec=spec,
        seed=args.data_seed,
        device=args.device,
        command=command,
    )
    done = len(folder.done_units())
    if done:
        units = len(layers) * len(names) * len(args.readouts)
        print(f"resuming: {done} of {units} units already in {args.out}")
    table = intervention_table(
        model,
        task,
        layers=layers,
        interventions=names,
        n_prompts=args.n_prompts,
        rank=args.rank,
        control_draws=args.control_draws,
        readouts=args.readouts,
        seed=args.data_seed,
        model_name=args.model,
        model_seed=None if config is None else config.seed,
        folder=folder,
        progress=True,
    )
    _print_table(table)
    INTERVENTION_TABLE.write(args.out / "interventions.csv", table)
    write_json(args.out / "interventions.json", {"settings": spec, "units": len(table)})
    saved = save_figure(plot_interventions(table), args.out / "interventions")
    written = ["interventions.csv", "interventions.json", *(p.name for p in saved.written)]
    print(f"\nwrote {', '.join(written)} to {args.out}")
    if saved.png_skipped:
        print(saved.png_skipped)
    return 0


def _model_and_task(args: argparse.Namespace) -> tuple[Any, Any]:
    from adjpos.cli._options import resolve_model
    from adjpos.pretrained import trained_task

    task = task_from_args(args)
    if args.model == "random":
        raise UsageError("--model: interventions need a trained model (pretrained:TASK or PATH)")
    model, task = resolve_model(args.model, device=args.device, task=task)
    if task is None:
        task = trained_task(args.model)
    return model, task


def _print_table(table: Any) -> None:
    """Exact match (and its interval) per intervention, read-out variant and layer."""
    layers = sorted(table["layer"].unique())
    print(f"\nexact match [95% interval], {int(table['n_prompts'].iloc[0])} prompts")
    print(f"{'intervention (read-out)':<40}" + "".join(f"{'layer ' + str(x):>20}" for x in layers))
    for (name, readout), rows in table.groupby(["intervention", "readout"], sort=False):
        by_layer = rows.set_index("layer")
        cells = "".join(
            f"{by_layer.loc[x, 'exact_match']:>7.3f} [{by_layer.loc[x, 'exact_match_low']:.2f},"
            f"{by_layer.loc[x, 'exact_match_high']:.2f}]"
            if x in by_layer.index
            else " " * 20
            for x in layers
        )
        print(f"{f'{name} ({readout})':<40}{cells}")
