"""What every adjpos figure promises a reader, as checks on the figure object: named axes, log
ticks printed as numbers, and one colour per model kind."""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from adjpos.figures.style import MODEL_KINDS

# Axis titles that name no quantity: a table's column name, or nothing.
NAMELESS = {"", "value", "variable", "index"}


def _domain(fig: go.Figure, anchor: str | None) -> float:
    """Where the axis that `anchor` names ("y2", "x") starts along its direction."""
    if not anchor or anchor == "free":
        return 0.0
    axis = fig.layout[f"{anchor[0]}axis{anchor[1:]}"]
    return 0.0 if axis.domain is None else float(axis.domain[0])


def outer_axis_titles(fig: go.Figure) -> tuple[list[str], list[str]]:
    """The titles of the x axes of the bottom row of panels and of the y axes of the left
    column ("" where a title is missing): the axes a reader reads the quantities from.
    Axes that no trace uses (an empty cell of the grid) are left out."""
    used = {(t.xaxis or "x") for t in fig.data} | {(t.yaxis or "y") for t in fig.data}
    xs = [a for a in fig.select_xaxes() if a.plotly_name.replace("axis", "") in used]
    ys = [a for a in fig.select_yaxes() if a.plotly_name.replace("axis", "") in used]
    bottom = min(_domain(fig, a.anchor) for a in xs)
    left = min(_domain(fig, a.anchor) for a in ys)
    return (
        [a.title.text or "" for a in xs if _domain(fig, a.anchor) == bottom],
        [a.title.text or "" for a in ys if _domain(fig, a.anchor) == left],
    )


def assert_axes_named(fig: go.Figure, name: str = "") -> None:
    """The outer axes all carry a title that names a quantity (`name`: the figure, in the
    message)."""
    xs, ys = outer_axis_titles(fig)
    assert xs and ys, name
    for title in xs + ys:
        assert title.split("<br>")[0].strip().lower() not in NAMELESS, (name, xs, ys)


def assert_log_ticks_are_numbers(fig: go.Figure) -> int:
    """Every log axis prints its ticks as numbers: at listed values whose text is that
    value, or once a decade with a number format. Returns how many log axes there are."""
    logs = [a for a in (*fig.select_xaxes(), *fig.select_yaxes()) if a.type == "log"]
    for axis in logs:
        if axis.tickmode == "array":
            assert len(axis.ticktext) == len(axis.tickvals) > 0
            for text, value in zip(axis.ticktext, axis.tickvals, strict=True):
                assert math.isclose(float(text), value, rel_tol=1e-5)
        else:
            assert axis.dtick == 1 and axis.tickformat  # "D1"/"D2" print bare mantissas
    return len(logs)


def kind_colours(figures: list[go.Figure]) -> dict[str, set[str]]:
    """Model kind -> the colours its traces take over all `figures`."""
    found: dict[str, set[str]] = defaultdict(set)
    for fig in figures:
        for trace in fig.data:
            if trace.name in MODEL_KINDS:
                line = getattr(trace, "line", None)
                found[trace.name].add(line.color if line and line.color else trace.marker.color)
    return dict(found)


def assert_one_colour_per_kind(figures: list[go.Figure]) -> None:
    """Each model kind is drawn in one colour in every figure, and no two kinds share it."""
    found = kind_colours(figures)
    assert all(len(colours) == 1 for colours in found.values()), found
    assert len({next(iter(c)) for c in found.values()}) == len(found), found
