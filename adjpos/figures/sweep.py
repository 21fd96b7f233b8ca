"""Figures of a random-init sweep, drawn from the rows of ``sweep.csv`` (no recomputation)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean
from typing import Any

import plotly.graph_objects as go

from adjpos.figures.style import CHANCE, apply_style, color

Rows = Sequence[dict[str, Any]]
# Columns that describe a measurement rather than the model measured.
_METRICS = ("layer", "adjacency", "variance_slope", "seconds")


def sweep_heatmap(rows: Rows, x: str, y: str, *, layer: int | None = None) -> go.Figure:
    """Mean adjacency score (over seeds and any other parameters) at one layer, over x and y.

    Args:
        rows: rows of ``sweep.csv`` (`adjpos.study.sweep.read_sweep_csv`).
        x, y: two grid parameters (columns of the CSV).
        layer: which layer (default: the deepest in the rows).
    """
    _check_columns(rows, [x, y])
    layer = _last_layer(rows) if layer is None else layer
    cells: dict[tuple, list[float]] = defaultdict(list)
    for row in rows:
        if row["layer"] == layer and row[x] is not None and row[y] is not None:
            cells[(row[x], row[y])].append(row["adjacency"])
    if not cells:
        raise ValueError(f"no rows vary both {x!r} and {y!r} at layer {layer}")
    xs = sorted({k[0] for k in cells}, key=_order)
    ys = sorted({k[1] for k in cells}, key=_order)
    z = [[mean(cells[(a, b)]) if (a, b) in cells else None for a in xs] for b in ys]
    fig = go.Figure(
        go.Heatmap(
            x=[str(v) for v in xs],
            y=[str(v) for v in ys],
            z=z,
            zmin=0.0,
            zmax=1.0,
            zmid=0.5,
            colorscale="RdBu_r",
            colorbar={"title": "adjacency"},
            text=[[f"{v:.2f}" if v is not None else "" for v in r] for r in z],
            texttemplate="%{text}",
        )
    )
    fig.update_layout(xaxis_title=x, yaxis_title=y)
    return apply_style(fig, title=f"Adjacency score at layer {layer} (mean over seeds)")


def sweep_layer_lines(rows: Rows, by: str) -> go.Figure:
    """Adjacency score against layer, one line per value of grid parameter `by`."""
    _check_columns(rows, [by])
    groups: dict[Any, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row[by] is not None:
            groups[row[by]][row["layer"]].append(row["adjacency"])
    fig = go.Figure()
    for value in sorted(groups, key=_order):
        layers = sorted(groups[value])
        fig.add_trace(
            go.Scatter(
                x=layers,
                y=[mean(groups[value][k]) for k in layers],
                mode="lines+markers",
                name=f"{by}={value}",
                line={"color": color(len(fig.data))},
            )
        )
    fig.add_hline(y=0.5, line=CHANCE, annotation_text="chance")
    fig.update_layout(
        xaxis_title="layer", yaxis_title="adjacency score", yaxis_range=[0.4, 1.0], xaxis_dtick=1
    )
    return apply_style(
        fig, title=f"Adjacency score by layer, by {by} (mean over seeds and the other grid values)"
    )


def sweep_histogram(rows: Rows, *, layer: int | None = None) -> go.Figure:
    """Histogram of the adjacency scores of every model (cell x seed) of the sweep.

    Args:
        rows: rows of ``sweep.csv``.
        layer: which layer (default: each model's own last layer, so grids that vary depth
            compare like with like).
    """
    if layer is None:
        values, where = last_layer_scores(rows), "each model's last layer"
    else:
        values, where = [r["adjacency"] for r in rows if r["layer"] == layer], f"layer {layer}"
    if not values:
        raise ValueError(f"no rows at layer {layer}")
    fig = go.Figure(
        go.Histogram(
            x=values, xbins={"start": 0.0, "end": 1.0, "size": 0.025}, marker_color=color(0)
        )
    )
    fig.add_vline(x=0.5, line=CHANCE, annotation_text="chance")
    fig.update_layout(xaxis_title="adjacency score", yaxis_title="models", xaxis_range=[0.3, 1.0])
    return apply_style(
        fig, title=f"Adjacency scores across the grid at {where} ({len(values)} models)"
    )


def last_layer_scores(rows: Rows) -> list[float]:
    """Each model's (every column but the metrics and the layer) score at its deepest layer."""
    deepest: dict[tuple, tuple[int, float]] = {}
    for row in rows:
        key = tuple((k, v) for k, v in row.items() if k not in _METRICS)
        if key not in deepest or row["layer"] > deepest[key][0]:
            deepest[key] = (row["layer"], row["adjacency"])
    return [score for _, score in deepest.values()]


def _check_columns(rows: Rows, names: list[str]) -> None:
    if not rows:
        raise ValueError("no sweep rows to draw")
    missing = [n for n in names if n not in rows[0]]
    if missing:
        params = [
            k
            for k in rows[0]
            if k not in ("seed", "layer", "adjacency", "variance_slope", "seconds")
        ]
        raise ValueError(f"{missing} are not grid parameters of this sweep; it has {params}")


def _last_layer(rows: Rows) -> int:
    return max(row["layer"] for row in rows)


def _order(value: Any) -> tuple:
    # Numbers in numeric order, then strings; None (not varied) last.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))
