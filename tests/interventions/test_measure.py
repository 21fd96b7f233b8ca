"""Measurements under an intervention, against plain references on a shipped model."""

import copy

import pytest
import torch

from adjpos import load_pretrained
from adjpos.interventions import (
    INTERVENTION_TABLE,
    NAMES,
    SPECS,
    Dose,
    Fitted,
    InterventionSpec,
    NoIntervention,
    fit_prompt_states,
    fit_states,
    held_out_prompts,
    intervention_table,
    measure_draws,
)
from adjpos.interventions import task as task_module
from adjpos.interventions.hooks import Stacked, intervene
from adjpos.runs import RunFolder
from adjpos.stats import wilson_interval
from adjpos.training import evaluate, predict
from adjpos.training.decode import predict_cached


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
    row = measure_draws(model, task, [NoIntervention()], layer=2, batch=batch)[0]
    accuracy, _ = evaluate(model, task, list(batch.prompts))
    assert row["exact_match"] == accuracy
    n = len(batch.prompts)  # a proportion's interval is Wilson's, never a bootstrap's
    interval = (row["exact_match_low"], row["exact_match_high"])
    assert interval == pytest.approx(wilson_interval(round(accuracy * n), n))
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
    interval = (row["token_accuracy_low"], row["token_accuracy_high"])
    assert interval == pytest.approx(wilson_interval(right, total))
    assert row["perturbation"] == 0 and row["log_norm_change"] == 0
    assert row["n_prompts"] == len(batch.prompts)


class _Scale:
    """A change of every state by a fixed factor (the same on any batch)."""

    site = "resid_pre"

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, acts, readout=None):
        return acts * self.factor


@pytest.mark.parametrize("layer", [0, 2])
def test_teacher_forced_draws_start_at_the_changed_block_as_the_whole_model_would(addition, layer):
    """Each draw's teacher-forced pass starts at the changed block (start_at_layer at layer >
    0): token accuracy and the last layer's states as the whole model gives them under the
    change, one sequence at a time."""
    model, task = addition
    batch = held_out_prompts(task, 40, seed=2).test
    draws = [_Scale(0.5), _Scale(3.0)]
    rows = measure_draws(model, task, draws, layer=layer, batch=batch)
    for change, row in zip(draws, rows, strict=True):
        right = total = 0
        for i, length in enumerate(batch.lengths.tolist()):
            tokens = batch.tokens[i : i + 1, :length]
            start = len(task.encode(batch.prompts[i])) - 1
            with torch.inference_mode(), intervene(model, change, layer=layer, readout_from=start):
                predicted = model(tokens)[0, :-1].argmax(-1)
            mask = batch.loss_mask[i, : length - 1]
            right += int((predicted == tokens[0, 1:])[mask].sum())
            total += int(mask.sum())
        assert row["token_accuracy"] == pytest.approx(right / total)
    assert rows[0]["token_accuracy"] != rows[1]["token_accuracy"]  # the changes did differ


def test_the_size_matched_control_changes_norms_as_much(addition):
    model, task = addition
    batch = held_out_prompts(task, 60, seed=2).test
    sizes = {
        name: measure_draws(
            model, task, [SPECS[name].build(Fitted(d_model=128))], layer=1, batch=batch
        )[0]["log_norm_change"]
        for name in ("norm_permute", "norm_scale_control")
    }
    assert sizes["norm_permute"] == pytest.approx(sizes["norm_scale_control"], rel=1e-6)
    assert sizes["norm_permute"] > 0.1


def test_the_table_resumes_from_its_run_folder(addition, tmp_path, monkeypatch):
    model, task = addition
    settings = dict(
        layers=[1],
        interventions=["none", "leace_position"],
        n_prompts=30,
        seed=0,
        readouts=["kept"],
    )
    folder = RunFolder.open(tmp_path / "run", kind="intervene", spec=settings)
    table = intervention_table(model, task, folder=folder, model_name="m", **settings)
    assert list(table.columns) == INTERVENTION_TABLE.names
    assert table["intervention"].tolist() == ["none", "leace_position"]
    assert table.loc[1, "control"] == "erase_random" and table.loc[1, "rank"] > 0
    assert table.loc[1, "exact_match"] < table.loc[0, "exact_match"]

    def refuse(*args, **kwargs):
        raise AssertionError("a finished unit was measured again")

    monkeypatch.setattr(task_module, "measure_draws", refuse)
    again = intervention_table(model, task, folder=folder, model_name="m", **settings)
    assert again.equals(table)


def test_bad_layers_and_names_are_named(addition):
    model, task = addition
    with pytest.raises(ValueError, match=r"layers \[4\] are not in \[0, 3\]"):
        intervention_table(model, task, layers=[4], n_prompts=10)
    with pytest.raises(ValueError, match=r"interventions: unknown \['shuffle'\]; choose from"):
        intervention_table(model, task, interventions=["none", "shuffle"], n_prompts=10)
    with pytest.raises(ValueError, match="subspace_swap is fitted: pass the states"):
        SPECS["subspace_swap"].build(Fitted(d_model=128))


def test_paired_differences_and_percentiles_follow_the_units_own_measurements(addition):
    """The table's difference is the mean per-prompt difference against the control's draws
    (each measured on its own here), and the percentile places the test among the draws."""
    from adjpos.interventions import READOUTS
    from adjpos.stats import paired_difference

    model, task = addition
    names = ["none", "norm_permute_mirrored", "norm_scale_control_mirrored"]
    table = intervention_table(
        model,
        task,
        layers=[2],
        interventions=names,
        n_prompts=40,
        control_draws=3,
        seed=0,
        readouts=READOUTS,
    )
    batch = held_out_prompts(task, 40, seed=0).test
    for readout in READOUTS:
        rows = table[table["readout"] == readout].set_index("intervention")

        def hits(name, draw=0, readout=readout):
            iv = SPECS[name].build(Fitted(d_model=128), draw=draw)
            kwargs = dict(layer=2, batch=batch, readout=readout)
            return measure_draws(model, task, [iv], **kwargs)[0]

        test = hits("norm_permute_mirrored")
        draws = [hits("norm_scale_control_mirrored", d) for d in range(3)]
        control = torch.tensor([d["hits"] for d in draws], dtype=torch.float64).mean(dim=0)
        expected = paired_difference(test["hits"], control.numpy(), seed=0)
        got = rows.loc["norm_permute_mirrored", ["difference", "difference_low", "difference_high"]]
        assert tuple(got) == pytest.approx(expected)
        ems = [d["exact_match"] for d in draws]
        below = (
            sum(e < test["exact_match"] for e in ems)
            + sum(e == test["exact_match"] for e in ems) / 2
        )
        assert rows.loc["norm_permute_mirrored", "percentile"] == pytest.approx(100 * below / 3)
        assert rows.loc["norm_scale_control_mirrored", "exact_match"] == pytest.approx(sum(ems) / 3)
        assert rows.loc["norm_scale_control_mirrored", "control_draws"] == 3
        assert rows.loc["norm_permute_mirrored", "perturbation"] == pytest.approx(
            test["perturbation"]
        )
    kept = table[table["readout"] == "kept"].set_index("intervention")
    changed = table[table["readout"] == "changed"].set_index("intervention")
    # Leaving the read-out states alone changes fewer states: a smaller recorded change.
    assert kept.loc["none", "exact_match"] == changed.loc["none", "exact_match"]
    assert (
        kept.loc["norm_permute_mirrored", "perturbation"]
        != changed.loc["norm_permute_mirrored", "perturbation"]
    )


def test_kept_readout_under_no_intervention_is_the_baseline(addition):
    model, task = addition
    batch = held_out_prompts(task, 30, seed=4).test
    kept = measure_draws(model, task, [NoIntervention()], layer=1, batch=batch, readout="kept")[0]
    plain = measure_draws(model, task, [NoIntervention()], layer=1, batch=batch)[0]
    assert kept["hits"] == plain["hits"] and kept["token_accuracy"] == plain["token_accuracy"]
    with pytest.raises(ValueError, match=r"readout must be one of \['kept', 'changed'\]"):
        measure_draws(model, task, [NoIntervention()], layer=1, batch=batch, readout="x")[0]


@pytest.mark.parametrize("name", ["norm_scale_control", "subspace_swap_random"])
def test_draws_measured_in_one_batch_equal_each_draw_measured_alone(addition, name):
    """`measure_draws` stacks the draws of a random control in one batch (`Stacked`): in
    float64 every draw's row is the row of that draw measured by itself."""
    model, task = addition
    model = copy.deepcopy(model).to(torch.float64)
    held = held_out_prompts(task, 40, n_fit=40, seed=4)
    states, positions = fit_states(model, held.fit, 1)
    fitted = Fitted(d_model=model.cfg.d_model, states=states, positions=positions, rank=4)
    built = [SPECS[name].build(fitted, draw=d) for d in range(3)]
    for readout in ("kept", "changed"):
        kwargs = {"layer": 1, "batch": held.test, "seed": 0, "readout": readout}
        together = measure_draws(model, task, built, **kwargs)
        alone = [measure_draws(model, task, [iv], **kwargs)[0] for iv in built]
        for a, b in zip(together, alone, strict=True):
            assert a["hits"] == b["hits"]
            assert a["answers"] == b["answers"]
            for key in set(a) - {"hits", "perturbation", "answers"}:
                assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key
        # pooled over the stack's decoding, which runs until every draw's prompts are
        # answered: a few more steps than some draw alone
        mean = sum(b["perturbation"] for b in alone) / len(alone)
        assert together[0]["perturbation"] == pytest.approx(mean, rel=0.02)
    with pytest.raises(ValueError, match="does not split into 3 equal chunks"):
        Stacked(tuple(built))(torch.zeros(4, 5, model.cfg.d_model))
    with pytest.raises(ValueError, match="needs at least one intervention"):
        measure_draws(model, task, [], layer=1, batch=held.test)


@pytest.fixture(scope="module")
def addition64(addition):
    model, task = addition
    model = copy.deepcopy(model).to(torch.float64)
    held = held_out_prompts(task, 40, n_fit=40, seed=5)
    prompts = fit_prompt_states(model, task, held, 1, seed=5)
    return model, task, held, fit_states(model, held.fit, 1), prompts


@pytest.mark.parametrize("name", NAMES)
def test_cached_decoding_with_the_readout_kept_equals_decoding_at_every_step(addition64, name):
    """With the read-out kept the change is the prompt's alone: decoding it once with a KV
    cache (`predict_cached`) gives the answers of re-running every step with the hook (a
    position-curve arm told the runs of the prompts at hand)."""
    model, task, held, (states, positions), prompts = addition64
    starts = [len(task.encode(p)) - 1 for p in held.test.prompts]
    counts = {n + 1: starts.count(n) for n in set(starts)}
    fitted = Fitted(
        model.cfg.d_model,
        rank=4,
        states=states,
        positions=positions,
        prompts=prompts,
        counts=counts,
        runs_of=lambda tokens: task.runs(task.decode(tokens)),
    )
    spec = SPECS[name]
    iv = spec.build(fitted, dose=Dose(1, 1 if "offsets" in spec.params else None))
    runs_of = task.runs if spec.dosed else lambda prompt: None  # grouped as measure_draws does
    layouts = [(s, runs_of(p)) for p, s in zip(held.test.prompts, starts, strict=True)]
    for start, runs in sorted(set(layouts), key=str):
        prompts = [
            p for p, key in zip(held.test.prompts, layouts, strict=True) if key == (start, runs)
        ]
        part = iv.at(runs) if spec.dosed else iv

        def change(start=start, part=part):
            return intervene(model, part, layer=1, readout_from=start, keep_readout=True)

        with change():
            slow = predict(model, task, prompts)
        assert predict_cached(model, task, prompts, prompt_pass=change) == slow


class _Scale:
    """A user's own intervention: every state scaled by `factor` (a plain class, no adjpos
    base)."""

    site = "resid_pre"

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, acts, readout=None):
        return acts * self.factor


def test_your_own_intervention_runs_through_the_task_runner(addition):
    model, task = addition
    mine = InterventionSpec(
        "scale", "every state scaled", lambda fit, *, factor, **_: _Scale(factor),
        params={"factor": 1.5}, role="tested",
    )  # fmt: skip
    table = intervention_table(
        model, task, layers=[1], interventions=["none", mine], n_prompts=30, readouts=["kept"]
    )
    rows = table.set_index("intervention")
    assert rows.loc["scale", "control"] == "none"
    alone = measure_draws(
        model, task, [_Scale(1.5)], layer=1, batch=held_out_prompts(task, 30).test, readout="kept"
    )[0]
    assert rows.loc["scale", "exact_match"] == alone["exact_match"]
    assert rows.loc["scale", "perturbation"] == pytest.approx(0.5)  # ||1.5 x - x|| / ||x||
    assert rows.loc["scale", "difference"] == pytest.approx(
        alone["exact_match"] - rows.loc["none", "exact_match"]
    )
