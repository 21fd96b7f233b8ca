import json

import pytest
import torch

from adjpos.models import build_model, is_position_free, load_model, save_model
from factories import tiny_config


@pytest.mark.parametrize("positional", ["none", "learned"])
def test_round_trip(tmp_path, tokens, positional):
    model = build_model(tiny_config(positional=positional))
    save_model(model, tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]
    loaded = load_model(tmp_path / "ckpt")
    assert loaded.adjpos_config == model.adjpos_config
    assert is_position_free(loaded) == (positional == "none")
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), model(tokens))


def test_w_pos_zero_after_trained_round_trip(tmp_path, tiny_model, tokens):
    opt = torch.optim.AdamW(tiny_model.parameters(), lr=1e-2, weight_decay=0.1)
    tiny_model(tokens, return_type="loss").backward()
    opt.step()
    loaded = load_model(save_model(tiny_model, tmp_path / "m"))
    assert not loaded.pos_embed.W_pos.any() and is_position_free(loaded)


def test_old_config_with_unknown_key_still_loads(tmp_path, tiny_model):
    folder = save_model(tiny_model, tmp_path / "m")
    data = json.loads((folder / "config.json").read_text())
    data["model"]["retired_option"] = True
    (folder / "config.json").write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="retired_option"):
        load_model(folder)


def test_not_a_checkpoint(tmp_path, tiny_model):
    with pytest.raises(ValueError, match="config.json is missing"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not an adjpos model config"):
        load_model(tmp_path)
    folder = save_model(tiny_model, tmp_path / "m")
    (folder / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="model.safetensors is missing"):
        load_model(folder)


@pytest.mark.parametrize("keep", [0.5, 0.0001])
def test_a_truncated_weights_file_is_a_value_error_naming_it(tmp_path, tiny_model, keep):
    folder = save_model(tiny_model, tmp_path / "m")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: int(len(data) * keep)])  # cut in the tensors, or in the header
    with pytest.raises(ValueError, match="truncated or corrupt") as err:
        load_model(folder)
    assert str(weights) in str(err.value)


def test_save_needs_a_config(tmp_path, tiny_model):
    del tiny_model.adjpos_config
    with pytest.raises(ValueError, match="ModelConfig"):
        save_model(tiny_model, tmp_path)


def test_failed_write_leaves_no_partial_file(tmp_path, tiny_model, monkeypatch):
    folder = save_model(tiny_model, tmp_path / "m")
    before = (folder / "model.safetensors").read_bytes()

    def boom(state, filename):
        open(filename, "wb").write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("adjpos.models.checkpoint.save_file", boom)
    with pytest.raises(OSError, match="disk full"):
        save_model(tiny_model, folder)
    assert (folder / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]


def test_written_files_get_the_usual_permissions(tmp_path, tiny_model):
    import os
    import stat

    umask = os.umask(0o022)
    try:
        folder = save_model(tiny_model, tmp_path / "m")
    finally:
        os.umask(umask)
    for name in ("config.json", "model.safetensors"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o644


@pytest.mark.parametrize("positional", ["none", "rotary"])
def test_load_with_a_longer_context_gives_the_same_outputs(tmp_path, positional, tokens):
    model = build_model(tiny_config(positional=positional))
    folder = save_model(model, tmp_path / "m")
    longer = load_model(folder, n_ctx=48)
    assert longer.cfg.n_ctx == 48 and longer.adjpos_config.n_ctx == 48
    assert is_position_free(longer) == (positional == "none")
    with torch.no_grad():
        torch.testing.assert_close(longer(tokens), model(tokens))
        assert longer(torch.randint(0, 20, (2, 40))).shape == (2, 40, 20)


def test_learned_positions_cannot_be_extended(tmp_path):
    folder = save_model(build_model(tiny_config(positional="learned")), tmp_path / "m")
    with pytest.raises(ValueError, match="learned-position"):
        load_model(folder, n_ctx=48)
