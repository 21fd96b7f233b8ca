"""Time to 99% exact match: each task's recipe, one run per task, against a 15-minute budget.

Each task's model is trained with the recipe of its shipped seeds
(``adjpos.pretrained.recipe(task)``), with every core of the machine (run it on idle cores),
stopping at the first evaluation (1,000 held-out prompts, every 250 steps) at 99% or more.
Prints, per task, the steps and wall time to get there (evaluations included) and its ratio
to the budget; from finished runs, also where the run stopped (the recipe's own target) and
its wall time. ``--from-runs DIR`` reads the same from finished runs instead
(``DIR/TASK/seedS/metrics.json``, e.g. those of ``examples/train_pretrained.py``);
``--quick`` trains a tiny model a few steps (the smoke test). ``--json PATH`` also writes
the rows to PATH, atomically.

    python benchmarks/bench_time_to_99.py [--tasks addition reversal] [--seed 0] [--json PATH]
    python benchmarks/bench_time_to_99.py --from-runs runs/pretrained
"""

import argparse
import json
import os
import platform
from pathlib import Path

import torch

import adjpos
from adjpos.pretrained import recipe
from adjpos.runs import versions, write_json

BUDGET_S, TARGET = 15 * 60, 0.99


def first_at_target(history: list[dict]) -> dict | None:
    """The first evaluation at or above the target, or None."""
    return next((h for h in history if h["accuracy"] >= TARGET), None)


def train_one(task_name: str, seed: int, quick: bool) -> dict:
    task = adjpos.get_task(task_name)
    options = recipe(task_name)
    size = {k: options.pop(k) for k in ("n_layers", "d_model", "n_heads")}
    if quick:
        size = {"n_layers": 1, "d_model": 16, "n_heads": 2}
    cfg = adjpos.ModelConfig(**size, d_vocab=25, n_ctx=task.max_len, seed=seed)
    model = adjpos.build_model(cfg, device="cpu")
    train = {**options, "target_accuracy": TARGET}
    if quick:
        train.update(steps=4, eval_every=2, warmup_steps=1, eval_size=8)
    result = adjpos.train(
        model,
        task,
        adjpos.TrainConfig(**train, seed=seed, device="cpu", snapshots="none"),
        progress=False,
    )
    return {"task": task_name, "seed": seed, "history": result.history}


def from_runs(folder: Path) -> list[dict]:
    runs = []
    for path in sorted(folder.glob("*/seed*/metrics.json")):
        record = json.loads(path.read_text())
        seed = int(path.parent.name.removeprefix("seed"))
        runs.append({"task": record["task"]["name"], "seed": seed, "history": record["history"]})
    return runs


def report(runs: list[dict], where: str) -> list[dict]:
    print(f"time to {TARGET:.0%} exact match ({where}); budget {BUDGET_S // 60} min")
    print(f"{'task':<10}{'seed':>5}{'steps':>8}{'seconds':>9}{'/ budget':>13}  {'stopped at'}")
    rows = []
    for run in runs:
        last = run["history"][-1] if run["history"] else {}
        hit = first_at_target(run["history"])
        steps = None if hit is None else hit["step"]
        seconds = None if hit is None else hit["seconds"]
        ratio = None if seconds is None else seconds / BUDGET_S
        shown = [("-" if v is None else f"{v:{f}}") for v, f in ((steps, "d"), (seconds, ".0f"))]
        stop = f"{last['step']} ({last['seconds']:.0f} s)" if last else "-"
        print(
            f"{run['task']:<10}{run['seed']:>5}{shown[0]:>8}{shown[1]:>9}"
            f"{'not reached' if ratio is None else f'{ratio:.2f}':>13}  {stop}"
        )
        rows.append({"task": run["task"], "seed": run["seed"], "steps": steps})
        rows[-1] |= {"seconds": seconds, "ratio_to_budget": ratio}
        rows[-1] |= {"stop_step": last.get("step"), "stop_seconds": last.get("seconds")}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(adjpos.TASKS), choices=adjpos.TASKS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from-runs", type=Path, help="read finished runs instead of training")
    parser.add_argument("--quick", action="store_true", help="a tiny model, a few steps")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")
    args = parser.parse_args()
    if args.from_runs is not None:
        where = f"runs in {args.from_runs}"
        rows = report(from_runs(args.from_runs), where)
    else:
        torch.set_num_threads(os.cpu_count() or 1)
        where = f"trained here, {torch.get_num_threads()} threads"
        rows = report([train_one(task, args.seed, args.quick) for task in args.tasks], where)
    if args.json is not None:
        machine = {"platform": platform.platform(), "quick": args.quick, "versions": versions()}
        settings = {"source": where, "target": TARGET, "budget_s": BUDGET_S}
        write_json(args.json, {"machine": machine, "settings": settings, "rows": rows})


if __name__ == "__main__":
    main()
