"""Causal tests: exact match by layer under each intervention, its control dashed beside it."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.layers import Rows
from adjpos.figures.style import COLORS, apply_style
from adjpos.validation import UsageError

NEEDED = ("layer", "intervention", "control", "exact_match", "exact_match_low", "exact_match_high")
BASELINE = dict(color="#000000", width=2.5)
# The palette without the baseline's black, so no line can be mistaken for the baseline.
PALETTE = tuple(c for c in COLORS if c != BASELINE["color"])


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
    )
    styles = _styles(table)
    shown: set[str] = set()
    for index, task in enumerate(tasks):
        rows_here = table[table["task"] == task]
        lines = ["intervention"] + (["seed"] if "seed" in rows_here.columns else [])
        for (name, *_), points in rows_here.groupby(lines, sort=False, dropna=False):
            points = points.sort_values("layer")
            fig.add_trace(
                go.Scatter(
                    x=points["layer"].tolist(),
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
                ),
                row=index // cols + 1,
                col=index % cols + 1,
            )
            shown.add(name)
    fig.update_xaxes(title_text="layer intervened at", dtick=1)
    fig.update_yaxes(title_text="exact match", range=[-0.03, 1.03], col=1)
    text = title or "Exact match with one carrier of position changed (controls dashed)"
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
