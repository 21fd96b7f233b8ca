"""Figures: results in, plotly `go.Figure` out. No torch here, and nothing is ever shown.

`style` holds the look every figure shares, `save` writes a figure to disk (HTML always, PNG
when static export works), and each other module draws one kind of result.
"""

from adjpos.figures.probing import plot_probe_scores
from adjpos.figures.save import SavedFigure, save_figure
from adjpos.figures.sweep import sweep_heatmap, sweep_histogram, sweep_layer_lines

__all__ = [
    "SavedFigure",
    "plot_probe_scores",
    "save_figure",
    "sweep_heatmap",
    "sweep_histogram",
    "sweep_layer_lines",
]
