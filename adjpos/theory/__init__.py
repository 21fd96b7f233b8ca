"""The first-layer argument as numbers: what near-uniform causal attention predicts, and how
close a model's first layer comes to it.

`prediction` holds the pure closed form and its finite-width Monte Carlo twin (no model);
`comparison` measures a model's first layer and sets it beside the prediction.
"""

from adjpos.theory.comparison import (
    THEORY_SITES,
    FirstLayerComparison,
    compare_first_layer,
    effective_width,
    estimate_residual_ratio,
)
from adjpos.theory.prediction import predicted_adjacency, predicted_cosine, simulate_first_layer

__all__ = [
    "THEORY_SITES",
    "FirstLayerComparison",
    "compare_first_layer",
    "effective_width",
    "estimate_residual_ratio",
    "predicted_adjacency",
    "predicted_cosine",
    "simulate_first_layer",
]
