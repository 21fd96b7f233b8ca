"""The causal findings follow from the intervals and the change sizes alone, each threshold on
an interval's bound."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.interventions import INTERVENTION_TABLE, SPECS
from adjpos.study.claim import CRITERIA
from adjpos.study.claims.causal import causal_numbers, finding


def _findings(numbers, criteria=CRITERIA):
    return [finding(r, criteria) for r in numbers["rows"]]


def _row(name, layer, em, half=0.02, perturbation=0.5, readout="kept", difference=None):
    """One table row; `difference`: (value, low, high) against its control, or None."""
    low_high = difference or (None, None, None)
    return dict.fromkeys(INTERVENTION_TABLE.names) | {
        "model": "trained",
        "task": "addition",
        "seed": 0,
        "layer": layer,
        "intervention": name,
        "readout": readout,
        "control": SPECS[name].control,
        "rank": None,
        "exact_match": em,
        "exact_match_low": em - half,
        "exact_match_high": em + half,
        "token_accuracy": em,
        "token_accuracy_low": em,
        "token_accuracy_high": em,
        "adjacency_at_layer": 0.6,
        "adjacency_at_layer_low": 0.6,
        "adjacency_at_layer_high": 0.6,
        "adjacency_last": 0.6,
        "variance_ratio_at_layer": 1.0,
        "variance_ratio_last": 1.0,
        "perturbation": perturbation,
        "log_norm_change": 0.0,
        "difference": low_high[0],
        "difference_low": low_high[1],
        "difference_high": low_high[2],
        "control_draws": 20 if SPECS[name].drawn else None,
        "percentile": None if difference is None else 2.5,
        "share": None,
        "n_prompts": 100,
    }


def _paired(em, control_em, half=0.03):
    d = em - control_em
    return (d, d - half, d + half)


@pytest.mark.parametrize(
    ("em", "control_em", "size", "control_size", "verdict"),
    [
        (0.97, 0.9, 0.5, 0.5, "not needed"),  # reaches the baseline's interval
        (0.10, 0.9, 0.5, 0.5, "necessary"),
        (0.10, 0.9, 0.6, 0.5, "necessary"),  # within the size slack
        (0.10, 0.9, 0.9, 0.2, "beyond a smaller control"),
        (0.10, 0.12, 0.5, 0.5, "no more than its control"),
        (0.00, 0.06, 0.5, 0.5, "no more than its control"),  # apart, but both at the floor
        (0.10, 0.22, 0.5, 0.5, "no more than its control"),  # mean 0.12 below, bound not 0.1
        (0.10, 0.24, 0.5, 0.5, "necessary"),  # upper bound -0.11: beyond the gap
    ],
)
def test_each_finding(em, control_em, size, control_size, verdict):
    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 1, 0.99, perturbation=0.0),
            _row("norm_permute", 1, em, perturbation=size, difference=_paired(em, control_em)),
            _row("norm_scale_control", 1, control_em, perturbation=control_size),
        ]
    )
    (row,) = causal_numbers(table)["rows"]
    assert finding(row, CRITERIA) == verdict
    assert "verdict" not in row  # measuring writes numbers, never words
    assert row["control"] == "norm_scale_control" and row["baseline"] == 0.99
    assert row["control_draws"] == 20 and row["readout"] == "kept"


def test_a_paired_interval_that_reaches_zero_is_no_evidence():
    """A large mean difference whose paired interval reaches zero: not beyond the control."""
    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 1, 0.99, perturbation=0.0),
            _row("norm_permute", 1, 0.3, difference=(-0.3, -0.62, 0.01)),
            _row("norm_scale_control", 1, 0.6),
        ]
    )
    (row,) = causal_numbers(table)["rows"]
    assert finding(row, CRITERIA) == "no more than its control"


def test_the_verdicts_use_the_kept_readout_and_report_the_changed_one():
    from adjpos.study.claims.causal import verdicts

    rows = []
    for readout, em in (("kept", 0.85), ("changed", 0.10)):  # the read-out carries the effect
        rows += [_row("none", 2, 0.99, perturbation=0.0, readout=readout)]
        rows += [_row("norm_permute", 2, em, readout=readout, difference=_paired(em, 0.9))]
        rows += [_row("norm_scale_control", 2, 0.9, readout=readout)]
    numbers = causal_numbers(INTERVENTION_TABLE.frame(rows))
    found = {r["readout"]: finding(r, CRITERIA) for r in numbers["rows"]}
    assert found == {"kept": "no more than its control", "changed": "necessary"}
    norms = verdicts(numbers, CRITERIA)[0]
    assert (norms.n_for, norms.n_cells) == (0, 1)
    assert "read-out positions kept" in norms.evidence


def test_uniform_attention_is_judged_against_the_baseline():
    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 2, 0.99, perturbation=0.0),
            _row("uniform_attention", 2, 0.3),
            _row("none", 3, 0.99, perturbation=0.0),
            _row("uniform_attention", 3, 0.98),
        ]
    )
    assert _findings(causal_numbers(table)) == ["breaks the task", "not needed"]


def test_a_cell_counts_only_when_every_seed_agrees():
    """Two seeds: necessary in both -> for; necessary in one, not needed in the other ->
    within; each seed keeps its own row."""
    from adjpos.study.claims.causal import verdicts

    rows = []
    for seed, em in ((0, 0.10), (1, 0.10)):  # layer 1: both seeds necessary
        rows += [{**_row("none", 1, 0.99, perturbation=0.0), "seed": seed}]
        rows += [{**_row("norm_permute", 1, em, difference=_paired(em, 0.9)), "seed": seed}]
        rows += [{**_row("norm_scale_control", 1, 0.9), "seed": seed}]
    for seed, em in ((0, 0.10), (1, 0.98)):  # layer 2: the seeds disagree
        rows += [{**_row("none", 2, 0.99, perturbation=0.0), "seed": seed}]
        rows += [{**_row("norm_permute", 2, em, difference=_paired(em, 0.9)), "seed": seed}]
        rows += [{**_row("norm_scale_control", 2, 0.9), "seed": seed}]
    numbers = causal_numbers(INTERVENTION_TABLE.frame(rows))
    assert sorted((r["seed"], r["layer"], finding(r, CRITERIA)) for r in numbers["rows"]) == [
        (0, 1, "necessary"),
        (0, 2, "necessary"),
        (1, 1, "necessary"),
        (1, 2, "not needed"),
    ]
    norms = verdicts(numbers, CRITERIA)[0]
    assert (norms.n_for, norms.n_within, norms.n_cells) == (1, 1, 2)
    assert norms.seeds == "0, 1"


def test_a_larger_min_gap_asks_more_of_the_bound():
    import dataclasses

    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 1, 0.99, perturbation=0.0),
            _row("norm_permute", 1, 0.1, difference=(-0.5, -0.55, -0.45)),
            _row("norm_scale_control", 1, 0.6),
        ]
    )
    numbers = causal_numbers(table)
    assert _findings(numbers) == ["necessary"]
    strict = dataclasses.replace(CRITERIA, min_gap=0.5)
    assert _findings(numbers, strict) == ["no more than its control"]


def test_the_baselines_carry_a_wilson_interval():
    table = INTERVENTION_TABLE.frame(
        [_row("none", 1, 1.0, perturbation=0.0), _row("norm_permute", 1, 0.5)]
    )
    (base,) = causal_numbers(table)["baselines"]
    assert base["baseline"] == 1.0 and base["n_prompts"] == 100
    assert base["baseline_high"] == 1.0 and 0.95 < base["baseline_low"] < 0.97


@pytest.mark.parametrize(
    ("percentile", "verdict"),
    [(2.5, "necessary"), (5.0, "no more than its control"), (None, "necessary")],
)
def test_a_drawn_control_needs_the_change_beyond_its_draws(percentile, verdict):
    """Beyond the gap, yet 5% or more of the control's draws harm as much: not necessary
    (a control without draws has no percentile)."""
    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 1, 0.99, perturbation=0.0),
            _row("norm_permute", 1, 0.1, difference=(-0.5, -0.55, -0.45))
            | {"percentile": percentile},
            _row("norm_scale_control", 1, 0.6),
        ]
    )
    assert _findings(causal_numbers(table)) == [verdict]


def test_a_long_causal_table_is_summed_up_per_task_and_change():
    """Over `fmt.LONG` rows (a full run has about 180): one row per task and change, each
    layer's mean exact match (its control's) and each finding's count over the seeds."""
    from adjpos.study import format as fmt
    from adjpos.study.claims.causal import section

    rows = [
        _row(name, layer, em, perturbation=0.5 if name != "none" else 0.0, difference=difference)
        | {"seed": seed}
        for seed in range(20)
        for layer in (1, 2)
        for name, em, difference in (
            ("none", 0.99, None),
            ("norm_permute", 0.10, _paired(0.10, 0.9)),
            ("norm_scale_control", 0.9, None),
        )
    ]
    numbers = causal_numbers(INTERVENTION_TABLE.frame(rows))
    assert len(numbers["rows"]) == 40 and fmt.LONG < 2 * 40
    text = section(numbers | {"rows": numbers["rows"] * 2}, CRITERIA, lambda prefix: "")
    (table,) = [line for line in text.splitlines() if line.startswith("| addition")]
    assert table == (
        "| addition | norms moved (random permutation) | 1: 0.10 (0.90); 2: 0.10 (0.90) "
        "| 1: necessary 40; 2: necessary 40 |"
    )
    assert "results/causal_findings.csv" in text


@given(
    floor_at=st.floats(0.05, 4.0),
    steep=st.floats(0.5, 20.0),
    doses=st.sampled_from([(0.5, 1, 2), (1, 2), (1,), (0.5, 1, 2, 3)]),
)
@settings(max_examples=200, deadline=None)
def test_added_sizes_are_new_valid_doses_until_two_are_measurable(floor_at, steep, doses):
    """The random control's exact match falling with the dose (a logistic curve through 0.25
    at `floor_at`): each added size is a dose the arms accept and not run before, and three
    tries leave two measurable sizes wherever half the smallest dose is measurable."""
    from adjpos.interventions.spec import added_dose, check_doses

    def level(d):
        return 1 / (1 + 3 * math.exp(steep * (d - floor_at)))  # 0.25 at floor_at

    levels = {float(d): level(d) for d in doses}
    for last in (False, False, True):
        dose = added_dose(levels, 0.25, 2, last=last)
        if dose is None:
            break
        assert dose not in levels
        check_doses([dose])
        levels[float(dose)] = level(dose)
    measurable = sum(v >= 0.25 for v in levels.values())
    if level(min(doses) / 2) >= 0.25 and min(doses) / 2 < 1:
        assert measurable >= 2
    assert added_dose(levels, 0.25, 2) is None or measurable < 2
