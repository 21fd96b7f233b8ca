"""The causal verdicts follow from the intervals and the change sizes alone."""

import pytest

from adjpos.interventions import CONTROL_OF, INTERVENTION_TABLE
from adjpos.study.claims.causal import causal_numbers


def _row(name, layer, em, half=0.02, perturbation=0.5):
    return {
        "model": "trained",
        "task": "addition",
        "seed": 0,
        "layer": layer,
        "intervention": name,
        "control": CONTROL_OF[name],
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
        "n_prompts": 100,
    }


@pytest.mark.parametrize(
    ("em", "control_em", "size", "control_size", "verdict"),
    [
        (0.97, 0.9, 0.5, 0.5, "not needed"),  # reaches the baseline's interval
        (0.10, 0.9, 0.5, 0.5, "necessary"),
        (0.10, 0.9, 0.6, 0.5, "necessary"),  # within the size slack
        (0.10, 0.9, 0.9, 0.2, "beyond a smaller control"),
        (0.10, 0.12, 0.5, 0.5, "no more than its control"),
        (0.00, 0.06, 0.5, 0.5, "no more than its control"),  # apart, but both at the floor
    ],
)
def test_each_verdict(em, control_em, size, control_size, verdict):
    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 1, 0.99, perturbation=0.0),
            _row("norm_permute", 1, em, perturbation=size),
            _row("norm_scale_control", 1, control_em, perturbation=control_size),
        ]
    )
    (row,) = causal_numbers(table)["rows"]
    assert row["verdict"] == verdict
    assert row["control"] == "norm_scale_control" and row["baseline"] == 0.99


def test_uniform_attention_is_judged_against_the_baseline():
    table = INTERVENTION_TABLE.frame(
        [
            _row("none", 2, 0.99, perturbation=0.0),
            _row("uniform_attention", 2, 0.3),
            _row("none", 3, 0.99, perturbation=0.0),
            _row("uniform_attention", 3, 0.98),
        ]
    )
    verdicts = [r["verdict"] for r in causal_numbers(table)["rows"]]
    assert verdicts == ["breaks the task", "not needed"]


def test_a_cell_counts_only_when_every_seed_agrees():
    """Two seeds: necessary in both -> for; necessary in one, not needed in the other ->
    within; each seed keeps its own row."""
    from adjpos.study.claim import CRITERIA
    from adjpos.study.claims.causal import verdicts

    rows = []
    for seed, em in ((0, 0.10), (1, 0.10)):  # layer 1: both seeds necessary
        rows += [{**_row("none", 1, 0.99, perturbation=0.0), "seed": seed}]
        rows += [{**_row("norm_permute", 1, em), "seed": seed}]
        rows += [{**_row("norm_scale_control", 1, 0.9), "seed": seed}]
    for seed, em in ((0, 0.10), (1, 0.98)):  # layer 2: the seeds disagree
        rows += [{**_row("none", 2, 0.99, perturbation=0.0), "seed": seed}]
        rows += [{**_row("norm_permute", 2, em), "seed": seed}]
        rows += [{**_row("norm_scale_control", 2, 0.9), "seed": seed}]
    numbers = causal_numbers(INTERVENTION_TABLE.frame(rows))
    assert sorted((r["seed"], r["layer"], r["verdict"]) for r in numbers["rows"]) == [
        (0, 1, "necessary"),
        (0, 2, "necessary"),
        (1, 1, "necessary"),
        (1, 2, "not needed"),
    ]
    norms = verdicts(numbers, CRITERIA)[0]
    assert (norms.n_for, norms.n_within, norms.n_cells) == (1, 1, 2)
    assert norms.seeds == "0, 1"
