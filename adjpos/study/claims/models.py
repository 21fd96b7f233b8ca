"""The premise: the trained NoPE models solve their tasks (so they know where their tokens
are): exact match under greedy decoding with its Wilson interval, for every trained seed, on a
shipped model's own 2,000 held-out prompts or on `StudySizes.n_eval` fresh ones.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from adjpos.pretrained import pretrained_info
from adjpos.stats import wilson_interval
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, judge, seeds_text
from adjpos.study.models import gen
from adjpos.tables import Table
from adjpos.tables import plain_records as records
from adjpos.tasks import TASKS
from adjpos.training import evaluate

TITLE = "The models"

MODELS = Table(task="string", seed="int64", source="string", hits="int64", n_prompts="int64")
MODELS += Table(accuracy="float64", accuracy_low="float64", accuracy_high="float64")
MODELS += Table(parameters="int64", n_layers="int64", d_model="int64", n_heads="int64")
MODELS += Table(train_command="string")


def measure(context: Context) -> dict[str, Any]:
    table = measure_models(context.models, context.sizes, level=context.criteria.level)
    return {"models": records(MODELS.write(context.results / "models.csv", table))}


def measure_models(models: Any, sizes: Any, *, level: float = 0.95) -> pd.DataFrame:
    """Held-out exact match of each trained model (every seed) with its Wilson interval, and
    where the model and the prompts came from."""
    rows = []
    for name, seed in ((n, s) for n in TASKS for s in models.seeds(n, sizes)):
        model, task = models.trained(name, seed)
        shipped = models.train_dir is None
        info = pretrained_info(name, seed) if shipped else {}
        if "heldout" in info:  # the shipped check: 2,000 prompts no training run draws
            n = info["heldout"]["n_prompts"]
            hits, source = round(info["heldout"]["accuracy"] * n), "shipped (its held-out check)"
        else:
            prompts = task.draw_prompts(sizes.n_eval, generator=gen(1), split="test")
            n, source = len(prompts), "shipped" if shipped else "trained by this run"
            hits = sum(evaluate(model, task, prompts, per_prompt=True))
        low, high = wilson_interval(hits, n, level=level)
        cfg = model.adjpos_config
        rows.append(
            {"task": name, "seed": seed, "source": source, "hits": hits, "n_prompts": n}
            | {"accuracy": hits / n, "accuracy_low": low, "accuracy_high": high}
            | {"parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}
            | {"n_layers": cfg.n_layers, "d_model": cfg.d_model, "n_heads": cfg.n_heads}
            | {"train_command": info.get("command")}
        )
    return MODELS.frame(rows)


def solved(model: dict[str, Any], criteria: Criteria) -> Outcome:
    """For when the model's interval lies above `criteria.solved`, against when below."""
    return judge(model["accuracy_low"], model["accuracy_high"], criteria.solved, criteria.solved)


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    models, claim = numbers["models"], "The trained models solve their tasks (the premise)"
    evidence = f"exact match on held-out prompts, {criteria.level:.0%} Wilson interval above "
    evidence += f"{criteria.solved}; fewest prompts {min(m['n_prompts'] for m in models)}"
    words = {"seeds": seeds_text(m["seed"] for m in models), "unit": "trained model"}
    return [Verdict.tally(claim, [solved(m, criteria) for m in models], **words, evidence=evidence)]


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    models = numbers["models"]
    header = ["task", "seed", "model", "parameters", "layers x d_model x heads"]
    header += [f"exact match ({criteria.level:.0%} Wilson)", "prompts", "solved"]
    rows = [
        [m["task"], m["seed"], m["source"], m["parameters"]]
        + [f"{m['n_layers']} x {m['d_model']} x {m['n_heads']}"]
        + [fmt.span(m["accuracy"], m["accuracy_low"], m["accuracy_high"]), m["n_prompts"]]
        + [solved(m, criteria)]
        for m in models
    ]
    return fmt.section(fmt.table(header, rows), fmt.text("models.section", solved=criteria.solved))


def agreement(numbers: dict[str, Any], criteria: Criteria) -> str:
    """The premise beside the same models' exact match in the other stages (the dynamics'
    last snapshot, the causal tests' unchanged model), on their own prompts: where an
    interval lies apart from the premise's, the table says so."""
    premise = {(m["task"], m["seed"]): m for m in numbers["models"]["models"]}
    rows = []
    for (task, seed), m in premise.items():
        mine = (m["accuracy_low"], m["accuracy_high"])
        others = [
            _other(numbers.get("dynamics", {}).get("accuracy", []), task, seed, "final"),
            _other(numbers.get("causal", {}).get("baselines", []), task, seed, "baseline"),
        ]
        apart = [o for o in others if o and judge(*o[1:3], *mine) != Outcome.WITHIN]
        rows.append(
            [task, seed, fmt.span(m["accuracy"], *mine)]
            + [fmt.span(*o[:3]) + f", {o[3]} prompts" if o else "not measured" for o in others]
            + ["apart" if apart else "agree"]
        )
    header = ["task", "seed", "premise", "dynamics: last snapshot", "causal: unchanged model"]
    text = fmt.text("models.agreement", level=criteria.level)
    return fmt.section(text, fmt.table([*header, "intervals"], rows))


def _other(rows: list[dict[str, Any]], task: str, seed: int, key: str) -> tuple | None:
    found = (r for r in rows if (r["task"], r["seed"]) == (task, seed))
    return next(((r[key], r[f"{key}_low"], r[f"{key}_high"], r["n_prompts"]) for r in found), None)
