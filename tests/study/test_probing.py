"""The probing claim: its numbers from its units' paired comparisons, its verdicts over seeds
(a cell counts only when every seed holds), and one unit on the tiny sizes."""

import json

import pytest

from adjpos.probes import ProbeResult
from adjpos.study import probe_units
from adjpos.study.claim import CRITERIA
from adjpos.study.claims import probing
from adjpos.study.models import Models
from adjpos.study.sizes import TINY

INTERVALS = {"above": (0.2, 0.1, 0.3), "below": (-0.2, -0.3, -0.1), "within": (0.0, -0.1, 0.1)}
# Per case: each task's sides over its seeds, the verdict, and (for, against, within).
CASES = {
    "every cell for": ([["above"] * 3] * 4, "supported", (4, 0, 0)),
    "mixed": (
        [["above"] * 3, ["below"] * 3, ["above", "above", "within"]],
        "mixed",
        (1, 1, 1),
    ),
    "none for": ([["below"] * 3, ["below", "below", "above"]], "not supported", (0, 1, 1)),
    "within only": ([["within", "above", "below"], ["within"] * 3], "not shown", (0, 0, 2)),
    "one seed": ([["above"]], "supported", (1, 0, 0)),
}


def _row(comparison, side, value=0.5, **extra):
    difference, low, high = INTERVALS[side]
    return (
        {"comparison": comparison, "a": "a", "b": "b", "layer": 1, "layer_b": 2}
        | {
            "value_a": value,
            "value_b": value - difference,
            "difference": difference,
            "low": low,
            "high": high,
            "positions": "1..9",
            "n_sequences": 8,
            "probe": "spline",
            "metric": "r2",
        }
        | extra
    )


def _units(tasks, *, previous=None):
    """One unit per task and seed: cosine_first against the variance on the given side (and
    cosine_previous, read higher, on `previous`'s side), and the same side for the trained
    model against its initial weights."""
    units = []
    for t, sides in enumerate(tasks):
        for seed, side in enumerate(sides):
            keys = {"task": f"t{t}", "seed": seed}
            comparisons = [_row("cosine_first_vs_variance", side, 0.5, **keys)]
            if previous:
                comparisons.append(_row("cosine_previous_vs_variance", previous, 0.7, **keys))
            copies = [_row("variance (spline R^2)", side, **keys)]
            trained = ProbeResult(f"trained t{t} seed {seed}", (), 8, 10, 2, (0,))
            units.append(
                {"task": f"t{t}", "seed": seed, "trained": trained}
                | {"comparisons": comparisons, "copies": copies}
            )
    return units


@pytest.mark.parametrize("case", list(CASES))
def test_a_task_counts_only_when_every_seed_holds(case):
    tasks, status, counts = CASES[case]
    numbers = probing.probe_numbers(_units(tasks), CRITERIA)
    json.dumps(numbers)  # what the pipeline writes
    cosine, _, copies = probing.verdicts(numbers, CRITERIA)
    for verdict in (cosine, copies):
        assert verdict.status == status
        assert (verdict.n_for, verdict.n_against, verdict.n_within) == counts
        assert verdict.n_cells == len(tasks)
    n = len(tasks[0])
    assert cosine.seeds == ("0 only" if n == 1 else "0, 1, 2")
    text = probing.section(numbers, CRITERIA, lambda prefix: "")
    word = {"above": "for", "below": "against", "within": "within"}
    for t, sides in enumerate(tasks):  # each task's seeds, counted in the summary table
        row = next(line for line in text.splitlines() if line.startswith(f"| t{t} |"))
        side = max(("above", "below", "within"), key=sides.count)
        assert f"{sides.count(side)} {word[side]}" in row.split("|")[2]


def test_the_best_backward_cosine_is_the_higher_of_the_two():
    """cosine_previous reads position better than cosine_first here: the verdict follows it."""
    numbers = probing.probe_numbers(_units([["above"] * 3], previous="below"), CRITERIA)
    assert {r["backward"] for r in numbers["rows"]} == {"cosine_previous_vs_variance"}
    assert probing.verdicts(numbers, CRITERIA)[0].status == "not supported"


def test_the_control_table_gives_each_seed_and_an_interval_over_seeds():
    numbers = probing.probe_numbers(_units([["above", "above", "within"]]), CRITERIA)
    text = probing.section(numbers, CRITERIA, lambda prefix: "")
    row = next(line for line in text.splitlines() if line.startswith("| t0 | variance"))
    assert "seed 0: 0.20 (0.10 to 0.30); seed 1:" in row
    assert "| 0.13 (" in row  # the mean over seeds, with its t interval
    assert "within (2 for, 1 within of 3 seeds)" in row


@pytest.fixture(scope="module")
def unit():
    return probe_units.probe_unit(Models(device="cpu"), TINY, CRITERIA, "reversal", 1)["result"]


def test_a_unit_pairs_a_trained_seed_with_its_own_initial_weights(unit):
    trained, control = (ProbeResult.from_json(json.dumps(unit[k])) for k in ("trained", "control"))
    assert (trained.model, control.model) == (
        "trained reversal seed 1",
        "random-init reversal seed 1",
    )
    models = Models(device="cpu")
    copy = models.control("reversal", 1)
    assert copy.adjpos_config == models.trained("reversal", 1)[0].adjpos_config.with_changes(seed=1)
    for row in unit["comparisons"] + unit["copies"]:
        assert (row["task"], row["seed"]) == ("reversal", 1)
        assert row["low"] <= row["high"] and row["n_sequences"] == TINY.n_probe_sequences
    found = {r["comparison"]: r for r in unit["comparisons"]}
    assert found["cosine_first_vs_variance"]["positions"].startswith("1..")
    assert found["profile_vs_variance_ridge"]["positions"].startswith("0..")
    assert found["first_sort_vs_variance_sort"]["positions"].startswith("1..")
    copies = {r["comparison"]: r for r in unit["copies"]}
    assert set(copies) == {"variance (spline R^2)", "cosine_first (spline R^2)"}
    assert copies["variance (spline R^2)"]["positions"].startswith("0..")
