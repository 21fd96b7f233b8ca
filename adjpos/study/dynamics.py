"""Training dynamics: the trained models' snapshots, from the initial weights to the end.

Each snapshot (``load_model(folder, step=s)``; the shipped models keep seed 0's, log-spaced,
step 0 included) is measured like the finished model: exact match on fresh held-out prompts,
and per layer the adjacency score (the study's and the centred prompt-row view), the variance
ratio and its Spearman correlation with position, and the gain of the residual's logistic
position probe over layer 0. Every value has a 95% bootstrap interval (over prompts or
sequences; the probe's spread over folds is its own). This answers when the pattern appears,
peaks or fades while the model learns its task.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from adjpos.capture import capture_residuals
from adjpos.metrics import position_variance
from adjpos.models import load_model, snapshot_steps
from adjpos.probes import probe_positions, sequences_of_length
from adjpos.stats import bootstrap_interval, variance_summary
from adjpos.study.sizes import StudySizes
from adjpos.study.trained import sequence_views
from adjpos.tables import Table
from adjpos.training import predict

DYNAMICS = Table(
    task="string",
    seed="int64",
    step="int64",
    layer="Int64",
    metric="string",
    value="float64",
    low="float64",
    high="float64",
)
# metric -> the adjacency view it reads (rows, centred, ties); see adjpos.study.trained.
ADJACENCY_METRICS = {
    "adjacency": ("all", False, "strict"),
    "adjacency_prompt_centred": ("prompt", True, "half"),
}
METRICS = ("accuracy", *ADJACENCY_METRICS, "variance_ratio", "variance_spearman", "probe_gain")


def dynamics_unit(models: Any, sizes: StudySizes, name: str) -> list[dict[str, Any]]:
    """One unit of the dynamics stage: every snapshot of task `name`'s seeds, as records."""
    rows = []
    for seed in sizes.dynamics_seeds:
        if seed not in models.seeds(name, sizes):
            continue
        folder = models.folder(name, seed)
        task = models.trained(name, seed)[1]
        for step in snapshot_steps(folder):  # none: reported as not measured
            model = load_model(folder, step=step, device=models.device)
            key = {"task": name, "seed": seed, "step": step}
            rows += [{**key, **r} for r in measure_snapshot(model, task, sizes)]
    return DYNAMICS.frame(rows).to_dict("records")


def measure_snapshot(model: Any, task: Any, sizes: StudySizes) -> list[dict[str, Any]]:
    """Every metric of one snapshot: {layer, metric, value, low, high} records."""
    gen = torch.Generator().manual_seed(5)
    prompts = task.draw_prompts(sizes.dynamics_prompts, generator=gen, split="test")
    hits = [a == task.solve(p) for p, a in zip(prompts, predict(model, task, prompts), strict=True)]
    rows = [_row(None, "accuracy", np.array(hits, dtype=float))]
    batch = task.sample(sizes.dynamics_sequences, generator=gen, split="test")
    n = int(batch.lengths.max())
    tokens, answer = batch.tokens[:, :n], batch.answer_rows[:, :n]
    masks = {"all": None, "prompt": (torch.arange(n) < batch.lengths[:, None]) & ~answer}
    masks["answer"] = answer
    for layer, views, _ in sequence_views(model, tokens, batch.lengths, masks):
        for metric, view in ADJACENCY_METRICS.items():
            rows.append(_row(layer, metric, views[view]))
    same = sequences_of_length(task, sizes.dynamics_sequences, generator=gen)
    variance = position_variance(capture_residuals(model, same).double()).numpy()
    for layer, values in enumerate(variance):
        summary = variance_summary(values)
        for metric, key in (("variance_ratio", "ratio"), ("variance_spearman", "spearman")):
            rows.append(
                {
                    "layer": layer,
                    "metric": metric,
                    "value": summary[key],
                    "low": summary[f"{key}_low"],
                    "high": summary[f"{key}_high"],
                }
            )
    return rows + _probe_gains(model, same, sizes)


def _probe_gains(model: Any, tokens: torch.Tensor, sizes: StudySizes) -> list[dict[str, Any]]:
    """Logistic position-probe accuracy on the raw residual, minus layer 0's, by layer
    (low/high: the gain -/+ twice the score's standard error over the folds; one seed of
    folds, to keep a snapshot cheap)."""
    result = probe_positions(
        model, tokens, features="resid", probe="logistic", cv=sizes.cv, repeats=1, progress=False
    )
    scores = {s.layer: s for s in result.scores if s.metric == "accuracy"}
    base = scores[0].value
    rows = []
    for layer, score in sorted(scores.items()):
        spread = 2 * score.sem if score.sem == score.sem else 0.0  # NaN: not measured
        gain = score.value - base
        rows.append(
            {
                "layer": layer,
                "metric": "probe_gain",
                "value": gain,
                "low": gain - spread,
                "high": gain + spread,
            }
        )
    return rows


def _row(layer: int | None, metric: str, per_unit: np.ndarray) -> dict[str, Any]:
    kept = per_unit[~np.isnan(per_unit)]
    low, high = bootstrap_interval(kept, n_boot=1000)
    return {"layer": layer, "metric": metric, "value": float(kept.mean()), "low": low, "high": high}


def dynamics_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Per task and seed: the first step at 99% exact match, and for each layer >= 1 and
    metric its value at the initial weights, its peak (the step of the highest value) and
    its end, with 'appears' (end above start), 'fades' (peak above end) judged by the
    intervals being apart."""
    out, accuracy = [], []
    for (task, seed), group in table.groupby(["task", "seed"], sort=False):
        acc = group[group["metric"] == "accuracy"].sort_values("step")
        reached = acc[acc["value"] >= 0.99]["step"]
        accuracy.append(
            {
                "task": task,
                "seed": int(seed),
                "first_step_99": None if reached.empty else int(reached.iloc[0]),
                "final_accuracy": float(acc["value"].iloc[-1]),
                "final_step": int(acc["step"].iloc[-1]),
            }
        )
        layered = group[group["layer"].notna() & (group["layer"] >= 1)]
        for (metric, layer), rows in layered.groupby(["metric", "layer"], sort=False):
            rows = rows.sort_values("step")
            start, end = rows.iloc[0], rows.iloc[-1]
            peak = rows.loc[rows["value"].idxmax()]
            out.append(
                {
                    "task": task,
                    "seed": int(seed),
                    "metric": metric,
                    "layer": int(layer),
                    "start": float(start["value"]),
                    "peak": float(peak["value"]),
                    "peak_step": int(peak["step"]),
                    "end": float(end["value"]),
                    "rises": bool(end["low"] > start["high"]),
                    "falls": bool(end["high"] < start["low"]),
                    "fades_after_peak": bool(end["high"] < peak["low"]),
                }
            )
    return {"accuracy": accuracy, "trajectories": out, "tasks": sorted(table["task"].unique())}
