"""Does the model read the pattern? Causal tests: one carrier of position changed at the input
of one block of each trained model, beside its matched control (`adjpos.interventions`).

Every intervention runs in two variants: the read-out positions (the last prompt position and
every answer position) kept untouched, which the verdicts use, and changed like the others,
reported beside. Per task, seed, layer, variant and tested intervention, exact match is judged
against the baseline's and, paired prompt by prompt, against its control's (the mean over the
control's draws):

- "not needed": its 95% interval over prompts reaches the baseline's (no drop beyond sampling);
- "necessary": the paired difference from the control (intervention minus control) has its
  95% interval below zero and is at least `Criteria.min_gap` below it, and the change (measured
  on the states the hook changed while decoding) is at most `Criteria.size_slack` times the
  control's;
- "beyond a smaller control": the same, but a larger change than the control's;
- "no more than its control": a drop, but not beyond the control's;
- for uniform attention (no matched control): "breaks the task" or "not needed".
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from adjpos.interventions import INTERVENTION_TABLE, SPECS, intervention_table
from adjpos.stats import compare_intervals
from adjpos.study import format as fmt
from adjpos.study.claim import (
    AGAINST,
    CRITERIA,
    FOR,
    WITHIN,
    Context,
    Criteria,
    Verdict,
    seeds_text,
)
from adjpos.study.models import TRAINED

TITLE = "Does the model read the pattern? (causal tests)"

# Interventions whose verdicts the report gives (each against its control), and their words:
# read from the intervention table.
TESTED = tuple(name for name, spec in SPECS.items() if spec.role == "tested")
WORDS = {name: spec.label for name, spec in SPECS.items()}
# The causal claims: what each tested intervention would show if the model needed that carrier.
CLAIMS = {
    ("norm_permute", "norm_permute_mirrored"): "The model reads position from the norms: "
    "moving them between positions, every cosine kept, breaks the task beyond a size-matched "
    "control (causal test)",
    ("subspace_swap",): "The model reads position from its position subspace: swapping it "
    "between positions, norms kept, breaks the task beyond a random subspace of its rank "
    "(causal test)",
    ("leace_position",): "The model needs linear position information: erasing it breaks the "
    "task beyond erasing as many random directions, the states changed as much (causal test)",
    ("position_mean_swap",): "The model reads the adjacency pattern (nearby states similar): "
    "scattering the neighbours of the position curve, tokens and norms kept, breaks the task "
    "beyond mirroring it, a change of the same size that keeps neighbours together (causal "
    "test)",
}


def measure(context: Context) -> dict[str, Any]:
    """One unit per trained seed, run by the engine, then the combined table."""
    table = context.per_seed("interventions", causal_unit, INTERVENTION_TABLE)
    table = INTERVENTION_TABLE.write(context.results / "interventions.csv", table)
    return causal_numbers(table, context.criteria)


def causal_unit(
    models: Any, sizes: Any, name: str, seed: int, folder: Any = None
) -> list[dict[str, Any]]:
    """The causal tests on trained seed `seed` of task `name` (`intervention_table`, the same
    prompts for every seed), as records; with `folder` (see `Context.per_seed`), each of its
    (layer, read-out, intervention) parts is kept there when done and read back on resume."""
    model, task = models.trained(name, seed)
    return intervention_table(
        model,
        task,
        layers=sizes.intervention_layers,
        interventions=sizes.interventions,
        n_prompts=sizes.intervention_prompts,
        control_draws=sizes.control_draws,
        readouts=sizes.readouts,
        model_name=TRAINED,
        model_seed=seed,
        folder=folder,
        progress=False,
    ).to_dict("records")


def causal_numbers(table: pd.DataFrame, criteria: Criteria = CRITERIA) -> dict[str, Any]:
    """Every tested cell beside its control and the baseline, with its verdict, in each
    read-out variant."""
    rows = []
    keys = ["task", "seed", "layer", "readout"]
    for (task, seed, layer, readout), group in table.groupby(keys, sort=False):
        by = group.set_index("intervention")
        if "none" not in by.index:
            continue
        for name in (n for n in TESTED if n in by.index):
            mine, control_name = by.loc[name], by.loc[name, "control"]
            control = by.loc[control_name] if control_name in by.index else None
            theirs = {} if control is None else _cell(control)
            rows.append(
                {"task": task, "seed": int(seed), "layer": int(layer), "intervention": name}
                | {"readout": readout}
                | {"control": control_name if control is not None else None}
                | _cell(mine)
                | {f"control_{k}": theirs.get(k) for k in ("exact_match", "low", "high")}
                | {"baseline": _float(by.loc["none", "exact_match"])}
                | {"control_perturbation": theirs.get("perturbation")}
                | {k: _float(mine[k]) for k in ("difference", "difference_low", "difference_high")}
                | {"percentile": _float(mine["percentile"])}
                | {"control_draws": None if control is None else _int(control["control_draws"])}
                | {"verdict": _verdict(mine, control, by.loc["none"], criteria)}
            )
    return {
        "rows": rows,
        "seeds": sorted(int(s) for s in table["seed"].dropna().unique()),
        "size_slack": criteria.size_slack,
        "min_gap": criteria.min_gap,
    }


def _cell(row: pd.Series) -> dict[str, Any]:
    return {
        "exact_match": _float(row["exact_match"]),
        "low": _float(row["exact_match_low"]),
        "high": _float(row["exact_match_high"]),
        "perturbation": _float(row["perturbation"]),
    }


def _verdict(mine: pd.Series, control: Any, base: pd.Series, criteria: Criteria) -> str:
    interval = (mine["exact_match_low"], mine["exact_match_high"])
    if compare_intervals(*interval, base["exact_match_low"], base["exact_match_high"]) != "below":
        return "not needed"
    if control is None or mine.name == "uniform_attention":
        return "breaks the task"
    if pd.isna(mine["difference"]):
        return "no more than its control"
    if not (mine["difference_high"] < 0 and -mine["difference"] >= criteria.min_gap):
        return "no more than its control"
    if mine["perturbation"] > criteria.size_slack * control["perturbation"]:
        return "beyond a smaller control"
    return "necessary"


# A cell's verdict as evidence for its claim.
OUTCOME = {"necessary": FOR, "not needed": AGAINST}


def judged(rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The read-out variant the verdicts use ("kept" when measured) and its rows."""
    readout = "kept" if any(r["readout"] == "kept" for r in rows) else "changed"
    return readout, [r for r in rows if r["readout"] == readout]


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    """Layers >= 1 only: at layer 0 the states are the token embeddings, which carry no
    position. The read-out positions kept (`judged`). A cell is a task, layer and intervention;
    it counts for (against) only when every seed's verdict is "necessary" ("not needed"); a
    change no worse than its control, or seeds that disagree, is no evidence either way
    (within). The evidence also counts the variant with the read-out changed."""
    inner = [r for r in numbers["rows"] if r["layer"] >= 1]
    readout, rows = judged(inner)
    other = [r for r in inner if r["readout"] != readout]
    out = []
    for names, claim in CLAIMS.items():
        cells: dict[tuple, list[str]] = {}
        for r in (r for r in rows if r["intervention"] in names):
            cells.setdefault((r["task"], r["layer"], r["intervention"]), []).append(r["verdict"])
        outcomes = [_across_seeds(verdicts) for verdicts in cells.values()]
        found = [r["verdict"] for r in rows if r["intervention"] in names]
        detail = "; ".join(f"{v} at {found.count(v)}" for v in sorted(set(found) - {"necessary"}))
        tested = ", ".join(n for n in names if any(r["intervention"] == n for r in rows))
        beside = [r["verdict"] for r in other if r["intervention"] in names]
        changed = (
            f"; with the read-out changed: necessary at {beside.count('necessary')} of "
            f"{len(beside)}"
            if beside
            else ""
        )
        out.append(
            Verdict.tally(
                claim,
                outcomes,
                seeds=seeds_text(numbers["seeds"]),
                unit="task x layer x intervention cell",
                evidence=f"necessary beyond the matched control in every seed, layers >= 1, "
                f"read-out positions {readout} ({tested}); per seed: necessary at "
                f"{found.count('necessary')}{'; ' + detail if detail else ''}{changed}"
                if cells
                else "not in this run's interventions",
            )
        )
    return out


def _across_seeds(verdicts: list[str]) -> str:
    """A cell's outcome over its seeds' verdicts."""
    outcomes = {OUTCOME.get(v, WITHIN) for v in verdicts}
    return outcomes.pop() if len(outcomes) == 1 else WITHIN


def section(numbers: dict[str, Any], figures: Any) -> str:
    readout, rows = judged(numbers["rows"])
    beside = {
        (r["task"], r["seed"], r["layer"], r["intervention"]): r
        for r in numbers["rows"]
        if r["readout"] != readout
    }

    def interval(value: Any, low: Any, high: Any) -> str:
        return "" if value is None else f"{value:.3f} ({low:.3f} to {high:.3f})"

    def other(r: dict[str, Any]) -> list[Any]:
        o = beside.get((r["task"], r["seed"], r["layer"], r["intervention"]))
        return ["", ""] if o is None else [f"{o['exact_match']:.3f}", o["verdict"]]

    header = ["task", "seed", "layer", "change", "exact match", "control"]
    header += ["control's exact match", "difference", "percentile", "baseline", "change size"]
    header += ["verdict", "read-out changed: exact match", "verdict"]
    table = fmt.table(
        header,
        [
            [r["task"], r["seed"], r["layer"], WORDS.get(r["intervention"], r["intervention"])]
            + [interval(r["exact_match"], r["low"], r["high"]), r["control"]]
            + [interval(r["control_exact_match"], r["control_low"], r["control_high"])]
            + [interval(r["difference"], r["difference_low"], r["difference_high"])]
            + [_percentile(r), r["baseline"], _sizes(r), r["verdict"], *other(r)]
            for r in rows
        ],
    )
    return SECTION.format(
        figure=figures("interventions"),
        table=table,
        readout=readout,
        norms=_norms_text(rows),
        per_task=_per_task(rows),
        min_gap=fmt.n(numbers["min_gap"]),
        size_slack=fmt.n(numbers["size_slack"]),
        seeds=seeds_text(numbers["seeds"]),
    )


def _percentile(r: dict[str, Any]) -> str:
    if r["percentile"] is None:
        return ""
    return f"{r['percentile']:.0f} ({r['control_draws']} draws)"


def _sizes(r: dict[str, Any]) -> str:
    theirs = r["control_perturbation"]
    return f"{r['perturbation']:.2f}" + ("" if theirs is None else f" ({theirs:.2f})")


def _norms_text(rows: list[dict[str, Any]]) -> str:
    inner, lines, beyond = [r for r in rows if r["layer"] >= 1], [], 0
    for name, words in (
        ("norm_permute", "a random permutation"),
        ("norm_permute_mirrored", "the mirror"),
    ):
        mine = [r for r in inner if r["intervention"] == name]
        if mine:
            hits = [r for r in mine if r["verdict"] == "necessary"]
            beyond += len(hits)
            where = ", ".join(f"{r['task']} {r['layer']} (seed {r['seed']})" for r in hits)
            dropped = sum(r["verdict"] != "not needed" for r in mine)
            lines.append(
                f"moved by {words}, below the baseline in {dropped} and beyond the size-matched "
                f"control in {len(hits)} of {len(mine)} task x seed x layer cases "
                f"({where or 'none'})"
            )
    reading = (
        "where the drop goes beyond the control, it is where the norms went, not only how much "
        "they changed, that broke the task; elsewhere a change of norms this large breaks the "
        "model wherever it lands, and the drop shows nothing about position"
        if beyond
        else "a change of norms this large breaks the model wherever it lands, so these drops "
        "do not show that the model reads position from the norms"
    )
    return (
        ("; ".join(lines) or "not measured")
        + ". The size-matched control applies the very same norm ratios at random places, so "
        + reading
    )


def _per_task(rows: list[dict[str, Any]]) -> str:
    """Per task, the carriers whose change breaks the task beyond its control in every seed."""
    parts = []
    for task in dict.fromkeys(r["task"] for r in rows):
        verdicts: dict[tuple[str, int], set[str]] = {}
        for r in (r for r in rows if r["task"] == task and r["layer"] >= 1):
            verdicts.setdefault((r["intervention"], r["layer"]), set()).add(r["verdict"])
        found: dict[str, list[int]] = {}
        for (name, layer), seen in verdicts.items():
            if seen <= {"necessary"} or seen <= {"breaks the task"}:
                found.setdefault(name, []).append(layer)
        named = [f"{WORDS.get(n, n)} at {fmt.layers(layers)}" for n, layers in found.items()]
        parts.append(f"{task}: {'; '.join(named) or 'no carrier beyond its control'}")
    return "; ".join(parts)


SECTION = """{figure}

Each trained model on fresh held-out prompts with one carrier of position changed at the input
of one block (layer 0 = the token embeddings), beside its control (exact match under greedy
decoding, the change active at every step, with its 95% bootstrap interval over prompts). The
read-out positions (the last prompt position and every answer position, where the answer is
read) are {readout} in the verdicts; the other variant is in the last two columns. A random
control is the mean of its draws; "difference" is the paired per-prompt difference from the
control with its 95% bootstrap interval, "percentile" the share (%) of the control's draws
whose exact match is below the intervention's (ties count half), "change size" the mean
relative size ||x' - x|| / ||x|| of the states the hook changed while decoding (the control's
in brackets):

{table}

What it shows: Every cosine kept and the norms moved (layers >= 1): {norms}. Carriers whose
change breaks the task beyond its control ("necessary": the paired difference from the control
below zero, its interval too, by at least {min_gap}, with a change at most {size_slack} times the
control's; uniform attention has no matched control and is judged against the baseline), in
every seed: {per_task}. At layer 0 the states are the token embeddings, which carry no
position: the "position" subspace and LEACE there find the directions of the tokens the format
puts at each place, so layer 0 is shown but left out of the counts. The trained seeds are
{seeds}, each on the same prompts; the intervals are over prompts, and a verdict of the claims
table counts a cell only when every seed agrees."""

CAPTION = (
    "Exact match of each trained model with one carrier of position changed at the input of "
    "one block (layer 0 = token embeddings), the read-out positions kept, each control dashed "
    "in its intervention's colour, the unchanged model black (bars: 95% bootstrap intervals "
    "over prompts)."
)


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    from adjpos.figures import plot_interventions

    table = INTERVENTION_TABLE.read(results / "interventions.csv")
    return {"interventions": (plot_interventions(table), CAPTION)}


def _float(value: Any) -> float | None:
    return None if pd.isna(value) else float(value)


def _int(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)
