"""When the pattern appears: the trained models' log-spaced snapshots (step 0 included), each
measured like the finished model: exact match, and per layer adjacency (two views), the variance
ratio and Spearman correlation and the position-probe gain over layer 0, each with its interval.
A trajectory rises when its end's interval lies above its start's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from adjpos.capture import capture_residuals
from adjpos.figures.style import label
from adjpos.metrics import position_variance
from adjpos.models import load_model, snapshot_steps
from adjpos.probes import probe_positions, sequences_of_length
from adjpos.scoring import sequence_views
from adjpos.stats import bootstrap_interval, compare_intervals, variance_summary, wilson_interval
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, every_seed, judge, seeds_text
from adjpos.study.models import gen as study_generator
from adjpos.study.views import INTERVAL, task_masks
from adjpos.tables import Table, with_interval
from adjpos.training import evaluate

TITLE = "When the pattern appears: training dynamics"

DYNAMICS = Table(task="string", seed="int64", step="int64", layer="Int64", metric="string")
DYNAMICS += Table(value="float64") + INTERVAL
# metric -> the adjacency view it reads (rows, centred, ties); see adjpos.scoring.sequence_views.
ADJACENCY_METRICS = {"adjacency": ("all", False, "strict")}
ADJACENCY_METRICS["adjacency_prompt_centred"] = ("prompt", True, "half")
# The metrics the report tabulates and judges (dynamics.csv has them all).
SHOWN = ("adjacency", "adjacency_prompt_centred", "variance_ratio", "probe_gain")
# Each trajectory's start, peak and end (``dynamics_trajectories.csv``; the report counts them).
TRAJECTORIES = Table(task="string", seed="int64", metric="string", layer="int64")
TRAJECTORIES += Table(peak_step="int64", **with_interval("start", "peak", "end"))


def measure(context: Context) -> dict[str, Any]:
    """One unit per trained seed (its snapshots), run by the engine, then the combined table."""
    table = context.per_unit("dynamics", dynamics_unit, {"dynamics": DYNAMICS})
    table = DYNAMICS.write(context.results / "dynamics.csv", table["dynamics"])
    numbers = dynamics_numbers(table, context.sizes.dynamics_prompts)
    TRAJECTORIES.write(context.results / "dynamics_trajectories.csv", numbers["trajectories"])
    return numbers


def dynamics_unit(
    models: Any, sizes: Any, criteria: Criteria, name: str, seed: int | None = None, *_: Any
) -> dict:
    """One unit of the dynamics stage (`Context.per_unit`): every snapshot of trained `seed`
    of task `name` (None: of each of its seeds) when it is one of `sizes.dynamics_seeds`, as
    {"dynamics": records}."""
    rows, wanted = [], sizes.dynamics_seeds if seed is None else (seed,)
    trained = models.seeds(name, sizes)
    for seed in (s for s in wanted if s in sizes.dynamics_seeds and s in trained):
        folder, task = models.folder(name, seed), models.trained(name, seed)[1]
        for step in snapshot_steps(folder, sizes.dynamics_snapshots):  # none: skipped
            model = load_model(folder, step=step, device=models.device)
            key = {"task": name, "seed": seed, "step": step}
            rows += [{**key, **r} for r in measure_snapshot(model, task, sizes, criteria)]
    return {"dynamics": DYNAMICS.frame(rows).to_dict("records")}


def measure_snapshot(model: Any, task: Any, sizes: Any, criteria: Criteria) -> list[dict]:
    """Every metric of one snapshot: {layer, metric, value, low, high} records (exact match
    with its Wilson interval, the others with bootstrap intervals over sequences; the probe's
    gain over layer 0 -/+ the normal quantile of the level times its standard error over one
    seed of `sizes.dynamics_cv` folds, to keep a snapshot cheap)."""
    from scipy.stats import norm

    gen, draws = study_generator("dynamics"), criteria.draws
    prompts = task.draw_prompts(sizes.dynamics_prompts, generator=gen, split="test")
    hits, n = sum(evaluate(model, task, prompts, per_prompt=True)), len(prompts)
    rows = [(None, "accuracy", hits / n, *wilson_interval(hits, n, level=criteria.level))]
    batch = task.sample(sizes.dynamics_sequences, generator=gen, split="test")
    tokens, masks = task_masks(batch)
    for layer, views, _ in sequence_views(model, tokens, batch.lengths, masks):
        for metric, view in ADJACENCY_METRICS.items():
            kept = views[view][~np.isnan(views[view])]
            rows.append((layer, metric, float(kept.mean()), *bootstrap_interval(kept, **draws)))
    same = sequences_of_length(task, sizes.dynamics_sequences, generator=gen)
    variance = position_variance(capture_residuals(model, same).double()).numpy()
    for layer, values in enumerate(variance):
        summary = variance_summary(values, **draws)
        for k in ("ratio", "spearman"):
            rows.append((layer, f"variance_{k}", *(summary[k + e] for e in ("", "_low", "_high"))))
    options = {"features": "resid", "probe": "logistic", "cv": sizes.dynamics_cv, "repeats": 1}
    probed = probe_positions(model, same, **options, progress=False).records()
    z = float(norm.ppf(0.5 + criteria.level / 2))
    for r in (r for r in probed if r["metric"] == "accuracy"):
        gain, sem = r["gain_layer0"], r["sem"] if r["sem"] == r["sem"] else 0.0  # NaN: not measured
        rows.append((r["layer"], "probe_gain", gain, gain - z * sem, gain + z * sem))
    return [dict(zip(("layer", "metric", "value", "low", "high"), r, strict=True)) for r in rows]


def dynamics_numbers(table: pd.DataFrame, n_prompts: int | None = None) -> dict[str, Any]:
    """Per task and seed: exact match at every snapshot (with `n_prompts`, the prompts of
    each), and for each layer and metric its value and interval at the initial weights, at
    its peak and at the end."""
    out, accuracy = [], []
    for (task, seed), group in table.groupby(["task", "seed"], sort=False):
        acc = group[group["metric"] == "accuracy"].sort_values("step")
        end = acc.iloc[-1]
        accuracy.append(
            {"task": task, "seed": int(seed), "n_prompts": n_prompts}
            | {"steps": acc[["step", "value"]].to_numpy().tolist(), "final_step": int(end.step)}
            | {"final": float(end.value), "final_low": end.low, "final_high": end.high}
        )
        layered = group[group["layer"].notna()]
        for (metric, layer), rows in layered.groupby(["metric", "layer"], sort=False):
            out.append({"task": task, "seed": int(seed)} | _trajectory(metric, int(layer), rows))
    return {"accuracy": accuracy, "trajectories": out, "tasks": sorted(table["task"].unique())}


def _trajectory(metric: str, layer: int, rows: pd.DataFrame) -> dict[str, Any]:
    rows = rows.sort_values("step")
    points = {"start": rows.iloc[0], "peak": rows.loc[rows["value"].idxmax()], "end": rows.iloc[-1]}
    out = {"metric": metric, "layer": layer, "peak_step": int(points["peak"]["step"])}
    for name, r in points.items():
        out |= {name: float(r["value"]), f"{name}_low": r["low"], f"{name}_high": r["high"]}
    return out


# The dynamics verdicts: metric -> the claim that its end lies above its start.
CLAIMS = {
    "adjacency": "Training raises the study's score (control, not a claim of the study)",
    "probe_gain": "Training adds linearly readable position to the residual (control, not a "
    "claim of the study)",
}


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    """One cell per task and layer counted: for when every seed with snapshots ends above its
    start, against when every one ends below."""
    seeds = seeds_text(t["seed"] for t in numbers["trajectories"])
    out, words = [], {"seeds": seeds, "unit": "task x layer cell"}
    rule = f"{criteria.level:.0%} intervals apart in every seed, layers >= {criteria.first_layer}"
    for metric, claim in CLAIMS.items():
        cells: dict[tuple[str, int], list[Outcome]] = {}
        for t in numbers["trajectories"]:
            if t["metric"] == metric and t["layer"] >= criteria.first_layer:
                outcome = judge(t["end_low"], t["end_high"], t["start_low"], t["start_high"])
                cells.setdefault((t["task"], t["layer"]), []).append(outcome)
        outcomes = [every_seed(per_seed) for per_seed in cells.values()]
        evidence = f"{metric} at the end of training above the initial weights (step 0), {rule}"
        out.append(Verdict.tally(claim, outcomes, **words, evidence=evidence))
    return out


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    if not numbers["tasks"]:
        return "What it shows: nothing: no measured model has training snapshots."
    solved = criteria.solved
    header = ["task", "seed", f"first snapshot at {solved} exact match", "last step"]
    header += [f"final exact match ({criteria.level:.0%} Wilson)"]
    rows = [
        [a["task"], a["seed"], next((int(s) for s, x in a["steps"] if x >= solved), "not reached")]
        + [a["final_step"], fmt.span(a["final"], a["final_low"], a["final_high"])]
        for a in numbers["accuracy"]
    ]
    accuracy = fmt.table(header, rows)
    found: dict[tuple, dict[str, list[int]]] = {}  # (task, seed, metric) -> side -> layers
    for t in numbers["trajectories"]:
        if t["metric"] in SHOWN and t["layer"] >= criteria.first_layer:
            layers = found.setdefault((t["task"], t["seed"], label(t["metric"])), {})
            side = compare_intervals(t["end_low"], t["end_high"], t["start_low"], t["start_high"])
            layers.setdefault(side, []).append(t["layer"])
    header = ["task", "seed", "metric", "end above start, at layers", "end below start, at layers"]
    header += ["intervals overlap, at layers"]
    rows = [
        [*key, *(fmt.join(at.get(side, [])) or "none" for side in ("above", "below", "within"))]
        for key, at in found.items()
    ]
    seeds = seeds_text(a["seed"] for a in numbers["accuracy"])
    text = fmt.text("dynamics.section", level=criteria.level, seeds=seeds)
    return fmt.section(figures("dynamics"), accuracy, fmt.table(header, rows), text)


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Every dynamics metric against the step, one panel per (metric, task), one line per
    layer, for each task's first seed."""
    from adjpos.figures import plot_intervals

    table = DYNAMICS.read(results / "dynamics.csv")
    if table.empty:
        return {}
    first = table.groupby("task")["seed"].transform("min")
    shown = table[table["seed"] == first].assign(
        step=lambda t: t["step"].clip(lower=1),
        layer=lambda t: [f"layer {int(x)}" if pd.notna(x) else "whole model" for x in t["layer"]],
    )
    title = "Training dynamics (the first seed with snapshots; bars: 95% intervals)"
    axes = {"x": "step", "y": "value", "low": "low", "high": "high", "color": "layer"}
    facets = {"facet_col": "task", "facet_row": "metric", "log_x": True}
    caption = fmt.text("dynamics.caption")
    return {"dynamics": (plot_intervals(shown, **axes, **facets, title=title), caption)}
