"""Claim 2: position is read better from cosine similarities than from the variance (probes)
and order reconstruction from shuffled states, each trained seed beside the random-init copy of
its own initial weights on the same sequences (`adjpos.study.probe_units`). Every comparison is
paired (`adjpos.probes.compare`), each side at its best layer counted, chosen again in every
bootstrap draw over sequences.
"""

from __future__ import annotations

import json
from typing import Any

from adjpos.probes import ProbeResult
from adjpos.stats import seed_interval
from adjpos.study import format as fmt
from adjpos.study import probe_units as units
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, every_seed, judge, seeds_text
from adjpos.study.models import TRAINED

TITLE = "Claim 2: similarity carries position better than variance (probes)"

ORDER_METHODS = ("spectral_seriation", "first_similarity_sort", "variance_sort")
BACKWARD_COSINES = ("cosine_first", "cosine_previous")
# The cells over seeds: name -> (the comparison each seed reads, the summary table's header);
# "backward": the better of the backward cosine numbers against the variance.
CELLS = {
    "cosine": ("backward", "best backward cosine vs variance (spline)"),
    "profile": ("profile_vs_variance_ridge", "profile vs variance (ridge)"),
    "order": ("seriation_vs_variance_sort", "seriation vs variance sort"),
    "first": ("first_sort_vs_variance_sort", "first sort vs variance sort"),
}


def measure(context: Context) -> dict[str, Any]:
    """One unit per trained seed (it and its own initial weights; `Context.per_unit` keeps its
    result with its marker), then each model's ``probes_<model>.json`` and the tables."""
    found = context.per_unit("probing", units.probe_unit, {})["result"]
    results = context.results
    for unit, kind in ((unit, kind) for unit in found for kind in ("trained", "control")):
        unit[kind] = ProbeResult.from_json(json.dumps(unit[kind]))
        unit[kind].to_json(results / f"probes_{units.slug(unit[kind].model)}.json")
    units.PROBES.write(results / "probes.csv", [r for u in found for r in units.probe_records(u)])
    for key, stem in (("comparisons", "probe_comparisons"), ("copies", "probe_copies")):
        units.PROBE_COMPARISONS.write(results / f"{stem}.csv", [r for u in found for r in u[key]])
    return probe_numbers(found, context.criteria)


def probe_numbers(found: list[dict[str, Any]], criteria: Criteria) -> dict[str, Any]:
    """Per trained seed: its carriers (`_carriers`, layers >= `criteria.first_layer`) and its
    paired comparisons; per seed and carrier, trained against its own copy."""
    rows = []
    for unit in found:
        compared = {c["comparison"]: c for c in unit["comparisons"]}
        backward = [f"{c}_vs_variance" for c in BACKWARD_COSINES if f"{c}_vs_variance" in compared]
        rows.append(
            {"task": unit["task"], "seed": unit["seed"], "comparisons": compared}
            | _carriers(unit["trained"], criteria.first_layer)
            | {"backward": max(backward, key=lambda k: compared[k]["value_a"], default=None)}
        )
    versus = [c for unit in found for c in unit["copies"]]
    return {"rows": rows, "versus": versus, "seeds": sorted({unit["seed"] for unit in found})}


def _carriers(result: ProbeResult, first: int) -> dict[str, Any]:
    """One trained model's scores as `probe_positions` reports them (mean over folds): the
    format baseline and the residual at layer 0, the residual and order reconstruction at
    their best layer >= `first` (each value, std, sem, layer, chance; None when not probed)."""

    def best(metric: str, probe: str, features: str | None = None, layer: int | None = None):
        found = [s for s in result.scores if (s.metric, s.probe) == (metric, probe)]
        found = [s for s in found if features in (None, s.features)]
        found = [s for s in found if (s.layer >= first if layer is None else s.layer == layer)]
        s = max(found, key=lambda s: s.value, default=None)
        return s and dict(value=s.value, std=s.std, sem=s.sem, layer=s.layer, chance=s.baseline)

    return {
        "token_identity_r2": best("r2", "ridge", "token_identity", layer=0),
        "resid_accuracy": best("accuracy", "logistic", "resid"),
        "resid_accuracy_layer0": best("accuracy", "logistic", "resid", layer=0),
        **{f"{m}_tau": best("abs_kendall_tau", m) for m in ORDER_METHODS},
    }


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    cells, seeds = tally(numbers), seeds_text(numbers["seeds"])
    rule = f"paired {criteria.level:.0%} bootstrap intervals over sequences, in every seed"
    best = f"best layer >= {criteria.first_layer}"
    found = [  # (cells, claim, unit, evidence)
        ("cosine", "Probes read position better from cosine similarities than from variance",
         "task", "best backward cosine number minus the variance under the spline probe, each "
         f"at its {best}, on positions 1..n-1 ({rule})"),
        ("order", "The cosine matrix orders shuffled states better than the variances", "task",
         f"spectral seriation minus the variance sort (absolute Kendall's tau, {best}; {rule})"),
        ("copies", "Training adds position information the random-init copies lack (control, "
         "not a claim of the study)", "task x carrier cell", "each trained seed minus the "
         f"random-init model of its own initial weights on the same sequences, {best} of each "
         f"({rule})"),
    ]  # fmt: skip
    outcomes = {key: [c["outcome"] for c in cells[key]] for key in cells}
    return [Verdict.tally(c, outcomes[k], seeds=seeds, unit=u, evidence=e) for k, c, u, e in found]


def tally(numbers: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The cells of the verdicts, each over the seeds (`_over_seeds`): per task, the best
    backward cosine against the variance (``cosine``), the profile against it (``profile``),
    seriation (``order``) and the first-similarity sort (``first``) against the variance sort;
    per task x carrier, the trained seeds against their initial weights (``copies``)."""
    cells = {
        name: _over_seeds(numbers["rows"], lambda row, key=key: _comparison(row, key))
        for name, (key, _) in CELLS.items()
    }
    cells["copies"] = _over_seeds(numbers["versus"], lambda v: v, ("task", "comparison"))
    return cells


def _comparison(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A row's comparison `key` (``backward``: its best backward cosine), or None."""
    key = row["backward"] if key == "backward" else key
    return row["comparisons"].get(key) if key else None


def _over_seeds(rows: list[dict], pick: Any, key: tuple[str, ...] = ("task",)) -> list[dict]:
    """One cell per `key` (in order of appearance): each seed's outcome (for when the
    comparison `pick(row)` lies above 0; None when not measured) and the cell's over them."""
    cells: dict[tuple, list[Outcome | None]] = {}
    for row in rows:
        found = pick(row)
        outcome = None if found is None else judge(found["low"], found["high"], 0.0, 0.0)
        cells.setdefault(tuple(row[k] for k in key), []).append(outcome)
    return [
        {"cell": name, "seeds": found} | {"outcome": every_seed(o or Outcome.WITHIN for o in found)}
        for name, found in cells.items()
    ]


def _summary_cell(cell: dict) -> str:
    """'for (3 of 3 seeds for)', 'within (2 of 3 seeds for, 1 within)', or 'not measured'."""
    if None in cell["seeds"]:
        return "not measured"
    counts = ", ".join(f"{cell['seeds'].count(o)} {o}" for o in Outcome if o in cell["seeds"])
    return f"{cell['outcome']} ({counts} of {len(cell['seeds'])} seeds)"


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    rows, cells = numbers["rows"], tally(numbers)
    by_cell = [{c["cell"]: c for c in cells[name]} for name in CELLS]  # each column's, by task
    keys = [c["cell"] for c in cells["cosine"]]
    by_task = [[key[0], *[_summary_cell(by[key]) for by in by_cell]] for key in keys]
    summary = fmt.table(["task", *(header for _, header in CELLS.values())], by_task)
    probes = fmt.table(
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
    )
    order = fmt.table(
        ["task", "seed", "seriation (all pairs)", "first-similarity sort (backward)"]
        + ["variance sort", "chance", "seriation - variance sort"]
        + ["first sort - variance sort (same n - 1 states)"],
        [
            [r["task"], r["seed"]]
            + [fmt.score(r[f"{m}_tau"]) for m in ORDER_METHODS]
            + [(r["variance_sort_tau"] or {}).get("chance")]
            + [_difference(_comparison(r, "seriation_vs_variance_sort"))]
            + [_difference(_comparison(r, "first_sort_vs_variance_sort"))]
            for r in rows
        ],
    )
    tables = [summary, probes, _control_table(numbers["versus"], cells["copies"]), order]
    said = fmt.text("probing.section", level=f"{criteria.level:.0%}", first=criteria.first_layer)
    said = said.split("\n\n")  # a paragraph before each table, one after the last
    parts = [part for pair in zip(said, tables, strict=False) for part in pair]
    return fmt.section(figures("probes"), *parts, said[-1])


def _pair_cells(comparison: dict | None) -> list[str]:
    """The two sides of a comparison and its difference, for the probe table."""
    if comparison is None:
        return ["not probed"] * 3
    a = f"{comparison['value_a']:.2f} ({comparison['a']}, {comparison['layer']})"
    b = f"{comparison['value_b']:.2f} ({comparison['layer_b']})"
    return [a, b, _difference(comparison)]


def _difference(comparison: dict | None) -> str:
    """'0.12 (0.08 to 0.15)'."""
    if comparison is None:
        return "not probed"
    return f"{comparison['difference']:.2f} ({comparison['low']:.2f} to {comparison['high']:.2f})"


def _control_table(versus: list[dict], cells: list[dict]) -> str:
    body = []
    for cell in cells:
        found = [v for v in versus if (v["task"], v["comparison"]) == cell["cell"]]
        per_seed = "; ".join(f"seed {v['seed']}: {_difference(v)}" for v in found)
        mean, low, high = seed_interval([v["difference"] for v in found])
        over = f"{mean:.2f} ({low:.2f} to {high:.2f})" if len(found) > 1 else f"{mean:.2f}"
        body.append([*cell["cell"], per_seed, over, _summary_cell(cell)])
    header = ["task", "carrier", "trained - its initial weights, per seed"]
    return fmt.table([*header, "mean over seeds (t interval)", "over the seeds"], body)


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
            said = f"Position probes per layer: {result.model} (the other seeds are in the tables)."
            out[path.stem] = (plot_probe_scores(result), said)
    return out
