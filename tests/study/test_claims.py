"""The claims' verdicts follow from their numbers alone: one table of cases (every cell for,
mixed, none for, within only, one seed) run through every claim, the statuses of `Verdict`,
and the report's tables and wording."""

import pytest

from adjpos.study.claim import AGAINST, CRITERIA, FOR, STATUSES, WITHIN, Verdict, seeds_text
from adjpos.study.claims import NAMES, claim
from adjpos.study.models import RANDOM, TRAINED

CASES = {
    "every cell for": ([FOR, FOR, FOR], (0, 1, 2), "supported"),
    "mixed": ([FOR, AGAINST, WITHIN], (0, 1, 2), "mixed"),
    "none for": ([AGAINST, AGAINST, WITHIN], (0, 1, 2), "not supported"),
    "within only": ([WITHIN, WITHIN, WITHIN], (0, 1, 2), "not shown"),
    "one seed": ([FOR, FOR], (0,), "supported"),
}
SIDE = {FOR: "above", AGAINST: "below", WITHIN: "within"}


def _models(outcomes, seeds):
    accuracy = {FOR: (1.0, 1.0, 1.0), AGAINST: (0.5, 0.4, 0.6), WITHIN: (0.99, 0.98, 1.0)}
    models = []
    for i, outcome in enumerate(outcomes):
        value, low, high = accuracy[outcome]
        seed = seeds[i % len(seeds)]
        models.append(
            {"task": "addition", "seed": seed, "accuracy": value}
            | {"accuracy_low": low, "accuracy_high": high}
        )
    return {"models": models}


def _adjacency(outcomes, seeds):
    per_task = [
        {"task": f"t{i}", "trained_vs_layer0": SIDE[o], "control_vs_layer0": "within"}
        | {"seeds": list(seeds), "control_seeds": [0]}
        for i, o in enumerate(outcomes)
    ]
    view = {"view": "whole", "ties": "strict", "cells": [], "counts": {}}
    view["counts"] = {"above": 0, "below": 0, "within": 0}
    return {"per_task": per_task, "views": [view]}


def _variance(outcomes, seeds):
    word = {FOR: "shrinks", AGAINST: "grows", WITHIN: "neither"}
    cells = [
        {"task": "reversal", "model": TRAINED, "layer": i + 1, "outcome": word[o]}
        | {"seeds": list(seeds)}
        for i, o in enumerate(outcomes)
    ]
    return {"cells": cells + [{**cells[0], "model": RANDOM}]}


def _decomposition(outcomes, seeds):
    cells = [
        {"task": "ordering", "model": TRAINED, "layer": i + 1, "versus": SIDE[o]}
        | {"seed_list": list(seeds), "seeds": len(seeds)}
        | {"seeds_above": len(seeds) * (o == FOR), "seeds_below": len(seeds) * (o == AGAINST)}
        for i, o in enumerate(outcomes)
    ]
    return {"cells": cells + [{**cells[0], "model": RANDOM}]}


def _dynamics(outcomes, seeds):
    trajectories = [
        {"task": "addition", "seed": seeds[i % len(seeds)], "metric": "adjacency"}
        | {"layer": i + 1, "rises": o == FOR, "falls": o == AGAINST}
        for i, o in enumerate(outcomes)
    ]
    return {"trajectories": trajectories}


def _probing(outcomes, seeds):
    # Per seed: every seed above (for), every seed below (against), or the first seed within
    # and the others above (within: a cell counts only when every seed holds).
    sides = {FOR: ["above"] * 3, AGAINST: ["below"] * 3, WITHIN: ["within", "above", "above"]}
    rows = [
        {"task": f"t{i}", "seed": seed, "backward": "cosine_first_vs_variance"}
        | {"comparisons": {"cosine_first_vs_variance": {"side": sides[o][j]}}}
        for i, o in enumerate(outcomes)
        for j, seed in enumerate(seeds)
    ]
    return {"rows": rows, "versus": [], "level": 0.95, "seeds": list(seeds)}


def _causal(outcomes, seeds):
    word = {FOR: "necessary", AGAINST: "not needed", WITHIN: "no more than its control"}
    rows = [
        {"task": f"t{i}", "layer": 1, "intervention": "norm_permute", "readout": "kept"}
        | {"verdict": word[o]}
        for i, o in enumerate(outcomes)
    ]
    return {"rows": rows, "seeds": list(seeds)}


def _sweep(outcomes, seeds):
    return {"nope_sides": [SIDE[o] for o in outcomes], "seeds": list(seeds), "chance": 0.5}


def _theory(outcomes, seeds):
    if WITHIN in outcomes:  # the prediction agrees or not: no third outcome
        return None
    rows = [
        {"init_range": 0.1 * (i + 1), "site": "attn_out"}
        | {"predicted_side": "within" if o == FOR else "above"}
        for i, o in enumerate(outcomes)
    ]
    return {"rows": rows, "seeds": list(seeds), "tolerance": 0.05}


BUILDERS = {
    "models": _models,
    "adjacency": _adjacency,
    "variance": _variance,
    "decomposition": _decomposition,
    "dynamics": _dynamics,
    "probing": _probing,
    "causal": _causal,
    "sweep": _sweep,
    "theory": _theory,
}


def test_every_claim_with_a_verdict_has_a_case_table():
    assert set(BUILDERS) == set(NAMES) - {"cosine"}
    assert claim("cosine").verdicts({"scores": []}, CRITERIA) == []  # an illustration


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(BUILDERS))
def test_each_claims_first_verdict_counts_its_cells(name, case):
    outcomes, seeds, status = CASES[case]
    numbers = BUILDERS[name](outcomes, seeds)
    if numbers is None:
        pytest.skip(f"{name} has no {case!r} case")
    if name == "theory":
        numbers |= {"attn_out_close_effective": []}
    verdict = claim(name).verdicts(numbers, CRITERIA)[0]
    assert verdict.status == status
    assert (verdict.n_for, verdict.n_against, verdict.n_within) == (
        outcomes.count(FOR),
        outcomes.count(AGAINST),
        outcomes.count(WITHIN),
    )
    assert verdict.n_cells == len(outcomes)
    assert verdict.seeds == seeds_text(seeds)
    assert (verdict.seeds == "0 only") == (case == "one seed")


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        ([FOR, FOR], "supported"),
        ([FOR, WITHIN], "mixed"),
        ([FOR, AGAINST], "mixed"),
        ([AGAINST], "not supported"),
        ([AGAINST, WITHIN, WITHIN], "not supported"),
        ([WITHIN], "not shown"),
        ([], "not shown"),
    ],
)
def test_verdict_statuses(outcomes, status):
    verdict = Verdict.tally("c", outcomes, seeds="0 only", unit="task", evidence="e")
    assert verdict.status == status and verdict.status in STATUSES
    assert verdict.counts.startswith(f"{outcomes.count(FOR)} of {len(outcomes)} tasks for")


def test_a_verdict_refuses_an_unknown_outcome():
    with pytest.raises(ValueError, match="outcomes must be 'for', 'against' or 'within'"):
        Verdict.tally("c", ["above"], seeds="0", unit="task", evidence="e")


def test_one_favourable_cell_is_never_supported():
    """The probing claim of an earlier report: 1 above, 1 tied, 2 below."""
    numbers = _probing([FOR, WITHIN, AGAINST, AGAINST], (0,))
    verdict = claim("probing").verdicts(numbers, CRITERIA)[0]
    assert verdict.status == "mixed"
    assert verdict.counts == "1 of 4 tasks for, 2 against, 1 within"
    order = claim("probing").verdicts(numbers, CRITERIA)[1]  # every cell unknown: not shown
    assert order.status == "not shown" and order.n_within == 4


def test_a_table_keeps_a_pipe_inside_its_cell_and_aligns_text_left_numbers_right():
    import markdown

    from adjpos.study.format import table

    text = table(["claim", "n", "evidence"], [["a", 3, "|Kendall's tau| of 0.5"], ["b", None, "c"]])
    lines = text.splitlines()
    assert lines[1] == "|:---|---:|:---|"
    page = markdown.markdown(text, extensions=["tables"])
    assert page.count("<td") == 6 and "|Kendall's tau| of 0.5</td>" in page
    assert 'style="text-align: left;">a</td>' in page
    assert 'style="text-align: right;">3</td>' in page
