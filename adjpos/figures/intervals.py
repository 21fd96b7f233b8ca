"""Faceted line figures of values with their intervals (seeds, bootstrap), in plotly express."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from adjpos.figures.style import apply_style, label, line_colors, log_ticks, title_facet_rows


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

    Each row of panels names its quantity on its y axis: its `facet_row` value (what the
    row measures), after `y_title` where given; without rows, `y_title` (default: `y`'s
    words). Names of columns and values are shown in words (`adjpos.figures.style.label`);
    model kinds keep their colour (`adjpos.figures.style.line_colors`); a log x axis prints
    its ticks as numbers.

    Example:
        >>> rows = [{"layer": l, "value": 0.5 + l / 4, "low": 0.25, "high": 1.5, "model": "m"}
        ...         for l in range(3)]
        >>> fig = plot_intervals(rows, x="layer", y="value", low="low", high="high",
        ...                      color="model", title="t", y_title="score")
        >>> len(fig.data), [float(v) for v in fig.data[0].error_y.array]
        (1, [1.0, 0.75, 0.5])
        >>> fig.layout.yaxis.title.text
        'score'
    """
    frame = pd.DataFrame(rows)
    for name in (n for n in (color, facet_col, facet_row) if n is not None):
        frame[name] = [label(v) if isinstance(v, str) else v for v in frame[name]]
    colours = line_colors(frame[color])
    frame = frame.sort_values([color, x])  # lines in order, each along x
    errors = {}
    if low is not None and high is not None:
        frame = frame.assign(_up=frame[high] - frame[y], _down=frame[y] - frame[low])
        errors = {"error_y": "_up", "error_y_minus": "_down"}
    options = dict(facet_col=facet_col, facet_row=facet_row, facet_col_spacing=0.06, markers=True)
    options |= dict(log_x=log_x, category_orders={color: list(colours)}, color_discrete_map=colours)
    fig = px.line(frame, x=x, y=y, color=color, labels={x: label(x)}, **options, **errors)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_yaxes(matches=None, showticklabels=True, title_text="")
    fig.update_layout(legend_title_text="")
    if log_x:
        fig.update_xaxes(**log_ticks(frame[x]))
    if facet_row is None:
        fig.update_yaxes(title_text=y_title or label(y), col=1)
    else:
        title_facet_rows(fig, list(dict.fromkeys(frame[facet_row])), y_title)
    n_rows = frame[facet_row].nunique() if facet_row else 1
    return apply_style(fig, title=title, rows=n_rows)
