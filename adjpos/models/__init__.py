"""Models: config, the one builder that removes position, and checkpoints."""

from adjpos.models.build import build_model, is_position_free
from adjpos.models.checkpoint import load_model, save_model, save_snapshot, snapshot_steps
from adjpos.models.config import ModelConfig

__all__ = [
    "ModelConfig",
    "build_model",
    "is_position_free",
    "load_model",
    "save_model",
    "save_snapshot",
    "snapshot_steps",
]
