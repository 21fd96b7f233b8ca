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
    _add_probe_parser(commands)
    _add_sweep_parser(commands)
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


def _add_probe_parser(commands: Any) -> None:
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
        type=_comma_list,
        default=list(DEFAULT_FEATURES),
        help=f"comma-separated feature sets from {list(FEATURE_SETS)} (default: "
        f"{','.join(DEFAULT_FEATURES)})",
    )
    probe.add_argument(
        "--probe",
        type=_comma_list,
        default=list(PROBES),
        help=f"comma-separated probes from {list(PROBES)} (default: both)",
    )
    probe.add_argument(
        "--layers", type=_comma_ints, help="comma-separated layers (default: all; 0 = embeddings)"
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
    _add_config_args(
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
    _write_text(args.out / "probes.csv", result.to_csv())
    _write_text(args.out / "probes.json", result.to_json())
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

    task = get_task(args.task, **_task_params(args.task_param)) if args.task else None
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
    values = _config_values(args)
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


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _comma_ints(text: str) -> list[int]:
    try:
        return [int(item) for item in _comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None


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


def _add_sweep_parser(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="adjacency score of random-init models over a grid of hyperparameters",
        description="Score random-init models for every combination of the grid x seeds, in "
        "worker processes; re-running the same command resumes. Writes DIR/sweep.csv, "
        "DIR/sweep.json and figures (HTML, and PNG when static export works). With neither "
        "--grid nor --param, runs the default grid (init scale x width, depth x "
        "normalization, positional scheme x init scale).",
    )
    sweep.add_argument("--grid", type=Path, help="a JSON file: {field: [values]} or a list of them")
    sweep.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="one grid axis, a ModelConfig field (repeatable; axes combine)",
    )
    sweep.add_argument("--out", required=True, type=Path, help="results folder")
    sweep.add_argument("--seeds", default="0,1,2", help="model seeds, comma-separated")
    sweep.add_argument("--n-sequences", type=int, default=32, help="random sequences per cell")
    sweep.add_argument("--seq-len", type=int, default=32, help="tokens per sequence")
    sweep.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    sweep.add_argument(
        "--layer",
        type=int,
        default=None,
        help="layer of the heatmaps and histogram (default: the deepest)",
    )
    sweep.add_argument("--png", action=argparse.BooleanOptionalAction, default=True,
                       help="also write PNG figures when static export works")
    _add_config_args(sweep, title="base model (ModelConfig fields; the grid overrides them)")
    sweep.set_defaults(run=_run_sweep)


def _run_sweep(args: argparse.Namespace) -> int:
    import json

    from adjpos.experiments.sweep import DEFAULT_GRID, read_sweep_csv, sweep
    from adjpos.figures import save_figure, sweep_heatmap, sweep_histogram, sweep_layer_lines
    from adjpos.models import ModelConfig

    if args.grid is not None and args.param:
        raise ValueError("give --grid FILE or --param NAME=..., not both")
    if args.grid is not None:
        try:
            grid = json.loads(args.grid.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{args.grid} is not valid JSON: {err}") from None
    else:
        grid = _grid_from_params(args.param) if args.param else DEFAULT_GRID
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    result = sweep(
        grid,
        seeds=seeds,
        n_sequences=args.n_sequences,
        seq_len=args.seq_len,
        out_dir=args.out,
        workers=args.workers,
        base=ModelConfig(**_config_values(args)),
        progress=True,
    )
    rows = read_sweep_csv(args.out / "sweep.csv")
    subgrids = [grid] if isinstance(grid, dict) else grid
    figures = {"sweep_histogram": sweep_histogram(rows, layer=args.layer)}
    for sub in subgrids:
        names = list(sub)
        if len(names) >= 2:
            figures[f"sweep_{names[0]}_by_{names[1]}"] = sweep_heatmap(
                rows, names[0], names[1], layer=args.layer
            )
        for name in names:
            figures[f"sweep_layers_by_{name}"] = sweep_layer_lines(rows, name)
    skipped = None
    for stem, fig in figures.items():
        skipped = save_figure(fig, args.out / stem, png=args.png).png_skipped or skipped
    if skipped and args.png:
        print(skipped)
    last = max(r["layer"] for r in rows) if args.layer is None else args.layer
    scores = sorted(r["adjacency"] for r in rows if r["layer"] == last)
    print(
        f"{len(rows)} rows ({result.ran} cells x seeds computed now) in {args.out}/sweep.csv; "
        f"{len(figures)} figures"
    )
    print(
        f"adjacency at layer {last} over {len(scores)} models: min {scores[0]:.3f}, "
        f"median {scores[len(scores) // 2]:.3f}, max {scores[-1]:.3f}"
    )
    return 0


def _grid_from_params(items: list[str]) -> dict[str, list[Any]]:
    from adjpos.models import ModelConfig

    fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise ValueError(f"--param takes NAME=V1,V2,..., got {item!r}")
        if name not in fields or name == "seed":
            allowed = [n for n in fields if n != "seed"]
            raise ValueError(f"--param {name!r} is not a ModelConfig field; allowed: {allowed}")
        parse = _parse_for(fields[name])
        try:
            grid[name] = [parse(v.strip()) for v in values.split(",")]
        except ValueError:
            raise ValueError(
                f"--param {name}: cannot read {values!r} as {parse.__name__} values"
            ) from None
    return grid
