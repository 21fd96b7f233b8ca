"""Shape-annotated tensor aliases shared across adjpos (TransformerLens dimension names)."""

from jaxtyping import Float, Int
from torch import Tensor

Tokens = Int[Tensor, "batch pos"]
# What capture and scoring accept: a batch, or one sequence (treated as a batch of one).
TokenInput = Int[Tensor, "batch pos"] | Int[Tensor, " pos"]
Lengths = Int[Tensor, "*batch"]
Resid = Float[Tensor, "batch pos d_model"]
ResidStack = Float[Tensor, "layer batch pos d_model"]
SimMatrix = Float[Tensor, "*batch pos pos"]
# Prompt states by prompt length: {L: (states [n, L, d_model], tokens [n, L])}.
PromptStates = dict[int, tuple[Float[Tensor, "n pos d_model"], Int[Tensor, "n pos"]]]

__all__ = ["Lengths", "PromptStates", "Resid", "ResidStack", "SimMatrix", "TokenInput", "Tokens"]
