"""The shipped models: each loads, is position-free, and answers held-out prompts."""

import json
import shlex

import pytest
import torch

from adjpos import is_position_free, predict
from adjpos.models import snapshot_steps
from adjpos.pretrained import (
    available_pretrained,
    load_pretrained,
    pretrained_folder,
    pretrained_info,
    pretrained_seeds,
    recipe,
)

# Written out, not read from disk or from TASKS: a deleted model must fail here, not vanish.
SHIPPED = ("addition", "reversal", "indexing", "ordering")


def test_every_task_has_a_shipped_model():
    assert available_pretrained() == list(SHIPPED)


SEEDS = [(name, seed) for name in SHIPPED for seed in pretrained_seeds(name)]


def test_every_task_ships_three_seeds():
    assert {name: pretrained_seeds(name) for name in SHIPPED} == {n: [0, 1, 2] for n in SHIPPED}


@pytest.mark.parametrize(("name", "seed"), SEEDS)
def test_shipped_model_answers_fresh_held_out_prompts(name, seed):
    model, task = load_pretrained(name, seed, device="cpu")
    assert is_position_free(model)
    info = pretrained_info(name, seed)
    assert info["command"].startswith("adjpos train")  # its eval accuracy is a stopping rule
    assert info["heldout"]["n_prompts"] == 2000 and info["heldout"]["accuracy"] >= 0.99
    prompts = task.draw_prompts(100, generator=torch.Generator().manual_seed(7), split="test")
    answers = predict(model, task, prompts)
    correct = sum(a == task.solve(p) for p, a in zip(prompts, answers, strict=True))
    assert correct >= 95  # a spot check; docs/pretrained.md has the 2,000-prompt measurement


def test_unknown_model_is_a_clear_error():
    with pytest.raises(ValueError, match=r"no shipped model for task 'division' with seed 0; "):
        load_pretrained("division")
    with pytest.raises(
        ValueError, match=r"with seed 99; shipped \(task: seeds\): \{'addition': \["
    ):
        load_pretrained("addition", seed=99)


def test_missing_weights_are_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "addition" / "seed0").mkdir(parents=True)  # a model folder without weights
    (tmp_path / "addition" / "seed0" / "train.json").write_text("{}")
    monkeypatch.setattr("adjpos.pretrained.HERE", tmp_path)
    assert available_pretrained() == []
    for lookup in (load_pretrained, pretrained_info):
        with pytest.raises(ValueError, match=r"no shipped model for task 'addition' with seed 0"):
            lookup("addition")


def test_every_task_ships_seed_0_and_snapshots_run_from_the_start_to_the_end():
    assert all(0 in pretrained_seeds(name) for name in SHIPPED)
    with_snapshots = [(n, s) for n, s in SEEDS if snapshot_steps(pretrained_folder(n, s))]
    assert with_snapshots, "no shipped seed has training snapshots (the dynamics stage needs one)"
    for name, seed in with_snapshots:
        steps = snapshot_steps(pretrained_folder(name, seed))
        assert steps[0] == 0 and steps[-1] == pretrained_info(name, seed)["steps"]
        first, _ = load_pretrained(name, seed, step=0, device="cpu")
        last, _ = load_pretrained(name, seed, step=steps[-1], device="cpu")
        final, _ = load_pretrained(name, seed, device="cpu")
        for b, c in zip(last.parameters(), final.parameters(), strict=True):
            torch.testing.assert_close(b, c, atol=1e-2, rtol=1e-2)  # float16 snapshots
        pairs = zip(first.parameters(), final.parameters(), strict=True)
        assert not all(torch.equal(a, c) for a, c in pairs)


@pytest.mark.parametrize("name", SHIPPED)
def test_the_seeds_of_a_task_differ_only_in_the_seed(name):
    from adjpos.cli import _parser

    runs = []
    for seed in (0, 1, 2):
        argv = shlex.split(pretrained_info(name, seed)["command"])[1:]
        options = vars(_parser().parse_args(argv))
        assert (options.pop("seed"), options.pop("data_seed")) == (seed, seed)
        for where in ("out", "resume", "handler"):
            options.pop(where, None)
        runs.append(options)
        assert pretrained_info(name, seed)["heldout"]["accuracy"] >= 0.99
    assert runs[0] == runs[1] == runs[2]
    assert {k: runs[0][k] for k in recipe(name)} == recipe(name)
    configs = [
        json.loads((pretrained_folder(name, seed) / "config.json").read_text())["model"]
        for seed in (0, 1, 2)
    ]
    assert [config.pop("seed") for config in configs] == [0, 1, 2]
    assert configs[0] == configs[1] == configs[2]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_seed_of_a_task_ships_its_snapshots_from_step_0(name):
    for seed in (0, 1, 2):
        steps = snapshot_steps(pretrained_folder(name, seed))
        assert len(steps) >= 3 and steps[0] == 0
        assert steps[-1] == pretrained_info(name, seed)["steps"]
