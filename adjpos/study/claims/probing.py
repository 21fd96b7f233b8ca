"""Claim 2: position is read better from cosine similarities than from the variance (probes),
order reconstruction from shuffled states, and trained models against random-init copies of
their own initial weights on the very same sequences.

Seeds are the unit: every trained seed is probed beside the random-init copy with its own
starting weights on the same held-out sequences (`adjpos.study.probe_units`). Every comparison
is paired (`adjpos.probes.compare`): two feature sets of one model on the same positions and
folds, or a trained model against its copy; each side at its best layer >= 1, chosen again in
every draw of a percentile bootstrap over sequences. A task (or task x carrier cell) counts for
a claim only when the difference lies above 0 in every seed, against only when below in every
seed, and within otherwise.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from adjpos.probes import (
    ProbeResult,
)
from adjpos.stats import compare_intervals, seed_interval
from adjpos.study import format as fmt
from adjpos.study.claim import (
    CRITERIA,
    Context,
    Criteria,
    Verdict,
    across_seeds,
    seeds_text,
    toward,
)
from adjpos.study.models import TRAINED
from adjpos.study.probe_units import (
    PROBE_COMPARISONS,
    PROBES,
    probe_records,
    probe_unit,
    probe_units,
    read_unit,
    unit_name,
    write_unit,
)

TITLE = "Claim 2: similarity carries position better than variance (probes)"

ORDER_METHODS = ("spectral_seriation", "variance_sort", "first_similarity_sort")
ORDER_COLUMNS = ("spectral_seriation", "first_similarity_sort", "variance_sort")
BACKWARD_COSINES = ("cosine_first", "cosine_previous")
# The cells over seeds: name -> the comparison each seed reads ("backward": the better of
# the backward cosine numbers against the variance).
CELLS = {
    "cosine": "backward",
    "profile": "profile_vs_variance_ridge",
    "order": "seriation_vs_variance_sort",
    "first": "first_sort_vs_variance_sort",
}
# The summary table's columns: header -> cells.
SUMMARY = {
    "best backward cosine vs variance (spline)": "cosine",
    "profile vs variance (ridge)": "profile",
    "seriation vs variance sort": "order",
    "first sort vs variance sort": "first",
}


def measure(context: Context) -> dict[str, Any]:
    """One unit per trained seed (it and its own initial weights), run by the engine, then
    the tables."""
    folder, results = context.folder, context.results
    units = probe_units(context.models, context.sizes)
    todo = [(t, s) for t, s in units if not folder.is_done(unit_name(t, s))]
    jobs = [(context.models.fresh(), context.sizes, context.criteria, t, s) for t, s in todo]
    for (*_, task, seed), text in context.units(probe_unit, jobs):
        write_unit(results, json.loads(text))
        folder.mark_done(unit_name(task, seed))
    found = [read_unit(results, task, seed) for task, seed in units]
    PROBES.write(results / "probes.csv", [r for unit in found for r in probe_records(unit)])
    PROBE_COMPARISONS.write(
        results / "probe_comparisons.csv", [r for unit in found for r in unit["comparisons"]]
    )
    PROBE_COMPARISONS.write(
        results / "probe_copies.csv", [r for unit in found for r in unit["copies"]]
    )
    return probe_numbers(found, context.criteria)


def probe_numbers(units: list[dict[str, Any]], criteria: Criteria = CRITERIA) -> dict[str, Any]:
    """Per trained seed: its carriers (`_carriers`) and its paired comparisons, each with the
    side of 0 its interval lies on; per seed and carrier, trained against its own copy."""
    rows, versus = [], []
    for unit in units:
        compared = {c["comparison"]: _with_side(c) for c in unit["comparisons"]}
        rows.append(
            {"task": unit["task"], "seed": unit["seed"], **_carriers(unit["trained"])}
            | {"comparisons": compared, "backward": _backward(compared)}
        )
        versus += [_with_side(c) for c in unit["copies"]]
    seeds = sorted({unit["seed"] for unit in units})
    return {"rows": rows, "versus": versus, "level": criteria.level, "seeds": seeds}


def _with_side(row: dict[str, Any]) -> dict[str, Any]:
    """The row with ``side``: where its interval lies against 0 ('above', 'below', 'within')."""
    return {**row, "side": compare_intervals(row["low"], row["high"], 0.0, 0.0)}


def _backward(compared: dict[str, dict]) -> str | None:
    """The comparison of the best backward cosine number (the higher R^2 of cosine_first and
    cosine_previous) against the variance, or None when neither was measured."""
    found = [f"{c}_vs_variance" for c in BACKWARD_COSINES if f"{c}_vs_variance" in compared]
    return max(found, key=lambda k: compared[k]["value_a"]) if found else None


def _carriers(result: ProbeResult) -> dict[str, Any]:
    """One trained model's scores as `probe_positions` reports them (mean over folds): the
    format baseline, the residual and order reconstruction."""
    return {
        "token_identity_r2": _at(result, "token_identity", "ridge", "r2"),
        "resid_accuracy": _best(result, "accuracy", features="resid", probe="logistic"),
        "resid_accuracy_layer0": _at(result, "resid", "logistic", "accuracy"),
        **{f"{m}_tau": _best(result, "abs_kendall_tau", probe=m) for m in ORDER_METHODS},
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
    cells, seeds = tally(numbers), seeds_text(numbers["seeds"])
    rule = (
        f"paired {criteria.level:.0%} bootstrap intervals over sequences; a cell counts only "
        "when every seed holds"
    )
    return [
        Verdict.tally(
            "Probes read position better from cosine similarities than from variance",
            [toward(cell["outcome"]) for cell in cells["cosine"]],
            seeds=seeds,
            unit="task",
            evidence="best backward cosine number minus the variance under the spline probe, "
            f"each at its best layer >= 1, on positions 1..n-1 ({rule}): "
            f"{_held(cells['cosine'])}; the many-number profile under ridge, not like against "
            f"like: {_held(cells['profile'])}",
        ),
        Verdict.tally(
            "The cosine matrix orders shuffled states better than the variances",
            [toward(cell["outcome"]) for cell in cells["order"]],
            seeds=seeds,
            unit="task",
            evidence="spectral seriation minus the variance sort (absolute Kendall's tau, best "
            f"layer >= 1; {rule}): {_held(cells['order'])}; the backward-only "
            "first-similarity sort against the variance sort of the same n - 1 states: "
            f"{_held(cells['first'])}",
        ),
        Verdict.tally(
            "Training adds position information the random-init copies lack (control, not a "
            "claim of the study)",
            [toward(cell["outcome"]) for cell in cells["copies"]],
            seeds=seeds,
            unit="task x carrier cell",
            evidence="each trained seed minus the random-init model of its own initial weights "
            f"on the same sequences, best layer >= 1 of each ({rule})",
        ),
    ]


def tally(numbers: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The cells of the verdicts, each over the seeds (`_over_seeds`): per task, the best
    backward cosine against the variance (``cosine``), the profile against it (``profile``),
    seriation (``order``) and the first-similarity sort (``first``) against the variance sort;
    per task x carrier, the trained seeds against their initial weights (``copies``)."""
    rows = numbers["rows"]
    cells = {
        name: _over_seeds(rows, lambda row, key=key: (_comparison(row, key) or {}).get("side"))
        for name, key in CELLS.items()
    }
    cells["copies"] = _over_seeds(numbers["versus"], lambda v: v["side"], ("task", "comparison"))
    return cells


def _comparison(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A row's comparison `key` (``backward``: its best backward cosine), or None."""
    key = row["backward"] if key == "backward" else key
    return row["comparisons"].get(key) if key else None


def _over_seeds(rows: list[dict], side: Any, key: tuple[str, ...] = ("task",)) -> list[dict]:
    """One cell per `key` (in order of appearance) with its seeds' sides (None: not measured)
    and its outcome: 'above' when every seed is above 0, 'below' when every seed is below,
    'within' otherwise."""
    cells: dict[tuple, list[str | None]] = {}
    for row in rows:
        cells.setdefault(tuple(row[k] for k in key), []).append(side(row))
    return [
        {"cell": name, "sides": sides, "outcome": across_seeds([s or "within" for s in sides])}
        | {s: sides.count(s) for s in ("above", "below", "within")}
        for name, sides in cells.items()
    ]


def _held(cells: list[dict]) -> str:
    """'addition 3 of 3 seeds above, reversal 3 of 3 seeds below, ...' (the larger side)."""
    return ", ".join(f"{cell['cell'][0]} {_seed_count(cell)}" for cell in cells) or "none"


def _seed_count(cell: dict) -> str:
    """'3 of 3 seeds above': the side most seeds are on (above, then below, on a tie), or
    'not measured'."""
    if None in cell["sides"]:
        return "not measured"
    side = max(("above", "below", "within"), key=lambda s: cell[s])
    return f"{cell[side]} of {len(cell['sides'])} seeds {side}"


def _summary_cell(cell: dict) -> str:
    """'above (3 of 3 seeds above)', 'within (2 of 3 seeds above)', or 'not measured'."""
    count = _seed_count(cell)
    return count if count == "not measured" else f"{cell['outcome']} ({count})"


def section(numbers: dict[str, Any], figures: Any) -> str:
    rows, cells = numbers["rows"], tally(numbers)
    return SECTION.format(
        figure=figures("probes"),
        level=f"{numbers['level']:.0%}",
        summary_table=fmt.table(
            ["task", *SUMMARY],
            [
                [cell[0], *[_summary_cell(by_task[cell]) for by_task in _by_cell(cells)]]
                for cell in [c["cell"] for c in cells["cosine"]]
            ],
        ),
        probe_table=fmt.table(
            ["task", "seed", "best backward cosine", "variance", "cosine - variance"]
            + ["profile - variance (ridge, many vs one)", "token_identity R^2"]
            + ["resid accuracy, layer 0", "resid accuracy, best"],
            [
                [r["task"], r["seed"], *_pair_cells(_comparison(r, "backward"))]
                + [_difference(_comparison(r, "profile_vs_variance_ridge"))]
                + [fmt.score(r["token_identity_r2"]), fmt.score(r["resid_accuracy_layer0"])]
                + [fmt.score(r["resid_accuracy"])]
                for r in rows
            ],
        ),
        control_table=_control_table(numbers["versus"], cells["copies"]),
        order_table=fmt.table(
            ["task", "seed", "seriation (all pairs)", "first-similarity sort (backward)"]
            + ["variance sort", "chance", "seriation - variance sort"]
            + ["first sort - variance sort (same n - 1 states)"],
            [
                [r["task"], r["seed"]]
                + [fmt.score(r[f"{m}_tau"]) for m in ORDER_COLUMNS]
                + [(r["variance_sort_tau"] or {}).get("chance")]
                + [_difference(_comparison(r, "seriation_vs_variance_sort"))]
                + [_difference(_comparison(r, "first_sort_vs_variance_sort"))]
                for r in rows
            ],
        ),
        text=_text(numbers, cells),
    )


def _by_cell(cells: dict[str, list[dict]]) -> list[dict[tuple, dict]]:
    """For each column of `SUMMARY`, its cells by task."""
    return [{c["cell"]: c for c in cells[name]} for name in SUMMARY.values()]


def _pair_cells(comparison: dict | None) -> list[str]:
    """The two sides of a comparison and its difference, for the probe table."""
    if comparison is None:
        return ["not probed"] * 3
    a = f"{comparison['value_a']:.2f} ({comparison['a']}, {comparison['layer']})"
    b = f"{comparison['value_b']:.2f} ({comparison['layer_b']})"
    return [a, b, _difference(comparison)]


def _difference(comparison: dict | None) -> str:
    """'0.12 (0.08 to 0.15), above'."""
    if comparison is None:
        return "not probed"
    low, high = comparison["low"], comparison["high"]
    return f"{comparison['difference']:.2f} ({low:.2f} to {high:.2f}), {comparison['side']}"


def _control_table(versus: list[dict], cells: list[dict]) -> str:
    body = []
    for cell in cells:
        found = [v for v in versus if (v["task"], v["comparison"]) == cell["cell"]]
        per_seed = "; ".join(f"seed {v['seed']}: {_difference(v)}" for v in found)
        mean, low, high = seed_interval([v["difference"] for v in found])
        over = f"{mean:.2f} ({low:.2f} to {high:.2f})" if len(found) > 1 else f"{mean:.2f}"
        body.append([*cell["cell"], per_seed, over, _summary_cell(cell)])
    header = ["task", "carrier", "trained - its initial weights, per seed"]
    return fmt.table([*header, "mean over seeds (t interval)", "seeds"], body)


def _text(numbers: dict[str, Any], cells: dict[str, list[dict]]) -> str:
    outcome = {name: Counter(c["outcome"] for c in found) for name, found in cells.items()}
    one, profile, order, first, copies = (
        outcome[k] for k in ("cosine", "profile", "order", "first", "copies")
    )
    tasks, n_cells = len(cells["cosine"]), len(cells["copies"])
    rows = numbers["rows"]
    # token_identity reads the tokens alone: the same for every seed of a task.
    by_task = {r["task"]: r["token_identity_r2"] for r in rows if r["token_identity_r2"]}
    identity = [round(entry["value"], 2) for entry in by_task.values()]
    level = f"{numbers['level']:.0%}"
    return (
        "One number against one under the spline probe, on the same positions (1..n-1) and "
        "folds, the best backward-only cosine number (the similarity to the first or to the "
        "previous token, what the model itself can compare at position k) is above the "
        f"variance in every seed in {one['above']}, below it in every seed in {one['below']} "
        f"and neither in {one['within']} of {tasks} tasks ({level} paired bootstrap intervals "
        "over sequences). The cosine profile (one similarity per other position, later tokens "
        f"included) under ridge is above the variance in every seed in {profile['above']} of "
        f"{tasks} tasks, many numbers against one. On task sequences the format alone names "
        f"the position (token_identity R^2 {fmt.join(identity) or 'not probed'}), and layer 0 "
        "already reads much of it, so the gain of a later layer over layer 0 is what the model "
        "computed. Against the random-init model of its own initial weights on the same "
        f"sequences, the trained model is above in every seed in {copies['above']}, below in "
        f"every seed in {copies['below']} and neither in {copies['within']} of {n_cells} task "
        "x carrier cells. Order reconstruction: seriation of the whole cosine matrix is ahead "
        f"of the variance sort in every seed in {order['above']} of {tasks} tasks, the "
        "backward-only first-similarity sort (against the variance sort of the same n - 1 "
        f"states) in {first['above']}. Seeds {seeds_text(numbers['seeds'])}."
    )


SECTION = """{figure}

Each cell over the trained seeds: above (or below) when the {level} paired interval of the
difference lies above (below) 0 in every seed, within otherwise:

{summary_table}

Per seed, one number against one under the spline probe (each at its best layer >= 1, layer in
brackets; the variance on the same positions 1..n-1 and folds as the cosine number), with the
difference and its {level} paired bootstrap interval over sequences, beside what the prompt
format gives away (mean over folds ± its standard error):

{probe_table}

Each trained seed against the random-init model of its own initial weights on the very same
sequences (best layer >= 1 of each; the mean over seeds with its Student-t interval, wide with
few seeds):

{control_table}

Order reconstruction from shuffled hidden states (absolute Kendall's tau, best layer >= 1, ±
its standard error over sequences; differences with their paired intervals):

{order_table}

What it shows: {text}"""

CAPTION = "Position probes per layer: {model} (the other seeds are in the tables)."


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """The probe scores of each task's first trained seed by layer (every seed and copy is
    in probes.csv and the report's tables)."""
    from adjpos.figures import plot_probe_scores

    out, drawn = {}, set()
    for path in sorted(results.glob(f"probes_{TRAINED}_*.json")):
        result = ProbeResult.from_json(path)
        task = result.model.removeprefix(f"{TRAINED} ").split(" ")[0]
        if task not in drawn:  # sorted by seed within a task: the first seed
            drawn.add(task)
            out[path.stem] = (plot_probe_scores(result), CAPTION.format(model=result.model))
    return out
