"""The first-layer argument against measurement, over the scale of the initial weights.

Left: the adjacency score measured at the first layer beside the score the averaging argument
predicts (PAPER.md, "The first-layer argument"). Right: how uniform the first layer's attention
is, as its entropy over the k + 1 visible positions divided by the uniform entropy log(k + 1).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.layers import Rows, check_columns, summarise
from adjpos.figures.style import CHANCE, apply_style, color

COLUMNS = ("init_range", "measured_adjacency", "predicted_adjacency", "entropy_ratio")
# Each site has its own prediction (the residual term enters it), drawn dashed in the site's
# colour; the entropy describes the attention alone, so it is one black line.
THEORY = dict(color="#000000", width=2.5)


def plot_first_layer_theory(rows: Rows, *, title: str | None = None) -> go.Figure:
    """Measured vs predicted first-layer adjacency (left) and attention entropy (right) against
    init_range, on log x axes.

    Rows that share an init_range (seeds) are averaged; measured scores also get an error bar
    of their sample std (n - 1) where there are several. With a ``site`` column the measured
    and the predicted score are one pair of lines per site (the prediction depends on the
    residual term, so on the site: dashed, in the site's colour); the entropy ratio is one
    line, averaged over sites, since it describes the attention pattern only.

    Args:
        rows: dicts with ``init_range`` (> 0), ``measured_adjacency``,
            ``predicted_adjacency``, ``entropy_ratio`` (1 = perfectly uniform attention) and
            optionally ``site``.
        title: figure title.
    """
    check_columns(rows, COLUMNS)
    bad = sorted({row["init_range"] for row in rows if not row["init_range"] > 0})
    if bad:
        raise ValueError(f"init_range must be > 0 for the log axis; got {bad}")
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("adjacency score at the first layer", "attention entropy H / log(k+1)"),
        horizontal_spacing=0.1,
    )
    sites = list(dict.fromkeys(row.get("site") for row in rows))
    for index, site in enumerate(sites):
        points = _points([row for row in rows if row.get("site") == site], "measured_adjacency")
        predicted = _points([row for row in rows if row.get("site") == site], "predicted_adjacency")
        where = "" if site is None else f" ({site})"
        fig.add_trace(
            _line(points, f"measured{where}", dict(color=color(index)), errors=True), row=1, col=1
        )
        fig.add_trace(
            _line(predicted, f"predicted{where}", dict(color=color(index), dash="dash")),
            row=1,
            col=1,
        )
    entropy = _points(rows, "entropy_ratio")
    fig.add_trace(_line(entropy, "entropy ratio", THEORY), row=1, col=2)
    fig.add_hline(
        y=0.5,
        line=CHANCE,
        annotation_text="chance",
        annotation_position="bottom left",
        row=1,
        col=1,
    )
    fig.add_hline(
        y=1.0,
        line=CHANCE,
        annotation_text="uniform",
        annotation_position="bottom right",
        row=1,
        col=2,
    )
    lowest = min(min(row["measured_adjacency"], row["predicted_adjacency"]) for row in rows)
    fig.update_xaxes(type="log", title_text="init_range")
    fig.update_yaxes(title_text="adjacency score", range=[min(0.4, lowest - 0.05), 1.05], col=1)
    fig.update_yaxes(title_text="H / log(k+1)", range=[0.0, 1.05], col=2)
    default = "First layer: the averaging argument against measurement (mean over seeds)"
    return apply_style(fig, title=title or default)


def _points(rows: Rows, column: str) -> dict[Any, list[float]]:
    points: dict[Any, list[float]] = defaultdict(list)
    for row in rows:
        points[row["init_range"]].append(float(row[column]))
    return points


def _line(points, name: str, line: dict, *, errors: bool = False) -> go.Scatter:
    xs, means, spread = summarise(points)
    bars = errors and any(len(ys) > 1 for ys in points.values())
    return go.Scatter(
        x=xs,
        y=means,
        error_y=dict(type="data", array=spread, thickness=1, width=3) if bars else None,
        mode="lines+markers" if line.get("dash") is None else "lines",
        name=name,
        line=line,
    )
