"""Training a bridged Hugging Face model: resumable, saved as a Hugging Face folder,
snapshots, NoPE kept; and the shipped SmolLM3 models load by family."""

import json

import pytest
import torch
import transformers

import adjpos
from adjpos import TrainConfig, get_task, is_position_free, load_model, train
from adjpos.hf import hf_state_dict, load_hf, task_config

TASK = get_task("addition", max_digits=2)
FAST = dict(steps=6, batch_size=8, eval_every=3, eval_size=8, warmup_steps=2, device="cpu")
SIZE = {"num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 2,
        "num_key_value_heads": 1, "intermediate_size": 32}  # fmt: skip


def _model(seed=0):
    return load_hf(task_config("smollm3", "addition", SIZE), seed=seed)


def _logits(model, tokens):
    with torch.no_grad():
        return model(tokens)


def test_resume_equals_uninterrupted_and_the_folder_is_a_hf_checkpoint(tmp_path):
    tokens = torch.randint(0, 25, (3, 9), generator=torch.Generator().manual_seed(0))
    initial = _logits(_model(), tokens)
    straight = _model()
    assert is_position_free(straight)
    whole = train(straight, TASK, TrainConfig(**FAST, snapshots="0,3"), out_dir=tmp_path / "a")
    assert whole.position_free

    class Interrupt(Exception):
        pass

    def stop(info):
        if info["step"] == 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        train(_model(), TASK, TrainConfig(**FAST), out_dir=tmp_path / "b", on_step=stop)
    resumed_model = _model(seed=5)  # resume must overwrite every weight
    resumed = train(resumed_model, TASK, TrainConfig(**FAST), out_dir=tmp_path / "b", resume=True)
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in whole.history]
    torch.testing.assert_close(_logits(resumed_model, tokens), _logits(straight, tokens))
    assert not torch.allclose(_logits(straight, tokens), initial)

    for folder in (tmp_path / "a", tmp_path / "b"):
        loaded = load_model(folder)
        torch.testing.assert_close(_logits(loaded, tokens), _logits(straight, tokens))
        assert adjpos.layer_kinds(loaded) == ["nope", "nope"]
    # transformers itself reads the folder
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    with torch.no_grad():
        torch.testing.assert_close(hf(tokens).logits, _logits(straight, tokens))
    torch.testing.assert_close(_logits(load_model(tmp_path / "a", step=0), tokens), initial)
    assert adjpos.models.snapshot_steps(tmp_path / "a") == [0, 3, 6]
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["model"]["hf"]["model_type"] == "smollm3"


def test_a_resumed_run_must_keep_its_architecture(tmp_path):
    train(_model(), TASK, TrainConfig(**FAST), out_dir=tmp_path)
    wider = load_hf(task_config("smollm3", "addition", {**SIZE, "hidden_size": 32}))
    with pytest.raises(ValueError, match="hidden_size"):
        train(wider, TASK, TrainConfig(**FAST), out_dir=tmp_path, resume=True)


def test_the_bridge_lm_head_bias_is_frozen_and_not_saved():
    model = _model()
    frozen = [n for n, p in model.original_model.named_parameters() if not p.requires_grad]
    assert frozen == ["lm_head._original_component.bias"]
    names = set(hf_state_dict(model))
    assert "lm_head.bias" not in names and "model.embed_tokens.weight" in names


def test_load_pretrained_by_family_lists_what_is_shipped():
    with pytest.raises(ValueError, match="no shipped model of family 'llama4'"):
        adjpos.load_pretrained("reversal", 0, family="llama4")
    assert adjpos.pretrained.pretrained_seeds("reversal", "llama4") == []


def test_the_shipped_smollm3_model_reverses():
    model, task = adjpos.load_pretrained("reversal", 0, family="smollm3")
    assert adjpos.layer_kinds(model) == ["nope"] * 4 and is_position_free(model)
    assert adjpos.pretrained.pretrained_seeds("reversal", "smollm3") == [0]
    info = adjpos.pretrained.pretrained_info("reversal", 0, family="smollm3")
    assert info["heldout"]["accuracy"] >= 0.99 and info["heldout"]["n_prompts"] == 2000
    prompts = task.draw_prompts(20, generator=torch.Generator().manual_seed(5), split="test")
    accuracy, _ = adjpos.evaluate(model, task, prompts)
    assert accuracy >= 0.9
