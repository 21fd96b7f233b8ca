"""The hypothesis claim's numbers: each (task, seed, layer, read-out) cell of the causal stage's
tables goes through `cell_numbers` once and comes back from plain JSON as the same
`CellNumbers`, so the rule gives the same outcomes; and a stage's units write two tables."""

import dataclasses
import json
import math

import pandas as pd

import adjpos.interventions
from adjpos.interventions.curve.numbers import CellNumbers, SizeNumbers
from adjpos.stats import Interval
from adjpos.study.claim import CRITERIA, Context
from adjpos.study.claims.hypothesis import curve_numbers, outcomes, readings
from adjpos.study.rules import hypothesis_outcomes
from factories import MemoryFolder

KEYS = ["task", "seed", "layer", "readout"]


def _size(size, shift_em):
    differences = {
        ("shift+1", "random"): Interval(shift_em - 0.9, shift_em - 0.92, shift_em - 0.88),
        ("rotate", "random"): Interval(0.0, -0.02, 0.02),
        ("rotate", "unchanged"): Interval(-0.01, -0.03, 0.01),
    }
    offsets = {"shift+1": {1: Interval(0.9, 0.85, 0.95), 0: Interval(math.nan, math.nan, math.nan)}}
    checks = {"shift+1": (0.0, 1.0), "rotate": (0.0, 0.0)}
    follows = {"shift+1": Interval(0.6, 0.5, 0.7)}
    controls = {"random": 0.9}
    return SizeNumbers(size, differences, checks, offsets, controls=controls, follows=follows)


def test_the_cells_come_back_from_json_with_the_same_outcomes(monkeypatch):
    made = {
        seed: CellNumbers(("reversal", 1, seed), [_size(0.1, em), _size(0.2, em)], direction=1)
        for seed, em in ((0, 0.1), (1, 0.95))
    }
    calls = []

    def cell_numbers(rows, differences, readout):  # the library's: one cell per group
        assert readout == "kept"
        (seed,) = set(differences["seed"])
        assert set(rows["seed"]) == {seed} and len(rows) == 2
        calls.append(seed)
        return [made[seed]]

    monkeypatch.setattr(adjpos.interventions, "cell_numbers", cell_numbers, raising=False)
    key = {"task": "reversal", "layer": 1, "readout": "kept"}
    rows = pd.DataFrame(
        [key | {"seed": s, "intervention": n} for s in (0, 1) for n in ("none", "x")]
    )
    differences = pd.DataFrame([key | {"seed": s, "a": "shift+1", "b": "random"} for s in (0, 1)])
    numbers = json.loads(json.dumps(curve_numbers(rows, differences)))
    assert calls == [0, 1] and numbers["seeds"] == [0, 1]
    assert [(c["task"], c["seed"], c["readout"]) for c in numbers["cells"]] == [
        ("reversal", 0, "kept"),
        ("reversal", 1, "kept"),
    ]
    _, found = outcomes(numbers, CRITERIA)
    expected = hypothesis_outcomes(list(made.values()))["cells"]
    assert {k: o.address for k, o in found.items()} == {k: o.address for k, o in expected.items()}
    assert [found[k].address for k in sorted(found)] == ["for", "against"]


class _Models:
    device = "cpu"

    def seeds(self, task, sizes):
        return [0]

    def fresh(self):
        return self


def _two_tables(models, sizes, criteria, task, seed, folder):
    tables = {"a": [{"task": task, "x": 1.0}], "b": [{"task": task, "seed": seed}]}
    return tables | {"result": {"unit": f"{task} {seed}"}}


def test_a_stage_writes_each_of_its_tables_per_unit(tmp_path):
    from adjpos.tables import Table
    from adjpos.tasks import TASKS

    folder = MemoryFolder(tmp_path)
    context = Context(folder, _Models(), sizes=None, criteria=CRITERIA, workers=0)
    tables = {"a": Table(task="string", x="float64"), "b": Table(task="string", seed="int64")}
    found = context.per_unit("stage", _two_tables, tables)
    assert list(found["a"]["task"]) == list(found["b"]["task"]) == list(TASKS)
    assert (tmp_path / "results" / "b_reversal_seed_0.csv").is_file()
    assert set(folder.done) == {f"stage {t} seed 0" for t in TASKS}
    again = context.per_unit("stage", _two_tables, tables)  # every unit done
    assert again["b"].equals(found["b"])
    assert again["result"] == found["result"] == [{"unit": f"{t} 0"} for t in TASKS]


def test_readings_count_each_claims_outcomes_over_the_seeds_per_size():
    made = [
        CellNumbers(("reversal", 1, seed), [_size(0.1, em), _size(0.3, em)], direction=1)
        for seed, em in ((0, 0.1), (1, 0.95))
    ]
    low = dataclasses.replace(_size(0.1, 0.1), controls={"random": 0.1})  # not measurable
    made.append(CellNumbers(("reversal", 2, 0), [low], direction=1))
    found = readings(hypothesis_outcomes(made)["cells"])
    assert found == {
        ("reversal", 1): [
            "size 0.10: address F1 A1 · relational F1 W1 · locality W2 · boundary W2",
            "size 0.30: address F1 A1 · relational F1 W1 · locality W2 · boundary W2",
        ],
        ("reversal", 2): [
            "size 0.10: address W1 · relational W1 · locality W1 · boundary W1"
            " (not measurable in 1 of 1 seeds)"
        ],
    }


def test_a_stage_runs_units_of_its_own_keys(tmp_path):
    """keys: units named by (name, seed) pairs of the stage's own (text: a model's layout),
    their results in the keys' order, however they finish."""
    from adjpos.tables import Table

    folder = MemoryFolder(tmp_path)
    context = Context(folder, None, sizes=None, criteria=CRITERIA, workers=0)
    tables = {"a": Table(task="string", x="float64"), "b": Table(task="string", seed="int64")}
    keys = [("nope-d128", 0), ("rope", 2)]
    found = context.per_unit("text", _two_tables, tables, keys=keys)
    assert list(found["b"]["task"]) == ["nope-d128", "rope"]
    assert list(found["b"]["seed"]) == [0, 2]
    assert found["result"] == [{"unit": "nope-d128 0"}, {"unit": "rope 2"}]
    assert (tmp_path / "results" / "a_nope-d128_seed_0.csv").is_file()
    assert set(folder.done) == {"text nope-d128 seed 0", "text rope seed 2"}


def test_readings_put_a_size_added_to_one_seed_on_its_own_line():
    """Seed 0 ran an added dose (0.75) between 0.5 and 1 that seed 1 did not: the lines go
    by dose, each counting the seeds that ran it, and the dose survives the trip to JSON."""
    sized = [(0.5, 0.05), (0.75, 0.08), (1.0, 0.1)]
    seed0 = [dataclasses.replace(_size(s, 0.1), dose=d) for d, s in sized]
    seed1 = [dataclasses.replace(_size(s, 0.95), dose=d) for d, s in (sized[0], sized[2])]
    made = [
        CellNumbers(("reversal", 1, 0), seed0, direction=1),
        CellNumbers(("reversal", 1, 1), seed1, direction=1),
    ]
    back = [CellNumbers.from_plain(c.key, json.loads(json.dumps(c.to_plain()))) for c in made]
    assert [s.dose for s in back[0].sizes] == [0.5, 0.75, 1.0]
    found = readings(hypothesis_outcomes(back)["cells"])
    assert found[("reversal", 1)] == [
        "size 0.05: address F1 A1 · relational F1 W1 · locality W2 · boundary W2",
        "size 0.08: address F1 · relational F1 · locality W1 · boundary W1",
        "size 0.10: address F1 A1 · relational F1 W1 · locality W2 · boundary W2",
    ]
