"""Interventions: change one carrier of position inside a model and leave the others intact.

Each intervention is a small frozen object applied at one site with TransformerLens hooks,
`intervene(model, intervention, layer=l)`, on any TransformerLens model. Layer l is numbered
as adjpos numbers residual layers: the hidden states entering block l
(``blocks.{l}.hook_resid_pre``; layer 0 = the token embeddings), so l runs over
0 .. n_layers - 1. `UniformAttention` acts on block l's attention pattern instead.

- `NoIntervention` ("none"): the baseline, through the same code path.
- `NormPermute` ("norm_permute"): each state keeps its direction and takes the norm of another
  position of the same sequence (a seeded random permutation, or the mirror k -> n - 1 - k).
  Every cosine is unchanged.
- `NormPermuteControl` ("norm_permute_control"): each state keeps its direction and takes the
  norm of the same position in another sequence of the batch (the next row, cyclically), a
  change of norms that moves no position information between positions.
- `UniformAttention` ("uniform_attention"): block l's attention pattern replaced by uniform
  causal attention (the first-layer theory's idealisation), for all heads or some.

Each states in its tests what it preserves (`tests/interventions`).
"""

from adjpos.interventions.hooks import (
    INTERVENTIONS,
    NoIntervention,
    NormPermute,
    NormPermuteControl,
    UniformAttention,
    intervene,
)

__all__ = [
    "INTERVENTIONS",
    "NoIntervention",
    "NormPermute",
    "NormPermuteControl",
    "UniformAttention",
    "intervene",
]
