"""Attention heads as layer x head heatmaps: which heads score by similarity, which look back.

One row of panels per measure of `adjpos.head_similarity` (by default the score-cosine
correlation and the attention on the previous positions; the correlation with the distance or
the key's token partialled out on request), one column per model (task); every panel of a row
shares that measure's colour scale, so heads compare across models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.style import MAX_WIDTH, WIDTH, apply_style
from adjpos.validation import UsageError

Rows = pd.DataFrame | Sequence[dict[str, Any]]
# Each measure's colour scale: (colorscale, min, max, label). Correlations diverge around 0;
# attention masses run from none to all of a query's attention.
SCALES = {
    "logit_cosine_pearson": ("RdBu_r", -1.0, 1.0, "score-cosine r"),
    "logit_cosine_spearman": ("RdBu_r", -1.0, 1.0, "score-cosine rho"),
    "logit_cosine_given_distance": ("RdBu_r", -1.0, 1.0, "score-cosine r, distance partialled"),
    "logit_cosine_given_token": ("RdBu_r", -1.0, 1.0, "score-cosine r, token partialled"),
    "previous_mass": ("Blues", 0.0, 1.0, "previous mass"),
    "self_mass": ("Blues", 0.0, 1.0, "self mass"),
}
DEFAULT_VALUES = ("logit_cosine_pearson", "previous_mass")
ROW_HEIGHT = 320


def plot_head_similarity(
    rows: Rows,
    *,
    values: Sequence[str] = DEFAULT_VALUES,
    panel: str | None = "task",
    title: str | None = None,
) -> go.Figure:
    """Heatmaps of layer (rows, layer 0 on top) by head (columns), one per measure and panel.

    Rows that share (panel, layer, head), e.g. one model measured on several prompt sets, are
    drawn as their mean. Heads of different seeds are different heads (head 3 of one seed has
    nothing to do with head 3 of another), so give each seed its own figure or panel. A
    missing or NaN cell (a head whose correlation is undefined) is blank. Each cell prints its
    value to two decimals.

    Args:
        rows: `adjpos.head_similarity` tables, stacked, with a `panel` column (e.g. ``task``)
            when they come from several models.
        values: the measures to draw, one row of panels each (keys of `SCALES`).
        panel: the column that splits panels (first-seen order); None draws one per measure.
        title: figure title.

    Raises:
        UsageError: no rows, an unknown measure, or a missing column.

    Example:
        >>> rows = [{"task": "t", "layer": l, "head": h, "logit_cosine_pearson": 0.1 * h,
        ...          "previous_mass": 0.5} for l in (0, 1) for h in (0, 1, 2)]
        >>> fig = plot_head_similarity(rows)
        >>> len(fig.data), list(fig.data[0].z[1])
        (2, [0.0, 0.1, 0.2])
    """
    table, values = _checked(rows, values, panel)
    panels = list(dict.fromkeys(table["_panel"]))
    titles = [str(key) for key in panels] + [""] * len(panels) * (len(values) - 1)
    spacing = dict(horizontal_spacing=0.12 / len(panels), vertical_spacing=0.3 / len(values))
    fig = make_subplots(rows=len(values), cols=len(panels), subplot_titles=titles, **spacing)
    for row, value in enumerate(values, start=1):
        axis = "coloraxis" if row == 1 else f"coloraxis{row}"
        for col, key in enumerate(panels, start=1):
            fig.add_trace(_heatmap(table[table["_panel"] == key], value, axis), row=row, col=col)
        fig.update_yaxes(title_text=f"{SCALES[value][3]}<br>layer", row=row, col=1)
        _colour_axis(fig, axis, value, row)
    fig.update_xaxes(title_text="head", row=len(values))
    fig.update_xaxes(dtick=1, tickformat="d", showgrid=False, zeroline=False)
    fig.update_yaxes(dtick=1, tickformat="d", autorange="reversed", showgrid=False)
    default = "Attention heads: score-cosine correlation and attention on the previous positions"
    apply_style(fig, title=title or default, rows=len(values))
    fig.update_layout(width=min(MAX_WIDTH, max(WIDTH, 260 * len(panels) + 200)))
    return fig.update_layout(height=140 + ROW_HEIGHT * len(values))


def _checked(rows: Rows, values: Sequence[str], panel: str | None) -> tuple[pd.DataFrame, list]:
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    values = [values] if isinstance(values, str) else list(values)
    unknown = [value for value in values if value not in SCALES]
    if unknown or not values:
        raise UsageError(f"values {unknown or values} are not allowed; choose from {list(SCALES)}")
    if table.empty:
        raise UsageError("no head rows to draw")
    needed = ["layer", "head", *values, *([panel] if panel else [])]
    missing = [name for name in needed if name not in table.columns]
    if missing:
        raise UsageError(
            f"the rows lack column(s) {missing}; they have {sorted(table.columns)}; every row "
            f"needs {needed}"
        )
    return table.assign(_panel="" if panel is None else table[panel]), values


def _heatmap(part: pd.DataFrame, value: str, axis: str) -> go.Heatmap:
    grid = part.groupby(["layer", "head"])[value].mean().unstack("head").sort_index()
    grid = grid[sorted(grid.columns)]
    z = [[None if pd.isna(v) else float(v) for v in line] for line in grid.to_numpy()]
    return go.Heatmap(
        z=z,
        x=[int(h) for h in grid.columns],
        y=[int(layer) for layer in grid.index],
        coloraxis=axis,
        texttemplate="%{z:.2f}",
        hoverongaps=False,
        hovertemplate=f"layer %{{y}}, head %{{x}}: {value} %{{z:.3f}}<extra></extra>",
    )


def _colour_axis(fig: go.Figure, axis: str, value: str, row: int) -> None:
    """`value`'s fixed colour scale, its bar beside panel row `row`."""
    scale, low, high, label = SCALES[value]
    bottom, top = fig.get_subplot(row, 1).yaxis.domain
    bar = dict(title=dict(text=label, side="right"), y=(bottom + top) / 2, len=top - bottom)
    fig.update_layout({axis: dict(colorscale=scale, cmin=low, cmax=high, colorbar=bar)})
