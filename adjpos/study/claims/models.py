"""The premise: the trained NoPE models solve their tasks, so they must know where their tokens
are. Exact match (whole answer right, greedy decoding) on fresh held-out prompts, with its
bootstrap interval over prompts, for every trained seed of every task.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from adjpos.pretrained import pretrained_info
from adjpos.stats import bootstrap_interval, compare_intervals
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Verdict, seeds_text, toward
from adjpos.study.models import gen
from adjpos.study.views import records
from adjpos.tables import Table
from adjpos.tasks import TASKS
from adjpos.training import evaluate

TITLE = "The models"

MODELS = Table(
    task="string",
    seed="int64",
    source="string",
    accuracy="float64",
    accuracy_low="float64",
    accuracy_high="float64",
    n_prompts="int64",
    parameters="int64",
    n_layers="int64",
    d_model="int64",
    n_heads="int64",
    train_command="string",
)


def measure(context: Context) -> dict[str, Any]:
    table = measure_models(context.models, context.sizes, n_boot=context.criteria.n_boot_prompts)
    return {"models": records(MODELS.write(context.results / "models.csv", table))}


def measure_models(models: Any, sizes: Any, *, n_boot: int = 2000) -> pd.DataFrame:
    """Held-out exact-match accuracy of each trained model (every seed), and where it came
    from."""
    rows = []
    for name, seed in ((n, s) for n in TASKS for s in models.seeds(n, sizes)):
        model, task = models.trained(name, seed)
        prompts = task.draw_prompts(sizes.n_eval, generator=gen(1), split="test")
        hits = evaluate(model, task, prompts, per_prompt=True)
        low, high = bootstrap_interval(hits, n_boot=n_boot)
        cfg, shipped = model.adjpos_config, models.train_dir is None
        rows.append(
            {
                "task": name,
                "seed": seed,
                "source": "shipped" if shipped else "trained by this run",
                "accuracy": sum(hits) / len(hits),
                "accuracy_low": low,
                "accuracy_high": high,
                "n_prompts": len(prompts),
                "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "n_layers": cfg.n_layers,
                "d_model": cfg.d_model,
                "n_heads": cfg.n_heads,
                "train_command": pretrained_info(name, seed)["command"] if shipped else None,
            }
        )
    return MODELS.frame(rows)


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    models, solved = numbers["models"], criteria.solved
    outcomes = [
        toward(compare_intervals(m["accuracy_low"], m["accuracy_high"], solved, solved))
        for m in models
    ]
    return [
        Verdict.tally(
            "The trained models solve their tasks (the premise)",
            outcomes,
            seeds=seeds_text(m["seed"] for m in models),
            unit="trained model",
            evidence=f"exact match on fresh held-out prompts, 95% interval above {solved}; "
            f"lowest {fmt.n(min(m['accuracy'] for m in models))}",
        )
    ]


def section(numbers: dict[str, Any], figures: Any) -> str:
    models = numbers["models"]
    worst = min(models, key=lambda m: m["accuracy"])
    header = ["task", "seed", "model", "parameters", "layers x d_model x heads"]
    rows = [
        [m["task"], m["seed"], m["source"], m["parameters"]]
        + [f"{m['n_layers']} x {m['d_model']} x {m['n_heads']}"]
        + [fmt.span(m["accuracy"], m["accuracy_low"], m["accuracy_high"]), m["n_prompts"]]
        for m in models
    ]
    source = "trained by this run" if worst["source"] != "shipped" else "shipped with adjpos"
    return (
        fmt.table(header + ["exact match (95% interval)", "prompts"], rows)
        + "\n\nEach task model is a causal transformer with no positional encoding (NoPE), "
        f"{source}. Exact-match accuracy (whole answer right, greedy decoding) on fresh held-out "
        f"prompts is at least {fmt.n(worst['accuracy'])} ({worst['task']}): the models solve "
        "their tasks, so they must know where their tokens are."
    )
