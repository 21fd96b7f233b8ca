"""The text models' layers: adjacency in four views and the position measures, by layer and
layout (the tables of `adjpos.text_layers`: ``text_adjacency.csv``, ``text_position.csv``)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from adjpos.figures.intervals import plot_intervals


def plot_text_layers(adjacency: pd.DataFrame, position: pd.DataFrame) -> dict[str, go.Figure]:
    """``text_adjacency``: the adjacency score by layer, one line per layout, one panel per
    view (mean over seeds; bars from the seeds' lowest interval bound to their highest);
    ``text_position``: each position measure by layer (mean over seeds; bars: the seeds'
    range)."""
    keys = ["layout", "view", "layer"]
    spans = adjacency.groupby(keys, as_index=False, sort=False)
    spans = spans.agg(value=("adjacency", "mean"), low=("low", "min"), high=("high", "max"))
    ranges = position.groupby(["layout", "measure", "layer"], as_index=False, sort=False)
    ranges = ranges.agg(value=("value", "mean"), low=("value", "min"), high=("value", "max"))
    axes = {"x": "layer", "y": "value", "low": "low", "high": "high", "color": "layout"}
    adjacency = dict(facet_col="view", title="Adjacency on held-out text")
    position = dict(facet_col="measure", title="Position in the text models' states")
    return {
        "text_adjacency": plot_intervals(spans, **axes, **adjacency, y_title="adjacency score"),
        "text_position": plot_intervals(ranges, **axes, **position, y_title="share or R^2"),
    }
