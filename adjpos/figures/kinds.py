"""A measure by layer with each layer's kind marked: NoPE layers as open diamonds."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from adjpos.figures.intervals import plot_intervals
from adjpos.validation import UsageError

NOPE_MARKER = {"symbol": "diamond-open", "size": 13, "color": "black", "line": {"width": 2}}


def plot_layer_kinds(
    rows: pd.DataFrame | list[dict[str, Any]],
    *,
    y: str = "adjacency",
    color: str,
    facet_col: str | None = None,
    low: str | None = None,
    high: str | None = None,
    title: str,
    y_title: str | None = None,
    ring: Any = None,
) -> go.Figure:
    """`y` by layer, one line per `color` value and one panel per `facet_col` value (as
    `plot_intervals`), with every point of a NoPE layer (``kind == "nope"``) ringed by an open
    diamond (only on the line whose `color` value is `ring`, when given). `rows` need the
    columns ``layer`` and ``kind`` (from `adjpos.measure_layers`).

    Example:
        >>> rows = [{"layer": l, "kind": k, "adjacency": 0.5 + l / 10, "model": "m"}
        ...         for l, k in enumerate(["embed", "rope", "nope"])]
        >>> fig = plot_layer_kinds(rows, color="model", title="t")
        >>> [[int(x) for x in t.x] for t in fig.data if t.name == "NoPE layer"]
        [[2]]
    """
    frame = pd.DataFrame(rows)
    missing = {"layer", "kind", y, color} - set(frame.columns)
    if missing:
        raise UsageError(f"rows lack the columns {sorted(missing)}")
    options = dict(low=low, high=high, facet_col=facet_col, title=title, y_title=y_title)
    fig = plot_intervals(frame, x="layer", y=y, color=color, **options)
    ordered = frame.sort_values([color, "layer"])  # the panel order plot_intervals used
    panels = list(ordered[facet_col].unique()) if facet_col else [None]
    for index, panel in enumerate(panels):
        part = frame if panel is None else frame[frame[facet_col] == panel]
        ringed = (part[color] == ring) if ring is not None else True
        nope = part[(part["kind"] == "nope") & ringed]
        if nope.empty:
            continue
        marker = go.Scatter(
            x=nope["layer"],
            y=nope[y],
            mode="markers",
            marker=NOPE_MARKER,
            name="NoPE layer",
            legendgroup="nope",
            showlegend=index == 0,
            hoverinfo="skip",
        )
        fig.add_trace(marker, row=1, col=index + 1) if facet_col else fig.add_trace(marker)
    return fig
