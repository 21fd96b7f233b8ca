"""The position curve's arms: the harm of each arm against its change size, beside its random
control, per task (row) and layer (column), with the rule's reading of each size under it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.style import apply_style, color, label
from adjpos.validation import UsageError

# An arm's family (the shifts by +k and by -k each one line over the sizes): its colour
# (of `style.color`: the two light blues kept apart) and marker.
STYLES = {
    "shift +k": (0, "triangle-right"),
    "shift -k": (1, "triangle-left"),
    "scatter": (2, "x"),
    "rotate": (3, "circle"),
    "remove": (4, "square"),
    "edges": (7, "star"),
}
CONTROLS = {"random": "random control", "edges_random": "edges' random control"}
CONTROL_LINE = dict(color="#777777", width=1.5, dash="dash")
# Arms of one size are drawn this share of the x span apart, so no point hides another.
SPREAD = 0.012


def family(arm: str) -> str:
    """'shift+2' -> 'shift +k'; every other arm is its own family."""
    found = re.fullmatch(r"shift([+-])\d+", arm)
    return f"shift {found.group(1)}k" if found else arm


def plot_curve_arms(
    rows: pd.DataFrame,
    *,
    value: str = "exact_match",
    readings: Mapping[tuple[Any, int], Sequence[str]] | None = None,
    title: str | None = None,
) -> go.Figure:
    """`value` (exact match, or on text the loss) against the change size (``size_target``)
    for each arm: every seed a point, the seeds' mean a line through the doses every seed ran
    (at the mean of the seeds' sizes); each random control drawn grey, its bar spanning its
    seeds' intervals (at a size only some seeds ran, each seed's own point and interval).
    One panel per (``task``, ``layer``); under each, the lines of `readings` for it
    (the rule's reading per size). An arm row that reached its size on no prompt
    (``unreached_share`` 1) is left out.

    Args:
        rows: arm rows (`adjpos.interventions.ARM_TABLE` columns with `value` and its
            ``_low``/``_high``, ``task``, ``seed``, ``layer``), one read-out.
        value: the column drawn.
        readings: {(task, layer): lines of text} written under the panel.

    Raises:
        UsageError: a needed column is missing, or there is no arm row.
    """
    need = ["task", "seed", "layer", "arm", "dose", "size_target", value, f"{value}_low"]
    need.append(f"{value}_high")
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise UsageError(f"arm rows lack columns {missing}; need {need}")
    table = rows.dropna(subset=["arm"])
    if "unreached_share" in table:  # an arm that reached its size on no prompt changed nothing
        table = table[~(table["unreached_share"] >= 1)]
    if table.empty:
        raise UsageError("no arm rows to draw (the 'arm' column is empty)")
    table = table.assign(family=table["arm"].map(lambda a: CONTROLS.get(a, family(a))))
    panels = list(dict.fromkeys(zip(table["task"], table["layer"], strict=True)))
    tasks = list(dict.fromkeys(table["task"]))
    layers = sorted(table["layer"].unique())
    titles = [f"{label(t)}, layer {x}" for t in tasks for x in layers]
    spacing = dict(vertical_spacing=0.5 / len(tasks), horizontal_spacing=0.08)
    fig = make_subplots(rows=len(tasks), cols=len(layers), subplot_titles=titles, **spacing)
    span = float(table["size_target"].max() - table["size_target"].min()) or 0.1
    names = [f for f in (*STYLES, *CONTROLS.values()) if f in set(table["family"])]
    names += sorted(set(table["family"]) - set(names))
    shown: set[str] = set()
    for task, layer in panels:
        here = table[(table["task"] == task) & (table["layer"] == layer)]
        where = dict(row=tasks.index(task) + 1, col=layers.index(layer) + 1)
        for name, part in here.groupby("family", sort=False):
            x0 = SPREAD * span * (names.index(name) - (len(names) - 1) / 2)
            for trace in _traces(part, value, name, x0, control=name in CONTROLS.values()):
                trace.update(legendgroup=name, showlegend=name not in shown and bool(trace.name))
                shown |= {name} if trace.name else set()
                fig.add_trace(trace, **where)
        lines = (readings or {}).get((task, layer), ())
        if lines:
            n = (where["row"] - 1) * len(layers) + where["col"]
            axis = f"{n if n > 1 else ''} domain"
            place = dict(
                xref=f"x{axis}", yref=f"y{axis}", x=0, y=-0.3, xanchor="left", yanchor="top"
            )
            text = "<br>".join(lines)
            fig.add_annotation(
                text=text, **place, align="left", showarrow=False, font=dict(size=10)
            )
    fig.update_xaxes(title_text=label("size_target"))
    fig.update_yaxes(title_text=label(value), col=1)
    if value == "exact_match":
        fig.update_yaxes(range=[-0.03, 1.03])
    text = title or (
        f"The position curve's arms: {label(value)} against the change size<br>"
        "<sup>points: seeds; lines: their mean; grey: random controls</sup>"
    )
    fig = apply_style(fig, title=text, rows=len(tasks))
    fig.update_layout(height=140 + 380 * len(tasks), margin=dict(b=140))
    return fig


def _traces(part: pd.DataFrame, value: str, name: str, x0: float, *, control: bool) -> list:
    """A family's seed points and its mean line (a control: one grey bar per size spanning its
    seeds' intervals, around their mean)."""
    # the line through the doses every seed ran (a size added to one seed's layer: a point)
    seeds_at = part.groupby("dose")["seed"].nunique()
    everyone = part["dose"].isin(seeds_at.index[seeds_at == part["seed"].nunique()])
    by_size = part[everyone].groupby("dose", sort=True)  # the seeds' sizes differ a little
    mean = by_size[value].mean()
    x = [s + x0 for s in by_size["size_target"].mean()]
    if control:
        low, high = by_size[f"{value}_low"].min(), by_size[f"{value}_high"].max()
        bar = dict(type="data", symmetric=False, array=(high - mean).tolist())
        bar |= dict(arrayminus=(mean - low).tolist(), thickness=6, width=0, color="#BBBBBB")
        line = go.Scatter(x=x, y=mean.tolist(), mode="lines+markers", name=name, error_y=bar)
        drawn = [line.update(line=CONTROL_LINE, marker=dict(color="#777777", symbol="diamond"))]
        alone = part[~everyone]
        if len(alone):  # each seed's own point and interval
            bar = dict(type="data", symmetric=False, thickness=6, width=0, color="#BBBBBB")
            bar |= dict(array=(alone[f"{value}_high"] - alone[value]).tolist())
            bar["arrayminus"] = (alone[value] - alone[f"{value}_low"]).tolist()
            points = go.Scatter(x=[s + x0 for s in alone["size_target"]], y=alone[value].tolist())
            marker = dict(color="#777777", symbol="diamond-open", size=8)
            drawn.append(points.update(mode="markers", name="", error_y=bar, marker=marker))
        return drawn
    index, symbol = STYLES.get(name, (6, "diamond"))
    colour = color(index)
    seeds = go.Scatter(
        x=[s + x0 for s in part["size_target"]],
        y=part[value].tolist(),
        mode="markers",
        name="",
        marker=dict(color=colour, size=6, opacity=0.55, symbol=symbol),
        hovertext=[f"{name}, seed {s}" for s in part["seed"]],
    )
    line = go.Scatter(x=x, y=mean.tolist(), mode="lines+markers", name=name)
    mean_marker = dict(color=colour, symbol=symbol, size=8)
    return [seeds, line.update(line=dict(color=colour, width=2), marker=mean_marker)]
