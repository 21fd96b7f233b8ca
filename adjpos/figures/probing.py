"""Probe scores against layer: one line per feature set, one panel per probe and metric."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.style import CHANCE, CONTROL_DASH, apply_style, color

if TYPE_CHECKING:
    from adjpos.probes.result import ProbeResult

METRIC_TITLES = {
    "r2": "R^2",
    "mae": "mean abs. error (lower is better)",
    "accuracy": "accuracy",
    "mean_abs_distance": "mean abs. distance (lower is better)",
    "abs_kendall_tau": "|Kendall's tau|",
}
# Order reconstruction methods share one panel, so cosine and variance sit side by side.
ORDER_METRIC, ORDER_PANEL = "abs_kendall_tau", "order from shuffled states"


def plot_probe_scores(
    result: ProbeResult, *, title: str | None = None, columns: int = 2
) -> go.Figure:
    """Score vs layer for every feature set, one panel per (probe, metric) in `result`.

    Order reconstruction (metric ``abs_kendall_tau``) gets one panel for all its methods. Each
    feature set keeps one colour in every panel; its chance baseline is the thin dashed
    line of the same colour, and ``shuffled:`` controls are dotted. Error bars are the std in
    the result (over seeds, or over sequences for order reconstruction).

    Args:
        result: a `ProbeResult` (from `adjpos.probe_positions`, `adjpos.reconstruct_order`,
            or both added together).
        title: figure title (default: names the model and the data).
        columns: panels per row.
    """
    panels = list(dict.fromkeys(_panel(s) for s in result.scores))
    if not panels:
        raise ValueError("the result holds no scores to plot")
    rows = math.ceil(len(panels) / columns)
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[f"{probe}: {METRIC_TITLES.get(m, m)}" for probe, m in panels],
        horizontal_spacing=0.1,
        vertical_spacing=min(0.5 / rows, 0.22),
    )
    colours = {name: color(i) for i, name in enumerate(result.feature_sets)}
    shown: set[str] = set()
    for index, (probe, metric) in enumerate(panels):
        where = dict(row=index // columns + 1, col=index % columns + 1)
        for name in colours:
            scores = [s for s in result.scores if (*_panel(s), s.features) == (probe, metric, name)]
            if not scores:
                continue
            for trace in _traces(name, scores, colours[name], first=name not in shown):
                fig.add_trace(trace, **where)
            shown.add(name)
        fig.update_xaxes(title_text="layer", dtick=1, **where)
    data = f"{result.n_sequences} sequences x {result.seq_len} tokens"
    default = f"Where is position? {result.model}: {data}"
    return apply_style(fig, title=title or default, rows=rows)


def _panel(score) -> tuple[str, str]:
    return (ORDER_PANEL if score.metric == ORDER_METRIC else score.probe), score.metric


def _traces(name, scores, colour, *, first: bool) -> list[go.Scatter]:
    scores = sorted(scores, key=lambda s: s.layer)
    layers = [s.layer for s in scores]
    spread = [0.0 if math.isnan(s.std) else s.std for s in scores]
    dash = CONTROL_DASH if name.startswith("shuffled:") else "solid"
    line = go.Scatter(
        x=layers,
        y=[s.value for s in scores],
        error_y=dict(type="data", array=spread, thickness=1, width=3),
        mode="lines+markers",
        name=name,
        legendgroup=name,
        showlegend=first,
        line=dict(color=colour, dash=dash),
    )
    chance = go.Scatter(
        x=layers,
        y=[s.baseline for s in scores],
        mode="lines",
        name=f"{name} chance",
        legendgroup=name,
        showlegend=False,
        hoverinfo="name+y",
        line={**CHANCE, "color": colour, "width": 1},
    )
    return [line, chance]
