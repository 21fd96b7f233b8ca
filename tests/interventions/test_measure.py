"""Measurements under an intervention, against plain references on a shipped model."""

import pytest
import torch

from adjpos import load_pretrained
from adjpos.interventions import (
    INTERVENTION_TABLE,
    NoIntervention,
    build_intervention,
    held_out_prompts,
    intervention_table,
    measure_intervention,
)
from adjpos.interventions import measure as measure_module
from adjpos.runs import RunFolder
from adjpos.training import evaluate


@pytest.fixture(scope="module")
def addition():
    return load_pretrained("addition")


def test_held_out_prompts_are_disjoint_and_grouped(addition):
    _, task = addition
    held = held_out_prompts(task, 60, n_fit=40, seed=3)
    assert not set(held.fit.prompts) & set(held.test.prompts)
    shapes = [(len(p), len(a)) for p, a in zip(held.test.prompts, held.test.answers, strict=True)]
    assert all(shapes.count(s) >= 2 for s in shapes)  # no length without a partner
    assert 40 <= len(held.test.prompts) <= 60 and len(held.fit.prompts) == 40
    with pytest.raises(ValueError, match="n_prompts must be an int >= 2, got 1"):
        held_out_prompts(task, 1)


def test_the_baseline_reproduces_the_models_own_scores(addition):
    """`none` goes through the hooks and must give what plain evaluation gives."""
    model, task = addition
    batch = held_out_prompts(task, 80, seed=1).test
    row = measure_intervention(model, task, NoIntervention(), layer=2, batch=batch)
    accuracy, _ = evaluate(model, task, list(batch.prompts))
    assert row["exact_match"] == accuracy
    assert row["exact_match_low"] <= accuracy <= row["exact_match_high"]
    # teacher forcing, one sequence at a time with no padding
    right = total = 0
    for i, length in enumerate(batch.lengths.tolist()):
        tokens = batch.tokens[i : i + 1, :length]
        with torch.inference_mode():
            predicted = model(tokens)[0, :-1].argmax(-1)
        mask = batch.loss_mask[i, : length - 1]
        right += int((predicted == tokens[0, 1:])[mask].sum())
        total += int(mask.sum())
    assert row["token_accuracy"] == pytest.approx(right / total)
    assert row["perturbation"] == 0 and row["log_norm_change"] == 0
    assert row["n_prompts"] == len(batch.prompts)


def test_the_size_matched_control_changes_norms_as_much(addition):
    model, task = addition
    batch = held_out_prompts(task, 60, seed=2).test
    sizes = {
        name: measure_intervention(
            model, task, build_intervention(name, d_model=128, seed=0), layer=1, batch=batch
        )["log_norm_change"]
        for name in ("norm_permute", "norm_scale_control")
    }
    assert sizes["norm_permute"] == pytest.approx(sizes["norm_scale_control"], rel=1e-6)
    assert sizes["norm_permute"] > 0.1


def test_the_table_resumes_from_its_run_folder(addition, tmp_path, monkeypatch):
    model, task = addition
    settings = dict(layers=[1], interventions=["none", "leace_position"], n_prompts=30, seed=0)
    folder = RunFolder.open(tmp_path / "run", kind="intervene", spec=settings)
    table = intervention_table(model, task, folder=folder, model_name="m", **settings)
    assert list(table.columns) == INTERVENTION_TABLE.names
    assert table["intervention"].tolist() == ["none", "leace_position"]
    assert table.loc[1, "control"] == "leace_random" and table.loc[1, "rank"] > 0
    assert table.loc[1, "exact_match"] < table.loc[0, "exact_match"]

    def refuse(*args, **kwargs):
        raise AssertionError("a finished unit was measured again")

    monkeypatch.setattr(measure_module, "measure_intervention", refuse)
    again = intervention_table(model, task, folder=folder, model_name="m", **settings)
    assert again.equals(table)


def test_bad_layers_and_names_are_named(addition):
    model, task = addition
    with pytest.raises(ValueError, match=r"layers \[4\] are not in \[0, 3\]"):
        intervention_table(model, task, layers=[4], n_prompts=10)
    with pytest.raises(ValueError, match=r"interventions: unknown \['shuffle'\]; choose from"):
        intervention_table(model, task, interventions=["none", "shuffle"], n_prompts=10)
    with pytest.raises(ValueError, match="subspace_swap is fitted: pass the states"):
        build_intervention("subspace_swap", d_model=128)
