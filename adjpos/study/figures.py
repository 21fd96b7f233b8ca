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
    plot_intervals,
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
from adjpos.study import stages, trained
from adjpos.study.dynamics import DYNAMICS
from adjpos.study.numbers import (
    ADJACENCY_VIEWS,
    LEARNED,
    MAIN_VIEW,
    TRAINED,
    score_view,
    seed_summary,
)
from adjpos.study.sweep import read_sweep, rows_of_subgrid

CAPTIONS = {
    "adjacency_by_layer": "Adjacency score per layer (the study's score: whole sequence, ties "
    "strict; layer 0 = token embeddings), per task: the trained NoPE models, random-init NoPE "
    "models of the same architecture, and random-init models with learned positions (mean "
    "over seeds; bars: std over seeds).",
    "adjacency_views": "Adjacency score per layer in four views (rows: the study's score, the "
    "prompt rows, the answer rows, the prompt rows of centred states; ties as half except in "
    "the first), trained against random-init NoPE (mean over seeds; bars: from the lowest to "
    "the highest seed's 95% bootstrap interval over sequences).",
    "cosine": "{task}: cosine similarity of each position's hidden state (rows) with the earlier "
    "positions (columns), trained (top) and random-init (bottom), every layer; axes carry the "
    "characters of the sequence ('.' ends the answer).",
    "variance_by_position": "Variance of the trained models' hidden states over d_model, by "
    "position (mean over held-out sequences of one length and over seeds), one line per layer.",
    "variance_by_layer": "Variance against position by layer: the last-third / first-third "
    "ratio (top; below 1 = shrinks) and the Spearman correlation with position (bottom), "
    "trained against random-init NoPE (mean over seeds; bars: from the lowest to the highest "
    "seed's 95% bootstrap interval over sequences).",
    "probes": "Position probes per layer: {model}.",
    "dynamics": "Training dynamics of each task's first seed with snapshots: exact match, "
    "adjacency (the study's score and the centred prompt-row view), the variance ratio and "
    "its Spearman correlation with position, and the residual's position-probe gain over "
    "layer 0, against the training step (log scale; step 0, the initial weights, drawn at 1), "
    "one line per layer (bars: 95% intervals).",
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


def adjacency_views_figure(table: pd.DataFrame) -> go.Figure:
    """Four views of the score by layer, trained against random-init NoPE, seed spans."""
    shown = list(ADJACENCY_VIEWS.items())[:1] + [
        (k, v) for k, v in ADJACENCY_VIEWS.items() if k[0] != "all"
    ]
    frames = []
    for key, label in shown:
        view = score_view(table, key)
        summary = seed_summary(view[view["model"] != LEARNED], "adjacency", "low", "high")
        frames.append(summary.assign(view=label))
    title = "Adjacency by layer in four views (seed spans of 95% intervals)"
    return _seed_spans(frames, row="view", title=title, y_title="adjacency")


def variance_layers_figure(table: pd.DataFrame) -> go.Figure:
    """Ratio and Spearman correlation of variance with position by layer, seed spans."""
    frames = [
        seed_summary(table, metric, f"{metric}_low", f"{metric}_high").assign(metric=metric)
        for metric in ("ratio", "spearman")
    ]
    title = "Variance against position by layer (seed spans of 95% intervals)"
    return _seed_spans(frames, row="metric", title=title)


def _seed_spans(frames: list[pd.DataFrame], *, row: str, title: str, y_title=None) -> go.Figure:
    """`seed_summary` frames by layer: one line per model, one panel per (`row`, task)."""
    return plot_intervals(
        pd.concat(frames),
        x="layer",
        y="value",
        low="low",
        high="high",
        color="model",
        facet_col="task",
        facet_row=row,
        title=title,
        y_title=y_title,
    )


def dynamics_figure(table: pd.DataFrame) -> go.Figure:
    """Every dynamics metric against the step, one panel per (metric, task), one line per
    layer, for each task's first seed."""
    first = table.groupby("task")["seed"].transform("min")
    shown = table[table["seed"] == first].assign(
        step=lambda t: t["step"].clip(lower=1),
        layer=lambda t: [f"layer {int(x)}" if pd.notna(x) else "model" for x in t["layer"]],
    )
    return plot_intervals(
        shown,
        x="step",
        y="value",
        low="low",
        high="high",
        color="layer",
        facet_col="task",
        facet_row="metric",
        log_x=True,
        title="Training dynamics (the first seed with snapshots; bars: 95% intervals)",
    )


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
    table = trained.ADJACENCY.read(results / "adjacency_by_layer.csv")
    main = score_view(table, MAIN_VIEW)
    figures["adjacency_by_layer"] = (adjacency_figure(main), CAPTIONS["adjacency_by_layer"])
    figures["adjacency_views"] = (adjacency_views_figure(table), CAPTIONS["adjacency_views"])
    panels = json.loads((results / "cosine_heatmaps.json").read_text())
    for stem, fig in cosine_figures(panels).items():
        figures[stem] = (fig, CAPTIONS["cosine"].format(task=stem.removeprefix("cosine_")))
    table = trained.VARIANCE.read(results / "variance_by_position.csv")
    figures["variance_by_position"] = (variance_figure(table), CAPTIONS["variance_by_position"])
    table = trained.VARIANCE_LAYERS.read(results / "variance_by_layer.csv")
    figures["variance_by_layer"] = (variance_layers_figure(table), CAPTIONS["variance_by_layer"])
    table = DYNAMICS.read(results / "dynamics.csv")
    if not table.empty:  # no snapshots measured: the report says so
        figures["dynamics"] = (dynamics_figure(table), CAPTIONS["dynamics"])
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
