"""Pure tensor metrics: no model, no I/O."""

from adjpos.metrics.adjacency import adjacency_probability, adjacency_rows
from adjpos.metrics.cosine import center_states, cosine_matrix
from adjpos.metrics.variance import position_variance

__all__ = [
    "adjacency_probability",
    "adjacency_rows",
    "center_states",
    "cosine_matrix",
    "position_variance",
]
