"""Claim 1, seen: the self-cosine matrix of the paper's example prompt of each task at every
layer, trained and random-init: an illustration of one sequence, so it gives no verdict.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import torch

from adjpos.capture import capture_residuals
from adjpos.metrics import cosine_matrix
from adjpos.runs import write_json
from adjpos.scoring import sequence_scores
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Verdict
from adjpos.study.claims.adjacency import by_layer
from adjpos.study.models import RANDOM, TRAINED, rounded
from adjpos.study.views import KEYS
from adjpos.tables import Table
from adjpos.tables import plain_records as records
from adjpos.tasks import TASKS
from adjpos.tasks.vocab import EOS

TITLE = "Claim 1, seen: self-cosine matrices of one prompt per task"

# The paper's example prompt of each task (PAPER.md), drawn as the cosine heatmaps.
EXAMPLE_PROMPTS = {"addition": "123+456=", "reversal": "rev(1234)="}
EXAMPLE_PROMPTS |= {"indexing": "wherex(134504392,4)=", "ordering": "ord(5831,3851)="}
COSINE_SCORES = KEYS + Table(adjacency="float64")


def measure(context: Context) -> dict[str, Any]:
    scores, panels = measure_cosine(context.models, context.sizes)
    COSINE_SCORES.write(context.results / "cosine_scores.csv", scores)
    write_json(context.results / "cosine_heatmaps.json", panels)
    return {"scores": records(scores)}


def measure_cosine(models: Any, sizes: Any) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Self-cosine matrices of each task's example sequence at every layer, each trained seed
    and its own initial weights: their adjacency scores, and the matrices (rounded) for the
    heatmaps."""
    scores, panels = [], []
    for name, seed in ((n, s) for n in TASKS for s in models.seeds(n, sizes)):
        model, task = models.trained(name, seed)
        text = EXAMPLE_PROMPTS[name] + task.solve(EXAMPLE_PROMPTS[name]) + EOS
        tokens = task.encode(text)[None]
        for label, m in ((TRAINED, model), (RANDOM, models.control(name, seed))):
            states = capture_residuals(m, tokens).double()
            for layer, sim in enumerate(cosine_matrix(states)[:, 0]):
                key = {"task": name, "model": label, "seed": seed, "layer": layer}
                score = sequence_scores(states[layer], torch.tensor([tokens.shape[1]]))
                scores.append(key | {"adjacency": float(score[0])})
                panels.append(key | {"text": text, "matrix": rounded(sim)})
    return COSINE_SCORES.frame(scores), panels


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    return []  # one sequence per task: an illustration, not evidence


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    rows = [{**r, "model": f"{r['model']}, seed {r['seed']}"} for r in numbers["scores"]]
    return fmt.section(figures("cosine"), by_layer(rows, "adjacency"), fmt.text("cosine.section"))


def cosine_figures(panels: list[dict[str, Any]]) -> dict[str, Any]:
    """One grid of self-cosine heatmaps per task: its first trained seed and that seed's
    initial weights, every layer (the other seeds' scores are in the table)."""
    from adjpos.figures import plot_cosine_heatmaps

    out = {}
    for task in dict.fromkeys(p["task"] for p in panels):
        first = min(p.get("seed", 0) for p in panels if p["task"] == task)
        mine = [p for p in panels if p["task"] == task and p.get("seed", 0) == first]
        out[f"cosine_{task}"] = plot_cosine_heatmaps(
            [p["matrix"] for p in mine],
            titles=[f"{p['model']} (seed {p.get('seed', 0)}), layer {p['layer']}" for p in mine],
            labels=[list(p["text"]) for p in mine],
            title=f"Self-cosine similarity, {task}: {mine[0]['text']}",
            columns=max(p["layer"] for p in mine) + 1,
        )
    return out


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    panels = json.loads((results / "cosine_heatmaps.json").read_text())
    return {
        stem: (fig, fmt.text("cosine.caption", task=stem.removeprefix("cosine_")))
        for stem, fig in cosine_figures(panels).items()
    }
