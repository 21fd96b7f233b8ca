"""The trained-against-control stages: every view of the score equals `adjacency_score` with
the same options (itself checked against the slow count), the variance summary equals its
definitions, and the cells count only when every seed's interval holds."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from adjpos import adjacency_score, build_model, get_task
from adjpos.scoring import sequence_views
from adjpos.stats import spearman, variance_summary
from adjpos.study.claim import CRITERIA, Outcome, per_seed
from adjpos.study.claims.adjacency import ADJACENCY, PAIRED, adjacency_numbers, over_layer0
from adjpos.study.claims.variance import shrinks, variance_numbers
from adjpos.study.models import RANDOM, TRAINED
from factories import tiny_config


def test_each_view_is_adjacency_score_with_its_options():
    task = get_task("addition")
    batch = task.sample(9, generator=torch.Generator().manual_seed(3), split="test")
    n = int(batch.lengths.max())
    tokens, answer = batch.tokens[:, :n], batch.answer_rows[:, :n]
    prompt = (torch.arange(n) < batch.lengths[:, None]) & ~answer
    masks = {"all": None, "prompt": prompt, "answer": answer}
    model = build_model(tiny_config(d_vocab=25, n_ctx=n, dtype="float64"))
    for layer, views, cosines in sequence_views(model, tokens, batch.lengths, masks):
        assert len(views) == 12
        for (rows, centred, ties), per_sequence in views.items():
            expected = adjacency_score(
                model, tokens, lengths=batch.lengths, rows=masks[rows], center=centred, ties=ties
            )[layer]
            assert np.nanmean(per_sequence) == pytest.approx(float(expected), abs=1e-12)
        assert all(-1 <= c <= 1 for c in cosines[False])
        assert np.allclose(cosines[True], cosines[True].clip(-1, 1))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=12))
def test_spearman_is_scipys(profile):
    values = np.array(profile)
    expected = spearmanr(values, np.arange(len(values))).statistic
    if np.isnan(expected):  # a constant profile
        assert np.isnan(spearman(values))
    else:
        assert spearman(values) == pytest.approx(expected, abs=1e-12)


def test_variance_summary_points_and_intervals():
    rng = np.random.default_rng(0)
    falling = np.linspace(2.0, 1.0, 9) + rng.normal(0, 0.05, size=(40, 9))
    summary = variance_summary(falling)
    profile = falling.mean(axis=0)
    third = 3
    assert summary["ratio"] == pytest.approx(profile[-third:].mean() / profile[:third].mean())
    assert summary["spearman"] == pytest.approx(spearmanr(profile, np.arange(9)).statistic)
    assert summary["ratio_low"] <= summary["ratio"] <= summary["ratio_high"] < 1
    assert summary["spearman_high"] < 0 and summary["n_sequences"] == 40
    # More sequences, a narrower interval.
    wide = variance_summary(falling[:8])
    assert wide["ratio_high"] - wide["ratio_low"] > summary["ratio_high"] - summary["ratio_low"]


def _cell(model, seed, layer, value, half_width, **view):
    key = {"rows": "all", "centred": False, "ties": "strict", **view}
    return {
        "task": "addition",
        "model": model,
        "seed": seed,
        "layer": layer,
        **key,
        "adjacency": value,
        "low": value - half_width,
        "high": value + half_width,
        "mean_cosine": 0.5,
        "n_sequences": 10,
    }


def _paired(seed, layer, difference, half_width):
    return {
        "task": "addition",
        "seed": seed,
        "layer": layer,
        "rows": "all",
        "centred": False,
        "ties": "strict",
        "difference": difference,
        "low": difference - half_width,
        "high": difference + half_width,
        "n_sequences": 10,
    }


def test_adjacency_cells_count_only_when_every_seed_holds():
    """Each trained seed minus its own initial weights: a cell is below (above) only when
    every seed's paired interval is, and its difference is the seeds' mean with a t-interval."""
    rows, paired = [], []
    for seed, value in ((0, 0.60), (1, 0.62), (2, 0.64)):
        rows += [_cell(TRAINED, seed, 0, 0.5, 0.01), _cell(TRAINED, seed, 1, value, 0.01)]
        rows += [_cell(TRAINED, seed, 2, value + 0.05 * seed, 0.01)]
        rows += [_cell(RANDOM, seed, 0, 0.5, 0.01), _cell(RANDOM, seed, 1, 0.70, 0.01)]
        rows += [_cell(RANDOM, seed, 2, 0.70, 0.01)]
        paired += [_paired(seed, 1, value - 0.70, 0.02)]
        paired += [_paired(seed, 2, value + 0.05 * seed - 0.70, 0.02)]
    numbers = adjacency_numbers(ADJACENCY.frame(rows), PAIRED.frame(paired))
    cells = {c["layer"]: c for c in numbers["views"][0]["cells"]}
    # Layer 1: every seed's difference (-0.10, -0.08, -0.06, +-0.02) lies below 0.
    assert per_seed(cells[1]) == Outcome.AGAINST and len(cells[1]["per_seed"]) == 3
    assert cells[1]["difference"] == pytest.approx(-0.08)
    assert cells[1]["difference_low"] < -0.08 < cells[1]["difference_high"]
    assert cells[1]["trained_low"] == pytest.approx(0.59)
    # Layer 2: seed 2 (+0.04) lies above 0, seed 1 (-0.03) below: the seeds disagree.
    assert per_seed(cells[2]) == Outcome.WITHIN
    (trained,), (control,) = (over_layer0(numbers, m, CRITERIA) for m in (TRAINED, RANDOM))
    assert (trained["layer"], trained["outcome"]) == (2, Outcome.FOR)  # the best layer
    assert (control["layer"], control["outcome"]) == (2, Outcome.FOR)  # the deepest


def test_the_paired_table_is_trained_minus_its_own_initial_weights():
    """measure_adjacency pairs each trained seed with its own initial weights: the paired
    difference of each view is the difference of the two models' scores on the same
    sequences."""
    from adjpos.study import TINY, Models
    from adjpos.study.claims.adjacency import measure_adjacency

    sizes = dataclasses.replace(TINY, trained_seeds=(1,))
    table, paired = measure_adjacency(Models(device="cpu"), sizes, n_boot=50)
    assert set(paired["seed"]) == {1} and set(table["seed"]) == {1}
    key = ["task", "layer", "rows", "centred", "ties"]
    scores = table.pivot_table(index=key, columns="model", values="adjacency")
    merged = paired.set_index(key).join(scores)
    # The mean of per-sequence differences equals the difference of the means when both
    # sides score the same sequences (every view of the whole sequence does).
    whole = merged[merged.index.get_level_values("rows") == "all"]
    assert np.allclose(whole["difference"], whole[TRAINED] - whole[RANDOM])
    assert (paired["low"] <= paired["difference"] + 1e-12).all()
    assert (paired["difference"] <= paired["high"] + 1e-12).all()


def test_variance_verdicts_name_the_layers():
    def row(model, seed, layer, ratio, rho, width):
        return {
            "task": "reversal",
            "model": model,
            "seed": seed,
            "layer": layer,
            "ratio": ratio,
            "ratio_low": ratio - width,
            "ratio_high": ratio + width,
            "spearman": rho,
            "spearman_low": rho - width,
            "spearman_high": rho + width,
            "n_sequences": 10,
        }

    table = pd.DataFrame(
        [row(TRAINED, s, 1, 0.3, -0.8, 0.1) for s in (0, 1)]
        + [row(TRAINED, s, 2, 0.95, -0.2, 0.1) for s in (0, 1)]
        + [row(RANDOM, s, 1, 0.9, -0.5, 0.05) for s in (0, 1)]
        + [row(RANDOM, s, 2, 0.9, -0.5, 0.05) for s in (0, 1)]
    )

    def paired(seed, layer, ratio, width):
        return (
            {"task": "reversal", "seed": seed, "layer": layer}
            | {"ratio": ratio, "ratio_low": ratio - width, "ratio_high": ratio + width}
            | {"spearman": 0.0, "spearman_low": -0.1, "spearman_high": 0.1}
        )

    differences = pd.DataFrame(
        [paired(s, 1, -0.6, 0.1) for s in (0, 1)]  # every seed below its initial weights
        + [paired(0, 2, 0.05, 0.01), paired(1, 2, -0.2, 0.1)]  # the seeds disagree
    )
    numbers = variance_numbers(table, differences)
    found = {
        model: [c["layer"] for c in numbers["cells"] if c["model"] == model and shrinks(c) == "for"]
        for model in (TRAINED, RANDOM)
    }
    assert found == {TRAINED: [1], RANDOM: [1, 2]}
    versus = {v["layer"]: v for v in numbers["versus"]}
    assert {k: per_seed(v, "below") for k, v in versus.items()} == {1: "for", 2: "within"}
    assert versus[1]["difference"] == pytest.approx(-0.6) and len(versus[1]["per_seed"]) == 2


def test_dynamics_measures_every_snapshot_and_its_numbers(tmp_path):
    """A run trained with snapshots: one accuracy row and per-layer rows per snapshot, the
    step-0 snapshot equal to the untrained model's scores, and the numbers' trajectories."""
    from adjpos.study import TINY, Models
    from adjpos.study.claim import CRITERIA
    from adjpos.study.claims.dynamics import DYNAMICS, dynamics_numbers, dynamics_unit

    models = Models(device="cpu", train_dir=tmp_path, train_steps=2)
    sizes = dataclasses.replace(TINY, dynamics_seeds=(0,))
    table = DYNAMICS.frame(dynamics_unit(models, sizes, CRITERIA, "addition")["dynamics"])
    assert sorted(table["step"].unique()) == [0, 2]
    n_layers = models.trained("addition")[0].cfg.n_layers
    for step in (0, 2):
        rows = table[table["step"] == step]
        assert (rows["metric"] == "accuracy").sum() == 1
        assert (rows["metric"] == "adjacency").sum() == n_layers + 1
    assert (table["low"] <= table["value"] + 1e-12).all()
    assert (table["value"] <= table["high"] + 1e-12).all()
    numbers = dynamics_numbers(table, sizes.dynamics_prompts)
    assert numbers["tasks"] == ["addition"]
    (acc,) = numbers["accuracy"]
    assert acc["final_step"] == 2 and [s for s, _ in acc["steps"]] == [0, 2]
    assert acc["final_low"] <= acc["final"] <= acc["final_high"]  # a Wilson interval
    adjacency = [t for t in numbers["trajectories"] if t["metric"] == "adjacency"]
    assert [t["layer"] for t in adjacency] == list(range(n_layers + 1))
    # Seeds without snapshots are left out, not an error.
    none = Models(device="cpu")
    assert dynamics_unit(
        none, dataclasses.replace(sizes, dynamics_seeds=(7,)), CRITERIA, "addition"
    ) == {"dynamics": []}
