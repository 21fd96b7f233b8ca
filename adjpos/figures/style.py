"""The one look shared by every adjpos figure: template, font, colours, line styles, size."""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterable
from typing import Any

import plotly.graph_objects as go

from adjpos.text.recipe import WIDTHS, sized

TEMPLATE = "plotly_white"
FONT = dict(family="Helvetica, Arial, sans-serif", size=13)
# Okabe and Ito's colour-blind-safe palette without its yellow (faint on white) and black, then
# Tol's muted colours, then black, then the two of Tol's older 12-colour set that the muted one
# lacks: enough for the kinds below and ten other lines (the probes' feature sets).
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")
COLORS += ("#332288", "#882255", "#44AA99", "#56B4E9", "#999933", "#AA4499", "#117733")
COLORS += ("#CC6677", "#88CCEE", "#DDCC77", "#000000", "#6699CC", "#661100")
# The model kinds the study compares (adjpos.study.models; the sweep's random-init models by
# their positional encoding, `POSITIONAL_KINDS`) and the text models' layouts (`LAYOUTS`) each
# keep one colour in every figure, and no other line takes it: a reader who learns "trained is
# blue" once can trust it.
MODEL_KINDS = ("trained", "random-init", "random-init, learned positions")
MODEL_KINDS += ("random-init, rotary positions", "random-init, alibi positions")
POSITIONAL_KINDS = dict(zip(("none", "learned", "rotary", "alibi"), MODEL_KINDS[1:], strict=True))
LAYOUTS = {"nope": "NoPE", "rope": "RoPE", "hybrid": "hybrid"}
KIND_COLORS = dict(zip((*MODEL_KINDS, *LAYOUTS.values()), COLORS, strict=False))
OTHER_COLORS = COLORS[len(KIND_COLORS) :]
# What a figure calls a column or a value of the tables: words, with units where there are
# any, never a field name. `label` looks names up here.
LABELS = {
    "step": "training step",
    "position": "position (tokens from the start)",
    "adjacency": "adjacency score",
    "adjacency_prompt_centred": "adjacency score, prompt rows, centred",
    "accuracy": "exact match (share of prompts)",
    "exact_match": "exact match (share of prompts)",
    "loss": "next-token loss (nats)",
    "size_target": "change size (its norm / the states' norm)",
    "variance_ratio": "variance ratio, last third / first third",
    "variance_spearman": "Spearman correlation of variance with position",
    "probe_gain": "probe accuracy gain over layer 0",
    "init_range": "initial weight scale (std)",
    "d_model": "width (residual dimensions)",
    "n_layers": "depth (blocks)",
    "normalization_type": "normalization",
    "positional": "positional encoding",
    "variance": "variance",
    "cosine_first": "cosine to the first position",
    "cosine_previous": "cosine to the previous position",
    "cosine_mean": "mean cosine to the other positions",
    "cosine_profile": "cosines to every other position",
    "cosine_sorted": "cosines to the other positions, sorted",
    "cosine_matrix": "cosine matrix (all pairs)",
    "token_identity": "token identity (the prompt format)",
    "resid": "residual stream",
    "attn_out": "attention output",
    "resid_mid": "residual after attention",
    "resid_post": "residual after the block",
} | LAYOUTS
# The text models of the other widths (`adjpos.text.recipe.sized`): "NoPE, width 128".
LABELS |= {sized(x, d): f"{w}, width {d}" for x, w in LAYOUTS.items() for d in WIDTHS[1:]}
CHANCE = dict(color="#888888", dash="dash", width=1.5)
# Controls (shuffled positions) are drawn dotted so they never pass for a carrier.
CONTROL_DASH = "dot"
WIDTH, HEIGHT_PER_ROW = 1000, 300
# The widest a figure is drawn: its frame in report.html then fits a 1,280 px window.
MAX_WIDTH = 1180
# A character's mean width, as a share of the font size (Helvetica): what `apply_style` reckons
# a y axis title takes before it breaks one in two lines to fit its panel's height.
CHAR_WIDTH = 0.53
# A log axis labels every measured value while there are at most this many and no two are
# closer than a 1 / (2 * MAX_LOG_TICKS) share of their span, else each decade.
MAX_LOG_TICKS = 8


def color(index: int) -> str:
    """The `index`-th colour for lines that are not model kinds, cycling."""
    return OTHER_COLORS[index % len(OTHER_COLORS)]


def label(name: Any) -> str:
    """The words for a column or value `name` (`LABELS`; "shuffled:NAME" as "shuffled: " and
    NAME's words), or `name` itself where it has none."""
    name = str(name)
    if name.startswith("shuffled:"):
        return "shuffled: " + label(name.removeprefix("shuffled:"))
    return LABELS.get(name, name)


def line_colors(values: Iterable[Hashable]) -> dict[Any, str]:
    """One colour per value, in legend order: the model kinds and layouts first, each in its
    own colour (the same in every figure), then the other values in first-seen order, each in
    the next colour that no kind owns."""
    values = list(dict.fromkeys(values))
    kinds = {kind: colour for kind, colour in KIND_COLORS.items() if kind in values}
    others = [value for value in values if value not in KIND_COLORS]
    return kinds | {value: color(index) for index, value in enumerate(others)}


def log_ticks(values: Iterable[numbers.Real]) -> dict[str, Any]:
    """A log axis's tick settings that print numbers ("0.02", "1000"), never bare mantissas
    ("2", "5"): a tick at each measured value while they are few and spread out, else one per
    decade."""
    found = sorted({float(v) for v in values if v is not None and math.isfinite(v) and v > 0})
    logs = [math.log10(v) for v in found]
    gaps = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    spread = not gaps or min(gaps) >= (logs[-1] - logs[0]) / (2 * MAX_LOG_TICKS)
    if 0 < len(found) <= MAX_LOG_TICKS and spread:
        return dict(
            type="log", tickmode="array", tickvals=found, ticktext=[f"{v:g}" for v in found]
        )
    return dict(type="log", tickmode="linear", tick0=0, dtick=1, tickformat="~g")


def title_facet_rows(fig: go.Figure, values: list[Any], y_title: str | None) -> None:
    """Name each row of a plotly express figure's panels on its first y axis (its facet_row
    value, after `y_title` where given), in place of express's labels at the right edge,
    which the legend overlaps. `values` are the row values in the order express drew them
    (first seen, top to bottom)."""
    fig.layout.annotations = [a for a in fig.layout.annotations if a.textangle != 90]
    for index, value in enumerate(values):  # express counts rows from the bottom
        text = f"{y_title}<br>{value}" if y_title else str(value)
        fig.update_yaxes(title_text=text, row=len(values) - index, col=1)


def apply_style(fig: go.Figure, *, title: str, rows: int = 1) -> go.Figure:
    """Give `fig` the shared layout (in place) and return it."""
    fig.update_layout(
        template=TEMPLATE,
        font=FONT,
        title=dict(text=title, x=0.0, xanchor="left"),
        width=WIDTH,
        height=120 + HEIGHT_PER_ROW * rows,
        legend=dict(orientation="v", yanchor="top", y=1.0, x=1.02, xanchor="left"),
        margin=dict(l=70, r=20, t=100, b=60),
    )
    fit_axis_titles(fig)
    return fig


def fit_axis_titles(fig: go.Figure) -> None:
    """Break each one-line y axis title that is longer than its panel is high in two lines, at
    the space nearest its middle (in place), so that it never runs into the panel above or
    the figure's title."""
    layout = fig.layout
    height = layout.height - layout.margin.t - layout.margin.b
    for axis in fig.select_yaxes():
        text = axis.title.text
        if not text or "<br>" in text or " " not in text:
            continue
        low, high = axis.domain or (0.0, 1.0)
        size = axis.title.font.size or layout.font.size or FONT["size"]
        if len(text) * CHAR_WIDTH * size > (high - low) * height:
            spaces = [i for i, c in enumerate(text) if c == " "]
            cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
            axis.title.text = f"{text[:cut]}<br>{text[cut + 1 :]}"
