"""Figures of a random-init sweep, drawn from its tidy table (``sweep.csv``; no recomputation)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from adjpos.figures.style import CHANCE, POSITIONAL_KINDS, apply_style, color, label, line_colors
from adjpos.validation import UsageError

Rows = pd.DataFrame | Sequence[dict[str, Any]]
# Columns that describe a measurement rather than the model measured.
MEASUREMENTS = ("layer", "adjacency", "variance_slope", "seconds")


def sweep_heatmap(rows: Rows, x: str, y: str, *, layer: int | None = None) -> go.Figure:
    """Mean adjacency score (over seeds and any other parameters) at one layer, over x and y.
    A parameter left unset (None, e.g. no normalization) is its own row or column, "none".

    Args:
        rows: the sweep's table (`adjpos.sweep.read_sweep`) or its rows as dicts.
        x, y: two grid parameters (columns of the table).
        layer: which layer (default: each model's own last layer, so a grid that varies depth
            shows every depth).
    """
    table = _table(rows, [x, y])
    at, where = _at_layer(table, layer)
    at = at.assign(**{name: at[name].astype(object).fillna("none") for name in (x, y)})
    if at.empty:
        raise UsageError(f"no rows vary both {x!r} and {y!r} at {where}")
    means = at.groupby([y, x])["adjacency"].mean().unstack(x)
    means = means.loc[_sorted(means.index), _sorted(means.columns)]
    z = [[None if pd.isna(v) else float(v) for v in row] for row in means.to_numpy()]
    text = [[f"{v:.2f}" if v is not None else "" for v in r] for r in z]
    axes = dict(x=[str(v) for v in means.columns], y=[str(v) for v in means.index])
    scale = dict(zmin=0.0, zmax=1.0, zmid=0.5, colorscale="RdBu_r")
    heatmap = go.Heatmap(z=z, **axes, **scale, colorbar={"title": "adjacency score"}, text=text)
    fig = go.Figure(heatmap.update(texttemplate="%{text}"))
    fig.update_layout(xaxis_title=label(x), yaxis_title=label(y))
    return apply_style(fig, title=f"Adjacency score at {where} (mean over seeds)")


def sweep_layer_lines(rows: Rows, by: str) -> go.Figure:
    """Adjacency score against layer, one line per value of grid parameter `by` (a positional
    encoding named as the model kind it makes: "random-init, learned positions")."""
    table = _table(rows, [by])
    means = table[table[by].notna()].groupby([by, "layer"], as_index=False)["adjacency"].mean()

    def name(value: Any) -> str:
        kind = POSITIONAL_KINDS.get(value) if by == "positional" else None
        return kind or f"{label(by)}: {value}"

    means[by] = [name(v) for v in means[by]]
    colours = line_colors(name(v) for v in _sorted(table[by].dropna().unique()))  # kinds first
    colouring = dict(category_orders={by: list(colours)}, color_discrete_map=colours)
    fig = px.line(means, x="layer", y="adjacency", color=by, markers=True, **colouring)
    fig.add_hline(y=0.5, line=CHANCE, annotation_text="chance")
    fig.update_layout(xaxis_title="layer", yaxis_title="adjacency score", yaxis_range=[0.4, 1.0])
    fig.update_layout(xaxis_dtick=1, legend_title_text="")
    title = f"Adjacency score by layer, by {label(by)} (mean over seeds and the other grid values)"
    return apply_style(fig, title=title)


def sweep_histogram(rows: Rows, *, layer: int | None = None) -> go.Figure:
    """Histogram of the adjacency scores of every model (cell x seed) of the sweep.

    Args:
        rows: the sweep's table or its rows as dicts.
        layer: which layer (default: each model's own last layer, so grids that vary depth
            compare like with like).
    """
    at, where = _at_layer(_table(rows, []), layer)
    values = at["adjacency"]
    if values.empty:
        raise UsageError(f"no rows at layer {layer}")
    bins = {"start": 0.0, "end": 1.0, "size": 0.025}
    fig = go.Figure(go.Histogram(x=values.tolist(), xbins=bins, marker_color=color(0)))
    fig.add_vline(x=0.5, line=CHANCE, annotation_text="chance")
    fig.update_layout(xaxis_title="adjacency score", yaxis_title="models", xaxis_range=[0.3, 1.0])
    return apply_style(
        fig, title=f"Adjacency scores across the grid at {where} ({len(values)} models)"
    )


def _at_layer(table: pd.DataFrame, layer: int | None) -> tuple[pd.DataFrame, str]:
    """The rows at `layer`, or at each model's (cell x seed) own last layer when it is None,
    and those words for a title ("layer 4" where every model's last layer is 4)."""
    if layer is not None:
        return table[table["layer"] == layer], f"layer {layer}"
    models = [c for c in table.columns if c not in MEASUREMENTS]
    deepest = table.groupby(models, dropna=False)["layer"].transform("max")
    last = deepest.unique()
    where = f"layer {int(last[0])}" if len(last) == 1 else "each model's last layer"
    return table[table["layer"] == deepest], where


def _table(rows: Rows, names: list[str]) -> pd.DataFrame:
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if table.empty:
        raise UsageError("no sweep rows to draw")
    missing = [n for n in [*names, "layer", "adjacency"] if n not in table.columns]
    if missing:
        params = [k for k in table.columns if k not in (*MEASUREMENTS, "seed")]
        raise UsageError(f"{missing} are not grid parameters of this sweep; it has {params}")
    return table


def _sorted(values: Any) -> list:
    # Numbers in numeric order, then strings.
    def key(value: Any) -> tuple:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return (0, value, "")
        return (1, 0, str(value))

    return sorted(values, key=key)
