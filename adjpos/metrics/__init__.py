"""Pure tensor metrics: no model, no I/O."""

from adjpos.metrics.adjacency import (
    DEFAULT_TIES,
    TIE_EPSILONS,
    adjacency_probability,
    adjacency_rows,
    states_precision,
    tie_tolerance,
)
from adjpos.metrics.cosine import center_states, cosine_matrix
from adjpos.metrics.decompose import (
    Decomposition,
    PositionContextAdjacency,
    PositionCurvePCs,
    decompose,
    decomposition_shares,
    position_context_adjacency,
    position_curve_pcs,
)
from adjpos.metrics.variance import position_variance

__all__ = [
    "DEFAULT_TIES",
    "TIE_EPSILONS",
    "Decomposition",
    "PositionContextAdjacency",
    "PositionCurvePCs",
    "adjacency_probability",
    "adjacency_rows",
    "center_states",
    "cosine_matrix",
    "decompose",
    "decomposition_shares",
    "position_context_adjacency",
    "position_curve_pcs",
    "position_variance",
    "states_precision",
    "tie_tolerance",
]
