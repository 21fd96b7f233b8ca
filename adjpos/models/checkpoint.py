"""Checkpoints: ``model.safetensors`` + ``config.json`` in one folder, written atomically.

Loading never unpickles: weights come through safetensors, the config is JSON, and the
model is rebuilt by `build_model`, whose load hook re-applies the NoPE freeze. A bridged
Hugging Face model is saved as a Hugging Face folder instead (`adjpos.models.bridge`), and such
a folder loads back bridged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from adjpos.models.bridge import (
    hf_state_dict,
    is_bridge,
    is_hf_folder,
    load_hf,
    load_hf_state,
    save_hf,
)
from adjpos.models.build import build_model
from adjpos.models.config import ModelConfig
from adjpos.runs import atomic_write, write_json
from adjpos.validation import UsageError

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
FORMAT = "adjpos.model"
SNAPSHOTS = "snapshots"


def save_model(model: Any, path: str | os.PathLike, *, cfg: ModelConfig | None = None) -> Path:
    """Save `model` to folder `path` (created if needed); returns the folder.

    Args:
        model: a model made by `build_model` (or any HookedTransformer, given `cfg`), or a
            bridged Hugging Face model (`adjpos.load_hf`), saved as a Hugging Face folder.
        path: the checkpoint folder.
        cfg: the model's config; defaults to ``model.adjpos_config``.
    """
    if is_bridge(model):
        return save_hf(model, path)
    cfg = cfg if cfg is not None else getattr(model, "adjpos_config", None)
    if not isinstance(cfg, ModelConfig):
        raise UsageError("save_model needs the model's ModelConfig: pass cfg=... ")
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    atomic_write(folder / WEIGHTS, lambda tmp: save_file(state, tmp))
    config = {"format": FORMAT, "version": 1, "model": cfg.to_dict()}
    write_json(folder / CONFIG, config)
    return folder


def load_model(
    path: str | os.PathLike,
    *,
    device: str | torch.device | None = None,
    n_ctx: int | None = None,
    step: int | None = None,
) -> Any:
    """Load a checkpoint folder written by `save_model` (a Hugging Face folder is loaded by
    `adjpos.load_hf`, bridged).

    Args:
        path: the checkpoint folder.
        device: where to put the model (default: cuda if available, else cpu).
        n_ctx: another context than the model was built with (no trained weight depends on it
            without learned positions, so a NoPE model can run on longer sequences).
        step: load the training snapshot of this step (see `snapshot_steps`) instead of the
            final weights.

    Raises:
        ValueError: not a checkpoint folder, no snapshot of `step`, or `n_ctx` asked of a
            learned-position model.
    """
    folder = Path(path)
    if is_hf_folder(folder):
        if n_ctx is not None:
            raise UsageError("n_ctx applies to adjpos models; a Hugging Face model keeps its own")
        if step is None:
            return load_hf(folder, device=device, offline=True)
        return load_hf_state(folder, read_weights(_snapshot_file(folder, step)), device=device)
    cfg = read_model_config(folder)
    if step is None:
        weights = folder / WEIGHTS
        if not weights.is_file():
            raise UsageError(f"{folder} is not an adjpos checkpoint: {WEIGHTS} is missing")
    else:
        weights = _snapshot_file(folder, step)
    state = read_weights(weights)
    if n_ctx is not None and n_ctx != cfg.n_ctx:
        if cfg.positional == "learned":
            raise UsageError(
                "n_ctx cannot change for a learned-position model: its W_pos has "
                f"{cfg.n_ctx} trained rows"
            )
        cfg = cfg.with_changes(n_ctx=n_ctx)
        state.pop("pos_embed.W_pos", None)  # zero and frozen in NoPE; rebuilt by build_model
    model = build_model(cfg, device=device)
    dtype = next(model.parameters()).dtype
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"pos_embed.W_pos"}:
        raise UsageError(
            f"{weights} does not fit its config.json: missing "
            f"{sorted(missing)}, unexpected {sorted(unexpected)}"
        )
    return model


def save_snapshot(
    model: Any, path: str | os.PathLike, step: int, *, dtype: torch.dtype | None = None
) -> Path:
    """Save `model`'s weights as the snapshot of training `step` in checkpoint folder `path`
    (``snapshots/step_NNNNNNNN.safetensors``, atomically); `dtype` (e.g. ``torch.float16``)
    stores them smaller. Load one with ``load_model(path, step=step)``."""
    target = _snapshot_path(Path(path), step)
    target.parent.mkdir(parents=True, exist_ok=True)
    return write_weights(model, target, dtype=dtype)


def write_weights(model: Any, target: Path, *, dtype: torch.dtype | None = None) -> Path:
    """Write `model`'s weights to the safetensors file `target` (atomically), floating
    tensors cast to `dtype` where given (`load_model` casts them back to the config's)."""
    cast = (lambda v: v.to(dtype)) if dtype is not None else (lambda v: v)
    weights = hf_state_dict(model) if is_bridge(model) else model.state_dict()
    state = {
        k: (cast(v) if v.is_floating_point() else v).detach().contiguous().cpu()
        for k, v in weights.items()
    }
    atomic_write(target, lambda tmp: save_file(state, tmp))
    return target


def snapshot_steps(path: str | os.PathLike, count: int | None = None) -> list[int]:
    """The training steps whose snapshots checkpoint folder `path` holds, in order; with
    `count`, that many of them (`spread_evenly`)."""
    folder = Path(path) / SNAPSHOTS
    if not folder.is_dir():
        return []
    names = (p.name for p in folder.glob("step_*.safetensors"))
    return spread_evenly(sorted(int(n[5:-12]) for n in names if n[5:-12].isdigit()), count)


def spread_evenly(steps: list[int], count: int | None) -> list[int]:
    """`count` of `steps` evenly spread by index, the first and the last among them (all of
    them when `count` is None or not smaller).

    Example:
        >>> spread_evenly([0, 32, 64, 128, 256, 512, 900], 3)
        [0, 128, 900]
    """
    import numpy as np

    if count is None or count >= len(steps):
        return list(steps)
    picks = np.linspace(0, len(steps) - 1, count).round().astype(int)
    return [steps[i] for i in dict.fromkeys(picks.tolist())]


def _snapshot_file(folder: Path, step: int) -> Path:
    steps = snapshot_steps(folder)
    if step not in steps:
        raise UsageError(f"{folder} has no snapshot of step {step!r}; it has {steps}")
    return _snapshot_path(folder, step)


def _snapshot_path(folder: Path, step: int) -> Path:
    return folder / SNAPSHOTS / f"step_{step:08d}.safetensors"


def read_model_config(folder: Path) -> ModelConfig:
    """The `ModelConfig` stored in checkpoint `folder`, with a clear error if there is none."""
    if not (folder / CONFIG).is_file():
        raise UsageError(f"{folder} is not an adjpos checkpoint: {CONFIG} is missing")
    try:
        data = json.loads((folder / CONFIG).read_text())
    except json.JSONDecodeError as err:
        raise UsageError(f"{folder / CONFIG} is not valid JSON: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or "model" not in data:
        raise UsageError(f"{folder / CONFIG} is not an adjpos model config (format={FORMAT!r})")
    return ModelConfig.from_dict(data["model"])


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, or a `ValueError` naming the file when it is
    truncated or corrupt (never a raw `SafetensorError`)."""
    try:
        return load_file(path)
    except Exception as err:  # safetensors raises its own SafetensorError for bad headers
        raise UsageError(
            f"{path} is not a readable safetensors file ({err}); it may be truncated or "
            "corrupt: save the model again"
        ) from None
