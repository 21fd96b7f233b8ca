"""``adjpos probe``: layer-wise position probes, written as CSV, JSON and a figure into a run
folder; re-running the same command reuses the results."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from adjpos.cli._options import (
    add_batch_size_arg,
    add_config_args,
    add_device_arg,
    add_model_arg,
    add_out_arg,
    add_task_args,
    comma_ints,
    comma_list,
    config_values,
    for_option,
    non_negative_int,
    open_run_folder,
    positive_int,
    random_tokens,
    resolve_model,
    task_from_args,
)
from adjpos.validation import UsageError, resolve_device

UNIT = "probes"


def add_probe_parser(commands: Any) -> None:
    from adjpos.probes import DEFAULT_FEATURES, FEATURE_SETS, PROBES

    probe = commands.add_parser(
        "probe",
        help="layer-wise probes: which carrier (cosine, variance, residual) holds position",
        description="Probe every layer of a model for token position with each feature set, and "
        "recover the order of shuffled hidden states, on random tokens or, with --task, on "
        "distinct test-split sequences (prompt + answer + EOS) of the task, all of one length. "
        "Writes DIR/probes.csv (model, layer, features, probe, metric, value, baseline), "
        "DIR/probes.json (with the std over seeds and the settings) and a figure of score vs "
        "layer, DIR/probes.html (and probes.png when static export works). DIR is a run folder: "
        "re-running the same command prints the results again without refitting; other settings "
        "need another folder.",
    )
    add_model_arg(
        probe,
        "A random model is a 4-layer NoPE ModelConfig (d_model 64, 4 heads, init "
        "0.8/sqrt(d_model)) unless the options below say otherwise, probed on --n-sequences "
        "uniformly random token sequences of --seq-len tokens; a shipped model is probed on "
        "its task.",
    )
    add_task_args(probe, default="TASK for pretrained:TASK, else random tokens")
    add_out_arg(probe)
    probe.add_argument("--n-sequences", type=positive_int, default=64, help="sequences")
    probe.add_argument(
        "--seq-len",
        type=positive_int,
        help="tokens per sequence (default: 32 for random tokens; for a task, the length with "
        "the most distinct sequences among the first draws)",
    )
    probe.add_argument("--data-seed", type=int, default=0, help="seed of the data")
    probe.add_argument(
        "--features",
        type=comma_list,
        default=",".join(DEFAULT_FEATURES),
        help=f"comma-separated feature sets from {list(FEATURE_SETS)}",
    )
    probe.add_argument(
        "--probe",
        type=comma_list,
        default=",".join(PROBES),
        help=f"comma-separated probes from {list(PROBES)}",
    )
    probe.add_argument(
        "--layers", type=comma_ints, help="comma-separated layers (default: all; 0 = embeddings)"
    )
    probe.add_argument("--cv", type=int, default=5, help="folds, grouped by sequence")
    probe.add_argument(
        "--probe-seed",
        type=non_negative_int,
        default=0,
        help="seed of the folds and shuffles (each repeat's own is derived from it)",
    )
    probe.add_argument("--repeats", type=positive_int, default=3, help="seeds per score")
    probe.add_argument(
        "--controls",
        type=non_negative_int,
        default=0,
        help="also probe N random-init copies of the model's own architecture on the very "
        "same sequences: the first with S, the seed the model was initialised from (a shipped "
        "model's own starting weights), the others with seeds derived from S "
        "(adjpos.seeds.derive_seed(S, 'random-init control', k, bits=32), k = 1 .. N - 1). "
        "Labelled "
        "'random-init (seed X)' in the model column; each gets DIR/probes_control_seedX.json "
        "and a figure.",
    )
    add_batch_size_arg(probe)
    add_device_arg(probe)
    add_config_args(probe, overrides={"d_vocab": None, "n_ctx": None})
    probe.set_defaults(run=_run_probe)


def _run_probe(args: argparse.Namespace) -> int:
    import torch

    from adjpos.probes import (
        ProbeResult,
        check_feature_sets,
        check_probes,
        probe_positions,
        reconstruct_order,
        sequences_of_length,
    )

    features = for_option("--features", check_feature_sets, args.features)
    probes = for_option("--probe", check_probes, args.probe)
    device = resolve_device(args.device)
    task = task_from_args(args)
    values = config_values(args)
    model, task = resolve_model(args.model, device=device, config_values=values, task=task)
    if task is None:
        tokens = random_tokens(args, model)
    else:
        gen = torch.Generator().manual_seed(args.data_seed)
        tokens = sequences_of_length(task, args.n_sequences, length=args.seq_len, generator=gen)
    _check_probe_input(args, model, tokens)
    spec = _probe_spec(args, model, task, tokens, features, probes)
    folder = open_run_folder(args, "probe", spec, seed=args.probe_seed, device=str(device))
    data = f"task {task.name}" if task is not None else "random tokens"
    print(f"{args.model}: {tokens.shape[0]} sequences x {tokens.shape[1]} tokens ({data})")
    subjects = _subjects(args, model, device)
    if folder.is_done(UNIT):
        for stem, _, _ in subjects:
            _print_probe_tables(ProbeResult.from_json(args.out / f"{stem}.json"))
        print(f"\nreused the results in {args.out} (same settings; a new folder recomputes)")
        return 0
    results = {}
    settings = dict(cv=args.cv, seed=args.probe_seed, repeats=args.repeats, progress=True)
    for stem, label, subject in subjects:
        common = dict(layers=args.layers, model_name=label, batch_size=args.batch_size)
        result = probe_positions(
            subject, tokens, features=features, probe=probes, **settings, **common
        )
        order = reconstruct_order(subject, tokens, seed=args.probe_seed, progress=False, **common)
        results[stem] = result + order
        _print_probe_tables(results[stem])
    _write_probes(args.out, results)
    folder.mark_done(UNIT)
    return 0


def _subjects(args: argparse.Namespace, model: Any, device: Any) -> list[tuple[str, str, Any]]:
    """(file stem, model label, model) of the model and of each random-init control."""
    from adjpos.models import build_model
    from adjpos.seeds import derive_seed

    subjects = [("probes", args.model, model)]
    if args.controls:
        config = model.adjpos_config
        others = [
            derive_seed(config.seed, "random-init control", k, bits=32)
            for k in range(1, args.controls)
        ]
        for seed in (config.seed, *others):  # the first: the model's own starting weights
            copy = build_model(config.with_changes(seed=seed), device=device)
            subjects.append((f"probes_control_seed{seed}", f"random-init (seed {seed})", copy))
    return subjects


def _write_probes(out: Path, results: dict[str, Any]) -> None:
    """probes.csv holds every model's rows; one JSON and one figure per model."""
    from adjpos.figures import plot_probe_scores, save_figure
    from adjpos.probes import PROBE_TABLE
    from adjpos.runs import write_text

    PROBE_TABLE.write(out / "probes.csv", [r for res in results.values() for r in res.records()])
    written, skipped = ["probes.csv"], None
    for stem, result in results.items():
        write_text(out / f"{stem}.json", result.to_json())
        saved = save_figure(plot_probe_scores(result), out / stem)
        written += [f"{stem}.json", *(p.name for p in saved.written)]
        skipped = skipped or saved.png_skipped
    print(f"\nwrote {', '.join(written)} to {out}")
    if skipped:
        print(skipped)


def _probe_spec(args: argparse.Namespace, model, task, tokens, features, probes) -> dict:
    """Every setting that decides the results (the batch size and the device do not)."""
    config = getattr(model, "adjpos_config", None)
    return {
        "model": args.model,
        "model_config": config.to_dict() if config is not None else None,
        "task": None if task is None else {"name": task.name, **dataclasses.asdict(task)},
        "sequences": list(tokens.shape),
        "data_seed": args.data_seed,
        "features": features,
        "probes": probes,
        "layers": args.layers,
        "cv": args.cv,
        "probe_seed": args.probe_seed,
        "repeats": args.repeats,
        "controls": args.controls,
    }


def _check_probe_input(args: argparse.Namespace, model: Any, tokens: Any) -> None:
    """What the probes would refuse, checked before the run folder is claimed: a typo must
    not leave a folder that refuses the corrected command."""
    from adjpos.capture import check_layers, check_tokens

    check_tokens(model, tokens)
    for_option("--layers", lambda layers: check_layers(model, "resid_post", layers), args.layers)
    if tokens.shape[1] < 3:
        raise UsageError(f"--seq-len: probing needs at least 3 tokens, got {tokens.shape[1]}")
    if args.cv < 2:
        raise UsageError(f"--cv must be at least 2 folds, got {args.cv}")
    if tokens.shape[0] < args.cv:
        raise UsageError(
            f"--n-sequences: {tokens.shape[0]} sequences are too few for --cv {args.cv} "
            "(folds are grouped by sequence); give more sequences or fewer folds"
        )
    if args.controls and getattr(model, "adjpos_config", None) is None:
        raise UsageError(
            "--controls needs an adjpos model (random, a run folder or pretrained:TASK)"
        )


def _print_probe_tables(result: Any) -> None:
    """One table per probe and metric: feature sets x layers, and each set's mean chance."""
    header = f"{'features':<24}" + "".join(f"{'layer ' + str(x):>9}" for x in result.layers)
    for probe, metric in dict.fromkeys((s.probe, s.metric) for s in result.scores):
        print(f"\n{probe} {metric}\n{header}{'chance':>9}")
        for name in result.feature_sets:
            rows = [s for s in result.scores if (s.probe, s.metric) == (probe, metric)]
            rows = [s for s in rows if s.features == name]
            if rows:
                values = {s.layer: f"{s.value:>9.3f}" for s in rows}
                cells = "".join(values.get(x, " " * 9) for x in result.layers)
                chance = sum(s.baseline for s in rows) / len(rows)
                print(f"{name:<24}{cells}{chance:>9.3f}")
