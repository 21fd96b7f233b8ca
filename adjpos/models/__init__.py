"""Models: config, the one builder that removes position, Hugging Face models bridged into
TransformerLens (with RoPE removed from chosen layers on request: `nope_layers`), each layer's
kind of position signal, and checkpoints of both."""

from adjpos.models.bridge import is_bridge, load_hf
from adjpos.models.build import build_model
from adjpos.models.checkpoint import load_model, save_model, save_snapshot, snapshot_steps
from adjpos.models.config import ModelConfig
from adjpos.models.kinds import capture_kinds, is_position_free, layer_kinds

__all__ = [
    "ModelConfig",
    "build_model",
    "capture_kinds",
    "is_bridge",
    "is_position_free",
    "layer_kinds",
    "load_hf",
    "load_model",
    "save_model",
    "save_snapshot",
    "snapshot_steps",
]
