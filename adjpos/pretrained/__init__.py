"""NoPE models trained by `adjpos train` and shipped with the package, one per task.

Each folder holds ``model.safetensors`` + ``config.json`` (the model), ``metrics.json`` (the
run: task parameters, training config, evaluation history) and ``train.json`` (the command
that made it, its steps, wall time and held-out accuracy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adjpos.models import load_model
from adjpos.tasks import TASKS, Task, get_task

HERE = Path(__file__).resolve().parent


def available_pretrained() -> list[str]:
    """Names of the tasks that have a shipped model."""
    return [name for name in TASKS if (HERE / name / "model.safetensors").is_file()]


def load_pretrained(
    name: str, *, device: str | None = None, n_ctx: int | None = None
) -> tuple[Any, Task]:
    """The shipped trained NoPE model for task `name`, and the task it was trained on.

    Example:
        >>> model, task = load_pretrained("addition")  # doctest: +SKIP
        >>> predict(model, task, ["123+456="])  # doctest: +SKIP
        ['579']

    `n_ctx` runs the model on longer sequences than it was trained on (see `load_model`).

    Raises:
        ValueError: no model is shipped for `name` (the message lists those that are).
    """
    if name not in available_pretrained():
        raise ValueError(f"no shipped model for {name!r}; available: {available_pretrained()}")
    folder = HERE / name
    return load_model(folder, device=device, n_ctx=n_ctx), trained_task(folder)


def trained_task(folder: str | Path) -> Task:
    """The task (with its parameters) a model folder written by `adjpos train` was trained on.

    Raises:
        ValueError: the folder has no ``metrics.json`` naming a task.
    """
    path = Path(folder) / "metrics.json"
    try:
        record = json.loads(path.read_text())["task"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(
            f"{str(folder)!r} has no metrics.json naming the task it was trained on (as "
            "adjpos train writes); name the task with --task"
        ) from None
    return get_task(record["name"], **{k: v for k, v in record.items() if k != "name"})


def pretrained_info(name: str) -> dict[str, Any]:
    """The shipped model's ``train.json``: command, steps, seconds, held-out accuracy."""
    if name not in available_pretrained():
        raise ValueError(f"no shipped model for {name!r}; available: {available_pretrained()}")
    return json.loads((HERE / name / "train.json").read_text())
