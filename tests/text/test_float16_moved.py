"""docs/float16_moved.py: a shipped text model against float32 weights of its training run."""

import runpy
from pathlib import Path

import pytest

from adjpos.models import save_model
from adjpos.pretrained import load_pretrained

SCRIPT = Path(__file__).parents[2] / "docs" / "float16_moved.py"


@pytest.fixture
def script():
    return runpy.run_path(str(SCRIPT), run_name="not_main")


def test_the_shipped_weights_in_float32_moved_nothing(script, tmp_path):
    """A run holding the shipped weights themselves, saved in float32: every change is 0."""
    model, _ = load_pretrained("text-nope", 0)
    save_model(model.float(), tmp_path / "nope-seed-0")
    (tmp_path / "notes").mkdir()  # not a run: left out
    result = script["compare"](tmp_path / "nope-seed-0", windows=4)
    assert result["model"] == "nope-seed-0" and 3 < result["loss32"] < 8
    assert result["difference"][0] == 0 and result["logit"] == 0 and result["adjacency"][0] == 0
    model.W_E.data += 0.01  # every embedding moved: the logits move
    save_model(model, tmp_path / "nope-seed-0")
    assert script["compare"](tmp_path / "nope-seed-0", windows=4)["logit"] > 0


def test_a_folder_without_runs_is_named(script, tmp_path):
    with pytest.raises(SystemExit, match="no training run"):
        script["main"]([str(tmp_path)])
