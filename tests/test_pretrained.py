"""The shipped models: each loads, is position-free, and answers held-out prompts."""

import pytest
import torch

from adjpos import is_position_free, predict
from adjpos.pretrained import available_pretrained, load_pretrained, pretrained_info

# Written out, not read from disk or from TASKS: a deleted model must fail here, not vanish.
SHIPPED = ("addition", "reversal", "indexing", "ordering")


def test_every_task_has_a_shipped_model():
    assert available_pretrained() == list(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_model_answers_fresh_held_out_prompts(name):
    model, task = load_pretrained(name, device="cpu")
    assert is_position_free(model)
    info = pretrained_info(name)
    assert info["accuracy"] >= 0.99 and info["command"].startswith("adjpos train")
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
