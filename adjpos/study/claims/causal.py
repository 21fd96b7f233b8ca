"""Does the model read the pattern? Causal tests: one carrier of position changed at the input
of one block of each trained model, beside its matched control (`adjpos.interventions`), the
read-out positions kept (the verdicts) or changed (beside); each row's `finding` is decided
from its intervals alone.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from adjpos.interventions import FAMILIES, INTERVENTION_TABLE, SPECS, intervention_table
from adjpos.interventions.spec import added_dose
from adjpos.stats import every_seed, judge, wilson_interval
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Prefixed, Verdict, seeds_text
from adjpos.study.models import TRAINED
from adjpos.study.sizes import CURVE_ARMS
from adjpos.tables import Table, plain_records, with_interval

TITLE = "Does the model read the pattern? (causal tests)"

# Interventions whose verdicts the report gives (each against its control), and their words:
# read from the intervention table.
TESTED = tuple(name for name, spec in SPECS.items() if spec.role == "tested")
WORDS = {name: spec.label for name, spec in SPECS.items()}
# The causal claims, by the ``claim`` of the interventions that test them (`SPECS`): what each
# would show if the model needed that carrier.
CLAIMS = {
    "norms": "The model reads position from the norms: moving them between positions, every "
    "cosine kept, breaks the task beyond a size-matched control (causal test)",
    "subspace": "The model reads position from its position subspace: swapping it between "
    "positions, norms kept, breaks the task beyond a random subspace of its rank (causal test)",
    "linear": "The model needs linear position information: erasing it breaks the task beyond "
    "erasing as many random directions, the states changed as much (causal test)",
}


def measure(context: Context) -> dict[str, Any]:
    """One unit per trained seed, run by the engine, then the combined tables
    (``interventions.csv``; with the arms, theirs, ``curve_arms.csv`` and
    ``curve_differences.csv``, which the hypothesis claim reads)."""
    tables = {"interventions": INTERVENTION_TABLE}
    if context.sizes.curve_layers:
        from adjpos.interventions import CURVE_DIFFERENCES

        tables |= {"curve_arms": INTERVENTION_TABLE, "curve_differences": CURVE_DIFFERENCES}
    found = context.per_unit("interventions", causal_unit, tables)
    for name, table in tables.items():
        table.write(context.results / f"{name}.csv", found[name])
    numbers = causal_numbers(found["interventions"], context.criteria.level)
    findings = [r | {"finding": finding(r, context.criteria)} for r in numbers["rows"]]
    FINDINGS.write(context.results / "causal_findings.csv", findings)  # the report's, whole
    return numbers


def causal_unit(
    models: Any, sizes: Any, criteria: Any, name: str, seed: int, folder: Any = None
) -> dict[str, Any]:
    """The causal tests on trained seed `seed` of task `name` (`intervention_table`, the same
    prompts for every seed), and the position-curve arms at their own sizes with the paired
    differences the hypothesis reads, as {table: records}; with `folder` (`Context.per_unit`)
    each part is kept when done and read back on resume."""
    model, task = models.trained(name, seed)
    common = {"readouts": sizes.readouts, "model_name": TRAINED, "model_seed": seed}
    common |= {"progress": False}
    options = {"layers": sizes.intervention_layers, "interventions": sizes.interventions}
    options |= {"n_prompts": sizes.intervention_prompts, "control_draws": sizes.control_draws}
    table = intervention_table(model, task, **options, **common, folder=folder)
    out = {"interventions": table.to_dict("records")}
    if sizes.curve_layers:
        options = {"layers": sizes.curve_layers, "interventions": ("none", *CURVE_ARMS)}
        options |= {"n_prompts": sizes.curve_prompts, "control_draws": sizes.curve_draws}
        options |= {"doses": sizes.curve_doses, "return_differences": True}
        arms = folder and Prefixed(folder, "arms")
        table, differences = intervention_table(model, task, **options, **common, folder=arms)
        tables, found = [table], [differences]
        # sizes added where too few are measurable (an arm built whole runs at the first only)
        dosed = tuple(a for a in CURVE_ARMS if not SPECS[a].params.get("once"))
        for layer in sizes.curve_layers:
            options |= {"layers": [layer], "interventions": dosed}
            for n in range(1, sizes.curve_added + 1):
                rows = pd.concat(tables)  # the random control's exact match at each dose so far
                rows = rows[(rows["intervention"] == "position_random") & (rows["layer"] == layer)]
                levels = dict(zip(rows["dose"].astype(float), rows["exact_match"], strict=True))
                floor, need = criteria.curve_measurable, criteria.min_sizes
                dose = added_dose(levels, floor, need, last=n == sizes.curve_added)
                if dose is None:
                    break
                options["doses"] = [dose]
                added = intervention_table(model, task, **options, **common, folder=arms)
                tables, found = [*tables, added[0]], [*found, added[1]]
        out["curve_arms"] = pd.concat(tables).to_dict("records")
        out["curve_differences"] = pd.concat(found).to_dict("records")
    return out


def causal_numbers(table: pd.DataFrame, level: float = 0.95) -> dict[str, Any]:
    """Every tested cell beside its control and the baseline, in each read-out variant: exact
    match with its interval over prompts, the paired difference from the control with its
    interval, the sizes of both changes; and each model's unchanged exact match with its
    Wilson interval at `level` (``baselines``)."""
    rows, baselines = [], {}
    for (task, seed, layer, readout), group in table.groupby(KEYS, sort=False):
        by = {r["intervention"]: r for r in plain_records(group)}
        if "none" not in by:
            continue
        base = by["none"]
        hits, n = round(base["exact_match"] * base["n_prompts"]), int(base["n_prompts"])
        low, high = wilson_interval(hits, n, level=level)
        model = {"task": task, "seed": int(seed), "n_prompts": n, "baseline": hits / n}
        baselines[task, int(seed)] = model | {"baseline_low": low, "baseline_high": high}
        for name in (n for n in TESTED if n in by):
            mine, control_name = by[name], by[name]["control"]
            control = by.get(control_name)
            theirs = dict.fromkeys(CELL) if control is None else _cell(control)
            draws = None if control is None else control["control_draws"]
            rows.append(
                {"task": task, "seed": int(seed), "layer": int(layer), "intervention": name}
                | {"readout": readout, "control": None if control is None else control_name}
                | _cell(mine)
                | {f"control_{k}": v for k, v in theirs.items()}
                | {f"baseline{k}": base[f"exact_match{k}"] for k in ("", "_low", "_high")}
                | {k: mine[k] for k in ("difference", "difference_low", "difference_high")}
                | {"percentile": mine["percentile"], "control_draws": draws}
            )
    seeds = sorted(int(s) for s in table["seed"].dropna().unique())
    return {"rows": rows, "seeds": seeds, "baselines": list(baselines.values())}


KEYS = ["task", "seed", "layer", "readout"]
# A changed model's numbers in the causal numbers: name -> its column of interventions.csv.
CELL = {"exact_match": "exact_match", "low": "exact_match_low", "high": "exact_match_high"}
CELL |= {"perturbation": "perturbation"}


# results/causal_findings.csv: every row of the report's causal table, with its finding.
FINDINGS = Table(task="string", seed="int64", layer="int64", intervention="string")
FINDINGS += Table(readout="string", control="string")
FINDINGS += Table(**dict.fromkeys([*CELL, *(f"control_{k}" for k in CELL)], "float64"))
FINDINGS += Table(**with_interval("baseline", "difference"), percentile="float64")
FINDINGS += Table(control_draws="Int64", finding="string")


def _cell(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row[column] for name, column in CELL.items()}


def finding(r: dict[str, Any], criteria: Criteria) -> str:
    """One row's finding (docs/causal.md), every threshold on an interval's bound: "not needed"
    when its interval reaches the baseline's; "breaks the task" with no matched control;
    "necessary" when the difference from the control lies `criteria.min_gap` below 0, under
    `criteria.percentile` % of its draws harm more and the change is at most
    `criteria.size_slack` times the control's; "beyond a smaller control" when only the size
    fails; "no more than its control" otherwise."""
    base = (r["baseline_low"], r["baseline_high"])
    if judge(r["low"], r["high"], *base, favour="below") != Outcome.FOR:
        return "not needed"
    if r["control"] is None or r["intervention"] == "uniform_attention":
        return "breaks the task"
    gap = -criteria.min_gap
    bound = (r["difference_low"], r["difference_high"])
    if None in bound or judge(*bound, gap, gap, favour="below") != Outcome.FOR:
        return "no more than its control"
    percentile = r.get("percentile")
    if percentile is not None and not percentile < criteria.percentile:
        return "no more than its control"
    if r["perturbation"] > criteria.size_slack * r["control_perturbation"]:
        return "beyond a smaller control"
    return "necessary"


def judged(rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The read-out variant the verdicts use ("kept" when measured) and its rows."""
    readout = "kept" if any(r["readout"] == "kept" for r in rows) else "changed"
    return readout, [r for r in rows if r["readout"] == readout]


def cells(rows: list[dict[str, Any]], criteria: Criteria) -> dict[tuple, Outcome]:
    """(task, layer, intervention) -> its outcome over the seeds (`every_seed`), layers
    counted only; a row whose finding is "necessary" is for its claim, "not needed" against."""
    found: dict[tuple, list[Outcome]] = {}
    sides = {"necessary": Outcome.FOR, "not needed": Outcome.AGAINST}  # the others: within
    for r in (r for r in rows if r["layer"] >= criteria.first_layer):
        outcome = sides.get(finding(r, criteria), Outcome.WITHIN)
        found.setdefault((r["task"], r["layer"], r["intervention"]), []).append(outcome)
    return {key: every_seed(seeds) for key, seeds in found.items()}


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    """Per task x layer (>= `criteria.first_layer`) x intervention cell, read-out positions
    kept (`judged`): for when every seed's finding is "necessary", against when every one is
    "not needed"."""
    readout, rows = judged(numbers["rows"])
    by_cell, seeds = cells(rows, criteria), seeds_text(numbers["seeds"])
    evidence = "necessary in every seed: the paired difference's 95% upper bound at least "
    evidence += f"{fmt.n(criteria.min_gap)} below zero, fewer than {criteria.percentile:g}% of "
    evidence += "the control's draws harming more, the change at most "
    evidence += f"{fmt.n(criteria.size_slack)} times the control's; layers >= "
    evidence += f"{criteria.first_layer}, read-out positions {readout}"
    words = {"seeds": seeds, "unit": "task x layer x intervention cell", "evidence": evidence}
    out = []
    for claim, statement in CLAIMS.items():
        outcomes = [o for (_, _, n), o in by_cell.items() if SPECS[n].claim == claim]
        out.append(Verdict.tally(statement, outcomes, **words))
    return out


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    readout, rows = judged(numbers["rows"])
    values = {"min_gap": fmt.n(criteria.min_gap), "size_slack": fmt.n(criteria.size_slack)}
    values |= {"percentile": f"{criteria.percentile:g}", "seeds": seeds_text(numbers["seeds"])}
    values |= {"per_task": _per_task(rows, criteria), "first": criteria.first_layer}
    after = fmt.text("causal.after", **values)
    if len(rows) > fmt.LONG:  # each seed's row is in results/causal_findings.csv
        shown = [fmt.text("causal.summary", readout=readout), _summary(rows, criteria)]
    else:
        shown = [fmt.text("causal.before", readout=readout), _rows_table(numbers, criteria)]
    return fmt.section(figures("interventions"), *shown, after)


def _rows_table(numbers: dict[str, Any], criteria: Criteria) -> str:
    """Each seed's row read-out positions `judged`, with the other read-out's finding."""
    readout, rows = judged(numbers["rows"])
    beside = {
        (r["task"], r["seed"], r["layer"], r["intervention"]): finding(r, criteria)
        for r in numbers["rows"]
        if r["readout"] != readout
    }

    def interval(value: Any, low: Any, high: Any) -> str:
        return "" if value is None else f"{value:.2f} [{low:.2f}, {high:.2f}]"

    header = ["task", "seed", "layer", "change", "exact match", "control's exact match"]
    header += ["difference", "baseline", "size (control's)", f"finding, read-out {readout}"]
    header += ["finding, read-out changed" if readout == "kept" else "finding, other read-out"]
    body = [
        [r["task"], r["seed"], r["layer"], WORDS.get(r["intervention"], r["intervention"])]
        + [interval(r["exact_match"], r["low"], r["high"])]
        + [interval(r["control_exact_match"], r["control_low"], r["control_high"])]
        + [interval(r["difference"], r["difference_low"], r["difference_high"])]
        + [f"{r['baseline']:.2f}", _sizes(r), finding(r, criteria)]
        + [beside.get((r["task"], r["seed"], r["layer"], r["intervention"]), "")]
        for r in rows
    ]
    return fmt.table(header, body)


def _summary(rows: list[dict[str, Any]], criteria: Criteria) -> str:
    """One row per task and change: by layer, the mean exact match over seeds (its control's
    in brackets) and how many seeds found what."""
    found: dict[tuple, dict[int, list]] = {}
    for r in rows:
        key = (r["task"], WORDS.get(r["intervention"], r["intervention"]))
        found.setdefault(key, {}).setdefault(r["layer"], []).append(r)

    def means(seeds: list) -> str:
        mean = sum(r["exact_match"] for r in seeds) / len(seeds)
        theirs = [r["control_exact_match"] for r in seeds if r["control_exact_match"] is not None]
        return f"{mean:.2f}" + (f" ({sum(theirs) / len(theirs):.2f})" if theirs else "")

    def counts(seeds: list) -> str:
        said = [finding(r, criteria) for r in seeds]
        return ", ".join(f"{word} {said.count(word)}" for word in dict.fromkeys(said))

    def by_layer(layers: dict[int, list], cell: Any) -> str:
        return "; ".join(f"{layer}: {cell(seeds)}" for layer, seeds in layers.items())

    body = [[*key, by_layer(at, means), by_layer(at, counts)] for key, at in found.items()]
    header = ["task", "change", "exact match by layer (control's), mean over seeds"]
    return fmt.table([*header, "findings by layer (seeds)"], body)


def _sizes(r: dict[str, Any]) -> str:
    theirs = r["control_perturbation"]
    return f"{r['perturbation']:.2f}" + ("" if theirs is None else f" ({theirs:.2f})")


def _per_task(rows: list[dict[str, Any]], criteria: Criteria) -> str:
    """Per task, the carriers whose cell is for its claim (necessary in every seed)."""
    found: dict[str, dict[str, list[int]]] = {}
    for (task, layer, name), outcome in cells(rows, criteria).items():
        named = found.setdefault(task, {})
        if outcome == Outcome.FOR:
            named.setdefault(WORDS.get(name, name), []).append(layer)
    return "; ".join(
        f"{task}: {'; '.join(f'{w} at {fmt.layers(x)}' for w, x in named.items()) or 'none'}"
        for task, named in found.items()
    )


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    from adjpos.figures import plot_interventions

    table = INTERVENTION_TABLE.read(results / "interventions.csv")
    drawn = plot_interventions(table, families=FAMILIES, labels=WORDS)
    return {"interventions": (drawn, fmt.text("causal.caption"))}
