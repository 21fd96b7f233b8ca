"""The first-layer argument against measurement, over the scale of the initial weights.

Left: the adjacency score measured at the first layer beside the score the averaging argument
predicts (PAPER.md, "The first-layer argument"). Right: how uniform the first layer's attention
is, as its entropy over the k + 1 visible positions divided by the uniform entropy log(k + 1).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.layers import Rows, summarise_rows
from adjpos.figures.style import CHANCE, apply_style, color, label, log_ticks
from adjpos.validation import UsageError

COLUMNS = ("init_range", "measured_adjacency", "predicted_adjacency", "entropy_ratio")
# Each site has its own prediction (the residual term enters it), drawn dashed in the site's
# colour; the entropy describes the attention alone, so it is one black line.
THEORY = dict(color="#000000", width=2.5)


def plot_first_layer_theory(rows: Rows, *, title: str | None = None) -> go.Figure:
    """Measured vs predicted first-layer adjacency (left) and attention entropy (right) against
    init_range, on log x axes ticked with numbers (`style.log_ticks`).

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
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if "site" not in table.columns:
        table = table.assign(site="")
    for column in COLUMNS:
        summarise_rows(table, None, "site", x="init_range", y=column)  # names missing columns
    bad = sorted(float(v) for v in table.loc[~(table["init_range"] > 0), "init_range"].unique())
    if bad:
        raise UsageError(f"init_range must be > 0 for the log axis; got {bad}")
    titles = ("adjacency score at the first layer", "attention entropy H / log(k+1)")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    measured = summarise_rows(table, None, "site", x="init_range", y="measured_adjacency")
    predicted = summarise_rows(table, None, "site", x="init_range", y="predicted_adjacency")
    for index, site in enumerate(dict.fromkeys(measured["_line"])):
        points, prediction = (s[s["_line"] == site] for s in (measured, predicted))
        where = "" if site == "" else f" ({label(site)})"
        measured_line = _line(points, f"measured{where}", dict(color=color(index)), errors=True)
        fig.add_trace(measured_line, row=1, col=1)
        dashed = dict(color=color(index), dash="dash")
        fig.add_trace(_line(prediction, f"predicted{where}", dashed), row=1, col=1)
    every_site = table.assign(site="all")
    entropy = summarise_rows(every_site, None, "site", x="init_range", y="entropy_ratio")
    fig.add_trace(_line(entropy, "entropy ratio", THEORY), row=1, col=2)
    for col, y, text, side in ((1, 0.5, "chance", "left"), (2, 1.0, "uniform", "right")):
        where = {"annotation_text": text, "annotation_position": f"bottom {side}"}
        fig.add_hline(y=y, line=CHANCE, row=1, col=col, **where)
    lowest = float(table[["measured_adjacency", "predicted_adjacency"]].min().min())
    fig.update_xaxes(title_text=label("init_range"), **log_ticks(table["init_range"]))
    fig.update_yaxes(title_text="adjacency score", range=[min(0.4, lowest - 0.05), 1.05], col=1)
    fig.update_yaxes(title_text="H / log(k+1)", range=[0.0, 1.05], col=2)
    default = "First layer: the averaging argument against measurement (mean over seeds)"
    return apply_style(fig, title=title or default)


def _line(points: pd.DataFrame, name: str, line: dict, *, errors: bool = False) -> go.Scatter:
    bars = errors and bool((points["size"] > 1).any())
    error = dict(type="data", array=points["std"].tolist(), thickness=1, width=3) if bars else None
    return go.Scatter(
        x=points["init_range"].tolist(),
        y=points["mean"].tolist(),
        error_y=error,
        # a dashed prediction is a line, but a single init_range leaves only its point
        mode="lines" if line.get("dash") and len(points) > 1 else "lines+markers",
        marker=dict(symbol="diamond-open" if line.get("dash") else "circle"),
        name=name,
        line=line,
    )
