"""Causal tests: exact match by layer under each intervention, its control dashed beside it."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.layers import Rows
from adjpos.figures.style import OTHER_COLORS, apply_style
from adjpos.validation import UsageError

NEEDED = ("layer", "intervention", "control", "exact_match", "exact_match_low", "exact_match_high")
BASELINE = dict(color="#000000", width=2.5)
# With a single layer the x axis names the interventions, slanted: rows of panels stand this
# far apart (a share of the plot's height, over the rows) so names and titles never meet.
NAMES_SPACING = 0.5
# The colours no model kind owns, less the baseline's black: no line passes for the baseline.
PALETTE = tuple(c for c in OTHER_COLORS if c != BASELINE["color"])


def plot_interventions(
    rows: Rows, *, title: str | None = None, readout: str | None = None
) -> go.Figure:
    """Exact match against the layer intervened at, one line per intervention (and per seed,
    where rows have a ``seed`` column) with its 95% interval; each control is dashed in the
    colour of the intervention it controls (read from the rows' ``control`` column), and the
    baseline (the row that is its own control, "none") is black. One panel per task (the
    ``task`` column, when there is one).

    Args:
        rows: the rows of `adjpos.interventions.intervention_table` (or dicts with at least
            layer, intervention, control and exact_match with its _low and _high).
        title: figure title.
        readout: the read-out variant drawn, where rows have a ``readout`` column (default:
            "kept" when there, else the first found).

    Raises:
        ValueError: a needed column is missing.
    """
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
        chosen = readout or ("kept" if "kept" in found else found[0])
        table = table[table["readout"] == chosen]
    tasks = list(dict.fromkeys(table["task"]))
    cols = min(2, len(tasks))
    n_rows = -(-len(tasks) // cols)
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        subplot_titles=[t or "exact match" for t in tasks],
        shared_yaxes=True,
        vertical_spacing=(NAMES_SPACING if table["layer"].nunique() == 1 else 0.3) / n_rows,
    )
    styles = _styles(table)
    place = _places(table)
    shown: set[str] = set()
    for index, task in enumerate(tasks):
        rows_here = table[table["task"] == task]
        lines = ["intervention"] + (["seed"] if "seed" in rows_here.columns else [])
        for (name, *seed), points in rows_here.groupby(lines, sort=False, dropna=False):
            points = points.sort_values("layer")
            fig.add_trace(
                go.Scatter(
                    x=place(name, seed, points),
                    y=points["exact_match"].tolist(),
                    error_y=dict(
                        type="data",
                        symmetric=False,
                        array=(points["exact_match_high"] - points["exact_match"]).tolist(),
                        arrayminus=(points["exact_match"] - points["exact_match_low"]).tolist(),
                        thickness=1,
                        width=3,
                    ),
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    line=styles[name],
                    marker=dict(symbol="circle-open" if "dash" in styles[name] else "circle"),
                ),
                row=index // cols + 1,
                col=index % cols + 1,
            )
            shown.add(name)
    _x_axis(fig, table, n_rows)
    fig.update_yaxes(title_text="exact match", range=[-0.03, 1.03], col=1)
    text = title or "Exact match, one carrier of position changed (controls: open markers)"
    if "readout" in table.columns and title is None:
        text += f", read-out positions {table['readout'].iloc[0]}"
    return apply_style(fig, title=text, rows=max(n_rows, 2))  # room for a dozen legend lines


def _styles(table: pd.DataFrame) -> dict[str, dict]:
    """Each intervention whose control is drawn gets a colour and its control the same,
    dashed (the pairs are the rows' ``control`` column, which the intervention table's specs
    write); the baseline, its own control, is black; every other line gets a colour of its
    own."""
    pairs = table[["intervention", "control"]].drop_duplicates()
    controls = dict(zip(pairs["intervention"], pairs["control"], strict=True))
    styles = {n: BASELINE for n, c in controls.items() if c == n}  # its own control
    paired = {n: c for n, c in controls.items() if c in controls and c not in styles}
    colours = iter(PALETTE * len(controls))
    for name, control in paired.items():
        if name not in styles:
            styles[name] = dict(color=next(colours), width=2)
            styles.setdefault(control, styles[name] | dict(dash="dash"))
    for name in controls:
        styles.setdefault(name, dict(color=next(colours), width=2))
    return styles


def _places(table: pd.DataFrame):
    """Where a line's points go along x: at their layers; with a single layer, which would
    stack every point on one x, at their intervention's place (one per intervention, in
    first-seen order), each seed a little apart so that no point hides another."""
    if table["layer"].nunique() > 1:
        return lambda name, seed, points: points["layer"].tolist()
    names = list(dict.fromkeys(table["intervention"]))
    seeds = sorted(table["seed"].unique()) if "seed" in table.columns else [None]
    step = min(0.15, 0.6 / len(seeds))
    shift = {s: step * (i - (len(seeds) - 1) / 2) for i, s in enumerate(seeds)}
    return lambda name, seed, points: [names.index(name) + shift[seed[0] if seed else None]]


def _x_axis(fig: go.Figure, table: pd.DataFrame, n_rows: int) -> None:
    layers = sorted(table["layer"].unique())
    if len(layers) > 1:
        fig.update_xaxes(title_text="layer intervened at", dtick=1)
        return
    names = list(dict.fromkeys(table["intervention"]))
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(len(names))),
        ticktext=names,
        tickangle=-40,
        range=[-0.5, len(names) - 0.5],
        showgrid=False,
    )
    fig.update_xaxes(title_text=f"intervention at layer {layers[0]}", row=n_rows)
