"""What every adjpos figure promises a reader, as checks on the figure object: named axes, log
ticks printed as numbers, words instead of field names, and one colour per model kind."""

from __future__ import annotations

import math
import re
from collections import defaultdict

import plotly.graph_objects as go

from adjpos.figures.style import CHAR_WIDTH, FONT, KIND_COLORS

# Axis titles that name no quantity: a table's column name, or nothing.
NAMELESS = {"", "value", "variable", "index"}
# A field name ("variance_ratio", "d_model") or a column=value pair ("layer=0", "positional=alibi").
FIELD_NAME = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[a-z_]+=\w")


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


def assert_y_titles_fit(fig: go.Figure, name: str = "") -> None:
    """Each line of each y axis title is no longer than its panel is high (at `CHAR_WIDTH` of
    its font size a character), so it runs into no other panel nor the figure's title."""
    layout = fig.layout
    height = layout.height - layout.margin.t - layout.margin.b
    for axis in fig.select_yaxes():
        low, high = axis.domain or (0.0, 1.0)
        size = axis.title.font.size or layout.font.size or FONT["size"]
        for line in (axis.title.text or "").split("<br>"):
            assert len(line) * CHAR_WIDTH * size <= (high - low) * height, (name, line)


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


def visible_text(fig: go.Figure) -> list[str]:
    """Every text a reader sees: the titles of the figure, its axes and colour bars, the
    annotations, the legend's entries and title, and the axes' tick labels."""
    layout = fig.layout
    found = [layout.title.text, layout.legend.title.text]
    for axis in (*fig.select_xaxes(), *fig.select_yaxes()):
        found += [axis.title.text, *(axis.ticktext or ())]
    found += [a.text for a in layout.annotations]
    found += [layout[k].colorbar.title.text for k in layout if k.startswith("coloraxis")]
    for trace in fig.data:
        found.append(trace.name)
        bar = getattr(trace, "colorbar", None)
        found.append(bar.title.text if bar is not None else None)
    return [str(text) for text in found if text]


def assert_no_field_names(fig: go.Figure, name: str = "") -> None:
    """No text of `fig` shows a field name or a column=value pair (`name`: the figure)."""
    raw = [text for text in visible_text(fig) if FIELD_NAME.search(text)]
    assert not raw, (name, raw)


def trace_colour(trace) -> str | None:
    line = getattr(trace, "line", None)
    if line is not None and line.color:
        return line.color
    marker = getattr(trace, "marker", None)
    return marker.color if marker is not None and isinstance(marker.color, str) else None


def kind_colours(figures: list[go.Figure]) -> dict[str, set[str]]:
    """Model kind or text layout -> the colours its traces take over all `figures`."""
    found: dict[str, set[str]] = defaultdict(set)
    for fig in figures:
        for trace in fig.data:
            if trace.name in KIND_COLORS:
                found[trace.name].add(trace_colour(trace))
    return dict(found)


def assert_one_colour_per_kind(figures: list[go.Figure]) -> None:
    """Each model kind (and text layout) is drawn in one colour in every figure, its own, and
    no other line takes a kind's colour."""
    found = kind_colours(figures)
    assert all(c == {KIND_COLORS[kind]} for kind, c in found.items()), found
    others = {
        (trace.name, trace_colour(trace))
        for fig in figures
        for trace in fig.data
        if trace.name not in KIND_COLORS and trace_colour(trace) in KIND_COLORS.values()
    }
    assert not others, others
