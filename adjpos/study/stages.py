"""The measurements of the study, one function per stage, each returning tidy tables.

Every stage reads its models through `Models` (the four trained NoPE models, and random-init
controls of the same architecture) and returns pandas DataFrames with the columns declared
here; `adjpos.study.pipeline` writes them, `adjpos.study.numbers` turns them into the numbers
each claim needs, and `adjpos.study.figures` draws them. The example scripts call these same
functions, so every figure has one source.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from adjpos.capture import capture_residuals
from adjpos.interventions import intervention_table
from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.models import ModelConfig, build_model, load_model
from adjpos.pretrained import (
    load_pretrained,
    pretrained_folder,
    pretrained_info,
    pretrained_seeds,
)
from adjpos.probes import ProbeResult, probe_positions, reconstruct_order, sequences_of_length
from adjpos.stats import bootstrap_interval
from adjpos.study.numbers import RANDOM, TRAINED
from adjpos.study.sizes import StudySizes
from adjpos.study.sweep import SweepResult, sweep
from adjpos.tables import Table
from adjpos.tasks import TASKS, Task, get_task
from adjpos.tasks.vocab import EOS
from adjpos.theory import compare_first_layer, effective_width, predicted_adjacency
from adjpos.training import TrainConfig, predict, train

# The paper's example prompt of each task (PAPER.md), drawn as the cosine heatmaps.
EXAMPLE_PROMPTS = {
    "addition": "123+456=",
    "reversal": "rev(1234)=",
    "indexing": "wherex(134504392,4)=",
    "ordering": "ord(5831,3851)=",
}

MODELS = Table(
    task="string",
    seed="int64",
    source="string",
    accuracy="float64",
    accuracy_low="float64",
    accuracy_high="float64",
    n_prompts="int64",
    parameters="int64",
    n_layers="int64",
    d_model="int64",
    n_heads="int64",
    train_command="string",
)
COSINE_SCORES = Table(task="string", model="string", layer="int64", adjacency="float64")
THEORY = Table(
    init_range="float64",
    seed="int64",
    site="string",
    residual_ratio="float64",
    measured_adjacency="float64",
    predicted_adjacency="float64",
    effective_width="float64",
    predicted_effective="float64",
    entropy_ratio="float64",
    mean_abs_error="float64",
)


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
    _controls: dict[tuple[str, int, str, int], Any] = field(default_factory=dict)

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

    def seeds(self, name: str, sizes: StudySizes) -> tuple[int, ...]:
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

    def control(
        self, name: str, seed: int, *, positional: str = "none", like: int | None = None
    ) -> Any:
        """A random-init model with init `seed`, `positional` and the architecture of the
        trained model of seed `like` (default: of the same seed, seed 0's where there is
        none; for a trained seed, its own starting weights), built once and shared."""
        trained = like if like is not None else seed if self._has_seed(name, seed) else 0
        key = (name, seed, positional, trained)
        if key not in self._controls:
            cfg = self.trained(name, trained)[0].adjpos_config
            cfg = cfg.with_changes(seed=seed, positional=positional)
            self._controls[key] = build_model(cfg, device=self.device)
        return self._controls[key]

    def _has_seed(self, name: str, seed: int) -> bool:
        if self.train_dir is None:
            return seed in pretrained_seeds(name)
        return seed == 0 or (name, seed) in self._trained

    def _train(self, name: str, seed: int) -> tuple[Any, Task]:
        """Train from the shipped recipe of `seed` (architecture, task and TrainConfig);
        resumable."""
        run = json.loads((pretrained_folder(name, seed) / "metrics.json").read_text())
        task = get_task(name, **{k: v for k, v in run["task"].items() if k != "name"})
        recipe = {**run["train"], "device": self.device}
        if self.train_steps is not None:  # smaller sizes: the same recipe, a few steps
            steps = self.train_steps
            recipe.update(steps=steps, warmup_steps=steps // 5, eval_every=steps, eval_size=64)
        folder = self.train_dir / name / f"seed{seed}"
        model = build_model(ModelConfig.from_dict(run["model"]), device=self.device)
        train(model, task, TrainConfig(**recipe), out_dir=folder, resume=True, progress=None)
        return load_model(folder, device=self.device), task


def measure_models(models: Models, sizes: StudySizes) -> pd.DataFrame:
    """Held-out exact-match accuracy of each trained model (every seed), and where it came
    from."""
    rows = []
    for name, seed in ((n, s) for n in TASKS for s in models.seeds(n, sizes)):
        model, task = models.trained(name, seed)
        prompts = task.draw_prompts(sizes.n_eval, generator=_gen(1), split="test")
        answers = predict(model, task, prompts)
        hits = [a == task.solve(p) for p, a in zip(prompts, answers, strict=True)]
        low, high = bootstrap_interval(hits)
        cfg = model.adjpos_config
        shipped = models.train_dir is None
        rows.append(
            {
                "task": name,
                "seed": seed,
                "source": "shipped" if shipped else "trained by this run",
                "accuracy": sum(hits) / len(hits),
                "accuracy_low": low,
                "accuracy_high": high,
                "n_prompts": len(prompts),
                "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "n_layers": cfg.n_layers,
                "d_model": cfg.d_model,
                "n_heads": cfg.n_heads,
                "train_command": pretrained_info(name, seed)["command"] if shipped else None,
            }
        )
    return MODELS.frame(rows)


def measure_cosine(models: Models) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Self-cosine matrices of each task's example sequence at every layer, trained and
    random-init: their adjacency scores, and the matrices (rounded) for the heatmaps."""
    scores, panels = [], []
    for name in TASKS:
        model, task = models.trained(name)
        text = EXAMPLE_PROMPTS[name] + task.solve(EXAMPLE_PROMPTS[name]) + EOS
        tokens = task.encode(text)[None]
        for label, m in ((TRAINED, model), (RANDOM, models.control(name, seed=0))):
            sims = cosine_matrix(capture_residuals(m, tokens).float())[:, 0]
            for layer, sim in enumerate(sims):
                score = float(adjacency_probability(sim.double()))
                scores.append({"task": name, "model": label, "layer": layer, "adjacency": score})
                panels.append(
                    {
                        "task": name,
                        "model": label,
                        "layer": layer,
                        "text": text,
                        "matrix": _round(sim),
                    }
                )
    return COSINE_SCORES.frame(scores), panels


@dataclass(frozen=True)
class ProbeSubject:
    """One probed model: a trained model or a random-init copy of its architecture, and the
    held-out sequences of its task (the same for the copies)."""

    label: str
    task: str
    kind: str  # TRAINED or RANDOM
    seed: int | None  # the copy's initialisation seed (None: the trained model)
    model: Any
    tokens: torch.Tensor


def probe_subjects(models: Models, sizes: StudySizes) -> Iterator[ProbeSubject]:
    """Each trained model on held-out sequences of its task (one length), then random-init
    copies of its architecture (`sizes.probe_controls` seeds) on the very same sequences."""
    for _, task, seed in probe_labels(sizes):
        yield probe_subject(models, sizes, task, seed)


def probe_labels(sizes: StudySizes) -> list[tuple[str, str, int | None]]:
    """(label, task, seed) of every probed model, in order: each trained model (seed None),
    then its random-init copies (`sizes.probe_controls`)."""
    labels = []
    for name in TASKS:
        labels.append((f"{TRAINED} {name}", name, None))
        labels += [(f"{RANDOM} {name} (seed {s})", name, s) for s in sizes.probe_controls]
    return labels


def probe_subject(models: Models, sizes: StudySizes, task: str, seed: int | None) -> ProbeSubject:
    """The trained model of `task` (seed None) or its random-init copy with `seed`, on the
    task's held-out sequences of one length (the same for all of them)."""
    model, spec = models.trained(task)
    tokens = sequences_of_length(spec, sizes.n_probe_sequences, generator=_gen(4))
    if seed is None:
        return ProbeSubject(f"{TRAINED} {task}", task, TRAINED, None, model, tokens)
    label = f"{RANDOM} {task} (seed {seed})"
    copy = models.control(task, seed, like=0)  # the probed trained model is seed 0
    return ProbeSubject(label, task, RANDOM, seed, copy, tokens)


def probe_unit(models: Models, sizes: StudySizes, task: str, seed: int | None) -> str:
    """One unit of the probing stage, run wherever the engine puts it: its result as JSON
    (`ProbeResult.from_json` reads it back exactly)."""
    return measure_probes(probe_subject(models, sizes, task, seed), sizes).to_json()


def causal_unit(models: Models, sizes: StudySizes, name: str) -> list[dict[str, Any]]:
    """One unit of the causal stage: the causal tests of task `name`, as records."""
    return measure_interventions(models, sizes, name).to_dict("records")


def measure_probes(subject: ProbeSubject, sizes: StudySizes) -> ProbeResult:
    """Every feature set with every probe, and order reconstruction."""
    common = {"model_name": subject.label, "progress": False}
    result = probe_positions(
        subject.model,
        subject.tokens,
        features=list(sizes.features),
        probe=list(sizes.probes),
        cv=sizes.cv,
        repeats=sizes.repeats,
        **common,
    )
    return result + reconstruct_order(subject.model, subject.tokens, **common)


def measure_interventions(models: Models, sizes: StudySizes, name: str) -> pd.DataFrame:
    """The causal tests on the trained model of task `name` (`intervention_table`)."""
    model, task = models.trained(name)
    return intervention_table(
        model,
        task,
        layers=sizes.intervention_layers,
        interventions=sizes.interventions,
        n_prompts=sizes.intervention_prompts,
        model_name=TRAINED,
        model_seed=model.adjpos_config.seed,
        progress=False,
    )


def measure_sweep(
    out_dir: Path,
    sizes: StudySizes,
    *,
    workers: int | None,
    device: str = "cpu",
    engine: str = "process",
    address: str | None = None,
) -> SweepResult:
    """The random-init sweep (its own run folder, resumable cell by cell)."""
    return sweep(
        list(sizes.grid),
        seeds=list(sizes.sweep_seeds),
        n_sequences=sizes.sweep_sequences,
        seq_len=sizes.sweep_len,
        out_dir=out_dir,
        workers=workers,
        base=sweep_base(sizes),
        device=device,
        engine=engine,
        address=address,
    )


def sweep_base(sizes: StudySizes) -> ModelConfig:
    """The config every cell of the study's sweep starts from."""
    return ModelConfig(n_layers=sizes.sweep_layers)


def measure_theory(sizes: StudySizes, device: str) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """First-layer measurements against the prediction, across init scales and seeds; and the
    measured and predicted matrices at `sizes.theory_heatmap_scale` (first seed)."""
    rows, matrices = [], []
    n_pos, width = 32, 64
    for scale in sizes.theory_scales:
        for seed in sizes.theory_seeds:
            cfg = ModelConfig(n_layers=1, d_model=width, init_range=scale, seed=seed)
            model = build_model(cfg, device=device)
            keys = torch.rand(sizes.theory_sequences, cfg.d_vocab, generator=_gen(100 + seed))
            tokens = keys.argsort(dim=1)[:, :n_pos]  # distinct tokens: independent values
            d_eff = effective_width(model, tokens)
            for site in ("attn_out", "resid_mid"):
                comp = compare_first_layer(model, tokens, site=site)
                predicted, at_effective = (
                    predicted_adjacency(
                        n_pos,
                        d_model=d,
                        residual_ratio=comp.residual_ratio,
                        n_samples=sizes.theory_samples,
                        generator=_gen(seed),
                    )
                    for d in (width, max(1, round(d_eff)))
                )
                rows.append(
                    {
                        "init_range": scale,
                        "seed": seed,
                        "site": site,
                        "residual_ratio": comp.residual_ratio,
                        "measured_adjacency": comp.measured_adjacency,
                        "predicted_adjacency": float(predicted[0]),
                        "effective_width": d_eff,
                        "predicted_effective": float(at_effective[0]),
                        "entropy_ratio": comp.entropy_ratio,
                        "mean_abs_error": comp.mean_abs_error,
                    }
                )
                if seed == sizes.theory_seeds[0] and scale == sizes.theory_heatmap_scale:
                    matrices.append(
                        {"site": site, "kind": "measured", "matrix": _round(comp.measured)}
                    )
                    matrices.append(
                        {"site": site, "kind": "predicted", "matrix": _round(comp.predicted)}
                    )
    return THEORY.frame(rows), matrices


def _round(matrix: torch.Tensor) -> list[list[float]]:
    return [[round(v, 5) for v in row] for row in matrix.tolist()]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
