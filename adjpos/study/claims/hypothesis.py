"""How do the models read the position curve? The paper's hypothesis, tested so it can fail:
the causal stage's position-curve arms (`adjpos.interventions.curve`) at matched sizes,
judged per task x layer x seed cell, the read-out kept, by the rule stated before the numbers
(`adjpos.study.rules`, docs/causal.md) under `Criteria.curve_tolerance`,
`min_sizes`, `curve_measurable` and the manipulation checks' thresholds, and again at half
and at double the tolerance (a verdict that moves there is marked sensitive). `measure` writes
numbers, `verdicts` decides.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

from adjpos.interventions import INTERVENTION_TABLE
from adjpos.interventions.curve.numbers import CURVE_DIFFERENCES, RANDOM, CellNumbers
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, seeds_text
from adjpos.study.claims.causal import KEYS, judged
from adjpos.study.rules import CLAIMS, hypothesis_outcomes

TITLE = "How is the position curve read? (the hypothesis, causal tests)"
STATEMENTS = {
    "address": "The model reads the position curve as an address: a shift of the curve by k "
    "inside each run breaks the task beyond a random change of its size, and its wrong "
    "answers sit at offset k more often than the random change's",
    "relational": "The model matches positions by similarity: rotating the curve (every "
    "distance kept) holds against a random change of its size while a shift of its size "
    "breaks beyond one (against: the rotation breaks the task as the shifts do, the curve's "
    "absolute directions are read)",
    "locality": "The model reads the curve's locality: scattering it breaks the task beyond "
    "a shift and a rotation of its size, at two sizes or more",
    "boundary": "The model reads where each run of digits begins and ends: moving the run's "
    "first and last positions to the points just outside it breaks the task beyond a random "
    "change of those positions of its size",
}
# Each claim's answer in words, for and against.
ANSWERS = {
    "address": ("the curve is read as an address", "no address"),
    "relational": ("positions are matched by similarity", "absolute directions are read"),
    "locality": ("locality is read", "locality is not read"),
    "boundary": ("the runs' edges are read", "the runs' edges are not read"),
}
# The tolerance t is varied by these factors; a verdict that moves is marked sensitive.
SENSITIVITY = {"at_half": 0.5, "at_double": 2.0}


def measure(context: Context) -> dict[str, Any]:
    """The rule's numbers from the causal stage's saved tables (none without the arms)."""
    tables = _arm_tables(context.results)
    return {"cells": [], "seeds": []} if tables is None else curve_numbers(*tables)


def _arm_tables(results: Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The arm rows and their differences saved in `results` (None without the arms)."""
    path = results / "curve_differences.csv"
    if not path.is_file():
        return None
    return INTERVENTION_TABLE.read(results / "curve_arms.csv"), CURVE_DIFFERENCES.read(path)


def curve_numbers(rows: pd.DataFrame, differences: pd.DataFrame) -> dict[str, Any]:
    """Each (task, seed, layer, read-out) cell's numbers (`adjpos.interventions.cell_numbers`)
    as plain values (`CellNumbers.to_plain`)."""
    from adjpos.interventions import cell_numbers

    cells = []
    for key, group in differences.groupby(KEYS, sort=False):
        mine = rows[(rows[KEYS] == pd.Series(key, index=KEYS)).all(axis=1)]
        (cell,) = cell_numbers(mine, group, readout=key[3])
        named = dict(zip(KEYS, key, strict=True)) | {"seed": int(key[1]), "layer": int(key[2])}
        cells.append(named | cell.to_plain())
    return {"cells": cells, "seeds": sorted({c["seed"] for c in cells})}


def outcomes(numbers: dict[str, Any], criteria: Criteria) -> tuple[str, dict[tuple, Any]]:
    """The read-out variant judged and each counted cell's `CellOutcome` by (task, layer,
    seed): the rule (`hypothesis_outcomes`) under `criteria`'s thresholds."""
    readout, cells = judged(numbers["cells"])
    counted = [c for c in cells if c["layer"] >= criteria.first_layer]
    counted = [CellNumbers.from_plain((c["task"], c["layer"], c["seed"]), c) for c in counted]
    return readout, hypothesis_outcomes(counted, criteria)["cells"]


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    readout, found = outcomes(numbers, criteria)
    t = criteria.curve_tolerance  # the rule's tolerance, varied by each factor
    moved = {
        name: outcomes(numbers, dataclasses.replace(criteria, curve_tolerance=t * factor))[1]
        for name, factor in SENSITIVITY.items()
    }
    unmeasured = sum(o.not_measurable for o in found.values())
    evidence = (
        f"the rule stated in causal.md: interval bounds against {fmt.n(criteria.curve_tolerance)}"
        f", layers >= {criteria.first_layer}, read-out positions {readout}; "
        f"{unmeasured} cell sizes not measurable (their random control below "
        f"{fmt.n(criteria.curve_measurable)} exact match); per task: "
    )
    words = {"seeds": seeds_text(numbers["seeds"]), "unit": "task x layer x seed cell"}
    blank = {"seeds": "", "unit": "", "evidence": ""}
    out = []
    for claim in CLAIMS:
        said = evidence + (answers(found, claim) or "no cell tested")
        cells = [getattr(o, claim) for o in found.values()]
        verdict = Verdict.tally(STATEMENTS[claim] + " (causal test)", cells, **words, evidence=said)
        scaled = {n: [getattr(o, claim) for o in c.values()] for n, c in moved.items()}
        at = {n: Verdict.tally(claim, o, **blank).status.value for n, o in scaled.items()}
        out.append(dataclasses.replace(verdict, **at))
    return out


def readings(cells: dict[tuple, Any]) -> dict[tuple, list[str]]:
    """Per (task, layer), one line per size of the rule's per-size outcomes (`CellOutcome`s
    by (task, layer, seed)) counted over the seeds: "size 0.12: address F2 W1 · locality W3
    · ..." (F for, A against, W within; seeds whose random control leaves the size not
    measurable said apart)."""
    found: dict[tuple, dict[float, list[dict]]] = {}
    for (task, layer, _), cell in cells.items():
        for index, size in enumerate(cell.per_size):  # by dose (a size added to some seeds)
            dose = index if size.get("dose") is None else size["dose"]
            found.setdefault((task, layer), {}).setdefault(dose, []).append(size)
    letters = {Outcome.FOR: "F", Outcome.AGAINST: "A", Outcome.WITHIN: "W"}
    out: dict[tuple, list[str]] = {}
    for key, by_size in found.items():
        for _, seeds in sorted(by_size.items()):
            tally = {claim: [s[claim] for s in seeds] for claim in CLAIMS}
            said = [
                f"{claim} " + " ".join(f"{letters[o]}{got.count(o)}" for o in Outcome if o in got)
                for claim, got in tally.items()
            ]
            low = sum(s["measurable"] == "no" for s in seeds)
            size = sum(s["size"] for s in seeds) / len(seeds)
            tail = f" (not measurable in {low} of {len(seeds)} seeds)" if low else ""
            out.setdefault(key, []).append(f"size {size:.2f}: " + " · ".join(said) + tail)
    return out


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """The arms against their change size (`adjpos.figures.curve.plot_curve_arms`), the
    rule's per-size reading under each panel, under the criteria the run recorded."""
    tables = _arm_tables(results)
    if tables is None:
        return {}
    from adjpos.figures.curve import plot_curve_arms
    from adjpos.study.report import run_criteria

    numbers = curve_numbers(*tables)
    readout, _ = judged(numbers["cells"]) if numbers["cells"] else ("kept", None)
    rows = tables[0][tables[0]["readout"] == readout]
    found = readings(outcomes(numbers, run_criteria(results.parent))[1])
    return {"curve_arms": (plot_curve_arms(rows, readings=found), fmt.text("hypothesis.caption"))}


def answers(found: dict[tuple, Any], claim: str) -> str:
    """Per task, where `claim` holds and where it fails: 'reversal: the curve is read as an
    address at layer 1 in 3 of 3 seeds'."""
    out = []
    for task in dict.fromkeys(key[0] for key in found):
        layers: dict[int, list[str]] = {}
        for (t, layer, _), o in sorted(found.items()):
            if t == task:
                layers.setdefault(layer, []).append(getattr(o, claim))
        said = [
            f"{words} at "
            + ", ".join(f"layer {x} in {o.count(side)} of {len(o)} seeds" for x, o in hits)
            for side, words in zip((Outcome.FOR, Outcome.AGAINST), ANSWERS[claim], strict=True)
            if (hits := [(x, o) for x, o in layers.items() if side in o])
        ]
        out.append(f"{task}: {'; '.join(said) or 'undecided at every layer'}")
    return ". ".join(out)


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    readout, found = outcomes(numbers, criteria)
    if not found:
        return "Not measured: this run's sizes leave the position-curve arms out."
    header = ["task", "layer", "seed", *CLAIMS, "reading", "not counted (check failed)"]
    header += ["sizes not measurable"]
    body = [
        [*key, *(getattr(o, c) for c in CLAIMS), o.reading]
        + [", ".join(f"{arm} at {size:.2f}" for size, arm in o.not_counted)]
        + [o.not_measurable]
        for key, o in found.items()
    ]
    shares: dict[tuple, dict[int, list[float]]] = {}  # (task, layer, shift) -> j -> values
    for c in judged(numbers["cells"])[1]:
        for name, by in (x for s in c["sizes"] for x in s["offsets"].items()):
            for j, value, *_ in (x for x in by if x[1] is not None):
                shares.setdefault((c["task"], c["layer"], name), {}).setdefault(j, []).append(value)
    span = sorted({j for by in shares.values() for j in by})
    offsets = fmt.table(
        ["task", "layer", "arm", *(f"offset {j:+d}" for j in span)],
        [
            [*key[:2], key[2] + (" (chance)" if key[2] == RANDOM else "")]
            + [sum(by[j]) / len(by[j]) if j in by else None for j in span]
            for key, by in sorted(shares.items(), key=lambda x: (*x[0][:2], x[0][2] == RANDOM))
        ],
    )
    after = " ".join(f"**{claim}**: {answers(found, claim)}." for claim in CLAIMS)
    before = fmt.text("hypothesis.before", readout=readout)
    parts = [figures("curve_arms"), before, fmt.table(header, body)]
    return fmt.section(*parts, fmt.text("hypothesis.note"), offsets, after)
