"""Figures: results in, plotly `go.Figure` out. No torch here, and nothing is ever shown.

`style` holds the look every figure shares, `save` writes a figure to disk (HTML always, PNG
when static export works), and each other module draws one kind of result.
"""

from adjpos.figures.curve import plot_curve_arms
from adjpos.figures.decomposition import plot_variance_shares
from adjpos.figures.heads import plot_head_similarity
from adjpos.figures.heatmaps import plot_cosine_heatmaps
from adjpos.figures.intervals import plot_intervals
from adjpos.figures.interventions import plot_interventions
from adjpos.figures.kinds import plot_layer_kinds
from adjpos.figures.layers import plot_adjacency_by_layer, plot_variance_by_position
from adjpos.figures.probing import plot_probe_scores
from adjpos.figures.save import SavedFigure, save_figure, save_figures
from adjpos.figures.sweep import sweep_heatmap, sweep_histogram, sweep_layer_lines
from adjpos.figures.theory import plot_first_layer_theory

__all__ = ["SavedFigure", "plot_adjacency_by_layer", "plot_cosine_heatmaps", "plot_curve_arms"]
__all__ += ["plot_first_layer_theory", "plot_head_similarity", "plot_intervals"]
__all__ += ["plot_interventions", "plot_layer_kinds", "plot_probe_scores"]
__all__ += ["plot_variance_by_position", "plot_variance_shares", "save_figure", "save_figures"]
__all__ += ["sweep_heatmap", "sweep_histogram", "sweep_layer_lines"]
