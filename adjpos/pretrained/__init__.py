"""NoPE models trained by `adjpos train` and shipped with the package: seeds of each task, and
the small language models of `adjpos.text` (``text-nope``, ``text-rope``, ``text-hybrid``, and
each at width 128: ``text-nope-d128``, ...).

Each ``TASK/seedS`` folder holds ``model.safetensors`` + ``config.json`` (the model),
``metrics.json`` (the run: task parameters, training config, evaluation history),
``train.json`` (the command that made it, its steps, wall time and held-out accuracy) and
``heldout.json`` (its exact match on 2,000 fresh held-out prompts) when it was checked; a
seed's ``snapshots/`` holds its weights during training (``load_pretrained(task, seed,
step=...)``). ``examples/train_pretrained.py`` trains them all.

A text model's ``text-LAYOUT[-d128]/seedS`` folder holds the same files (``metrics.json`` names
the token counts of the data instead of a task; the weights in float16, read back as float32;
no snapshots) and ``tokenizer.json``, the tokenizer it was trained with;
``examples/train_text.py`` trains them and copies finished runs here (``--install``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adjpos.models import load_model
from adjpos.tasks import TASKS, Task, get_task
from adjpos.text.recipe import LAYOUTS, WIDTHS, sized
from adjpos.validation import UsageError

HERE = Path(__file__).resolve().parent
TEXT_MODELS = tuple(f"text-{sized(layout, d)}" for d in WIDTHS for layout in LAYOUTS)
# The one recipe of each task (``examples/train_pretrained.py`` trains seeds 0, 1 and 2 with
# it; they differ only in the seed): 4 layers with 8 heads, AdamW at 1e-3 (warmup 500, cosine
# decay to 0.1x), width 64, batches of 64, evaluation every 250 steps on 1,000 prompts, stop at
# 99.9% there. The loss is the answer's, except ordering: every real next token ("sequence"; with
# the answer's loss, seeds of every width tried stalled at chance beyond one digit).
RECIPE_MODEL = {"n_layers": 4, "d_model": 64, "n_heads": 8}
RECIPE_TRAIN = dict(lr=1e-3, batch_size=64, warmup_steps=500, eval_every=250)
RECIPE_TRAIN |= dict(target_accuracy=0.999, loss="answer")
RECIPE_LOSS = {"ordering": "sequence"}
RECIPE_STEPS = {"addition": 24_000, "reversal": 20_000, "indexing": 20_000, "ordering": 20_000}
# Earlier recipes, each of which failed on some seed (docs/pretrained.md), kept so that the
# failures can be rerun (``examples/train_pretrained.py --recipe NAME``). "fast": width 64, 4
# heads, AdamW at 3e-3 (warmup 200), stop at 99.5%; "heads8": the same with 8 heads; "wide":
# width 128, 8 heads, 1e-3 (warmup 500), evaluation every 500 steps, stop at 99.5%; "h8": the
# recipe above with the answer's loss for every task.
FAST_MODEL = {"n_layers": 4, "d_model": 64, "n_heads": 4}
FAST_TRAIN = dict(lr=3e-3, batch_size=64, warmup_steps=200, eval_every=250, target_accuracy=0.995)
WIDE_MODEL = {"n_layers": 4, "d_model": 128, "n_heads": 8}
WIDE_TRAIN = {**RECIPE_TRAIN, "eval_every": 500, "target_accuracy": 0.995}
WIDE_STEPS = {"addition": 20_000, "reversal": 12_000, "indexing": 20_000, "ordering": 12_000}
EARLIER = {
    "fast": (FAST_MODEL, FAST_TRAIN, RECIPE_STEPS),
    "heads8": ({**FAST_MODEL, "n_heads": 8}, FAST_TRAIN, RECIPE_STEPS),
    "wide": (WIDE_MODEL, WIDE_TRAIN, WIDE_STEPS),
    "h8": (RECIPE_MODEL, RECIPE_TRAIN, RECIPE_STEPS),
}


def recipe(task: str, name: str | None = None) -> dict[str, Any]:
    """The `adjpos train` options of `task`'s recipe (every shipped seed of it was trained with
    it); with `name`, of that earlier recipe (`EARLIER`: 'fast', 'heads8', 'wide', 'h8').

    >>> recipe("ordering")["loss"], recipe("reversal")["loss"]
    ('sequence', 'answer')
    >>> recipe("reversal", "fast")["lr"]
    0.003

    Raises:
        ValueError: `name` is not an earlier recipe, or `task` is not a task.
    """
    if name is not None and name not in EARLIER:
        raise UsageError(f"unknown recipe {name!r}; allowed: None (the recipe), {sorted(EARLIER)}")
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r}; allowed: {list(TASKS)}")
    if name is None:
        loss = {"loss": RECIPE_LOSS.get(task, RECIPE_TRAIN["loss"])}
        return {**RECIPE_MODEL, **RECIPE_TRAIN, **loss, "steps": RECIPE_STEPS[task]}
    model, train, steps = EARLIER[name]
    return {**model, **train, "steps": steps[task]}


def available_pretrained() -> list[str]:
    """Names of the tasks that have a shipped model (seed 0 at least)."""
    return [name for name in TASKS if pretrained_seeds(name)]


def pretrained_seeds(name: str, family: str | None = None) -> list[int]:
    """The seeds shipped for task `name` (empty when none or `name` is unknown); with
    `family` (e.g. "smollm3"), those of that Hugging Face architecture trained on it."""
    prefix = "seed" if family is None else f"{family}_seed"
    folders = (HERE / name).glob(f"{prefix}*") if name in (*TASKS, *TEXT_MODELS) else ()
    found = [f for f in folders if (f / "model.safetensors").is_file()]
    return sorted(int(f.name[len(prefix) :]) for f in found if f.name[len(prefix) :].isdigit())


def pretrained_folder(name: str, seed: int = 0, family: str | None = None) -> Path:
    """The folder of the shipped model of task `name` and `seed` (of Hugging Face
    architecture `family`, when given).

    Raises:
        ValueError: no such model is shipped (the message lists the tasks and seeds that are).
    """
    if seed not in pretrained_seeds(name, family):
        shipped = {task: pretrained_seeds(task, family) for task in (*TASKS, *TEXT_MODELS)}
        which = "" if family is None else f" of family {family!r}"
        raise UsageError(
            f"no shipped model{which} for task {name!r} with seed {seed!r}; shipped (task: "
            f"seeds): { {task: seeds for task, seeds in shipped.items() if seeds} }"
        )
    return HERE / name / (f"seed{seed}" if family is None else f"{family}_seed{seed}")


def load_pretrained(
    name: str,
    seed: int = 0,
    *,
    device: str | None = None,
    n_ctx: int | None = None,
    step: int | None = None,
    family: str | None = None,
) -> tuple[Any, Any]:
    """The shipped trained NoPE model for task `name` and `seed`, and the task it was
    trained on; with `family` (e.g. "smollm3"), the all-NoPE Hugging Face model of that
    architecture trained on it, bridged (`adjpos.load_hf`). For a text model (`name` one of
    `TEXT_MODELS`), the model and its tokenizer (`adjpos.text.load_tokenizer`).

    Example:
        >>> from adjpos import predict
        >>> model, task = load_pretrained("addition", seed=0)
        >>> predict(model, task, ["123+456="])
        ['579']

    `n_ctx` runs the model on longer sequences than it was trained on (see `load_model`);
    `step` loads a training snapshot (`adjpos.models.snapshot_steps` of the model's
    `pretrained_folder` lists them).

    Raises:
        ValueError: no model is shipped for `name` and `seed`, or no snapshot of `step`
            (the messages list those that are).
    """
    folder = pretrained_folder(name, seed, family)
    model = load_model(folder, device=device, n_ctx=n_ctx, step=step)
    if name in TEXT_MODELS:
        from adjpos.text.tokenizer import load_tokenizer

        return model, load_tokenizer(folder)
    return model, trained_task(folder)


def trained_task(folder: str | Path) -> Task:
    """The task (with its parameters) a model folder written by `adjpos train` was trained on.

    Raises:
        ValueError: the folder has no ``metrics.json`` naming a task.
    """
    path = Path(folder) / "metrics.json"
    try:
        record = json.loads(path.read_text())["task"]
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(
            f"{str(folder)!r} has no metrics.json naming the task it was trained on (as "
            "adjpos train writes); name the task with --task"
        ) from None
    return get_task(record["name"], **{k: v for k, v in record.items() if k != "name"})


def pretrained_info(name: str, seed: int = 0, family: str | None = None) -> dict[str, Any]:
    """The shipped model's ``train.json`` (command, steps, seconds, accuracy on its eval
    prompts) and, as ``"heldout"``, its ``heldout.json`` when it was checked."""
    folder = pretrained_folder(name, seed, family)
    info = json.loads((folder / "train.json").read_text())
    if (folder / "heldout.json").is_file():
        info["heldout"] = json.loads((folder / "heldout.json").read_text())
    return info


CHECK_PROMPTS, CHECK_SEED, PASS = 2000, 2026, 0.99


def heldout_check(model: Any, task: Task, n_prompts: int = CHECK_PROMPTS) -> dict[str, Any]:
    """Exact match on `n_prompts` fresh held-out prompts (test split, seed 2026, which no
    training run uses): what every shipped model's ``heldout.json`` holds."""
    import torch

    from adjpos.training import evaluate

    generator = torch.Generator().manual_seed(CHECK_SEED)
    prompts = task.draw_prompts(n_prompts, generator=generator, split="test")
    accuracy, per_length = evaluate(model, task, prompts)
    found = {"accuracy": accuracy, "n_prompts": n_prompts, "prompt_seed": CHECK_SEED}
    return found | {"per_length_accuracy": per_length, "passes": accuracy >= PASS}
