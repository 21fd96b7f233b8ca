"""adjpos: where causal transformers without positional encodings keep token positions.

Public API (imported lazily, so ``import adjpos`` stays fast)::

    import adjpos
    model = adjpos.build_model(adjpos.ModelConfig())
    adjpos.adjacency_score(model, tokens)
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ModelConfig": "adjpos.models",
    "build_model": "adjpos.models",
    "is_position_free": "adjpos.models",
    "save_model": "adjpos.models",
    "load_model": "adjpos.models",
    "SITES": "adjpos.capture",
    "capture_residuals": "adjpos.capture",
    "iter_residuals": "adjpos.capture",
    "cosine_matrix": "adjpos.metrics",
    "adjacency_rows": "adjpos.metrics",
    "adjacency_probability": "adjpos.metrics",
    "position_variance": "adjpos.metrics",
    "adjacency_score": "adjpos.experiments",
    "sweep": "adjpos.experiments",
    "SweepResult": "adjpos.experiments",
    "reproduce": "adjpos.experiments.reproduce",
    "ReproduceConfig": "adjpos.experiments.reproduce",
    "ReproduceResult": "adjpos.experiments.reproduce",
    "TASKS": "adjpos.tasks",
    "TaskBatch": "adjpos.tasks",
    "get_task": "adjpos.tasks",
    "TrainConfig": "adjpos.training",
    "TrainResult": "adjpos.training",
    "train": "adjpos.training",
    "predict": "adjpos.training",
    "evaluate": "adjpos.training",
    "load_pretrained": "adjpos.pretrained",
    "predicted_cosine": "adjpos.theory",
    "simulate_first_layer": "adjpos.theory",
    "predicted_adjacency": "adjpos.theory",
    "compare_first_layer": "adjpos.theory",
    "estimate_residual_ratio": "adjpos.theory",
    "FEATURE_SETS": "adjpos.probes",
    "PROBES": "adjpos.probes",
    "ProbeResult": "adjpos.probes",
    "ProbeScore": "adjpos.probes",
    "probe_positions": "adjpos.probes",
    "position_features": "adjpos.probes",
    "reconstruct_order": "adjpos.probes",
    "expected_abs_tau": "adjpos.probes",
    "sequences_of_length": "adjpos.probes",
    "plot_probe_scores": "adjpos.figures",
    "plot_cosine_heatmaps": "adjpos.figures",
    "plot_adjacency_by_layer": "adjpos.figures",
    "plot_variance_by_position": "adjpos.figures",
    "plot_first_layer_theory": "adjpos.figures",
    "save_figure": "adjpos.figures",
    "save_figures": "adjpos.figures",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'adjpos' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
