"""Claim 2: position is read better from cosine similarities than from the variance (probes),
order reconstruction from shuffled states, and trained models against random-init copies of
their architecture on the very same sequences.

Like against like: one number against one under the same flexible probe (spline R^2, best
layer >= 1), compared by `Criteria.z` standard errors over the folds (over sequences for
order reconstruction); without any error (one seed, one fold) a difference is not judged.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from adjpos.probes import (
    PROBE_TABLE,
    ProbeResult,
    probe_positions,
    reconstruct_order,
    sequences_of_length,
)
from adjpos.stats import compare_intervals
from adjpos.study import format as fmt
from adjpos.study.claim import CRITERIA, Context, Criteria, Verdict, seeds_text, toward
from adjpos.study.models import RANDOM, TRAINED, gen
from adjpos.tasks import TASKS

TITLE = "Claim 2: similarity carries position better than variance (probes)"

ORDER_METHODS = ("spectral_seriation", "variance_sort", "first_similarity_sort")
ORDER_COLUMNS = ("spectral_seriation", "first_similarity_sort", "variance_sort")
ONE_NUMBER = ("variance", "norm", "cosine_first", "cosine_previous", "cosine_mean")
# The carriers compared between a trained model and its random-init copies.
CONTROL_CARRIERS = {
    "variance (spline R^2)": ("variance", "spline", "r2"),
    "cosine_first (spline R^2)": ("cosine_first", "spline", "r2"),
    "cosine_previous (spline R^2)": ("cosine_previous", "spline", "r2"),
    "resid (logistic accuracy)": ("resid", "logistic", "accuracy"),
}


def measure(context: Context) -> dict[str, Any]:
    """One unit per probed model (the longest stage), run by the engine, then the table."""
    labels, folder = probe_labels(context.sizes), context.folder
    paths = {label: context.results / f"probes_{slug(label)}.json" for label, _, _ in labels}
    todo = [(t, s) for label, t, s in labels if not folder.is_done(f"probing {label}")]
    jobs = [(context.models.fresh(), context.sizes, task, seed) for task, seed in todo]
    for _, text in context.units(probe_unit, jobs):
        result = ProbeResult.from_json(text)
        result.to_json(paths[result.model])
        folder.mark_done(f"probing {result.model}")
    results = [ProbeResult.from_json(paths[label]) for label, _, _ in labels]
    records = [record for result in results for record in result.records()]
    PROBE_TABLE.write(context.results / "probes.csv", records)
    subjects = [{"task": t, "kind": TRAINED if s is None else RANDOM} for _, t, s in labels]
    return probe_numbers(results, subjects, context.criteria)


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


def probe_labels(sizes: Any) -> list[tuple[str, str, int | None]]:
    """(label, task, seed) of every probed model, in order: each trained model (seed None),
    then its random-init copies (`sizes.probe_controls`)."""
    labels = []
    for name in TASKS:
        labels.append((f"{TRAINED} {name}", name, None))
        labels += [(f"{RANDOM} {name} (seed {s})", name, s) for s in sizes.probe_controls]
    return labels


def probe_subjects(models: Any, sizes: Any):
    """Each trained model on held-out sequences of its task (one length), then random-init
    copies of its architecture (`sizes.probe_controls` seeds) on the very same sequences."""
    for _, task, seed in probe_labels(sizes):
        yield probe_subject(models, sizes, task, seed)


def probe_subject(models: Any, sizes: Any, task: str, seed: int | None) -> ProbeSubject:
    """The trained model of `task` (seed None) or its random-init copy with `seed`, on the
    task's held-out sequences of one length (the same for all of them)."""
    model, spec = models.trained(task)
    tokens = sequences_of_length(spec, sizes.n_probe_sequences, generator=gen(4))
    if seed is None:
        return ProbeSubject(f"{TRAINED} {task}", task, TRAINED, None, model, tokens)
    copy = models.control(task, seed, like=0)  # the probed trained model is seed 0
    return ProbeSubject(f"{RANDOM} {task} (seed {seed})", task, RANDOM, seed, copy, tokens)


def probe_unit(models: Any, sizes: Any, task: str, seed: int | None) -> str:
    """One unit of the probing stage: its result as JSON (`ProbeResult.from_json`)."""
    return measure_probes(probe_subject(models, sizes, task, seed), sizes).to_json()


def measure_probes(subject: ProbeSubject, sizes: Any) -> ProbeResult:
    """Every feature set with every probe, and order reconstruction."""
    common = {"model_name": subject.label, "progress": False}
    features, probes = list(sizes.features), list(sizes.probes)
    result = probe_positions(
        subject.model, subject.tokens, features=features, probe=probes, cv=sizes.cv,
        repeats=sizes.repeats, **common,
    )  # fmt: skip
    return result + reconstruct_order(subject.model, subject.tokens, **common)


def slug(label: str) -> str:
    """A file-name-safe form of a model label."""
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").replace("__", "_")


def probe_numbers(
    results: list[ProbeResult], subjects: list[dict[str, Any]], criteria: Criteria = CRITERIA
) -> dict[str, Any]:
    """Per task: the trained model's carriers (`_carriers`) and each carrier against the
    random-init copies' range (`subjects` gives each result's task and kind)."""
    tasks: dict[str, dict[str, Any]] = {}
    for result, subject in zip(results, subjects, strict=True):
        entry = tasks.setdefault(subject["task"], {"trained": None, "controls": []})
        if subject["kind"] == TRAINED:
            entry["trained"] = result
        else:
            entry["controls"].append(result)
    rows, versus = [], []
    for task, entry in tasks.items():
        trained, z = entry["trained"], criteria.z
        rows.append({"task": task, **_carriers(trained, z), "controls": len(entry["controls"])})
        for key, (features, probe, metric) in CONTROL_CARRIERS.items():
            mine = _best(trained, metric, features=features, probe=probe)
            theirs = [_best(c, metric, features=features, probe=probe) for c in entry["controls"]]
            theirs = [t for t in theirs if t is not None]
            if mine is not None and theirs:
                versus.append({"task": task, "carrier": key, **_against(mine, theirs, z)})
    # The probed trained model of each task is its seed 0 (`probe_subject`).
    return {"tasks": rows, "trained_vs_control": versus, "z": criteria.z, "seeds": [0]}


def _carriers(result: ProbeResult, z: float) -> dict[str, Any]:
    """One trained model's numbers: the one-number carriers under the spline probe, the best
    backward cosine against the variance, the format baseline and order reconstruction."""
    spline = {n: _best(result, "r2", features=n, probe="spline") for n in ONE_NUMBER}
    backward = [spline[n] for n in ("cosine_first", "cosine_previous") if spline[n] is not None]
    cosine = max(backward, key=lambda s: s["value"]) if backward else None
    profile, ridge = (_best(result, "r2", features=f) for f in ("cosine_profile", "variance"))
    order = {m: _best(result, "abs_kendall_tau", probe=m) for m in ORDER_METHODS}
    return {
        **{f"{n}_spline": v for n, v in spline.items()},
        "cosine_backward_spline": cosine,
        "cosine_vs_variance": _compare(cosine, spline["variance"], z),
        "cosine_mean_vs_variance": _compare(spline["cosine_mean"], spline["variance"], z),
        "profile_ridge": profile,
        "variance_ridge": ridge,
        "profile_vs_variance_ridge": _compare(profile, ridge, z),
        "token_identity_r2": _at(result, "token_identity", "ridge", "r2"),
        "token_identity_accuracy": _at(result, "token_identity", "logistic", "accuracy"),
        "resid_accuracy": _best(result, "accuracy", features="resid", probe="logistic"),
        "resid_accuracy_layer0": _at(result, "resid", "logistic", "accuracy"),
        **{f"{m}_tau": v for m, v in order.items()},
        "seriation_vs_variance_sort": _compare(
            order["spectral_seriation"], order["variance_sort"], z
        ),
        "first_sort_vs_variance_sort": _compare(
            order["first_similarity_sort"], order["variance_sort"], z
        ),
        "seeds": len(result.seeds),
    }


def _compare(a: dict | None, b: dict | None, z: float) -> str:
    """'above', 'below' or 'within': the difference a - b against z combined standard errors
    (over the folds, or the sequences for order reconstruction; else the std over probe
    seeds); 'unknown' when one is not measured; 'within' with no error to judge by."""
    if a is None or b is None:
        return "unknown"
    for key in ("sem", "std"):
        errors = (a.get(key, math.nan), b.get(key, math.nan))
        if not any(math.isnan(e) for e in errors):
            gap, margin = a["value"] - b["value"], z * math.hypot(*errors)
            return compare_intervals(gap - margin, gap + margin, 0.0, 0.0)
    return "within"


def _against(mine: dict, theirs: list[dict], z: float) -> dict[str, Any]:
    """The trained score against the copies' range of scores, widened by z combined standard
    errors (over the folds) of the trained score and the largest of the copies'."""
    low, high = min(t["value"] for t in theirs), max(t["value"] for t in theirs)
    theirs_sem = [t["sem"] for t in theirs if not math.isnan(t.get("sem", math.nan))]
    mine_sem = 0.0 if math.isnan(mine.get("sem", math.nan)) else mine["sem"]
    margin = z * math.hypot(mine_sem, max(theirs_sem, default=0.0))
    versus = compare_intervals(mine["value"] - margin, mine["value"] + margin, low, high)
    return {
        "trained": mine["value"],
        "layer": mine["layer"],
        "control_low": low,
        "control_high": high,
        "versus": versus,
    }


def _best(result: ProbeResult, metric: str, *, features: str | None = None, probe: str = "ridge"):
    """The best score at layers >= 1 (value, std, sem, layer, chance), or None."""
    scores = [
        s
        for s in result.scores
        if (s.metric, s.probe) == (metric, probe)
        and s.layer >= 1
        and (features is None or s.features == features)
    ]
    return _entry(max(scores, key=lambda s: s.value)) if scores else None


def _at(result: ProbeResult, features: str, probe: str, metric: str, layer: int = 0) -> Any:
    """The score at one layer (default 0), or None."""
    for s in result.scores:
        if (s.layer, s.features, s.probe, s.metric) == (layer, features, probe, metric):
            return _entry(s)
    return None


def _entry(score) -> dict[str, Any]:
    return {
        "value": score.value,
        "std": score.std,
        "sem": score.sem,
        "layer": score.layer,
        "chance": score.baseline,
    }


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    rows, versus = numbers["tasks"], numbers["trained_vs_control"]
    profile = Counter(r["profile_vs_variance_ridge"] for r in rows)
    firsts = Counter(r["first_sort_vs_variance_sort"] for r in rows)
    seeds = seeds_text(numbers["seeds"])
    errors = f"{criteria.z:g} standard errors"
    return [
        Verdict.tally(
            "Probes read position better from cosine similarities than from variance",
            [_toward(r["cosine_vs_variance"]) for r in rows],
            seeds=seeds,
            unit="trained model",
            evidence=f"best backward cosine number against the variance under the spline probe "
            f"(best layer >= 1, {errors} over folds); the many-number profile under ridge, not "
            f"like against like, above in {profile['above']} of {len(rows)}",
        ),
        Verdict.tally(
            "The cosine matrix orders shuffled states better than the variances",
            [_toward(r["seriation_vs_variance_sort"]) for r in rows],
            seeds=seeds,
            unit="trained model",
            evidence="spectral seriation against the variance sort (absolute Kendall's tau, "
            f"best layer >= 1, {errors} over sequences); the backward-only first-similarity "
            f"sort above it in {firsts['above']} of {len(rows)}",
        ),
        Verdict.tally(
            "Training adds position information the random-init copies lack (control, not a "
            "claim of the study)",
            [toward(v["versus"]) for v in versus],
            seeds=seeds,
            unit="task x carrier cell",
            evidence="trained best score against the range of random-init copies of its "
            f"architecture on the same sequences, widened by {errors} over folds",
        ),
    ]


def _toward(outcome: str) -> str:
    return toward("within" if outcome == "unknown" else outcome)


def section(numbers: dict[str, Any], figures: Any) -> str:
    rows, versus = numbers["tasks"], numbers["trained_vs_control"]
    return SECTION.format(
        figure=figures("probes"),
        probe_table=fmt.table(
            ["task", *ONE_NUMBER, "backward cosine vs variance"]
            + ["profile vs variance (ridge, many vs one)", "token_identity R^2"]
            + ["resid accuracy, layer 0", "resid accuracy, best"],
            [
                [r["task"], *[fmt.score(r[f"{n}_spline"]) for n in ONE_NUMBER]]
                + [r["cosine_vs_variance"], r["profile_vs_variance_ridge"]]
                + [fmt.score(r["token_identity_r2"]), fmt.score(r["resid_accuracy_layer0"])]
                + [fmt.score(r["resid_accuracy"])]
                for r in rows
            ],
        ),
        control_table=fmt.table(
            ["task", "carrier", "trained", "random-init copies", "trained vs copies"],
            [
                [v["task"], v["carrier"], f"{v['trained']:.3f} ({v['layer']})"]
                + [f"{v['control_low']:.3f} to {v['control_high']:.3f}", v["versus"]]
                for v in versus
            ],
        ),
        order_table=fmt.table(
            ["task", "seriation (all pairs)", "first-similarity sort (backward)"]
            + ["variance sort", "chance"],
            [
                [r["task"]]
                + [fmt.score(r[f"{m}_tau"]) for m in ORDER_COLUMNS]
                + [(r["variance_sort_tau"] or {}).get("chance")]
                for r in rows
            ],
        ),
        text=_text(numbers),
    )


def _text(numbers: dict[str, Any]) -> str:
    rows, versus = numbers["tasks"], numbers["trained_vs_control"]
    one, profile, orders, firsts = (
        Counter(r[key] for r in rows)
        for key in (
            "cosine_vs_variance",
            "profile_vs_variance_ridge",
            "seriation_vs_variance_sort",
            "first_sort_vs_variance_sort",
        )
    )
    counts = Counter(v["versus"] for v in versus)
    identity = [round(r["token_identity_r2"]["value"], 2) for r in rows if r["token_identity_r2"]]
    z = f"{numbers['z']:g}"
    return (
        "One number against one under the spline probe, the best backward-only cosine number "
        "(the similarity to the first or to the previous token, what the model itself can "
        f"compare at position k) is above the variance in {one['above']}, within {z} standard "
        f"errors in {one['within']} and below in {one['below']} of {len(rows)} trained models. "
        "The older comparison, the cosine profile (one similarity per other position, later "
        "tokens included) against the one variance number under ridge, favours the profile "
        f"({profile['above']} of {len(rows)}) because it is many numbers against one. On task "
        "sequences the format alone names the position (token_identity R^2 "
        f"{fmt.join(identity) or 'not probed'}), and layer 0 already reads much of it, so the "
        "gain of a later layer over layer 0 is what the model computed. Against the random-init "
        "copies of the same architecture on the same sequences the trained models are above the "
        f"copies' range in {counts['above']}, within it in {counts['within']} and below it in "
        f"{counts['below']} of {len(versus)} task x carrier cells (range widened by {z} standard "
        "errors over the folds). Order reconstruction: seriation of the whole cosine matrix is "
        f"ahead of the variance sort in {orders['above']} of {len(rows)} models, the "
        f"backward-only first-similarity sort in {firsts['above']} (ties within {z} standard "
        "errors over sequences). Every number here is the seed-0 trained model of each task."
    )


SECTION = """{figure}

One number against one, under the same flexible probe (spline R^2 at the best layer >= 1,
layer in brackets, ± its standard error over the folds), beside what the prompt format gives
away:

{probe_table}

Each trained model against random-init copies of its own architecture on the very same
sequences (best layer >= 1 of each):

{control_table}

Order reconstruction from shuffled hidden states (absolute Kendall's tau, best layer >= 1, ±
its standard error over sequences):

{order_table}

What it shows: {text}"""

CAPTION = "Position probes per layer: {model}."


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    from adjpos.figures import plot_probe_scores

    out = {}
    for path in sorted(results.glob("probes_*.json")):
        result = ProbeResult.from_json(path)
        if result.model.startswith(TRAINED):  # the copies are in the report's tables
            out[path.stem] = (plot_probe_scores(result), CAPTION.format(model=result.model))
    return out
