"""``adjpos probe``: layer-wise position probes, written as CSV, JSON and a figure."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adjpos.cli._options import (
    add_config_args,
    comma_ints,
    comma_list,
    config_values,
    task_params,
    write_text,
)


def add_probe_parser(commands: Any) -> None:
    from adjpos.probes import DEFAULT_FEATURES, FEATURE_SETS, PROBES
    from adjpos.tasks import TASKS

    probe = commands.add_parser(
        "probe",
        help="layer-wise probes: which carrier (cosine, variance, residual) holds position",
        description="Probe every layer of a model for token position with each feature set, "
        "and recover the order of shuffled hidden states. Writes DIR/probes.csv (model, "
        "layer, features, probe, metric, value, baseline), DIR/probes.json (with the std over "
        "seeds and the settings) and a figure of score vs layer, DIR/probes.html (and "
        "probes.png when static export works).",
    )
    probe.add_argument(
        "--model",
        default="random",
        help="'random' (default): a random-init model from the options below, by default a "
        "4-layer NoPE ModelConfig (d_model 64, 4 heads, init 0.8/sqrt(d_model)), probed on "
        "--n-sequences uniformly random token sequences of --seq-len tokens; or a checkpoint "
        "folder; or pretrained:TASK, a shipped trained model (probed on its task)",
    )
    probe.add_argument(
        "--task",
        choices=TASKS,
        help="probe on distinct test-split sequences (prompt + answer + EOS) of this task, all "
        "of one length, instead of random tokens (default for pretrained:TASK: TASK)",
    )
    probe.add_argument(
        "--task-param", action="append", default=[], metavar="NAME=VALUE", help="a task parameter"
    )
    probe.add_argument("--out", required=True, type=Path, help="output folder")
    probe.add_argument("--n-sequences", type=int, default=64, help="sequences (default: 64)")
    probe.add_argument(
        "--seq-len",
        type=int,
        help="tokens per sequence (default: 32 for random tokens; for a task, the length with "
        "the most distinct sequences among the first draws)",
    )
    probe.add_argument("--data-seed", type=int, default=0, help="seed of the data (default: 0)")
    probe.add_argument(
        "--features",
        type=comma_list,
        default=list(DEFAULT_FEATURES),
        help=f"comma-separated feature sets from {list(FEATURE_SETS)} (default: "
        f"{','.join(DEFAULT_FEATURES)})",
    )
    probe.add_argument(
        "--probe",
        type=comma_list,
        default=list(PROBES),
        help=f"comma-separated probes from {list(PROBES)} (default: both)",
    )
    probe.add_argument(
        "--layers", type=comma_ints, help="comma-separated layers (default: all; 0 = embeddings)"
    )
    probe.add_argument("--cv", type=int, default=5, help="folds, grouped by sequence (default: 5)")
    probe.add_argument(
        "--probe-seed",
        type=int,
        default=0,
        help="first seed of the folds and shuffles (default: 0)",
    )
    probe.add_argument("--repeats", type=int, default=3, help="seeds per score (default: 3)")
    probe.add_argument("--batch-size", type=int, default=None, help="sequences per forward pass")
    add_config_args(
        probe,
        title="random model (ModelConfig fields; used with --model random only)",
        overrides={"d_vocab": None, "n_ctx": None},
    )
    probe.set_defaults(run=_run_probe)


def _run_probe(args: argparse.Namespace) -> int:
    from adjpos.figures import plot_probe_scores, save_figure
    from adjpos.probes import check_feature_sets, check_probes, probe_positions, reconstruct_order

    features, probes = check_feature_sets(args.features), check_probes(args.probe)
    model, task = _probe_model(args)
    tokens = _probe_tokens(args, model, task)
    common = dict(layers=args.layers, model_name=args.model, batch_size=args.batch_size)
    settings = dict(cv=args.cv, seed=args.probe_seed, repeats=args.repeats, progress=True)
    result = probe_positions(model, tokens, features=features, probe=probes, **settings, **common)
    order = reconstruct_order(model, tokens, seed=args.probe_seed, progress=False, **common)
    result = result + order
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "probes.csv", result.to_csv())
    write_text(args.out / "probes.json", result.to_json())
    saved = save_figure(plot_probe_scores(result), args.out / "probes")
    data = f"task {task.name}" if task is not None else "random tokens"
    print(f"{args.model}: {tokens.shape[0]} sequences x {tokens.shape[1]} tokens ({data})")
    _print_probe_tables(result)
    written = ["probes.csv", "probes.json", *(p.name for p in saved.written)]
    print(f"wrote {', '.join(written)} to {args.out}")
    if saved.png_skipped:
        print(saved.png_skipped)
    return 0


def _probe_model(args: argparse.Namespace) -> tuple[Any, Any]:
    """The model named by --model, and the task to probe it on (None: random tokens)."""
    from adjpos import build_model, load_model
    from adjpos.models import ModelConfig
    from adjpos.tasks import TASKS, VOCAB_SIZE, get_task

    task = get_task(args.task, **task_params(args.task_param)) if args.task else None
    if args.model.startswith("pretrained:"):
        from adjpos.pretrained import load_pretrained

        name = args.model.removeprefix("pretrained:")
        if name not in TASKS:
            raise ValueError(
                f"--model pretrained:{name}: unknown task; choose one of {list(TASKS)}"
            )
        model, trained_on = load_pretrained(name, device="cpu")
        return model, task if task is not None else trained_on
    if args.model != "random":
        return load_model(args.model, device="cpu"), task
    values = config_values(args)
    values["d_vocab"] = values["d_vocab"] or (VOCAB_SIZE if task else ModelConfig.d_vocab)
    values["n_ctx"] = values["n_ctx"] or (task.max_len if task else ModelConfig.n_ctx)
    return build_model(ModelConfig(**values), device="cpu"), task


def _probe_tokens(args: argparse.Namespace, model: Any, task: Any) -> Any:
    import torch

    from adjpos.probes import sequences_of_length

    gen = torch.Generator().manual_seed(args.data_seed)
    if task is not None:
        n, length = args.n_sequences, args.seq_len
        return sequences_of_length(task, n, length=length, generator=gen, split="test")
    if args.n_sequences < 1:
        raise ValueError(f"--n-sequences must be positive, got {args.n_sequences}")
    shape = (args.n_sequences, args.seq_len or min(32, model.cfg.n_ctx))
    return torch.randint(0, model.cfg.d_vocab, shape, generator=gen)


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
