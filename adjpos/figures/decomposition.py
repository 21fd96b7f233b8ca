"""The shares of the position / context decomposition's parts, stacked by layer."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from adjpos.figures.style import apply_style, line_colors, title_facet_rows
from adjpos.validation import UsageError

# The parts in the order they stack, bottom to top (adjpos.metrics.decompose.SHARE_PARTS; a
# share without a token part has none), each with its name in the legend.
PARTS = {"mean": "mean", "token": "token means", "position": "position curve"}
PARTS |= {"context": "context (per-sequence mean)", "residual": "residual"}


def plot_variance_shares(
    rows: pd.DataFrame | list[dict[str, Any]],
    *,
    x: str = "layer",
    facet_col: str | None = "task",
    facet_row: str | None = "model",
    title: str = "Variance shares of the decomposition by layer",
) -> go.Figure:
    """Each part's share of the sum of squares as stacked bars along `x`, one panel per
    (`facet_row`, `facet_col`) value. Rows that repeat a bar (seeds) are averaged. A negative
    share (a part fitted on other sequences that fits these worse than nothing) stacks below
    zero.

    Args:
        rows: one row per bar and part, with the columns ``part`` (a key of `PARTS`),
            ``share``, `x` and the facets, e.g. ``{"task": "addition", "model": "trained",
            "layer": 2, "part": "position", "share": 0.31}``.
        x: the column along the x axis.
        facet_col, facet_row: the columns that split panels (None: no split).
        title: the figure's title.

    Example:
        >>> rows = [{"layer": 1, "part": p, "share": s}
        ...         for p, s in zip(("mean", "position", "context"), (0.5, -0.1, 0.6))]
        >>> fig = plot_variance_shares(rows, facet_col=None, facet_row=None)
        >>> [(t.name, float(t.y[0])) for t in fig.data]
        [('mean', 0.5), ('position curve', -0.1), ('context (per-sequence mean)', 0.6)]
    """
    frame = pd.DataFrame(rows)
    keys = [k for k in (facet_row, facet_col, x) if k is not None]
    missing = sorted({*keys, "part", "share"} - set(frame.columns))
    if missing:
        raise UsageError(f"rows lack the columns {missing}; they have {sorted(frame.columns)}")
    unknown = sorted(set(frame["part"]) - set(PARTS))
    if unknown:
        raise UsageError(f"part must be one of {list(PARTS)}, got {unknown}")
    groups = frame.groupby([*keys, "part"], sort=False)["share"].mean()
    frame = groups.reset_index().sort_values(x, kind="stable")
    colouring = dict(category_orders={"part": list(PARTS)}, color_discrete_map=line_colors(PARTS))
    facets = dict(facet_col=facet_col, facet_row=facet_row)
    fig = px.bar(frame, x=x, y="share", color="part", **facets, **colouring)
    fig.for_each_trace(lambda trace: trace.update(name=PARTS[trace.name]))
    fig.update_layout(barmode="relative", legend_title_text="")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_xaxes(dtick=1)
    if (frame["share"] >= 0).all():
        fig.update_yaxes(range=[0.0, 1.0])
    if facet_row is not None:
        fig.update_yaxes(title_text="")
        title_facet_rows(fig, list(dict.fromkeys(frame[facet_row])), "share")
    n_rows = frame[facet_row].nunique() if facet_row else 1
    return apply_style(fig, title=title, rows=n_rows)
