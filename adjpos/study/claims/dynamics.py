"""When the pattern appears: the trained models' snapshots, from the initial weights to the end.

Each snapshot (``load_model(folder, step=s)``, log-spaced, step 0 included) is measured like
the finished model: exact match on fresh held-out prompts, and per layer the adjacency score
(the study's and the centred prompt-row view), the variance ratio and its Spearman
correlation with position, and the gain of the residual's logistic position probe over
layer 0. Every value has a 95% interval (bootstrap over prompts or sequences; the probe's is
twice its standard error over folds). A trajectory rises (falls) when its end's interval lies
above (below) its start's.
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
from adjpos.stats import bootstrap_interval, compare_intervals, variance_summary
from adjpos.study import format as fmt
from adjpos.study.claim import (
    CRITERIA,
    Context,
    Criteria,
    Verdict,
    across_seeds,
    seed_agreement,
    seeds_text,
    toward,
)
from adjpos.study.views import sequence_views, task_masks
from adjpos.tables import Table
from adjpos.training import evaluate

TITLE = "When the pattern appears: training dynamics"

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
# metric -> the adjacency view it reads (rows, centred, ties); see adjpos.study.views.
ADJACENCY_METRICS = {
    "adjacency": ("all", False, "strict"),
    "adjacency_prompt_centred": ("prompt", True, "half"),
}
METRICS = ("accuracy", *ADJACENCY_METRICS, "variance_ratio", "variance_spearman", "probe_gain")
# The metrics the report tabulates and judges (dynamics.csv has them all).
SHOWN = ("adjacency", "adjacency_prompt_centred", "variance_ratio", "probe_gain")


def measure(context: Context) -> dict[str, Any]:
    """One unit per task (its seeds' snapshots), run by the engine, then the combined table."""
    table = context.per_task("dynamics", dynamics_unit, DYNAMICS)
    table = DYNAMICS.write(context.results / "dynamics.csv", table)
    return dynamics_numbers(table, context.criteria)


def dynamics_unit(models: Any, sizes: Any, name: str) -> list[dict[str, Any]]:
    """One unit of the dynamics stage: every snapshot of task `name`'s seeds, as records."""
    rows = []
    for seed in (s for s in sizes.dynamics_seeds if s in models.seeds(name, sizes)):
        folder, task = models.folder(name, seed), models.trained(name, seed)[1]
        for step in spread(snapshot_steps(folder), sizes.dynamics_snapshots):  # none: skipped
            model = load_model(folder, step=step, device=models.device)
            key = {"task": name, "seed": seed, "step": step}
            rows += [{**key, **r} for r in measure_snapshot(model, task, sizes)]
    return DYNAMICS.frame(rows).to_dict("records")


def spread(steps: list[int], count: int | None) -> list[int]:
    """`count` of `steps` evenly spread by index, the first and the last among them (all of
    them when `count` is None or not smaller).

    Example:
        >>> spread([0, 32, 64, 128, 256, 512, 900], 3)
        [0, 128, 900]
    """
    if count is None or count >= len(steps):
        return list(steps)
    picks = np.linspace(0, len(steps) - 1, count).round().astype(int)
    return [steps[i] for i in dict.fromkeys(picks.tolist())]


def measure_snapshot(model: Any, task: Any, sizes: Any) -> list[dict[str, Any]]:
    """Every metric of one snapshot: {layer, metric, value, low, high} records."""
    gen = torch.Generator().manual_seed(5)
    prompts = task.draw_prompts(sizes.dynamics_prompts, generator=gen, split="test")
    hits = evaluate(model, task, prompts, per_prompt=True)
    rows = [_row(None, "accuracy", np.asarray(hits, dtype=float))]
    batch = task.sample(sizes.dynamics_sequences, generator=gen, split="test")
    tokens, masks = task_masks(batch)
    for layer, views, _ in sequence_views(model, tokens, batch.lengths, masks):
        rows += [_row(layer, metric, views[view]) for metric, view in ADJACENCY_METRICS.items()]
    same = sequences_of_length(task, sizes.dynamics_sequences, generator=gen)
    variance = position_variance(capture_residuals(model, same).double()).numpy()
    for layer, values in enumerate(variance):
        summary = variance_summary(values)
        for metric, key in (("variance_ratio", "ratio"), ("variance_spearman", "spearman")):
            low, high = summary[f"{key}_low"], summary[f"{key}_high"]
            rows.append(
                {"layer": layer, "metric": metric, "value": summary[key], "low": low, "high": high}
            )
    return rows + _probe_gains(model, same, sizes)


def _probe_gains(model: Any, tokens: torch.Tensor, sizes: Any) -> list[dict[str, Any]]:
    """Logistic position-probe accuracy on the raw residual, minus layer 0's, by layer
    (low/high: the gain -/+ twice the score's standard error over the folds; one seed of
    folds, to keep a snapshot cheap)."""
    result = probe_positions(
        model, tokens, features="resid", probe="logistic", cv=sizes.cv, repeats=1, progress=False
    )
    scores = {s.layer: s for s in result.scores if s.metric == "accuracy"}
    rows = []
    for layer, score in sorted(scores.items()):
        spread = 2 * score.sem if score.sem == score.sem else 0.0  # NaN: not measured
        gain = score.value - scores[0].value
        rows.append(
            {"layer": layer, "metric": "probe_gain", "value": gain}
            | {"low": gain - spread, "high": gain + spread}
        )
    return rows


def _row(layer: int | None, metric: str, per_unit: np.ndarray) -> dict[str, Any]:
    kept = per_unit[~np.isnan(per_unit)]
    low, high = bootstrap_interval(kept, n_boot=CRITERIA.n_boot)
    return {"layer": layer, "metric": metric, "value": float(kept.mean()), "low": low, "high": high}


def dynamics_numbers(table: pd.DataFrame, criteria: Criteria | None = None) -> dict[str, Any]:
    """Per task and seed: the first step at `criteria.solved` exact match, and for each layer
    >= 1 and metric its value at the initial weights, its peak and its end; 'rises' / 'falls'
    (end against start) and 'fades_after_peak' judged by the intervals being apart."""
    solved = (criteria or CRITERIA).solved
    out, accuracy = [], []
    for (task, seed), group in table.groupby(["task", "seed"], sort=False):
        acc = group[group["metric"] == "accuracy"].sort_values("step")
        reached = acc[acc["value"] >= solved]["step"]
        accuracy.append(
            {"task": task, "seed": int(seed)}
            | {"first_step_99": None if reached.empty else int(reached.iloc[0])}
            | {
                "final_accuracy": float(acc["value"].iloc[-1]),
                "final_step": int(acc["step"].iloc[-1]),
            }
        )
        layered = group[group["layer"].notna() & (group["layer"] >= 1)]
        for (metric, layer), rows in layered.groupby(["metric", "layer"], sort=False):
            out.append({"task": task, "seed": int(seed)} | _trajectory(metric, int(layer), rows))
    return {"accuracy": accuracy, "trajectories": out, "tasks": sorted(table["task"].unique())}


def _trajectory(metric: str, layer: int, rows: pd.DataFrame) -> dict[str, Any]:
    rows = rows.sort_values("step")
    start, end = rows.iloc[0], rows.iloc[-1]
    peak = rows.loc[rows["value"].idxmax()]
    versus = compare_intervals(end["low"], end["high"], start["low"], start["high"])
    return {
        "metric": metric,
        "layer": layer,
        "start": float(start["value"]),
        "peak": float(peak["value"]),
        "peak_step": int(peak["step"]),
        "end": float(end["value"]),
        "rises": versus == "above",
        "falls": versus == "below",
        "fades_after_peak": compare_intervals(end["low"], end["high"], peak["low"], peak["high"])
        == "below",
    }


# The dynamics verdicts: metric -> (claim, the direction that supports it).
CLAIMS = {
    "adjacency": ("Training raises the study's score (control, not a claim of the study)", "rises"),
    "probe_gain": (
        "Training adds linearly readable position to the residual (control, not a claim of the "
        "study)",
        "rises",
    ),
}


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    """One cell per task and layer: it counts only when every seed with snapshots moves the
    same way."""
    out = []
    for metric, (claim, favour) in CLAIMS.items():
        cells = seed_cells([t for t in numbers["trajectories"] if t["metric"] == metric])
        out.append(
            Verdict.tally(
                claim,
                [toward(c["versus"], "above" if favour == "rises" else "below") for c in cells],
                seeds=seeds_text(t["seed"] for t in numbers["trajectories"]),
                unit="task x layer cell",
                evidence=f"{metric} at the end of training against the initial weights "
                f"(step 0), 95% intervals apart in every seed ({seed_agreement(cells)})",
            )
        )
    return out


def seed_cells(trajectories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trajectories grouped by (task, layer): how many seeds rise and fall, and the cell's
    outcome over them (`across_seeds`)."""
    cells: dict[tuple[str, int], list[str]] = {}
    for t in trajectories:
        side = "above" if t["rises"] else "below" if t["falls"] else "within"
        cells.setdefault((t["task"], t["layer"]), []).append(side)
    return [
        {"task": task, "layer": layer, "versus": across_seeds(sides), "seeds": len(sides)}
        | {"seeds_above": sides.count("above"), "seeds_below": sides.count("below")}
        for (task, layer), sides in cells.items()
    ]


def section(numbers: dict[str, Any], figures: Any) -> str:
    if not numbers["tasks"]:
        return (
            "What it shows: nothing: no measured model has training snapshots (see "
            "docs/pretrained.md)."
        )
    accuracy = fmt.table(
        ["task", "seed", "first snapshot at 99% exact match", "last step", "final exact match"],
        [
            [a["task"], a["seed"], a["first_step_99"], a["final_step"], a["final_accuracy"]]
            for a in numbers["accuracy"]
        ],
    )
    shown = [t for t in numbers["trajectories"] if t["metric"] in SHOWN]
    rows = [
        [t["task"], t["seed"], t["metric"], t["layer"], t["start"]]
        + [f"{fmt.n(t['peak'])} ({t['peak_step']})", t["end"]]
        + ["rises" if t["rises"] else "falls" if t["falls"] else "no change"]
        for t in shown
    ]
    header = ["task", "seed", "metric", "layer", "start", "peak (step)", "end", "end vs start"]
    counts = []
    for metric in SHOWN:
        mine = [t for t in numbers["trajectories"] if t["metric"] == metric]
        counts.append(
            f"{metric}: rises in {sum(t['rises'] for t in mine)}, falls in "
            f"{sum(t['falls'] for t in mine)} of {len(mine)} task x seed x layer trajectories, "
            f"ends below its peak in {sum(t['fades_after_peak'] for t in mine)}"
        )
    seeds = seeds_text(a["seed"] for a in numbers["accuracy"])
    return (
        f"{figures('dynamics')}\n\n{accuracy}\n\n{fmt.table(header, rows)}\n\nWhat it shows: "
        "from the initial weights (step 0) to the end of training, with the end against the "
        "start judged by 95% intervals apart: " + "; ".join(counts) + ". Snapshots are "
        f"log-spaced, so early training is seen in detail; seeds {seeds}."
    )


CAPTION = (
    "Training dynamics of each task's first seed with snapshots: exact match, adjacency (the "
    "study's score and the centred prompt-row view), the variance ratio and its Spearman "
    "correlation with position, and the residual's position-probe gain over layer 0, against "
    "the training step (log scale; step 0, the initial weights, drawn at 1), one line per layer "
    "(bars: 95% intervals)."
)


def dynamics_figure(table: pd.DataFrame):
    """Every dynamics metric against the step, one panel per (metric, task), one line per
    layer, for each task's first seed."""
    from adjpos.figures import plot_intervals

    first = table.groupby("task")["seed"].transform("min")
    shown = table[table["seed"] == first].assign(
        step=lambda t: t["step"].clip(lower=1),
        layer=lambda t: [f"layer {int(x)}" if pd.notna(x) else "model" for x in t["layer"]],
    )
    title = "Training dynamics (the first seed with snapshots; bars: 95% intervals)"
    return plot_intervals(
        shown,
        **{"x": "step", "y": "value", "low": "low", "high": "high", "color": "layer"},
        **{"facet_col": "task", "facet_row": "metric", "log_x": True, "title": title},
    )


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    table = DYNAMICS.read(results / "dynamics.csv")
    return {} if table.empty else {"dynamics": (dynamics_figure(table), CAPTION)}
