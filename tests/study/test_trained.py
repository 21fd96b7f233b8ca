"""The trained-against-control stages: every view of the score equals `adjacency_score` with
the same options (itself checked against the slow count), the variance summary equals its
definitions, and the verdicts compare seed spans of intervals."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from adjpos import adjacency_score, build_model, get_task
from adjpos.stats import spearman, variance_summary
from adjpos.study.claims.adjacency import ADJACENCY, adjacency_numbers
from adjpos.study.claims.variance import variance_numbers
from adjpos.study.models import RANDOM, TRAINED
from adjpos.study.views import sequence_views
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


def test_adjacency_verdicts_need_the_seed_spans_apart():
    rows = []
    for seed, value in ((0, 0.60), (1, 0.62), (2, 0.64)):
        rows += [_cell(TRAINED, seed, 0, 0.5, 0.01), _cell(TRAINED, seed, 1, value, 0.01)]
        rows += [_cell(TRAINED, seed, 2, value + 0.05 * seed, 0.01)]
    for seed, value in ((0, 0.70), (1, 0.72)):
        rows += [_cell(RANDOM, seed, 0, 0.5, 0.01), _cell(RANDOM, seed, 1, value, 0.01)]
        rows += [_cell(RANDOM, seed, 2, 0.70, 0.01)]
    numbers = adjacency_numbers(ADJACENCY.frame(rows))
    cells = {c["layer"]: c for c in numbers["views"][0]["cells"]}
    # Layer 1: trained seeds span [0.59, 0.65], controls [0.69, 0.73]: apart, below.
    assert cells[1]["versus"] == "below" and cells[1]["trained_seeds"] == 3
    assert cells[1]["trained_low"] == pytest.approx(0.59)
    assert cells[1]["control_high"] == pytest.approx(0.73)
    # Layer 2: one trained seed (0.72) reaches the controls: inside the spread, within.
    assert cells[2]["versus"] == "within"
    (task,) = numbers["per_task"]
    assert task["trained_vs_layer0"] == "above" and task["control_vs_layer0"] == "above"


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
    numbers = variance_numbers(table)
    shrinks = {
        model: [
            c["layer"] for c in numbers["cells"] if (c["model"], c["outcome"]) == (model, "shrinks")
        ]
        for model in (TRAINED, RANDOM)
    }
    assert shrinks == {TRAINED: [1], RANDOM: [1, 2]}
    versus = {v["layer"]: v["versus"] for v in numbers["versus"]}
    assert versus == {1: "below", 2: "within"}


def test_dynamics_measures_every_snapshot_and_its_numbers(tmp_path):
    """A run trained with snapshots: one accuracy row and per-layer rows per snapshot, the
    step-0 snapshot equal to the untrained model's scores, and the numbers' trajectories."""
    from adjpos.study import TINY, Models
    from adjpos.study.claims.dynamics import DYNAMICS, dynamics_numbers, dynamics_unit

    models = Models(device="cpu", train_dir=tmp_path, train_steps=2)
    table = DYNAMICS.frame(
        dynamics_unit(models, dataclasses.replace(TINY, dynamics_seeds=(0,)), "addition")
    )
    assert sorted(table["step"].unique()) == [0, 2]
    n_layers = models.trained("addition")[0].cfg.n_layers
    for step in (0, 2):
        rows = table[table["step"] == step]
        assert (rows["metric"] == "accuracy").sum() == 1
        assert (rows["metric"] == "adjacency").sum() == n_layers + 1
    assert (table["low"] <= table["value"] + 1e-12).all()
    assert (table["value"] <= table["high"] + 1e-12).all()
    numbers = dynamics_numbers(table)
    assert numbers["tasks"] == ["addition"]
    (acc,) = numbers["accuracy"]
    assert acc["final_step"] == 2
    adjacency = [t for t in numbers["trajectories"] if t["metric"] == "adjacency"]
    assert [t["layer"] for t in adjacency] == list(range(1, n_layers + 1))
    # Seeds without snapshots are left out, not an error.
    none = Models(device="cpu")
    assert dynamics_unit(none, dataclasses.replace(TINY, dynamics_seeds=(7,)), "addition") == []
