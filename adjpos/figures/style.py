"""The one look shared by every adjpos figure: template, font, colours, line styles."""

from __future__ import annotations

import plotly.graph_objects as go

TEMPLATE = "plotly_white"
FONT = dict(family="Helvetica, Arial, sans-serif", size=13)
# Okabe and Ito's colour-blind-safe palette without its yellow (faint on white), then four of
# Tol's muted colours, so a dozen lines stay distinct.
COLORS = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#882255",
    "#999933",
    "#44AA99",
    "#332288",
    "#AA4499",
)
CHANCE = dict(color="#888888", dash="dash", width=1.5)
# Controls (shuffled positions) are drawn dotted so they never pass for a carrier.
CONTROL_DASH = "dot"
WIDTH, HEIGHT_PER_ROW = 1000, 300


def color(index: int) -> str:
    """The `index`-th colour of the palette, cycling."""
    return COLORS[index % len(COLORS)]


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
    return fig
