"""The numbers each claim of the study needs, computed from the stages' tidy tables.

Pure pandas: no torch, no model. Each function takes the tables of one stage and returns plain
JSON-able values (lists of records, counts, intervals), which the pipeline writes to
``results/numbers.json`` and the report states. Every comparison carries its uncertainty: a
standard error over sequences, a spread over seeds, or a std over probe seeds; a difference
inside twice its standard error is reported as a tie, never as a win.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd

from adjpos.probes import ProbeResult
from adjpos.study.sweep import last_layer_rows

# The model labels of the stages' tables (defined here, the lighter module; stages uses them).
TRAINED, RANDOM, LEARNED = "trained", "random-init", "random-init, learned positions"
# A difference counts when it exceeds this many standard errors.
Z = 2.0
ORDER_METHODS = ("spectral_seriation", "variance_sort", "first_similarity_sort")
ONE_NUMBER = ("variance", "norm", "cosine_first", "cosine_previous", "cosine_mean")


# The adjacency views the report shows, (rows, centred, ties) -> label; the first is the
# study's score (see `adjpos.study.trained`).
ADJACENCY_VIEWS = {
    ("all", False, "strict"): "whole (the study's score)",
    ("all", False, "half"): "whole, ties half",
    ("prompt", False, "half"): "prompt rows, ties half",
    ("answer", False, "half"): "answer rows, ties half",
    ("all", True, "half"): "whole, centred, ties half",
    ("prompt", True, "half"): "prompt rows, centred, ties half",
}
MAIN_VIEW = next(iter(ADJACENCY_VIEWS))


def adjacency_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Per view of the score, task and layer >= 1: the trained seeds against the random-init
    NoPE control seeds; per task (the study's score): the trained models' best layer >= 1
    against their layer 0, and the controls' deepest layer against theirs.

    Each (model, seed, layer) value has a 95% bootstrap interval over sequences; a group of
    seeds spans from its lowest interval to its highest, and one group is above (below)
    another only when the two spans do not overlap: a difference inside the seed spread is
    not a difference."""
    views = []
    for key, label in ADJACENCY_VIEWS.items():
        summary = seed_summary(score_view(table, key), "adjacency", "low", "high")
        cells = []
        for (task, layer), group in summary.groupby(["task", "layer"], sort=False):
            by = group.set_index("model")
            if layer < 1 or TRAINED not in by.index or RANDOM not in by.index:
                continue
            mine, theirs = by.loc[TRAINED], by.loc[RANDOM]
            cells.append(
                {
                    "task": task,
                    "layer": int(layer),
                    "trained": float(mine["value"]),
                    "trained_low": float(mine["low"]),
                    "trained_high": float(mine["high"]),
                    "trained_seeds": int(mine["seeds"]),
                    "control": float(theirs["value"]),
                    "control_low": float(theirs["low"]),
                    "control_high": float(theirs["high"]),
                    "control_seeds": int(theirs["seeds"]),
                    "versus": _spans(mine, theirs),
                }
            )
        counts = Counter(c["versus"] for c in cells)
        views.append(
            {"view": label, "rows": key[0], "centred": key[1], "ties": key[2], "cells": cells}
            | {"counts": {v: counts.get(v, 0) for v in ("above", "below", "within")}}
        )
    main = score_view(table, MAIN_VIEW)
    summary = seed_summary(main, "adjacency", "low", "high")
    cosine = seed_summary(score_view(table, MAIN_VIEW), "mean_cosine")
    return {
        "per_task": [_layer0(main, task) for task in main["task"].unique()],
        "views": views,
        "layers": sorted(int(x) for x in table["layer"].unique()),
        "means": records(summary),
        "mean_cosine": records(cosine),
    }


def score_view(table: pd.DataFrame, key: tuple[str, bool, str]) -> pd.DataFrame:
    rows, centred, ties = key
    return table[(table["rows"] == rows) & (table["centred"] == centred) & (table["ties"] == ties)]


def seed_summary(frame: pd.DataFrame, value: str, low: str | None = None, high: str | None = None):
    """Per (task, model, layer): the mean over seeds, the span of the seeds' intervals (their
    lowest low to their highest high; the values' own range without intervals) and the
    number of seeds."""
    groups = frame.groupby(["task", "model", "layer"], sort=False)
    out = groups.agg(
        value=(value, "mean"),
        low=(low or value, "min"),
        high=(high or value, "max"),
        seeds=(value, "size"),
    )
    return out.reset_index()


def _spans(mine: pd.Series, theirs: pd.Series) -> str:
    """'above', 'below' or 'within': whether two spans of seeds' intervals are apart."""
    if mine["low"] > theirs["high"]:
        return "above"
    if mine["high"] < theirs["low"]:
        return "below"
    return "within"


def _layer0(main: pd.DataFrame, task: str) -> dict[str, Any]:
    """The trained models' best layer >= 1 (by the mean over seeds) against their layer 0,
    and the controls' deepest layer against theirs, seed by seed: 'above' or 'below' when
    every seed's two intervals are apart that way, 'tie' otherwise."""
    rows = main[main["task"] == task]
    layers = sorted(int(x) for x in rows["layer"].unique())
    trained, control = rows[rows["model"] == TRAINED], rows[rows["model"] == RANDOM]
    means = trained.groupby("layer")["adjacency"].mean()
    best = int(means.loc[layers[1:]].idxmax())
    deepest = int(layers[-1])
    control_means = control.groupby("layer")["adjacency"].mean()
    return {
        "task": task,
        "best_layer": best,
        "trained_best": float(means.loc[best]),
        "trained_layer0": float(means.loc[layers[0]]),
        "trained_vs_layer0": _per_seed(trained, best, layers[0]),
        "control_deepest": float(control_means.loc[deepest]),
        "control_layer0": float(control_means.loc[layers[0]]),
        "control_vs_layer0": _per_seed(control, deepest, layers[0]),
        "seeds": int(trained["seed"].nunique()),
        "control_seeds": int(control["seed"].nunique()),
    }


def _per_seed(rows: pd.DataFrame, layer: int, base: int) -> str:
    outcomes = set()
    for _, seed_rows in rows.groupby("seed"):
        by = seed_rows.set_index("layer")
        outcomes.add(_spans(by.loc[layer], by.loc[base]))
    return outcomes.pop() if len(outcomes) == 1 and "within" not in outcomes else "tie"


def cosine_numbers(scores: pd.DataFrame) -> dict[str, Any]:
    """The adjacency score of each example matrix, by task, model and layer."""
    return {"scores": records(scores)}


def variance_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Per task, model kind and layer: the last-third / first-third variance ratio and the
    Spearman correlation of variance with position, as the mean over seeds and the span of
    the seeds' 95% intervals. Variance shrinks with position at a (task, layer) when both
    spans lie below their null (ratio 1, correlation 0); the trained models shrink more than
    their random-init controls when their ratio span lies below the controls'."""
    ratio = seed_summary(table, "ratio", "ratio_low", "ratio_high")
    rho = seed_summary(table, "spearman", "spearman_low", "spearman_high")
    cells = []
    for (task, model, layer), r in ratio.set_index(["task", "model", "layer"]).iterrows():
        s = rho.set_index(["task", "model", "layer"]).loc[(task, model, layer)]
        shrinks = r["high"] < 1 and s["high"] < 0
        grows = r["low"] > 1 and s["low"] > 0
        cells.append(
            {
                "task": task,
                "model": model,
                "layer": int(layer),
                "ratio": float(r["value"]),
                "ratio_low": float(r["low"]),
                "ratio_high": float(r["high"]),
                "spearman": float(s["value"]),
                "spearman_low": float(s["low"]),
                "spearman_high": float(s["high"]),
                "seeds": int(r["seeds"]),
                "outcome": "shrinks" if shrinks else "grows" if grows else "neither",
            }
        )
    frame = pd.DataFrame(cells)
    versus = []
    for (task, layer), group in frame.groupby(["task", "layer"], sort=False):
        by = group.set_index("model")
        if layer >= 1 and {TRAINED, RANDOM} <= set(by.index):
            mine, theirs = by.loc[TRAINED], by.loc[RANDOM]
            spans = {"low": mine["ratio_low"], "high": mine["ratio_high"]}
            other = {"low": theirs["ratio_low"], "high": theirs["ratio_high"]}
            versus.append(
                {
                    "task": task,
                    "layer": int(layer),
                    "versus": _spans(pd.Series(spans), pd.Series(other)),
                }
            )
    blocks = frame[frame["layer"] >= 1]
    where = {
        model: {
            outcome: [
                [r["task"], int(r["layer"])] for _, r in g[g["outcome"] == outcome].iterrows()
            ]
            for outcome in ("shrinks", "grows")
        }
        for model, g in blocks.groupby("model")
    }
    return {
        "cells": cells,
        "versus": versus,
        "where": where,
        "blocks": {m: len(g) for m, g in blocks.groupby("model")},
        "deepest_layer": int(frame["layer"].max()),
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
        effective_width=("effective_width", "mean"),
        predicted_effective=("predicted_effective", "mean"),
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
    close, close_effective = (
        [
            r["init_range"]
            for r in rows
            if r["site"] == "attn_out" and abs(r["measured"] - r[key]) < 0.05
        ]
        for key in ("predicted", "predicted_effective")
    )
    return {
        "rows": rows,
        "attn_out_within_0.05": close,
        "attn_out_within_0.05_effective": close_effective,
        "scales": len({r["init_range"] for r in rows}),
    }


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
