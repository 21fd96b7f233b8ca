"""Bridged Hugging Face models in `adjpos.models`: told apart without importing TransformerLens,
saved and loaded by the same `save_model` / `load_model` as adjpos's own models."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import adjpos
from adjpos.models import (
    is_bridge,
    is_position_free,
    layer_kinds,
    load_model,
    save_model,
    save_snapshot,
    snapshot_steps,
)
from factories import tiny_bridge, tiny_config

SMALL = {"num_hidden_layers": 2, "hidden_size": 16, "intermediate_size": 32}


def test_is_bridge_tells_bridges_from_other_models():
    assert is_bridge(tiny_bridge())
    assert not is_bridge(adjpos.build_model(tiny_config()))
    assert not is_bridge(torch.nn.Linear(2, 2))


def test_reading_a_model_imports_no_transformer_library():
    """`is_bridge`, `layer_kinds` and `is_position_free` of a non-TransformerLens object
    answer without importing TransformerLens or transformers (a fresh interpreter)."""
    code = (
        "import json, sys, torch\n"
        "from adjpos.models import is_bridge, is_position_free, layer_kinds\n"
        "linear = torch.nn.Linear(2, 2)\n"
        "try:\n"
        "    layer_kinds(linear)\n"
        "except TypeError:\n"
        "    raised = True\n"
        "answers = [is_bridge(linear), is_position_free(linear), raised]\n"
        "loaded = [m in sys.modules for m in ('transformer_lens', 'transformers')]\n"
        "print(json.dumps(answers + loaded))"
    )
    root = Path(adjpos.__file__).parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert json.loads(done.stdout) == [False, False, True, False, False]


@pytest.fixture(scope="module")
def bridge():
    return adjpos.load_hf(adjpos.hf_config("smollm3", SMALL, nope="all"))


def _logits(model, tokens):
    with torch.no_grad():
        return model(tokens)


def test_a_bridge_saves_as_a_hugging_face_folder_and_loads_back(tmp_path, bridge):
    tokens = torch.randint(3, 256, (2, 7), generator=torch.Generator().manual_seed(0))
    folder = save_model(bridge, tmp_path / "m")
    assert json.loads((folder / "config.json").read_text())["model_type"] == "smollm3"
    loaded = load_model(folder)
    assert is_bridge(loaded) and layer_kinds(loaded) == ["nope", "nope"]
    assert is_position_free(loaded)
    torch.testing.assert_close(_logits(loaded, tokens), _logits(bridge, tokens))
    save_snapshot(bridge, folder, 3, dtype=torch.float16)
    assert snapshot_steps(folder) == [3]
    snapshot = load_model(folder, step=3)
    torch.testing.assert_close(
        _logits(snapshot, tokens), _logits(bridge, tokens), atol=5e-2, rtol=0
    )
    with pytest.raises(ValueError, match="n_ctx applies to adjpos models"):
        load_model(folder, n_ctx=64)
    with pytest.raises(ValueError, match=r"no snapshot of step 4; it has \[3\]"):
        load_model(folder, step=4)
    assert adjpos.save_model is save_model and adjpos.load_model is load_model
