"""The numbers each claim of the study needs, computed from the stages' tidy tables.

Pure pandas: no torch, no model. Each function takes the tables of one stage and returns plain
JSON-able values (lists of records, counts, intervals), which the pipeline writes to
``results/numbers.json`` and the report states. Every comparison carries its uncertainty: a
standard error over sequences, a spread over seeds, or a std over probe seeds; a difference
inside twice its standard error is reported as a tie, never as a win.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from adjpos.probes import ProbeResult
from adjpos.stats import variance_ratio
from adjpos.study.sweep import last_layer_rows

# The model labels of the stages' tables (defined here, the lighter module; stages uses them).
TRAINED, RANDOM, LEARNED = "trained", "random-init", "random-init, learned positions"
# A difference counts when it exceeds this many standard errors.
Z = 2.0
ORDER_METHODS = ("spectral_seriation", "variance_sort", "first_similarity_sort")
ONE_NUMBER = ("variance", "norm", "cosine_first", "cosine_previous", "cosine_mean")


def adjacency_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Per task: the trained model's best layer >= 1 against its layer 0, and against the
    random-init NoPE controls (their seed range, and the standard errors over sequences)."""
    mean = table.groupby(["task", "model", "layer"], sort=False).agg(
        adjacency=("adjacency", "mean"),
        low=("adjacency", "min"),
        high=("adjacency", "max"),
        sem=("sem", "max"),
        seeds=("adjacency", "size"),
    )
    layers = sorted(table["layer"].unique())
    per_task, by_layer = [], []
    for task in table["task"].unique():
        trained = mean.loc[(task, TRAINED)]
        control = mean.loc[(task, RANDOM)]
        best = int(trained.loc[layers[1:], "adjacency"].idxmax())
        above_layer0 = _compare(trained.loc[best], trained.loc[layers[0]])
        deepest = layers[-1]
        per_task.append(
            {
                "task": task,
                "best_layer": best,
                "trained_best": float(trained.loc[best, "adjacency"]),
                "trained_layer0": float(trained.loc[layers[0], "adjacency"]),
                "trained_vs_layer0": above_layer0,
                "control_deepest": float(control.loc[deepest, "adjacency"]),
                "control_layer0": float(control.loc[layers[0], "adjacency"]),
                "control_vs_layer0": _compare(control.loc[deepest], control.loc[layers[0]]),
                "control_min_above_0": float(control.loc[layers[1:], "adjacency"].min()),
            }
        )
        for layer in layers[1:]:
            by_layer.append(
                {
                    "task": task,
                    "layer": int(layer),
                    "trained": float(trained.loc[layer, "adjacency"]),
                    "control_low": float(control.loc[layer, "low"]),
                    "control_high": float(control.loc[layer, "high"]),
                    "control_seeds": int(control.loc[layer, "seeds"]),
                    "trained_vs_control": _against_range(trained.loc[layer], control.loc[layer]),
                }
            )
    return {
        "per_task": per_task,
        "trained_vs_control": by_layer,
        "layers": [int(x) for x in layers],
        "means": records(mean["adjacency"].reset_index()),
    }


def cosine_numbers(scores: pd.DataFrame) -> dict[str, Any]:
    """The adjacency score of each example matrix, by task, model and layer."""
    return {"scores": records(scores)}


def variance_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Variance over the last third of the positions divided by the first third, for every
    task, model and layer (below 1: the shrinkage Chi et al. describe)."""
    ratios = []
    for (task, model, layer), rows in table.groupby(["task", "model", "layer"], sort=False):
        values = rows.sort_values("position")["variance"].to_numpy()
        ratio = variance_ratio(values)
        ratios.append(
            {
                "task": task,
                "model": model,
                "layer": int(layer),
                "positions": len(values),
                "ratio": ratio,
            }
        )
    frame = pd.DataFrame(ratios)
    deepest = frame[frame["layer"] == frame["layer"].max()]
    inner = frame[(frame["layer"] >= 1) & (frame["layer"] < frame["layer"].max())]
    blocks = frame[frame["layer"] >= 1]
    return {
        "falls": {m: int((g["ratio"] < 1).sum()) for m, g in blocks.groupby("model")},
        "cells": {m: len(g) for m, g in blocks.groupby("model")},
        "ratios": ratios,
        "deepest_falls": {m: int((g["ratio"] < 1).sum()) for m, g in deepest.groupby("model")},
        "inner_falls": {m: int((g["ratio"] < 1).sum()) for m, g in inner.groupby("model")},
        "inner_cells": {m: len(g) for m, g in inner.groupby("model")},
        "models": {m: int(g["task"].nunique()) for m, g in frame.groupby("model")},
    }


def probe_numbers(results: list[ProbeResult], subjects: list[dict[str, Any]]) -> dict[str, Any]:
    """The probing claim, like against like, per task (`subjects` gives each result's task,
    kind and seed):

    - one number against one under the same flexible probe (spline R^2, best layer >= 1):
      the variance, and the best backward-only cosine number (cosine_first or
      cosine_previous), compared by Z std over probe seeds; the many-number profile against
      the variance under ridge is kept, marked as not like against like;
    - what the format gives away: token_identity (ridge R^2, logistic accuracy) and the raw
      residual's gain over layer 0;
    - trained against the random-init copies of its architecture on the same sequences:
      each carrier's best score against the copies' range;
    - order reconstruction: seriation (all pairs), the first-similarity sort (backward-only)
      and the variance sort.
    """
    tasks: dict[str, dict[str, Any]] = {}
    for result, subject in zip(results, subjects, strict=True):
        entry = tasks.setdefault(subject["task"], {"trained": None, "controls": []})
        if subject["kind"] == TRAINED:
            entry["trained"] = result
        else:
            entry["controls"].append(result)
    rows, versus = [], []
    for task, entry in tasks.items():
        trained = entry["trained"]
        rows.append({"task": task, **_carriers(trained), "controls": len(entry["controls"])})
        for key, (features, probe, metric) in CONTROL_CARRIERS.items():
            mine = _best(trained, metric, features=features, probe=probe)
            theirs = [_best(c, metric, features=features, probe=probe) for c in entry["controls"]]
            theirs = [t for t in theirs if t is not None]
            if mine is not None and theirs:
                versus.append({"task": task, "carrier": key, **_against_controls(mine, theirs)})
    return {"tasks": rows, "trained_vs_control": versus}


# The carriers compared between a trained model and its random-init copies.
CONTROL_CARRIERS = {
    "variance (spline R^2)": ("variance", "spline", "r2"),
    "cosine_first (spline R^2)": ("cosine_first", "spline", "r2"),
    "cosine_previous (spline R^2)": ("cosine_previous", "spline", "r2"),
    "resid (logistic accuracy)": ("resid", "logistic", "accuracy"),
}


def _carriers(result: ProbeResult) -> dict[str, Any]:
    """One trained model's numbers for the probing claim."""
    spline = {n: _best(result, "r2", features=n, probe="spline") for n in ONE_NUMBER}
    backward = [spline[n] for n in ("cosine_first", "cosine_previous") if spline[n] is not None]
    cosine = max(backward, key=lambda s: s["value"]) if backward else None
    variance, profile = spline["variance"], _best(result, "r2", features="cosine_profile")
    ridge_variance = _best(result, "r2", features="variance")
    order = {m: _best(result, "abs_kendall_tau", probe=m) for m in ORDER_METHODS}
    resid = _best(result, "accuracy", features="resid", probe="logistic")
    return {
        **{f"{n}_spline": v for n, v in spline.items()},
        "cosine_backward_spline": cosine,
        "cosine_vs_variance": _compare_scores(cosine, variance),
        "cosine_mean_vs_variance": _compare_scores(spline["cosine_mean"], variance),
        "profile_ridge": profile,
        "variance_ridge": ridge_variance,
        "profile_vs_variance_ridge": _compare_scores(profile, ridge_variance),
        "token_identity_r2": _at(result, "token_identity", "ridge", "r2"),
        "token_identity_accuracy": _at(result, "token_identity", "logistic", "accuracy"),
        "resid_accuracy": resid,
        "resid_accuracy_layer0": _at(result, "resid", "logistic", "accuracy"),
        **{f"{m}_tau": v for m, v in order.items()},
        "seriation_vs_variance_sort": _compare_scores(
            order["spectral_seriation"], order["variance_sort"]
        ),
        "first_sort_vs_variance_sort": _compare_scores(
            order["first_similarity_sort"], order["variance_sort"]
        ),
        "seeds": len(result.seeds),
    }


def _at(result: ProbeResult, features: str, probe: str, metric: str, layer: int = 0) -> Any:
    """The score at one layer (default 0) as {value, std, layer, chance}, or None."""
    for s in result.scores:
        if (s.layer, s.features, s.probe, s.metric) == (layer, features, probe, metric):
            return _entry(s)
    return None


def _against_controls(mine: dict, theirs: list[dict]) -> dict[str, Any]:
    """The trained score against the copies' range of scores, widened by Z combined standard
    errors (over the folds) of the trained score and the largest of the copies':
    'above', 'below' or 'within'."""
    low, high = min(t["value"] for t in theirs), max(t["value"] for t in theirs)
    theirs_sem = [t["sem"] for t in theirs if not math.isnan(t.get("sem", math.nan))]
    mine_sem = mine.get("sem", math.nan)
    margin = Z * math.hypot(0.0 if math.isnan(mine_sem) else mine_sem, max(theirs_sem, default=0.0))
    verdict = "within"
    if mine["value"] > high + margin:
        verdict = "above"
    elif mine["value"] < low - margin:
        verdict = "below"
    return {
        "trained": mine["value"],
        "layer": mine["layer"],
        "control_low": low,
        "control_high": high,
        "versus": verdict,
    }


# Interventions whose verdicts the report gives (each against its control, see CONTROL_OF);
# a change this many times larger than its control's is not matched in size.
TESTED = (
    "norm_permute",
    "norm_permute_mirrored",
    "subspace_swap",
    "leace_position",
    "uniform_attention",
)
SIZE_SLACK = 1.25
# ... and a drop must exceed its control's by this much exact match to count (two near-zero
# scores with separate intervals are a floor, not a difference).
MIN_GAP = 0.1


def causal_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """For every task, layer and tested intervention: exact match with its 95% interval
    beside its control's and the baseline's, the sizes of the two changes, and a verdict:

    - "not needed": the interval reaches the baseline's (no drop beyond sampling);
    - "necessary": the interval lies below the control's, exact match is at least MIN_GAP
      below the control's, and the change is at most SIZE_SLACK times the control's (so the
      drop is not a larger perturbation's);
    - "beyond a smaller control": the same, but a larger change than the control's;
    - "no more than its control": a drop, but the control drops about as far (intervals
      overlap, or less than MIN_GAP apart);
    - for uniform attention (no matched control): "breaks the task" or "not needed".
    """
    rows = []
    for (task, layer), group in table.groupby(["task", "layer"], sort=False):
        by = group.set_index("intervention")
        if "none" not in by.index:
            continue
        base = by.loc["none"]
        for name in (n for n in TESTED if n in by.index):
            mine, control_name = by.loc[name], by.loc[name, "control"]
            control = by.loc[control_name] if control_name in by.index else None
            rows.append(
                {
                    "task": task,
                    "layer": int(layer),
                    "intervention": name,
                    "control": control_name if control is not None else None,
                    "exact_match": _float(mine["exact_match"]),
                    "low": _float(mine["exact_match_low"]),
                    "high": _float(mine["exact_match_high"]),
                    "control_exact_match": None
                    if control is None
                    else _float(control["exact_match"]),
                    "control_low": None if control is None else _float(control["exact_match_low"]),
                    "control_high": None
                    if control is None
                    else _float(control["exact_match_high"]),
                    "baseline": _float(base["exact_match"]),
                    "perturbation": _float(mine["perturbation"]),
                    "control_perturbation": None
                    if control is None
                    else _float(control["perturbation"]),
                    "verdict": _causal_verdict(mine, control, base),
                }
            )
    necessary: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        if row["verdict"] in ("necessary", "breaks the task"):
            necessary.setdefault(row["task"], {}).setdefault(row["intervention"], []).append(
                row["layer"]
            )
    return {"rows": rows, "necessary": necessary, "size_slack": SIZE_SLACK, "min_gap": MIN_GAP}


def _causal_verdict(mine: pd.Series, control: pd.Series | None, base: pd.Series) -> str:
    if mine["exact_match_high"] >= base["exact_match_low"]:
        return "not needed"
    if control is None or mine.name == "uniform_attention":
        return "breaks the task"
    apart = mine["exact_match_high"] < control["exact_match_low"]
    if not apart or control["exact_match"] - mine["exact_match"] < MIN_GAP:
        return "no more than its control"
    if mine["perturbation"] > SIZE_SLACK * control["perturbation"]:
        return "beyond a smaller control"
    return "necessary"


def sweep_numbers(table: pd.DataFrame, first_subgrid: pd.DataFrame) -> dict[str, Any]:
    """How many random-init models score above chance at their deepest layer (NoPE and all),
    and the mean score by init scale in the first sub-grid, with its std over cells x seeds."""
    deepest = last_layer_rows(table)
    nope = deepest[deepest["positional"] == "none"] if "positional" in deepest else deepest
    last = first_subgrid[first_subgrid["layer"] == first_subgrid["layer"].max()]
    by_init = last.groupby("init_range")["adjacency"].agg(["mean", "std", "size"]).reset_index()
    return {
        "models": len(deepest),
        "above_chance": int((deepest["adjacency"] > 0.5).sum()),
        "nope_models": len(nope),
        "nope_above_chance": int((nope["adjacency"] > 0.5).sum()),
        "deepest_layer": int(last["layer"].max()),
        "by_init": [
            {
                "init_range": float(r["init_range"]),
                "mean": float(r["mean"]),
                "std": _float(r["std"]),
                "n": int(r["size"]),
            }
            for _, r in by_init.iterrows()
        ],
    }


def theory_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Measured first-layer adjacency against the prediction by init scale and site (mean and
    std over seeds), and how uniform attention is."""
    grouped = table.groupby(["init_range", "site"]).agg(
        entropy_ratio=("entropy_ratio", "mean"),
        measured=("measured_adjacency", "mean"),
        measured_std=("measured_adjacency", "std"),
        predicted=("predicted_adjacency", "mean"),
        seeds=("seed", "size"),
    )
    rows = [
        {
            "init_range": float(i),
            "site": s,
            **{k: _float(v) for k, v in r.items()},
            "seeds": int(r["seeds"]),
        }
        for (i, s), r in grouped.iterrows()
    ]
    close = [
        r["init_range"]
        for r in rows
        if r["site"] == "attn_out" and abs(r["measured"] - r["predicted"]) < 0.05
    ]
    return {
        "rows": rows,
        "attn_out_within_0.05": close,
        "scales": len({r["init_range"] for r in rows}),
    }


def _compare(a: pd.Series, b: pd.Series) -> str:
    """'above', 'below' or 'tie': a's mean against b's, by Z combined standard errors."""
    gap = float(a["adjacency"] - b["adjacency"])
    return _verdict(gap, math.hypot(float(a["sem"]), float(b["sem"])))


def _against_range(trained: pd.Series, control: pd.Series) -> str:
    """'above', 'below' or 'within': the trained score against the controls' seed range,
    widened by Z standard errors of both."""
    margin = Z * math.hypot(float(trained["sem"]), float(control["sem"]))
    if trained["adjacency"] > control["high"] + margin:
        return "above"
    if trained["adjacency"] < control["low"] - margin:
        return "below"
    return "within"


def _compare_scores(a: dict | None, b: dict | None) -> str:
    """'above', 'below', 'tie' or 'unknown', by Z combined standard errors (over the folds,
    or the sequences for order reconstruction); without them, by the std over probe seeds;
    with neither (one seed, one fold), the bare difference, marked as such."""
    if a is None or b is None:
        return "unknown"
    for key in ("sem", "std"):
        errors = (a.get(key, math.nan), b.get(key, math.nan))
        if not any(math.isnan(e) for e in errors):
            return _verdict(a["value"] - b["value"], math.hypot(*errors))
    return "above (one seed)" if a["value"] > b["value"] else "below (one seed)"


def _verdict(gap: float, error: float) -> str:
    if abs(gap) <= Z * error:
        return "tie"
    return "above" if gap > 0 else "below"


def _best(result: ProbeResult, metric: str, *, features: str | None = None, probe: str = "ridge"):
    """The best score at layers >= 1 (value, std, layer, chance), or None if not measured."""
    scores = [
        s
        for s in result.scores
        if (s.metric, s.probe) == (metric, probe)
        and s.layer >= 1
        and (features is None or s.features == features)
    ]
    if not scores:
        return None
    top = max(scores, key=lambda s: s.value)
    return _entry(top)


def _entry(score) -> dict[str, Any]:
    return {
        "value": score.value,
        "std": score.std,
        "sem": score.sem,
        "layer": score.layer,
        "chance": score.baseline,
    }


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain JSON-able dicts (numpy and pandas scalars become Python ones)."""
    return [
        {k: None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]


def _float(value: Any) -> float | None:
    return None if pd.isna(value) else float(value)
