"""Train the shipped models: three seeds per task with its one recipe, checked on fresh prompts.

Each (task, seed) is one ``adjpos train`` run in ``OUT/TASK/seedS`` (resumable: run the script
again to continue), started with ``--seed S --data-seed S`` and the task's recipe
(``adjpos.pretrained.recipe(task)``; the seeds differ only in the seed), in a local process
pool with one thread per run. Each finished run is then checked on 2,000 fresh held-out
prompts (test split, a seed training never used) into ``heldout.json``. ``--recipe NAME``
trains with an earlier recipe instead (``adjpos.pretrained.EARLIER``: how the failures in
docs/pretrained.md were found). With ``--install`` the runs that pass (>= 99%) are copied into
``adjpos/pretrained/TASK/seedS`` with ``--snapshots K`` of their training snapshots in float16
(spread over the log-spaced steps, the first and the last among them). The shipped models drew
their batches from earlier seeds, so a run today trains other weights (docs/pretrained.md).

    python examples/train_pretrained.py [--out runs/pretrained] [--tasks addition reversal]
        [--seeds 0 1 2] [--recipe NAME] [--workers 2] [--install] [--snapshots K] [--quick]
"""

import argparse
import json
import shutil
from pathlib import Path

import torch

import adjpos
from adjpos.cli import main as adjpos_main
from adjpos.engines import run_units
from adjpos.models import save_snapshot, snapshot_steps
from adjpos.pretrained import CHECK_PROMPTS, HERE, heldout_check, recipe
from adjpos.runs import write_json

# Snapshots each installed seed keeps: the package's weights stay under 50 MB.
SNAPSHOTS = 5


# --quick: a tiny model a few steps, checked on a few prompts (the smoke test).
QUICK = {"n_layers": 1, "d_model": 16, "n_heads": 2, "steps": 20, "eval_every": 10, "eval_size": 8}


def train_one(
    task: str, seed: int, out: str, quick: bool = False, recipe_name: str | None = None
) -> dict:
    """One run (resumed if its folder holds one), then its check on fresh prompts."""
    folder = Path(out) / task / f"seed{seed}"
    options = {**recipe(task, recipe_name), **(QUICK if quick else {})}
    argv = ["train", "--task", task, "--out", str(folder), "--device", "cpu"]
    argv += [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    argv += ["--seed", str(seed), "--data-seed", str(seed)]
    if (folder / "run.json").is_file():
        argv.append("--resume")
    if not (folder / "train.json").is_file():
        adjpos_main(argv)
    model = adjpos.load_model(folder, device="cpu")
    spec = adjpos.pretrained.trained_task(folder)
    check = heldout_check(model, spec, 20 if quick else CHECK_PROMPTS)
    write_json(folder / "heldout.json", check)
    return {"task": task, "seed": seed, **check}


def install(
    out: Path,
    task: str,
    seed: int,
    *,
    keep: int | None = SNAPSHOTS,
    into: Path = HERE,
) -> Path:
    """Copy a passing run into the package folder `into`, with `keep` of its snapshots in
    float16 (all when None; spread evenly by index, the first and the last among them)."""
    from adjpos.models.checkpoint import spread_evenly

    source, target = out / task / f"seed{seed}", into / task / f"seed{seed}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "metrics.json", "train.json", "heldout.json"):
        shutil.copy2(source / name, target / name)
    for step in spread_evenly(snapshot_steps(source), keep):
        model = adjpos.load_model(source, step=step, device="cpu")
        save_snapshot(model, target, step, dtype=torch.float16)
    return target


def main(
    out: Path,
    tasks: list[str],
    seeds: list[int],
    workers: int,
    do_install: bool,
    quick: bool,
    recipe_name: str | None = None,
    snapshots: int = SNAPSHOTS,
) -> None:
    jobs = [(task, seed, str(out), quick, recipe_name) for task in tasks for seed in seeds]
    for _, row in run_units(train_one, jobs, engine="process", workers=workers):
        print(json.dumps({k: v for k, v in row.items() if k != "per_length_accuracy"}), flush=True)
        if do_install and row["passes"]:
            where = install(out, row["task"], row["seed"], keep=snapshots)
            print("installed", where, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/pretrained"))
    parser.add_argument("--tasks", nargs="+", default=list(adjpos.TASKS), choices=adjpos.TASKS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=2, help="runs at once (0: in-process)")
    parser.add_argument(
        "--recipe",
        default=None,
        choices=sorted(adjpos.pretrained.EARLIER),
        help="an earlier recipe instead of each task's own",
    )
    parser.add_argument("--install", action="store_true", help="copy passing runs into the package")
    parser.add_argument(
        "--snapshots",
        type=int,
        default=SNAPSHOTS,
        metavar="K",
        help=f"with --install: each seed keeps K of its snapshots in float16 (default {SNAPSHOTS})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="addition, seed 1, a tiny model, in-process"
    )
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.seeds, args.workers, args.install = ["addition"], [1], 0, False
    main(
        args.out,
        args.tasks,
        args.seeds,
        args.workers,
        args.install,
        args.quick,
        args.recipe,
        args.snapshots,
    )
