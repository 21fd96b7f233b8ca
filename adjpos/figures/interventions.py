"""Causal tests: exact match under each change beside its own control, one family of carriers
per panel, each seed a point around the seeds' mean."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.layers import Rows
from adjpos.figures.style import OTHER_COLORS, apply_style, label
from adjpos.validation import UsageError

NEEDED = ("layer", "intervention", "control", "exact_match")
BASELINE = dict(color="#000000", width=2, dash="dot")
# The colours no model kind owns, less the baseline's black: no change passes for the baseline.
PALETTE = tuple(c for c in OTHER_COLORS if c != BASELINE["color"])
# How far apart a group's seeds sit around their place on x (a share of one place).
SPREAD = 0.3
MEAN = dict(symbol="line-ew-open", size=22, line=dict(width=3))


def plot_interventions(
    rows: Rows,
    *,
    families: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    title: str | None = None,
    readout: str | None = None,
) -> go.Figure:
    """Exact match under each change beside its control: one row of panels per task (the
    ``task`` column, when there is one), one panel per family of carriers (`families`: name ->
    family; None: one panel), and in a panel, at each layer intervened at, each change of the
    family followed by its control (the rows' ``control`` column). Each seed is a small point
    (spread a little so that none hides another), the seeds' mean a wide bar; a change is
    filled and its control open, in the change's colour; the unchanged model (the row that is
    its own control) is a dotted black line across each layer's group.

    Args:
        rows: the rows of `adjpos.interventions.intervention_table` (or dicts with at least
            layer, intervention, control and exact_match).
        families: each intervention's family of carriers
            (`adjpos.interventions.FAMILIES`); names it lacks go to a panel "other".
        labels: each intervention's words in the legend (default: `style.label`).
        title: figure title.
        readout: the read-out variant drawn, where rows have a ``readout`` column (default:
            "kept" when there, else the first found).

    Raises:
        ValueError: a needed column is missing, or the read-out variant is not in the rows.
    """
    table = _chosen(rows, readout)
    names = list(dict.fromkeys(table["intervention"]))
    controls = dict(zip(table["intervention"], table["control"], strict=False))
    baseline = [n for n in names if controls[n] == n]
    panels = _panels([n for n in names if n not in baseline], controls, families)
    tasks = list(dict.fromkeys(table["task"]))
    layers = sorted(table["layer"].unique())
    titles = [f"{t}: {p}" if t else p for t in tasks for p in panels]
    spacing = dict(shared_yaxes=True, horizontal_spacing=0.04, vertical_spacing=0.3 / len(tasks))
    fig = make_subplots(rows=len(tasks), cols=len(panels), subplot_titles=titles, **spacing)
    colours = _colours(panels, controls)
    is_control = {controls[n] for n in names if controls[n] != n}
    words = {n: (labels or {}).get(n, label(n)) for n in names}
    shown: set[str] = set()
    for row, task in enumerate(tasks, start=1):
        mine = table[table["task"] == task]
        for col, members in enumerate(panels.values(), start=1):
            width = len(members) + 1
            for name in baseline:
                _baseline(fig, mine[mine["intervention"] == name], layers, width, row, col)
            for index, name in enumerate(members):
                points = mine[mine["intervention"] == name]
                style = dict(color=colours[name], open=name in is_control)
                for trace in _points(points, layers, width, index, words[name], style):
                    trace.update(showlegend=trace.showlegend and words[name] not in shown)
                    fig.add_trace(trace, row=row, col=col)
                shown.add(words[name])
            centres = [i * width + (width - 2) / 2 for i in range(len(layers))]
            names = [f"layer {layer}" for layer in layers]
            axis = dict(tickmode="array", tickvals=centres, ticktext=names, showgrid=False)
            axis |= dict(range=[-0.6, len(layers) * width - 1.4], zeroline=False)
            fig.update_xaxes(axis, row=row, col=col)
    fig.update_xaxes(title_text="layer intervened at", row=len(tasks))
    fig.update_yaxes(range=[-0.05, 1.05])
    fig.update_yaxes(title_text=label("exact_match"), col=1)
    shown_readout = table["readout"].iloc[0] if "readout" in table.columns else None
    text = title or "Exact match under each change beside its control (open markers)"
    if shown_readout is not None and title is None:
        text += f", read-out positions {shown_readout}"
    fig = apply_style(fig, title=text, rows=len(tasks))
    return fig.update_layout(legend=dict(orientation="h", y=-0.12, x=0.0, xanchor="left"))


def _chosen(rows: Rows, readout: str | None) -> pd.DataFrame:
    """The rows as a table with a ``task`` column, in the read-out variant drawn."""
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise UsageError(f"intervention rows lack columns {missing}; need {list(NEEDED)}")
    if "task" not in table.columns:
        table = table.assign(task="")
    if "readout" in table.columns:
        found = list(dict.fromkeys(table["readout"]))
        if readout is not None and readout not in found:
            raise UsageError(f"no rows with readout {readout!r}; the rows have {found}")
        table = table[table["readout"] == (readout or ("kept" if "kept" in found else found[0]))]
    return table


def _panels(
    names: list[str], controls: Mapping[str, str], families: Mapping[str, str] | None
) -> dict[str, list[str]]:
    """Family -> its members in drawing order: each change, then its control (a control
    shared by several changes follows the first)."""
    panels: dict[str, list[str]] = {}
    for name in names:
        members = panels.setdefault("" if families is None else families.get(name, "other"), [])
        for member in (name, controls[name]):
            if member in names and member not in members:
                members.append(member)
    return panels


def _colours(panels: Mapping[str, list[str]], controls: Mapping[str, str]) -> dict[str, str]:
    """A colour per change, its control's the same; a control of no change has its own."""
    colours: dict[str, str] = {}
    for members in panels.values():
        for name in members:
            if name not in colours:
                colours[name] = PALETTE[len(set(colours.values())) % len(PALETTE)]
                if controls[name] in members:
                    colours.setdefault(controls[name], colours[name])
    return colours


def _points(
    points: pd.DataFrame, layers: list, width: int, index: int, name: str, style: dict
) -> list[go.Scatter]:
    """One intervention's seeds as points and their mean as a bar, at each layer's place."""
    places = {layer: i * width + index for i, layer in enumerate(layers)}
    seeds = points.groupby("layer", sort=True)["exact_match"]
    x, y = [], []
    for layer, values in seeds:
        offsets = [SPREAD * (i / max(len(values) - 1, 1) - 0.5) for i in range(len(values))]
        x += [places[layer] + (o if len(values) > 1 else 0.0) for o in offsets]
        y += values.tolist()
    symbol = "circle-open" if style["open"] else "circle"
    marker = dict(color=style["color"], symbol=symbol, size=7, opacity=0.7)
    seed_points = go.Scatter(
        x=x, y=y, mode="markers", marker=marker, name=name, legendgroup=name, showlegend=True
    )
    means = seeds.mean()
    mean_bars = go.Scatter(x=[places[layer] for layer in means.index], y=means.tolist())
    mean_bars.update(mode="markers", marker=MEAN | dict(color=style["color"]), hoverinfo="name+y")
    mean_bars.update(name=f"{name} (mean)", legendgroup=name, showlegend=False)
    return [seed_points, mean_bars]


def _baseline(fig: go.Figure, rows: pd.DataFrame, layers: list, width: int, row: int, col: int):
    """The unchanged model's mean exact match over seeds across each layer's group."""
    means = rows.groupby("layer")["exact_match"].mean()
    for i, layer in enumerate(layers):
        if layer in means.index:
            x = [i * width - 0.4, i * width + width - 1.6]
            trace = go.Scatter(x=x, y=[means[layer]] * 2, mode="lines", line=BASELINE)
            trace.update(name="unchanged model", legendgroup="unchanged model", hoverinfo="name+y")
            trace.update(showlegend=row == col == i + 1 == 1)
            fig.add_trace(trace, row=row, col=col)
