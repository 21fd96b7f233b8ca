"""Self-cosine matrices drawn as heatmaps: the adjacency pattern made visible.

Only the lower triangle (j < i) is drawn: it holds each position's similarity to the earlier
positions, which is all the adjacency score reads, and the matrix is symmetric. The diagonal is
always 1 and would swamp the colour scale, so it is left blank with the upper triangle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.style import MAX_WIDTH, WIDTH, apply_style
from adjpos.validation import UsageError

COLORSCALE = "Viridis"
ROW_TITLE, COLUMN_TITLE = "position (row)", "earlier position (column)"
# Empty lower triangles (n < 2 everywhere) leave nothing to set the range from.
FULL_RANGE = (-1.0, 1.0)
# The room the margins and the colour bar take beside the panels.
FRAME_PX = 200
# Below this many pixels per panel, titles collide and tick characters blur: widen instead,
# up to the widest figure (`MAX_WIDTH`); wider grids get smaller panels.
MIN_PANEL_PX = 260.0
# The smallest tick font (px) a character is drawn in: below it, the ticks print positions.
MIN_TICK_PX = 9


def plot_cosine_heatmaps(
    matrices: Sequence[Any],
    *,
    titles: Sequence[str],
    labels: Sequence[Sequence[str] | None] | None = None,
    title: str = "Self-cosine similarity",
    columns: int = 3,
) -> go.Figure:
    """One square heatmap per self-cosine matrix C[i, j], all on one shared colour scale.

    Row i (top to bottom, like a matrix) and column j are positions; only j < i is coloured.
    The colour range (sequential "Viridis", one colour bar) runs from the smallest to the
    largest off-diagonal lower-triangle value over all panels together: the plain min and max
    rather than percentiles, because every cell of these small matrices is a measurement, and
    one range makes panels (tasks, models, layers) comparable.

    Args:
        matrices: square array-likes (nested lists or numpy arrays), n x n with n free per
            panel, each the cosine matrix of one sequence at one layer.
        titles: one subplot title per matrix, e.g. ``"addition, trained, layer 2"``.
        labels: None (axes show positions 0..n-1) or, per matrix, the n characters of the
            prompt (a string or a sequence of strings; None for numbers). Ticks stay one per
            position, so repeated characters stay distinct; a panel too small to print them
            in `MIN_TICK_PX` px shows positions instead.
        title: figure title.
        columns: panels per row.

    Raises:
        ValueError: a matrix is not square, or titles or labels do not match the matrices.
    """
    grids = [_lower_triangle(matrix, index) for index, matrix in enumerate(matrices)]
    ticks = _tick_text(grids, titles, labels)
    zmin, zmax = shared_range(grids)
    columns = max(1, min(columns, len(grids)))
    n_rows = math.ceil(len(grids) / columns)
    spacing = dict(horizontal_spacing=0.2 / columns, vertical_spacing=0.25 / n_rows)
    fig = make_subplots(rows=n_rows, cols=columns, subplot_titles=list(titles), **spacing)
    panel_px = min(
        max((WIDTH - FRAME_PX) / columns, MIN_PANEL_PX), (MAX_WIDTH - FRAME_PX) / columns
    )
    axes: dict[str, dict[str, Any]] = {}
    for index, (grid, text) in enumerate(zip(grids, ticks, strict=True)):
        x, y = _axes(index, len(grid), text, panel_px=panel_px)
        if index % columns == 0:
            y["title"] = dict(text=ROW_TITLE)
        if index + columns >= len(grids):  # no panel below
            x["title"] = dict(text=COLUMN_TITLE)
        suffix = "" if index == 0 else str(index + 1)  # make_subplots numbers panels row-major
        axes |= {f"xaxis{suffix}": x, f"yaxis{suffix}": y}
    fig.add_traces(
        [_heatmap(g, zmin, zmax, showscale=i == 0) for i, g in enumerate(grids)],
        rows=[i // columns + 1 for i in range(len(grids))],
        cols=[i % columns + 1 for i in range(len(grids))],
    )
    fig.update_layout(axes)  # one update: per-panel update_xaxes calls cost a layout walk each
    apply_style(fig, title=title, rows=n_rows)
    if panel_px < MIN_PANEL_PX:  # narrow panels: smaller titles keep neighbours apart
        fig.update_annotations(font_size=11)
    fig.update_layout(
        width=max(WIDTH, round(panel_px * columns + FRAME_PX)),
        height=140 + n_rows * (panel_px + 40),
    )
    return fig


def shared_range(grids: Sequence[np.ndarray]) -> tuple[float, float]:
    """(min, max) of the finite values of all `grids` (a small pad if they are all equal)."""
    values = np.concatenate([grid[np.isfinite(grid)] for grid in grids])
    if values.size == 0:
        return FULL_RANGE
    low, high = float(values.min()), float(values.max())
    return (low - 0.05, high + 0.05) if low == high else (low, high)


def _lower_triangle(matrix: Any, index: int) -> np.ndarray:
    """`matrix` as floats with the diagonal and the upper triangle set to NaN."""
    try:
        grid = np.array(matrix, dtype=float)
    except (TypeError, ValueError) as err:
        raise UsageError(f"matrix {index} is not a numeric n x n array: {err}") from err
    if grid.ndim != 2 or grid.shape[0] != grid.shape[1]:
        raise UsageError(f"matrix {index} has shape {grid.shape}; expected a square (n, n) matrix")
    grid[np.triu_indices(len(grid))] = np.nan
    return grid


def _tick_text(grids, titles, labels) -> list[list[str] | None]:
    """Each panel's tick text (None: plain position numbers), checked against its matrix."""
    if not grids:
        raise UsageError("no matrices to draw")
    if isinstance(titles, str) or len(titles) != len(grids):
        count = "a single string" if isinstance(titles, str) else f"{len(titles)} titles"
        raise UsageError(f"got {count} for {len(grids)} matrices; give one title per matrix")
    if labels is None:
        return [None] * len(grids)
    if isinstance(labels, str) or len(labels) != len(grids):
        count = "a single string" if isinstance(labels, str) else f"{len(labels)} label lists"
        raise UsageError(f"got {count} for {len(grids)} matrices; give one per matrix (or None)")
    for index, (grid, text) in enumerate(zip(grids, labels, strict=True)):
        if text is not None and len(text) != len(grid):
            raise UsageError(
                f"labels {index} has {len(text)} characters but matrix {index} has shape "
                f"{grid.shape}; give one label per position"
            )
    return [None if text is None else [str(c) for c in text] for text in labels]


def _heatmap(grid: np.ndarray, zmin: float, zmax: float, *, showscale: bool) -> go.Heatmap:
    positions = list(range(len(grid)))
    z = np.where(np.isnan(grid), None, grid).tolist()  # None: blank cells in the JSON
    scale = dict(zmin=zmin, zmax=zmax, colorscale=COLORSCALE, showscale=showscale)
    bar = dict(title=dict(text="cosine", side="right"), thickness=15)
    hover = dict(hoverongaps=False, hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>")
    return go.Heatmap(z=z, x=positions, y=positions, **scale, colorbar=bar, **hover)


def _axes(index: int, n: int, text, *, panel_px: float) -> tuple[dict, dict]:
    """The x and y axis of panel `index`: square, matrix orientation (position 0 top left),
    one tick per character."""
    anchor = "x" if index == 0 else f"x{index + 1}"
    frame = dict(showgrid=False, zeroline=False, constrain="domain")
    size = int(min(13, 0.8 * panel_px / n))
    if text is None or size < MIN_TICK_PX:
        ticks: dict[str, Any] = dict(tickformat="d")
    else:
        # Positions are the coordinates, characters only their names: repeats stay distinct.
        ticks = dict(tickmode="array", tickvals=list(range(n)), ticktext=text)
        ticks["tickfont"] = dict(size=size)
    x = dict(range=[-0.5, n - 0.5], tickangle=0, **frame, **ticks)
    return x, dict(range=[n - 0.5, -0.5], scaleanchor=anchor, **frame, **ticks)
