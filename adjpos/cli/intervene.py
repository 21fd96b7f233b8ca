"""``adjpos intervene``: causal tests of which carrier of position a trained model reads,
written as CSV, JSON and a figure into a run folder; an interrupted run resumes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from adjpos.cli._inputs import check_hf_gguf
from adjpos.cli._options import (
    PRETRAINED,
    add_device_arg,
    add_out_arg,
    add_task_args,
    comma_doses,
    comma_ints,
    comma_list,
    nope_layers_arg,
    open_run_folder,
    positive_int,
    read_text_file,
    resolve_model,
    task_from_args,
)
from adjpos.validation import UsageError, check_model, resolve_device


def add_intervene_parser(commands: Any) -> None:
    from adjpos.interventions import (
        DEFAULT_DOSES,
        DEFAULT_DRAWS,
        DEFAULT_PROMPTS,
        DEFAULT_RANK,
        DEFAULT_READOUTS,
        NAMES,
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
        "export works); with the position curve's arms also DIR/curve_differences.csv (the "
        "paired differences between the arms of each size) and the rule's reading per layer. "
        "DIR is a run folder: an interrupted run resumes where it stopped.",
    )
    parser.add_argument(
        "--model",
        metavar="pretrained:TASK|PATH",
        help=f"a shipped model ({', '.join(PRETRAINED + t for t in TASKS)}) or a folder "
        "written by adjpos train (or --hf and --text)",
    )
    text = parser.add_argument_group(
        "on text (a language model)",
        "Next-token loss and accuracy instead of exact match: each sequence is cut at --cut; "
        "the context before it is changed, the loss is read on the continuation after it "
        "(whose own states are left untouched with the read-out kept); the first half of the "
        "sequences fits the fitted interventions, the second half is measured "
        "(adjpos.interventions.text_intervention_table)",
    )
    text.add_argument(
        "--hf",
        metavar="SOURCE",
        help="a Hugging Face causal LM instead of --model: a save_pretrained folder, a GGUF file, "
        "or a hub name (needs the network); needs --text",
    )
    text.add_argument(
        "--text",
        type=Path,
        help="with --hf: a UTF-8 text file, cut into sequences by adjpos.hf.text_tokens",
    )
    text.add_argument("--seq-len", type=positive_int, default=128, help="tokens per sequence")
    text.add_argument(
        "--n-sequences", type=positive_int, default=32, help="sequences from the start of the text"
    )
    text.add_argument("--bos", action="store_true", help="start every sequence with the BOS token")
    text.add_argument(
        "--cut",
        type=int,
        help="first position of the continuation (default: --seq-len // 2)",
    )
    text.add_argument(
        "--skip-first",
        type=int,
        default=0,
        metavar="K",
        help="never change the first K positions (attention sinks: position 0 of a language "
        "model often carries a massive activation)",
    )
    text.add_argument(
        "--nope-layers",
        type=nope_layers_arg,
        metavar="all|none|released|every:K|I,J,...",
        help="remove RoPE from these layers of the weights first (as adjpos score)",
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
        help=f"comma-separated, from {list(NAMES)} (default: all but the position curve's "
        "arms position_*, each measured at several sizes: name them to run them, their control "
        "position_random comes along; on a Hugging Face model all but uniform_attention, whose "
        "pattern hook a bridge does not feed back)",
    )
    parser.add_argument(
        "--doses",
        type=comma_doses,
        default=",".join(map(str, DEFAULT_DOSES)),
        help="the sizes of the position curve's arms, comma-separated shift magnitudes m: at "
        "m, the size of the full shift of the curve by m, every arm matched to it (a shift "
        "by k runs at m = |k|); a fraction m < 1: m times the size of the shift by 1, the "
        "shifts by 1 blended down to it",
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
    add_device_arg(parser)  # before --data-seed, the last entry above the text options
    parser.add_argument(
        "--data-seed",
        type=int,
        default=0,
        help="seed of the prompts, of the random draws (permutations, random subspaces) and "
        "of the bootstrap",
    )
    parser.set_defaults(run=_run_intervene)


def _run_intervene(args: argparse.Namespace) -> int:
    from adjpos.figures import plot_interventions, save_figure
    from adjpos.interventions import (
        CURVE_DIFFERENCES,
        DEFAULT_INTERVENTIONS,
        FAMILIES,
        INTERVENTION_TABLE,
        SPECS,
        intervention_table,
    )
    from adjpos.interventions.specs import plan_units
    from adjpos.runs import write_json

    if args.hf is not None or args.text is not None:
        return _run_on_text(args)
    if args.model is None:
        raise UsageError("pass --model (a trained model), or --hf with --text (a language model)")
    text_only = {"--cut": args.cut, "--nope-layers": args.nope_layers}
    text_only |= {"--skip-first": args.skip_first or None, "--bos": args.bos or None}
    given = [option for option, value in text_only.items() if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)} go with --hf and --text (a language model)")
    names = args.interventions if args.interventions is not None else list(DEFAULT_INTERVENTIONS)
    model, task = _model_and_task(args)
    layers = args.layers if args.layers is not None else list(range(model.cfg.n_layers))
    if args.n_prompts < 2:
        raise UsageError(f"--n-prompts must be at least 2, got {args.n_prompts}")
    if not 1 <= args.rank <= model.cfg.d_model:
        raise UsageError(f"--rank must be in [1, {model.cfg.d_model}] (d_model), got {args.rank}")
    # Layers, interventions, read-outs, draws and doses: checked here, before the folder
    # is claimed and before the model runs.
    units = plan_units(model, layers, names, args.readouts, args.control_draws, args.doses)
    dosed = any(unit.spec.dosed for unit in units)
    config = getattr(model, "adjpos_config", None)
    spec = {
        "model": args.model,
        "model_config": config.to_dict() if config is not None else None,
        "task": {"name": task.name, **dataclasses.asdict(task)},
        "layers": layers,
        "interventions": names,
        "n_prompts": args.n_prompts,
        **_shared_spec(args, dosed),
    }
    folder = open_run_folder(args, "intervene", spec, seed=args.data_seed, device=args.device)
    done = len(folder.done_units())
    if done:
        print(f"resuming: {done} of {len(units)} units already in {args.out}")
    table, differences = intervention_table(
        model,
        task,
        layers=layers,
        interventions=names,
        n_prompts=args.n_prompts,
        model_name=args.model,
        model_seed=None if config is None else config.seed,
        return_differences=True,
        **_shared_settings(args, folder),
    )
    arms = table["arm"].notna()
    if not arms.all():
        _print_table(table[~arms])
    INTERVENTION_TABLE.write(args.out / "interventions.csv", table)
    write_json(args.out / "interventions.json", {"settings": spec, "units": len(table)})
    written = ["interventions.csv", "interventions.json"]
    if dosed:
        _print_arms(table[arms], differences)
        CURVE_DIFFERENCES.write(args.out / "curve_differences.csv", differences)
        written.append("curve_differences.csv")
    saved = None
    if not arms.all():
        words = {name: spec.label for name, spec in SPECS.items()}
        drawn = plot_interventions(table[~arms], families=FAMILIES, labels=words)
        saved = save_figure(drawn, args.out / "interventions")
        written += [p.name for p in saved.written]
    print(f"\nwrote {', '.join(written)} to {args.out}")
    if saved is not None and saved.png_skipped:
        print(saved.png_skipped)
    return 0


def _run_on_text(args: argparse.Namespace) -> int:
    """``--hf SOURCE --text FILE``: the causal tests on text (`text_intervention_table`)."""
    from adjpos.hf import load_hf, load_tokenizer, text_tokens
    from adjpos.interventions import DEFAULT_INTERVENTIONS, TEXT_TABLE, text_intervention_table
    from adjpos.interventions.specs import plan_units
    from adjpos.runs import write_json

    if args.hf is None or args.text is None:
        raise UsageError("--hf and --text go together (a language model on a text file)")
    if args.model is not None:
        raise UsageError("pass either --model or --hf, not both")
    text = read_text_file(args.text, "--text")
    check_hf_gguf(args.hf)
    model = load_hf(args.hf, device=resolve_device(args.device), nope_layers=args.nope_layers)
    check_model(model)
    tokenizer = load_tokenizer(args.hf)
    tokens = text_tokens(
        tokenizer, text, args.seq_len, max_sequences=args.n_sequences, bos=args.bos
    )
    cut = args.cut if args.cut is not None else args.seq_len // 2
    names = args.interventions
    # Checked before the folder is claimed (without --interventions, the table's own default
    # differs only in leaving out what a bridge cannot hook).
    planned = names if names is not None else DEFAULT_INTERVENTIONS
    units = plan_units(model, args.layers, planned, args.readouts, args.control_draws, args.doses)
    spec = {
        "hf": args.hf,
        "nope_layers": args.nope_layers,
        "text": str(args.text),
        "seq_len": args.seq_len,
        "n_sequences": len(tokens),
        "bos": args.bos,
        "cut": cut,
        "skip_first": args.skip_first,
        "layers": args.layers,
        "interventions": names,
        **_shared_spec(args, any(unit.spec.dosed for unit in units)),
    }
    folder = open_run_folder(args, "intervene-text", spec, seed=args.data_seed, device=args.device)
    table = text_intervention_table(
        model,
        tokens,
        layers=args.layers,
        interventions=names,
        cut=cut,
        skip_first=args.skip_first,
        model_name=args.hf,
        **_shared_settings(args, folder),
    )
    measured = len(tokens) - len(tokens) // 2
    print(f"\nnext-token loss on the continuation (positions {cut} on), {measured} sequences")
    columns = ["layer", "intervention", "readout", "loss", "loss_low", "loss_high"]
    columns += ["accuracy", "perturbation", "loss_difference", "percentile"]
    print(table[columns].round(3).to_string(index=False))
    TEXT_TABLE.write(args.out / "interventions.csv", table)
    write_json(args.out / "interventions.json", {"settings": spec, "units": len(table)})
    print(f"\nwrote interventions.csv, interventions.json to {args.out}")
    return 0


def _shared_spec(args: argparse.Namespace, dosed: bool) -> dict[str, Any]:
    """The settings of both kinds of run, under the keys their folders hold (--data-seed as
    "seed"); the doses only with dosed arms, so a folder made before the arms resumes."""
    spec = {"rank": args.rank, "readouts": args.readouts, "control_draws": args.control_draws}
    return spec | {"seed": args.data_seed} | ({"doses": list(args.doses)} if dosed else {})


def _shared_settings(args: argparse.Namespace, folder: Any) -> dict[str, Any]:
    """The table's options that both kinds of run take from the same flags."""
    return dict(
        rank=args.rank,
        control_draws=args.control_draws,
        readouts=args.readouts,
        doses=list(args.doses),
        seed=args.data_seed,
        folder=folder,
        progress=True,
    )


def _model_and_task(args: argparse.Namespace) -> tuple[Any, Any]:
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


def _print_arms(table: Any, differences: Any) -> None:
    """The position curve's arms per read-out variant and size with their check numbers, and
    the study's reading of them: each arm's check and each layer's rule
    (`adjpos.study.rules`, under the study's default `Criteria`)."""
    from adjpos.interventions import cell_numbers
    from adjpos.study.claim import Criteria
    from adjpos.study.rules import hypothesis_outcomes, row_passed

    head = f"{'arm':<9}{'param':>7}{'size':>7}{'decoded':>8}{'exact':>7}"
    head += f"{'- random [95%]':>25}{'off-1':>7}{'off+1':>7}{'off-2':>7}{'off+2':>7}"
    head += f"{'size err':>9}{'check':>9}  judged"
    for (readout, dose), rows in table.groupby(["readout", "dose"], sort=False):
        print(
            f"\nposition curve, read-out {readout}, size of the full shift by {dose}: "
            f"{rows['size_target'].iloc[0]:.4f} ({int(rows['n_prompts'].iloc[0])} prompts)"
        )
        print(f"{'layer':<6}{head}")
        for r in rows.to_dict("records"):
            versus = ""
            if r["difference"] == r["difference"]:  # not NaN: a tested arm
                versus = f"{r['difference']:+.3f} [{r['difference_low']:+.3f},"
                versus += f"{r['difference_high']:+.3f}]"
            shares = [r[f"error_offset_share_{j}"] for j in (-1, 1, -2, 2)]
            print(
                f"{r['layer']:<6}{r['arm']:<9}{r['parameter']:>7.3f}{r['size_target']:>7.3f}"
                f"{r['perturbation']:>8.3f}{r['exact_match']:>7.3f}{versus:>25}"
                + "".join(f"{s:>7.2f}" for s in shares)
                + f"{r['size_error']:>9.4f}{r['check_value']:>9.3g}"
                + f"  {'passed' if row_passed(r) else 'FAILED'}"
            )
    for readout in dict.fromkeys(table["readout"]):
        cells = cell_numbers(table, differences, readout=readout)
        found = hypothesis_outcomes(cells, Criteria())["cells"]
        print(f"\nthe rule (read-out {readout}):")
        for (task, layer, seed), c in found.items():
            print(
                f"  {task} seed {seed} layer {layer}: address {c.address}, "
                f"relational {c.relational}, locality {c.locality}: {c.reading}"
                + (f" (not counted, check failed: {list(c.not_counted)})" if c.not_counted else "")
            )
