"""Layer-wise results: the adjacency score against layer, the variance of the hidden state
against position.

Both take long-format rows (one dict per measurement), draw one panel per value of `panel` and
one line per value of `line`, and average rows that repeat a point (seeds). A line keeps its
colour in every panel and has one legend entry.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from adjpos.figures.style import CHANCE, apply_style, label, line_colors
from adjpos.validation import UsageError

Rows = pd.DataFrame | Sequence[dict[str, Any]]
# At most this many panels per row; more wrap into balanced rows (4 panels -> 2 x 2).
MAX_COLUMNS = 3
# Layers are ordered, so their lines run light (shallow) to dark (deep) along this scale,
# starting part-way in so the shallowest line still shows on white.
LAYER_SCALE, LAYER_SCALE_START = "Blues", 0.3


def plot_adjacency_by_layer(
    rows: Rows, *, panel: str | None = "task", line: str = "model", title: str | None = None
) -> go.Figure:
    """Adjacency score against layer: one panel per `panel` value, one line per `line` value.

    Rows that share (panel, line, layer), e.g. several seeds, are drawn as their mean, with an
    error bar of their sample standard deviation (n - 1) where there is more than one. Model
    kinds keep their colour in every figure (`style.line_colors`); the y axis (0 to 1) is
    shared and the dashed grey line is chance (0.5).

    Args:
        rows: dicts with ``layer``, ``adjacency`` and the `panel` and `line` keys, e.g.
            ``{"task": "addition", "model": "trained", "layer": 2, "adjacency": 0.81}``.
        panel: the key that splits panels (first-seen order); None draws a single panel.
        line: the key that splits lines.
        title: figure title (default: says what is averaged).
    """
    stats = summarise_rows(rows, panel, line, x="layer", y="adjacency")
    fig, n_rows = _draw_panels(stats, panel, line, "layer", shared_y=True, errors=True)
    fig.update_xaxes(title_text="layer", dtick=1, tickformat="d")
    fig.update_yaxes(range=[0.0, 1.05], dtick=0.25)
    fig.update_yaxes(title_text="adjacency score", col=1)
    fig.add_hline(y=0.5, line=CHANCE, row="all", col="all")
    default = "Adjacency score by layer (mean over seeds; bars: std)"
    return apply_style(fig, title=title or default, rows=n_rows)


def plot_variance_by_position(
    rows: Rows, *, panel: str | None = "task", line: str = "layer", title: str | None = None
) -> go.Figure:
    """Variance of the hidden state over d_model against position, one line per `line` value.

    Rows that share (panel, line, position) are averaged. With ``line="layer"`` the lines run
    along a sequential blue ramp, light for shallow layers and dark for deep ones, so depth
    reads at a glance; any other `line` key colours as `style.line_colors` does. Each panel
    keeps its own y range (variance scales differ between models and layers).

    Args:
        rows: dicts with ``position``, ``variance`` and the `panel` and `line` keys, e.g.
            ``{"task": "addition", "layer": 1, "position": 3, "variance": 0.8}``.
        panel: the key that splits panels (first-seen order); None draws a single panel.
        line: the key that splits lines.
        title: figure title.
    """
    stats = summarise_rows(rows, panel, line, x="position", y="variance")
    fig, n_rows = _draw_panels(stats, panel, line, "position", shared_y=False, errors=False)
    fig.update_xaxes(title_text="position", tickformat="d")
    fig.update_yaxes(title_text="variance of the hidden state over its dimensions", col=1)
    default = "Variance of the hidden state by position (mean over sequences and seeds)"
    return apply_style(fig, title=title or default, rows=n_rows)


def summarise_rows(rows: Rows, panel: str | None, line: str, *, x: str, y: str) -> pd.DataFrame:
    """Mean, sample std (n - 1; 0 for a single row) and count of `y` at every (panel, line,
    `x`), panels and lines in first-seen order; a None `panel` puts every row in one panel
    (key "")."""
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    names = [name for name in (x, y, panel, line) if name is not None]
    if table.empty:
        raise UsageError("no rows to draw")
    missing = [name for name in names if name not in table.columns]
    if missing:
        raise UsageError(
            f"the rows lack column(s) {missing}; they have {sorted(table.columns)}; "
            f"every row needs {names}"
        )
    table = table.assign(_panel="" if panel is None else table[panel], _line=table[line])
    table["_y"] = table[y].astype(float)
    keys = ["_panel", "_line", x]
    stats = table.groupby(keys, sort=False, dropna=False)["_y"].agg(["mean", "std", "size"])
    return stats.fillna({"std": 0.0}).reset_index().sort_values(x, kind="stable")


def _draw_panels(
    stats: pd.DataFrame, panel: str | None, line: str, x: str, *, shared_y: bool, errors: bool
) -> tuple[go.Figure, int]:
    panels = list(dict.fromkeys(stats["_panel"]))
    colours = _colours(list(dict.fromkeys(stats["_line"])), line)
    n_rows, columns = _grid(len(panels))
    titles = None if panel is None else [_label(panel, key) for key in panels]
    spacing = dict(horizontal_spacing=0.04 if shared_y else 0.08, vertical_spacing=0.35 / n_rows)
    fig = make_subplots(
        rows=n_rows, cols=columns, subplot_titles=titles, shared_yaxes=shared_y, **spacing
    )
    shown: set[Hashable] = set()
    for index, key in enumerate(panels):
        where = dict(row=index // columns + 1, col=index % columns + 1)
        mine = stats[stats["_panel"] == key]
        for value in (v for v in colours if v in set(mine["_line"])):
            points = mine[mine["_line"] == value]
            bars = errors and bool((points["size"] > 1).any())
            y = points["mean"].tolist()
            std = dict(type="data", array=points["std"].tolist(), thickness=1, width=3)
            trace = go.Scatter(x=points[x].tolist(), y=y, error_y=std if bars else None)
            trace.update(mode="lines+markers", name=_label(line, value), legendgroup=str(value))
            trace.update(showlegend=value not in shown, line=dict(color=colours[value]))
            fig.add_trace(trace, **where)
            shown.add(value)
    fig.update_layout(legend_title_text=label(line))
    return fig, n_rows


def _colours(values: list[Any], line: str) -> dict[Any, str]:
    """One colour per line value, in drawing (and legend) order: layers light to dark along
    `LAYER_SCALE` in numeric order, anything else as `line_colors` gives it (model kinds
    first, each in its own colour)."""
    if line != "layer":
        return line_colors(values)
    values = sorted(values)
    steps = np.linspace(1.0, LAYER_SCALE_START, len(values))[::-1]  # one layer: the darkest
    return dict(zip(values, sample_colorscale(LAYER_SCALE, steps.tolist()), strict=True))


def _grid(panels: int) -> tuple[int, int]:
    """(rows, columns) for `panels` panels, at most `MAX_COLUMNS` a row, rows balanced."""
    n_rows = math.ceil(panels / MAX_COLUMNS)
    return n_rows, math.ceil(panels / n_rows)


def _label(key: str, value: Any) -> str:
    # Names read alone ("addition", "trained"); numbers need their key ("layer 2").
    return label(value) if isinstance(value, str) else f"{label(key)} {value}"
