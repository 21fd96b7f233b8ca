"""The models every claim of the study measures: the trained NoPE model of each task and seed,
and random-init controls of the same architecture (of a trained seed: its own starting weights).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from adjpos.models import ModelConfig, build_model, load_model
from adjpos.pretrained import load_pretrained, pretrained_folder, pretrained_seeds, trained_task
from adjpos.seeds import derived_generator
from adjpos.tasks import TASKS, Task
from adjpos.training import TrainConfig, train

# The model labels of the study's tables.
TRAINED, RANDOM, LEARNED = "trained", "random-init", "random-init, learned positions"
STUDY_SEED = 0  # every draw of the study (prompts, sequences) is a stream derived from it


@dataclass
class Models:
    """The trained model of each task (shipped, or trained into `train_dir`) and its controls.

    Args:
        device: where every model runs.
        train_dir: train the four models there from the shipped recipes (resumable) instead
            of loading the shipped ones.
        train_steps: with `train_dir`, the steps to train (None: the recipe's).
    """

    device: str = "cpu"
    train_dir: Path | None = None
    train_steps: int | None = None
    _trained: dict[tuple[str, int], tuple[Any, Task]] = field(default_factory=dict)
    _controls: dict[tuple[str, int, str], Any] = field(default_factory=dict)

    def fresh(self) -> Models:
        """The same models, none loaded yet: what a unit of work carries to another process."""
        return Models(device=self.device, train_dir=self.train_dir, train_steps=self.train_steps)

    def trained(self, name: str, seed: int = 0) -> tuple[Any, Task]:
        """The trained NoPE model of task `name` and `seed`, and its task."""
        if (name, seed) not in self._trained:
            if self.train_dir is None:
                self._trained[name, seed] = load_pretrained(name, seed, device=self.device)
            else:
                self._trained[name, seed] = self._train(name, seed)
        return self._trained[name, seed]

    def seeds(self, name: str, sizes: Any) -> tuple[int, ...]:
        """The trained seeds of task `name` the stages measure (`sizes.trained_seeds`, or
        every shipped seed; seed 0 when this run trains its models)."""
        if sizes.trained_seeds is not None:
            return sizes.trained_seeds
        return tuple(pretrained_seeds(name)) if self.train_dir is None else (0,)

    def folder(self, name: str, seed: int = 0) -> Path:
        """The checkpoint folder of the trained model of task `name` and `seed` (its
        snapshots are there)."""
        if self.train_dir is None:
            return pretrained_folder(name, seed)
        self.trained(name, seed)
        return self.train_dir / name / f"seed{seed}"

    def control(self, name: str, seed: int, *, positional: str = "none") -> Any:
        """A random-init model with init `seed`, `positional` and the architecture of the
        trained model of `seed` (with no positions, that seed's own starting weights), built
        once and shared."""
        key = (name, seed, positional)
        if key not in self._controls:
            cfg = self.trained(name, seed)[0].adjpos_config
            cfg = cfg.with_changes(seed=seed, positional=positional)
            self._controls[key] = build_model(cfg, device=self.device)
        return self._controls[key]

    def _train(self, name: str, seed: int) -> tuple[Any, Task]:
        """Train from the shipped recipe of `seed` (architecture, task and TrainConfig);
        resumable."""
        shipped = pretrained_folder(name, seed)
        run, task = json.loads((shipped / "metrics.json").read_text()), trained_task(shipped)
        recipe = {**run["train"], "device": self.device}
        if self.train_steps is not None:  # smaller sizes: the same recipe, a few steps
            steps = self.train_steps
            recipe.update(steps=steps, warmup_steps=steps // 5, eval_every=steps, eval_size=64)
        folder = self.train_dir / name / f"seed{seed}"
        model = build_model(ModelConfig.from_dict(run["model"]), device=self.device)
        train(model, task, TrainConfig(**recipe), out_dir=folder, resume=True, progress=None)
        return load_model(folder, device=self.device), task


def variants(models: Models, sizes: Any, name: str, *, learned: bool = True):
    """(label, seed, model) of task `name`, seed by seed: each trained seed, its own initial
    weights (the random-init NoPE control it is paired with) and, with `learned`, the same
    architecture and seed with learned positions."""
    for seed in models.seeds(name, sizes):
        yield TRAINED, seed, models.trained(name, seed)[0]
        yield RANDOM, seed, models.control(name, seed)
        if learned:
            yield LEARNED, seed, models.control(name, seed, positional="learned")


def layer_states(models: Models, sizes: Any):
    """Every layer's states (float64, [sequence, position, d_model]) of each trained seed and
    its own initial weights (`variants`) on the same held-out sequences of one length per
    task: (key {task, model, seed, layer}, tokens, states)."""
    from adjpos.capture import capture_residuals
    from adjpos.probes import sequences_of_length

    for name in TASKS:
        tokens = sequences_of_length(models.trained(name)[1], sizes.n_sequences, generator=gen(3))
        for label, seed, model in variants(models, sizes, name, learned=False):
            for layer, states in enumerate(capture_residuals(model, tokens).double()):
                yield {"task": name, "model": label, "seed": seed, "layer": layer}, tokens, states


def gen(*labels: int | str) -> torch.Generator:
    """A fresh generator for one draw of the study, named by `labels`: a stream derived from
    `STUDY_SEED` (``adjpos.seeds.derived_generator(STUDY_SEED, "study", *labels)``)."""
    return derived_generator(STUDY_SEED, "study", *labels)


def rounded(matrix: torch.Tensor) -> list[list[float]]:
    """A matrix as nested lists rounded to 5 decimals (what the JSON of a heatmap holds)."""
    return [[round(v, 5) for v in row] for row in matrix.tolist()]
