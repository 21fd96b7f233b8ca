"""The measurements of `adjpos reproduce`, one function per stage; each writes its results.

Every stage reads the models through `Models` (the four trained NoPE models, and random-init
controls of the same architecture), writes plain CSV/JSON under ``results/`` and returns
nothing: the figures and the report are drawn from those files alone, so a resumed run and an
uninterrupted one give the same report.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from adjpos.capture import capture_residuals
from adjpos.metrics import cosine_matrix, position_variance
from adjpos.models import ModelConfig, build_model, load_model
from adjpos.pretrained import HERE as PRETRAINED
from adjpos.pretrained import load_pretrained, pretrained_info
from adjpos.probes import ProbeResult, probe_positions, reconstruct_order, sequences_of_length
from adjpos.runs import write_json, write_text
from adjpos.scoring import adjacency_score
from adjpos.study.sweep import sweep
from adjpos.tasks import TASKS, Task, get_task
from adjpos.tasks.vocab import EOS
from adjpos.theory import compare_first_layer, predicted_adjacency
from adjpos.training import TrainConfig, evaluate, train

# The paper's example prompt of each task (PAPER.md), drawn as the cosine heatmaps.
EXAMPLE_PROMPTS = {
    "addition": "123+456=",
    "reversal": "rev(1234)=",
    "indexing": "wherex(134504392,4)=",
    "ordering": "ord(5831,3851)=",
}
TRAINED, RANDOM, LEARNED = "trained", "random-init", "random-init, learned positions"


@dataclass
class Models:
    """The trained model of each task (shipped, or trained into ``models/``) and its controls."""

    out: Path
    device: str
    train: bool
    train_steps: int | None
    _cache: dict[str, tuple[Any, Task]] = field(default_factory=dict)
    _controls: dict[tuple[str, int, str], Any] = field(default_factory=dict)

    def trained(self, name: str) -> tuple[Any, Task]:
        """The trained NoPE model of task `name`, and its task."""
        if name not in self._cache:
            if self.train:
                self._cache[name] = self._train(name)
            else:
                self._cache[name] = load_pretrained(name, device=self.device)
        return self._cache[name]

    def control(self, name: str, seed: int, *, positional: str = "none") -> Any:
        """A random-init model with the trained model's architecture (and `positional`),
        built once and shared by the stages."""
        key = (name, seed, positional)
        if key not in self._controls:
            cfg = self.trained(name)[0].adjpos_config.with_changes(seed=seed, positional=positional)
            self._controls[key] = build_model(cfg, device=self.device)
        return self._controls[key]

    def _train(self, name: str) -> tuple[Any, Task]:
        """Train from the shipped recipe (architecture, task and TrainConfig); resumable."""
        run = json.loads((PRETRAINED / name / "metrics.json").read_text())
        task = get_task(name, **{k: v for k, v in run["task"].items() if k != "name"})
        recipe = {**run["train"], "device": self.device}
        if self.train_steps is not None:  # --quick: the same recipe, a few steps
            steps = self.train_steps
            recipe.update(steps=steps, warmup_steps=steps // 5, eval_every=steps, eval_size=64)
        folder = self.out / "models" / name
        model = build_model(ModelConfig.from_dict(run["model"]), device=self.device)
        train(model, task, TrainConfig(**recipe), out_dir=folder, resume=True, progress=None)
        return load_model(folder, device=self.device), task


def run_models(models: Models, results: Path, sizes: dict[str, Any]) -> None:
    """Held-out exact-match accuracy of each trained model, and where it came from."""
    rows = []
    for name in TASKS:
        model, task = models.trained(name)
        gen = torch.Generator().manual_seed(1)
        prompts = task.draw_prompts(sizes["n_eval"], generator=gen, split="test")
        accuracy, _ = evaluate(model, task, prompts)
        cfg = model.adjpos_config
        rows.append(
            {
                "task": name,
                "source": "trained by this run" if models.train else "shipped",
                "accuracy": accuracy,
                "n_prompts": len(prompts),
                "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "n_layers": cfg.n_layers,
                "d_model": cfg.d_model,
                "n_heads": cfg.n_heads,
                "train_command": None if models.train else pretrained_info(name)["command"],
            }
        )
    write_json(results / "models.json", rows)


def run_cosine(models: Models, results: Path) -> None:
    """Self-cosine matrices of each task's example sequence at every layer, trained and not."""
    panels = []
    for name in TASKS:
        model, task = models.trained(name)
        prompt = EXAMPLE_PROMPTS[name]
        text = prompt + task.solve(prompt) + EOS
        tokens = task.encode(text)[None]
        for label, m in ((TRAINED, model), (RANDOM, models.control(name, seed=0))):
            sims = cosine_matrix(capture_residuals(m, tokens).float())[:, 0]
            for layer, sim in enumerate(sims):
                panels.append(
                    {
                        "task": name,
                        "model": label,
                        "layer": layer,
                        "text": text,
                        "matrix": _rounded(sim),
                    }
                )
    write_json(results / "cosine_heatmaps.json", panels)


def run_adjacency(models: Models, results: Path, sizes: dict[str, Any]) -> None:
    """Adjacency score per layer on held-out task sequences: trained vs random-init controls."""
    rows = []
    for name in TASKS:
        model, task = models.trained(name)
        batch = task.sample(sizes["n_sequences"], generator=_gen(2), split="test")
        tokens = batch.tokens[:, : int(batch.lengths.max())]
        variants = [(TRAINED, None, model)]
        for seed in sizes["control_seeds"]:
            variants.append((RANDOM, seed, models.control(name, seed)))
            variants.append((LEARNED, seed, models.control(name, seed, positional="learned")))
        for label, seed, m in variants:
            scores = adjacency_score(m, tokens, lengths=batch.lengths)
            for layer, score in enumerate(scores.tolist()):
                rows.append(
                    {"task": name, "model": label, "seed": seed, "layer": layer, "adjacency": score}
                )
    write_csv(results / "adjacency_by_layer.csv", rows)


def run_variance(models: Models, results: Path, sizes: dict[str, Any]) -> None:
    """Mean variance of the hidden state over d_model, per position and layer (one length)."""
    rows = []
    for name in TASKS:
        model, task = models.trained(name)
        tokens = sequences_of_length(task, sizes["n_sequences"], generator=_gen(3))
        for label, m in ((TRAINED, model), (RANDOM, models.control(name, seed=0))):
            var = position_variance(capture_residuals(m, tokens).float()).mean(dim=1)
            for layer, per_position in enumerate(var.tolist()):
                for position, value in enumerate(per_position):
                    rows.append(
                        {
                            "task": name,
                            "model": label,
                            "layer": layer,
                            "position": position,
                            "variance": value,
                        }
                    )
    write_csv(results / "variance_by_position.csv", rows)


def run_probing(models: Models, results: Path, sizes: dict[str, Any]) -> None:
    """Position probes and order reconstruction: each trained model and one random-init model.

    Each model's result is written as soon as it is done, and a re-run skips the models
    already written (this is the longest stage).
    """
    texts = []
    for label, model, tokens in _probe_subjects(models, sizes):
        path = results / f"probes_{slug(label)}.json"
        if not path.is_file():
            write_text(path, _probe(model, tokens, label, sizes).to_json())
        texts.append(ProbeResult.from_json(path).to_csv())
    header = texts[0].splitlines(keepends=True)[0]
    body = "".join("".join(t.splitlines(keepends=True)[1:]) for t in texts)
    write_text(results / "probes.csv", header + body)


def _probe_subjects(models: Models, sizes: dict[str, Any]):
    """(label, model, tokens): held-out task sequences of one length per trained model, then
    the README's random-init model on random tokens."""
    for name in TASKS:
        model, task = models.trained(name)
        tokens = sequences_of_length(task, sizes["n_probe_sequences"], generator=_gen(4))
        yield f"{TRAINED} {name}", model, tokens
    cfg = ModelConfig(n_layers=4, d_model=64, n_heads=4)
    tokens = torch.randint(0, cfg.d_vocab, (sizes["n_probe_sequences"], 32), generator=_gen(5))
    yield f"{RANDOM} (random tokens)", build_model(cfg, device=models.device), tokens


def _probe(model: Any, tokens: torch.Tensor, label: str, sizes: dict[str, Any]) -> ProbeResult:
    common = {"model_name": label, "cv": sizes["cv"]}
    result = probe_positions(
        model, tokens, features=sizes["features"], repeats=sizes["repeats"], **common
    )
    if sizes["logistic_features"]:
        result = result + probe_positions(
            model,
            tokens,
            features=sizes["logistic_features"],
            probe="logistic",
            repeats=sizes["logistic_repeats"],
            **common,
        )
    return result + reconstruct_order(model, tokens, model_name=label)


def run_sweep(results: Path, sizes: dict[str, Any], workers: int | None) -> None:
    """The random-init sweep (its own folder, resumable cell by cell)."""
    sweep(
        sizes["grid"],
        seeds=sizes["sweep_seeds"],
        n_sequences=sizes["sweep_sequences"],
        seq_len=sizes["sweep_len"],
        out_dir=results / "sweep",
        workers=workers,
        base=ModelConfig(n_layers=sizes["sweep_layers"]),
    )


def run_theory(results: Path, sizes: dict[str, Any], device: str) -> None:
    """First-layer measurements against the prediction, across init scales and seeds."""
    rows, matrices = [], []
    n_pos, width = 32, 64
    for scale in sizes["theory_scales"]:
        for seed in sizes["theory_seeds"]:
            cfg = ModelConfig(n_layers=1, d_model=width, init_range=scale, seed=seed)
            model = build_model(cfg, device=device)
            keys = torch.rand(sizes["theory_sequences"], cfg.d_vocab, generator=_gen(100 + seed))
            tokens = keys.argsort(dim=1)[:, :n_pos]  # distinct tokens: independent values
            for site in ("attn_out", "resid_mid"):
                comp = compare_first_layer(model, tokens, site=site)
                predicted = predicted_adjacency(
                    n_pos,
                    d_model=width,
                    residual_ratio=comp.residual_ratio,
                    n_samples=sizes["theory_samples"],
                    generator=_gen(seed),
                )
                rows.append(
                    {
                        "init_range": scale,
                        "seed": seed,
                        "site": site,
                        "residual_ratio": comp.residual_ratio,
                        "measured_adjacency": comp.measured_adjacency,
                        "predicted_adjacency": float(predicted[0]),
                        "entropy_ratio": comp.entropy_ratio,
                        "mean_abs_error": comp.mean_abs_error,
                    }
                )
                if seed == sizes["theory_seeds"][0] and scale == sizes["theory_heatmap_scale"]:
                    matrices.append({"site": site, "measured": _rounded(comp.measured)})
                    matrices.append({"site": site, "predicted": _rounded(comp.predicted)})
    write_csv(results / "theory.csv", rows)
    write_json(results / "theory_matrices.json", matrices)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows with the same keys to CSV, atomically (None is written as an empty cell); read
    them back with `adjpos.study.sweep.read_sweep_csv`."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, out.getvalue())


def slug(label: str) -> str:
    """A file-name-safe form of a model label."""
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").replace("__", "_")


def _rounded(matrix: torch.Tensor) -> list[list[float]]:
    return [[round(v, 5) for v in row] for row in matrix.tolist()]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
