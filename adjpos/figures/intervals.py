"""Faceted line figures of values with their intervals (seeds, bootstrap), in plotly express."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from adjpos.figures.style import COLORS, apply_style


def plot_intervals(
    rows: pd.DataFrame | list[dict[str, Any]],
    *,
    x: str,
    y: str,
    color: str,
    low: str | None = None,
    high: str | None = None,
    facet_col: str | None = None,
    facet_row: str | None = None,
    log_x: bool = False,
    title: str,
    y_title: str | None = None,
) -> go.Figure:
    """`y` against `x`, one line per `color` value, one panel per (`facet_row`, `facet_col`)
    value, with error bars from `low` to `high` where given.

    Example:
        >>> rows = [{"layer": l, "value": 0.5 + l / 4, "low": 0.25, "high": 1.5, "model": "m"}
        ...         for l in range(3)]
        >>> fig = plot_intervals(rows, x="layer", y="value", low="low", high="high",
        ...                      color="model", title="t")
        >>> len(fig.data), [float(v) for v in fig.data[0].error_y.array]
        (1, [1.0, 0.75, 0.5])
    """
    frame = pd.DataFrame(rows).sort_values([color, x])  # lines in order, each along x
    errors = {}
    if low is not None and high is not None:
        frame = frame.assign(_up=frame[high] - frame[y], _down=frame[y] - frame[low])
        errors = {"error_y": "_up", "error_y_minus": "_down"}
    fig = px.line(
        frame,
        x=x,
        y=y,
        color=color,
        facet_col=facet_col,
        facet_row=facet_row,
        markers=True,
        log_x=log_x,
        color_discrete_sequence=COLORS,
        **errors,
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_layout(legend_title_text="")
    if y_title:
        fig.update_yaxes(title_text="")
        fig.update_yaxes(title_text=y_title, col=1)
    rows_ = frame[facet_row].nunique() if facet_row else 1
    return apply_style(fig, title=title, rows=rows_)
