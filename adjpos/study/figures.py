"""The study's figures, each drawn from the tables its stage wrote (or returned) and nothing
else. The pipeline draws every figure of a run with `run_figures`; the example scripts call
the per-figure functions on the stages' tables, so a figure has one source.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from adjpos.figures import (
    plot_adjacency_by_layer,
    plot_cosine_heatmaps,
    plot_first_layer_theory,
    plot_interventions,
    plot_probe_scores,
    plot_variance_by_position,
    sweep_heatmap,
    sweep_histogram,
    sweep_layer_lines,
)
from adjpos.interventions import INTERVENTION_TABLE
from adjpos.models import ModelConfig
from adjpos.probes import ProbeResult
from adjpos.study import stages
from adjpos.study.numbers import TRAINED
from adjpos.study.sweep import read_sweep, rows_of_subgrid

CAPTIONS = {
    "adjacency_by_layer": "Adjacency score per layer (0.5 = chance; layer 0 = token embeddings), "
    "per task: the trained NoPE model, random-init NoPE models of the same architecture, and "
    "random-init models with learned positions (bars: std over seeds).",
    "cosine": "{task}: cosine similarity of each position's hidden state (rows) with the earlier "
    "positions (columns), trained (top) and random-init (bottom), every layer; axes carry the "
    "characters of the sequence ('.' ends the answer).",
    "variance_by_position": "Variance of the trained models' hidden states over d_model, by "
    "position (mean over held-out sequences of one length), one line per layer.",
    "probes": "Position probes per layer: {model}.",
    "interventions": "Exact match of each trained model with one carrier of position changed "
    "at the input of one block (layer 0 = token embeddings), each control dashed in its "
    "intervention's colour, the unchanged model black (bars: 95% bootstrap intervals over "
    "prompts).",
    "sweep_init_by_width": "Random-init NoPE models: adjacency score at the deepest layer over "
    "init scale and width (mean over seeds).",
    "sweep_histogram": "Adjacency scores of every random-init model of the sweep.",
    "sweep_by_positional": "Random-init models: NoPE against learned, rotary and alibi positions.",
    "sweep_depth_by_norm": "Random-init NoPE models: depth against normalization placement.",
    "theory_first_layer": "One-layer random-init NoPE models: measured first-layer adjacency "
    "against the prediction for near-uniform attention, and how uniform attention really is.",
    "theory_cosine": "Mean first-layer self-cosine matrix of a one-layer model at init_range "
    "{scale}, measured and predicted, attention output alone (attn_out) and with the residual "
    "(resid_mid).",
}


def adjacency_figure(table: pd.DataFrame) -> go.Figure:
    """Adjacency by layer, one panel per task, one line per model kind."""
    return plot_adjacency_by_layer(table, panel="task", line="model")


def variance_figure(table: pd.DataFrame) -> go.Figure:
    """Variance by position of the trained models, one panel per task, one line per layer."""
    return plot_variance_by_position(
        table[table["model"] == stages.TRAINED], panel="task", line="layer"
    )


def cosine_figures(panels: list[dict[str, Any]]) -> dict[str, go.Figure]:
    """One grid of self-cosine heatmaps per task: trained and random-init, every layer."""
    figures = {}
    for task in dict.fromkeys(p["task"] for p in panels):
        mine = [p for p in panels if p["task"] == task]
        figures[f"cosine_{task}"] = plot_cosine_heatmaps(
            [p["matrix"] for p in mine],
            titles=[f"{p['model']}, layer {p['layer']}" for p in mine],
            labels=[list(p["text"]) for p in mine],
            title=f"Self-cosine similarity, {task}: {mine[0]['text']}",
            columns=max(p["layer"] for p in mine) + 1,
        )
    return figures


def sweep_figures(table: pd.DataFrame, grid: Any, base: ModelConfig) -> dict[str, go.Figure]:
    """The sweep's heatmap (init x width), histogram, and the positional and depth figures
    when the grid has those sub-grids."""
    grid = list(grid)
    figures = {
        "sweep_init_by_width": sweep_heatmap(
            rows_of_subgrid(table, grid[0], base), "init_range", "d_model"
        ),
        "sweep_histogram": sweep_histogram(table),
    }
    positional = next((g for g in grid if "positional" in g), None)
    if positional is not None:
        sub = rows_of_subgrid(table, positional, base)
        figures["sweep_by_positional"] = sweep_layer_lines(sub, "positional")
    depth = next((g for g in grid if "normalization_type" in g), None)
    if depth is not None:
        sub = rows_of_subgrid(table, depth, base)
        figures["sweep_depth_by_norm"] = sweep_heatmap(sub, "n_layers", "normalization_type")
    return figures


def theory_figures(
    table: pd.DataFrame, matrices: list[dict[str, Any]], scale: float
) -> dict[str, go.Figure]:
    """Measured against predicted first-layer adjacency by init scale, and the heatmaps."""
    heatmaps = plot_cosine_heatmaps(
        [m["matrix"] for m in matrices],
        titles=[f"{m['site']} {m['kind']}" for m in matrices],
        title=f"First layer at init_range {scale}: measured and predicted self-cosine",
        columns=2,
    )
    return {"theory_first_layer": plot_first_layer_theory(table), "theory_cosine": heatmaps}


def run_figures(out: str | Path) -> dict[str, tuple[go.Figure, str]]:
    """Every figure of the study run in `out`, with its caption, from its result files."""
    results = Path(out) / "results"
    spec = json.loads((Path(out) / "run.json").read_text())["spec"]
    sizes = spec["sizes"]
    figures: dict[str, tuple[go.Figure, str]] = {}
    table = stages.ADJACENCY.read(results / "adjacency_by_layer.csv")
    figures["adjacency_by_layer"] = (adjacency_figure(table), CAPTIONS["adjacency_by_layer"])
    panels = json.loads((results / "cosine_heatmaps.json").read_text())
    for stem, fig in cosine_figures(panels).items():
        figures[stem] = (fig, CAPTIONS["cosine"].format(task=stem.removeprefix("cosine_")))
    table = stages.VARIANCE.read(results / "variance_by_position.csv")
    figures["variance_by_position"] = (variance_figure(table), CAPTIONS["variance_by_position"])
    for path in sorted(results.glob("probes_*.json")):
        result = ProbeResult.from_json(path)
        if not result.model.startswith(TRAINED):  # the copies are in the report's tables
            continue
        caption = CAPTIONS["probes"].format(model=result.model)
        figures[path.stem] = (plot_probe_scores(result), caption)
    table = INTERVENTION_TABLE.read(results / "interventions.csv")
    figures["interventions"] = (plot_interventions(table), CAPTIONS["interventions"])
    base = ModelConfig(n_layers=sizes["sweep_layers"])
    for stem, fig in sweep_figures(read_sweep(results / "sweep"), sizes["grid"], base).items():
        figures[stem] = (fig, CAPTIONS[stem])
    table = stages.THEORY.read(results / "theory.csv")
    matrices = json.loads((results / "theory_matrices.json").read_text())
    scale = sizes["theory_heatmap_scale"]
    for stem, fig in theory_figures(table, matrices, scale).items():
        figures[stem] = (fig, CAPTIONS[stem].format(scale=scale))
    return figures
