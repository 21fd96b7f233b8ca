"""adjpos: where causal transformers without positional encodings keep token positions.

The top level holds the verbs a user reaches for::

    import adjpos
    model = adjpos.build_model(adjpos.ModelConfig())
    adjpos.adjacency_score(model, tokens)

Everything else lives in namespaces (`adjpos.figures`, `adjpos.theory`, `adjpos.hf`,
`adjpos.sweep`, `adjpos.study`, `adjpos.probes`, ...), each an attribute of `adjpos` imported
on first use (PEP 562). TransformerLens, transformers, scikit-learn and plotly are imported
only when a function needs them, so ``import adjpos`` stays fast.
"""

__version__ = "0.1.0"

import importlib
import pkgutil

from adjpos.capture import SITES, capture_residuals, iter_residuals
from adjpos.heads import head_similarity
from adjpos.hf.families import hf_config
from adjpos.layerwise import measure_layers
from adjpos.metrics import (
    adjacency_probability,
    adjacency_rows,
    cosine_matrix,
    decompose,
    position_variance,
)
from adjpos.models import (
    ModelConfig,
    build_model,
    is_position_free,
    layer_kinds,
    load_hf,
    load_model,
    save_model,
)
from adjpos.pretrained import load_pretrained
from adjpos.probes import (
    FEATURE_SETS,
    PROBES,
    ProbeResult,
    ProbeScore,
    compare_feature_sets,
    position_features,
    probe_positions,
    reconstruct_order,
    sequences_of_length,
)
from adjpos.scoring import adjacency_score
from adjpos.tasks import TASKS, TaskBatch, get_task
from adjpos.training import TrainConfig, TrainResult, evaluate, predict, train

__all__ = [
    "FEATURE_SETS",
    "PROBES",
    "SITES",
    "TASKS",
    "ModelConfig",
    "ProbeResult",
    "ProbeScore",
    "TaskBatch",
    "TrainConfig",
    "TrainResult",
    "adjacency_probability",
    "adjacency_rows",
    "adjacency_score",
    "build_model",
    "capture_residuals",
    "compare_feature_sets",
    "cosine_matrix",
    "decompose",
    "evaluate",
    "get_task",
    "head_similarity",
    "hf_config",
    "iter_residuals",
    "is_position_free",
    "layer_kinds",
    "load_hf",
    "load_model",
    "load_pretrained",
    "measure_layers",
    "position_features",
    "position_variance",
    "predict",
    "probe_positions",
    "reconstruct_order",
    "save_model",
    "sequences_of_length",
    "train",
]

# Every subpackage and module of adjpos, reachable as ``adjpos.<name>`` without an import.
_NAMESPACES = tuple(module.name for module in pkgutil.iter_modules(__path__))


def __getattr__(name: str):
    """``adjpos.figures`` and the other namespaces, imported on first access (PEP 562)."""
    if name in _NAMESPACES:
        return importlib.import_module(f"adjpos.{name}")
    raise AttributeError(
        f"module 'adjpos' has no attribute {name!r}; its namespaces are {list(_NAMESPACES)} "
        "and its verbs are listed in adjpos.__all__"
    )


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMESPACES})
