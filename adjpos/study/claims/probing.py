"""Claim 2: position is read better from cosine similarities than from the variance (probes),
order reconstruction from shuffled states, and trained models against random-init copies of
their own initial weights on the very same sequences.

Seeds are the unit. Every trained seed of a task is probed beside the random-init copy with its
own starting weights (the seed's step-0 weights), both on the same held-out sequences. Every
comparison is paired (`adjpos.probes.compare`): two feature sets of one trained model on the
same positions and folds (position 0 dropped for both when either cannot score it), or a
trained model against its own copy on the same sequences; each side at its best layer >= 1,
chosen again in every draw of a percentile bootstrap over sequences (`Criteria.level`,
`Criteria.n_boot`). A task (or task x carrier cell) counts for a claim only when the interval
of the difference lies above 0 in every seed, against only when it lies below in every seed,
and within otherwise.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from adjpos.probes import (
    COMPARISON_TABLE,
    PROBE_TABLE,
    ProbeResult,
    compare_scores,
    order_scores,
    probe_positions,
    reconstruct_order,
    score_sequences,
    sequences_of_length,
)
from adjpos.runs import write_text
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
from adjpos.study.models import RANDOM, TRAINED, gen
from adjpos.tables import Table
from adjpos.tasks import TASKS

TITLE = "Claim 2: similarity carries position better than variance (probes)"

ORDER_METHODS = ("spectral_seriation", "variance_sort", "first_similarity_sort")
ORDER_COLUMNS = ("spectral_seriation", "first_similarity_sort", "variance_sort")
BACKWARD_COSINES = ("cosine_first", "cosine_previous")
# The comparisons within each trained model: name -> (a, b, probe, metric).
COMPARISONS = {
    "cosine_first_vs_variance": ("cosine_first", "variance", "spline", "r2"),
    "cosine_previous_vs_variance": ("cosine_previous", "variance", "spline", "r2"),
    "profile_vs_variance_ridge": ("cosine_profile", "variance", "ridge", "r2"),
}
# Order reconstruction: name -> (a, b, whether both rank only the states after position 0).
ORDER_COMPARISONS = {
    "seriation_vs_variance_sort": ("spectral_seriation", "variance_sort", False),
    "first_sort_vs_variance_sort": ("first_similarity_sort", "variance_sort", True),
}
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
# The carriers compared between a trained model (a) and its own initial weights (b).
CONTROL_CARRIERS = {
    "variance (spline R^2)": ("variance", "variance", "spline", "r2"),
    "cosine_first (spline R^2)": ("cosine_first", "cosine_first", "spline", "r2"),
    "cosine_previous (spline R^2)": ("cosine_previous", "cosine_previous", "spline", "r2"),
    "resid (logistic accuracy)": ("resid", "resid", "logistic", "accuracy"),
}
# probes.csv: every score of every probed model, with the trained seed it belongs to.
PROBES = Table(task="string", seed="int64", kind="string", control_seed="Int64") + PROBE_TABLE
# probe_comparisons.csv (two feature sets of a trained model) and probe_copies.csv (a carrier
# of a trained model, a, against its own initial weights, b): one row per paired comparison.
PROBE_COMPARISONS = Table(task="string", seed="int64", comparison="string") + COMPARISON_TABLE


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
    PROBES.write(results / "probes.csv", [r for unit in found for r in _probe_records(unit)])
    PROBE_COMPARISONS.write(
        results / "probe_comparisons.csv", [r for unit in found for r in unit["comparisons"]]
    )
    PROBE_COMPARISONS.write(
        results / "probe_copies.csv", [r for unit in found for r in unit["copies"]]
    )
    return probe_numbers(found, context.criteria)


@dataclass(frozen=True)
class ProbeSubject:
    """One probed model: a trained seed or the random-init copy of its initial weights, and
    the held-out sequences of its task (the same for every seed and copy)."""

    label: str
    task: str
    kind: str  # TRAINED or RANDOM
    seed: int  # the trained seed (a copy has that seed's initial weights)
    model: Any
    tokens: torch.Tensor


def probe_units(models: Any, sizes: Any) -> list[tuple[str, int]]:
    """(task, trained seed) of every unit, in order: the seeds the other stages measure."""
    return [(task, seed) for task in TASKS for seed in models.seeds(task, sizes)]


def unit_name(task: str, seed: int) -> str:
    """The run folder's marker of one unit."""
    return f"probing {task} seed {seed}"


def probe_pair(models: Any, sizes: Any, task: str, seed: int) -> tuple[ProbeSubject, ProbeSubject]:
    """Trained seed `seed` of `task` and the random-init model of its own initial weights
    (`Models.control` with ``like=seed``), on the task's held-out sequences of one length."""
    model, spec = models.trained(task, seed)
    tokens = sequences_of_length(spec, sizes.n_probe_sequences, generator=gen(4))
    copy = models.control(task, seed, like=seed)
    return (
        ProbeSubject(f"{TRAINED} {task} seed {seed}", task, TRAINED, seed, model, tokens),
        ProbeSubject(f"{RANDOM} {task} seed {seed}", task, RANDOM, seed, copy, tokens),
    )


def probe_unit(models: Any, sizes: Any, criteria: Criteria, task: str, seed: int) -> str:
    """One unit of the probing stage as JSON: both models' `ProbeResult`s, the comparisons
    within the trained model and the trained model against its copy (see `write_unit`)."""
    trained, copy = probe_pair(models, sizes, task, seed)
    draws = {"n_boot": criteria.n_boot, "level": criteria.level}
    unit = {
        "task": task,
        "seed": seed,
        "trained": json.loads(measure_probes(trained, sizes).to_json()),
        "control": json.loads(measure_probes(copy, sizes).to_json()),
        "comparisons": compare_within(trained, sizes, **draws),
        "copies": compare_copies(trained, copy, sizes, **draws),
    }
    return json.dumps(unit)


def measure_probes(subject: ProbeSubject, sizes: Any) -> ProbeResult:
    """Every feature set with every probe, and order reconstruction."""
    common = {"model_name": subject.label, "progress": False}
    features, probes = list(sizes.features), list(sizes.probes)
    result = probe_positions(
        subject.model, subject.tokens, features=features, probe=probes, cv=sizes.cv,
        repeats=sizes.repeats, **common,
    )  # fmt: skip
    return result + reconstruct_order(subject.model, subject.tokens, **common)


def compare_within(subject: ProbeSubject, sizes: Any, **draws: Any) -> list[dict[str, Any]]:
    """The `COMPARISONS` this size measures and the `ORDER_COMPARISONS` of one trained model,
    each side at its best layer >= 1: the rows of ``probe_comparisons.csv``."""
    rows = _paired(subject, subject, COMPARISONS, sizes, **draws)
    layers = list(range(1, subject.model.cfg.n_layers + 1))
    for name, (a, b, drop_first) in ORDER_COMPARISONS.items():
        taus = order_scores(subject.model, subject.tokens, layers=layers, drop_first=drop_first)
        found = compare_scores(taus[a], taus[b], metric="abs_kendall_tau", best_layer=True, **draws)
        rows += _named(subject, name, found)
    return rows


def compare_copies(
    trained: ProbeSubject, copy: ProbeSubject, sizes: Any, **draws: Any
) -> list[dict[str, Any]]:
    """Each of the `CONTROL_CARRIERS` this size measures, the trained model minus its own
    initial weights on the same sequences, each at its best layer >= 1: the rows of
    ``probe_copies.csv``."""
    return _paired(trained, copy, CONTROL_CARRIERS, sizes, **draws)


def _paired(first: ProbeSubject, second: ProbeSubject, specs: dict, sizes: Any, **draws: Any):
    """Set a on `first` minus set b on `second` for each spec (a, b, probe, metric) whose sets
    and probe this size measures; two sets of one model are scored together, on the
    positions both have."""
    layers = list(range(1, first.model.cfg.n_layers + 1))
    rows = []
    for probe in sizes.probes:
        wanted = {
            name: (a, b, metric)
            for name, (a, b, p, metric) in specs.items()
            if p == probe and {a, b} <= set(sizes.features)
        }
        if not wanted:
            continue
        if first is second:
            groups = [(a, b) for a, b, _ in wanted.values()]
            mine = theirs = _scores(first, groups, probe, layers, sizes)
        else:  # the same set on two models: the same samples and folds
            groups = [(a,) for a, _, _ in wanted.values()]
            mine, theirs = (_scores(s, groups, probe, layers, sizes) for s in (first, second))
        for (name, (a, b, metric)), x, y in zip(wanted.items(), mine, theirs, strict=True):
            found = compare_scores(x[a], y[b], metric=metric, best_layer=True, **draws)
            rows += _named(first, name, found)
    return rows


def _named(subject: ProbeSubject, name: str, rows: list[dict]) -> list[dict[str, Any]]:
    return [{"task": subject.task, "seed": subject.seed, "comparison": name} | r for r in rows]


def _scores(subject: ProbeSubject, groups: list, probe: str, layers: list, sizes: Any) -> list:
    return score_sequences(
        subject.model, subject.tokens, groups, probe=probe, layers=layers, cv=sizes.cv, seed=0
    )


def slug(label: str) -> str:
    """A file-name-safe form of a model label."""
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").replace("__", "_")


def write_unit(results: Any, unit: dict[str, Any]) -> None:
    """A unit's files: ``probes_<model>.json`` for each of its two models (the figures read
    them) and ``probe_pairs_<task>_seed_<seed>.json`` with its comparisons."""
    for kind in ("trained", "control"):
        result = ProbeResult.from_json(json.dumps(unit[kind]))
        result.to_json(results / f"probes_{slug(result.model)}.json")
    pairs = {k: unit[k] for k in ("task", "seed", "comparisons", "copies")}
    pairs |= {"trained": unit["trained"]["model"], "control": unit["control"]["model"]}
    write_text(results / _pairs_file(unit["task"], unit["seed"]), json.dumps(pairs, indent=1))


def read_unit(results: Any, task: str, seed: int) -> dict[str, Any]:
    """What `write_unit` wrote, with both `ProbeResult`s."""
    unit = json.loads((results / _pairs_file(task, seed)).read_text())
    for kind in ("trained", "control"):
        unit[kind] = ProbeResult.from_json(results / f"probes_{slug(unit[kind])}.json")
    return unit


def _pairs_file(task: str, seed: int) -> str:
    return f"probe_pairs_{task}_seed_{seed}.json"


def _probe_records(unit: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kind, control_seed in ((TRAINED, None), (RANDOM, unit["seed"])):
        result = unit["trained" if kind == TRAINED else "control"]
        keys = {"task": unit["task"], "seed": unit["seed"], "kind": kind}
        rows += [keys | {"control_seed": control_seed} | r for r in result.records()]
    return rows


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
        name: _over_seeds(rows, lambda row, key=key: _side(_comparison(row, key)))
        for name, key in CELLS.items()
    }
    cells["copies"] = _over_seeds(numbers["versus"], lambda v: v["side"], ("task", "comparison"))
    return cells


def _comparison(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A row's comparison `key` (``backward``: its best backward cosine), or None."""
    key = row["backward"] if key == "backward" else key
    return row["comparisons"].get(key) if key else None


def _side(comparison: dict | None) -> str | None:
    return None if comparison is None else comparison["side"]


def _over_seeds(rows: list[dict], side: Any, key: tuple[str, ...] = ("task",)) -> list[dict]:
    """One cell per `key` (in order of appearance) with its seeds' sides (None: not measured)
    and its outcome: 'above' when every seed is above 0, 'below' when every seed is below,
    'within' otherwise."""
    cells: dict[tuple, list[str | None]] = {}
    for row in rows:
        cells.setdefault(tuple(row[k] for k in key), []).append(side(row))
    out = []
    for name, sides in cells.items():
        counts = {s: sides.count(s) for s in ("above", "below", "within")}
        out.append(
            {"cell": name, "sides": sides, "outcome": across_seeds([s or "within" for s in sides])}
            | counts
        )
    return out


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
