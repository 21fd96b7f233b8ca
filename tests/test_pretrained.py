"""The shipped models: each loads, is position-free, and answers held-out prompts."""

import pytest
import torch

from adjpos import TASKS, is_position_free, predict
from adjpos.pretrained import available_pretrained, load_pretrained, pretrained_info


@pytest.mark.parametrize("name", available_pretrained())
def test_shipped_model_answers_fresh_held_out_prompts(name):
    model, task = load_pretrained(name, device="cpu")
    assert is_position_free(model)
    info = pretrained_info(name)
    assert info["accuracy"] >= 0.99 and info["command"].startswith("adjpos train")
    prompts = task.draw_prompts(100, generator=torch.Generator().manual_seed(7), split="test")
    answers = predict(model, task, prompts)
    correct = sum(a == task.solve(p) for p, a in zip(prompts, answers, strict=True))
    assert correct >= 95  # a spot check; docs/pretrained.md has the 2,000-prompt measurement


def test_unknown_or_missing_model_is_a_clear_error():
    with pytest.raises(ValueError, match="available"):
        load_pretrained("division")
    missing = [name for name in TASKS if name not in available_pretrained()]
    for name in missing:
        with pytest.raises(ValueError, match="no shipped model"):
            pretrained_info(name)
