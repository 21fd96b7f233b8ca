"""The text models on the command line and through `load_pretrained`: ``adjpos train --text
FILE --layout``, ``adjpos score --text`` with the model's own tokenizer, and a shipped
``pretrained:text-LAYOUT:SEED`` (installed here into a temporary package folder)."""

import json
import re
import shutil

import pytest
import torch

import adjpos
from adjpos.cli import main
from adjpos.text import encode_text

TINY = ["--n-layers", "4", "--d-model", "16", "--n-heads", "2", "--n-ctx", "16"]
SHORT = ["--steps", "4", "--eval-every", "2", "--eval-size", "4", "--batch-size", "4"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    words = "the king and queen of a land far away did speak with love".split()
    picks = torch.randint(0, len(words), (1500, 7), generator=torch.Generator().manual_seed(0))
    path = tmp_path_factory.mktemp("text") / "play.txt"
    path.write_text("".join(" ".join(words[i] for i in row) + ".\n" for row in picks.tolist()))
    return path


@pytest.fixture(scope="module")
def hybrid_run(text_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "hybrid"
    argv = ["train", "--text", str(text_file), "--layout", "hybrid", "--out", str(out)]
    assert main([*argv, *TINY, *SHORT, "--vocab-size", "300", "--device", "cpu"]) == 0
    return out


def test_train_text_writes_a_model_with_its_tokenizer_and_layout(hybrid_run, text_file):
    summary = json.loads((hybrid_run / "train.json").read_text())
    assert summary["layer_kinds"] == ["rope", "rope", "rope", "nope"]
    metrics = json.loads((hybrid_run / "metrics.json").read_text())
    assert summary["val_loss"] == metrics["history"][-1]["val_loss"]
    model = adjpos.load_model(hybrid_run)
    assert adjpos.layer_kinds(model) == summary["layer_kinds"]
    tokenizer = adjpos.text.load_tokenizer(hybrid_run)
    assert model.cfg.d_vocab == tokenizer.vocab_size


def test_train_text_nope_is_position_free(text_file, tmp_path):
    argv = ["train", "--text", str(text_file), "--out", str(tmp_path / "nope"), *TINY, *SHORT]
    assert main([*argv, "--vocab-size", "300", "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "nope" / "train.json").read_text())["position_free"]
    assert adjpos.is_position_free(adjpos.load_model(tmp_path / "nope"))


def _score_rows(output):
    rows = [line.split() for line in output.splitlines() if line.strip()[:1].isdigit()]
    return [(row[1], float(row[2])) for row in rows]


def test_score_reads_text_with_the_models_tokenizer(hybrid_run, text_file, capsys):
    argv = ["score", "--model", str(hybrid_run), "--text", str(text_file), "--seq-len", "16"]
    assert main([*argv, "--n-sequences", "5", "--device", "cpu"]) == 0
    rows = _score_rows(capsys.readouterr().out)
    assert [kind for kind, _ in rows] == ["embed", "rope", "rope", "rope", "nope"]
    tokenizer = adjpos.text.load_tokenizer(hybrid_run)
    ids = torch.tensor(encode_text(tokenizer, text_file.read_text())[:80]).view(5, 16)
    expected = adjpos.adjacency_score(adjpos.load_model(hybrid_run), ids).tolist()  # one default
    assert [value for _, value in rows] == pytest.approx(expected, abs=1e-4)


@pytest.fixture
def shipped(hybrid_run, tmp_path, monkeypatch):
    """The tiny run installed as the shipped ``text-hybrid`` seed 0."""
    monkeypatch.setattr("adjpos.pretrained.HERE", tmp_path)
    shutil.copytree(hybrid_run, tmp_path / "text-hybrid" / "seed0")
    return tmp_path / "text-hybrid" / "seed0"


def test_load_pretrained_gives_the_model_and_its_tokenizer(shipped):
    model, tokenizer = adjpos.load_pretrained("text-hybrid", 0)
    assert adjpos.layer_kinds(model) == ["rope", "rope", "rope", "nope"]
    assert tokenizer.decode(tokenizer("the king did speak")["input_ids"]) == "the king did speak"
    longer, _ = adjpos.load_pretrained("text-hybrid", 0, n_ctx=64)
    assert longer(torch.zeros(1, 64, dtype=torch.long)).shape[1] == 64
    assert adjpos.pretrained.pretrained_seeds("text-hybrid") == [0]
    with pytest.raises(ValueError, match="text-hybrid"):
        adjpos.load_pretrained("text-rope", 0)


def test_pretrained_text_model_as_a_model_spec(shipped, text_file, capsys):
    argv = ["score", "--model", "pretrained:text-hybrid:0", "--text", str(text_file)]
    assert main([*argv, "--seq-len", "16", "--n-sequences", "3", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "pretrained:text-hybrid:0" in out
    assert [kind for kind, _ in _score_rows(out)][-1] == "nope"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["score", "--text", "FILE"], "--text needs a model with a tokenizer"),
        (["score", "--model", "pretrained:text-big:0"], "unknown task or seed"),
        (["train", "--out", "OUT"], "needs --task TASK or --text FILE"),
        (["train", "--text", "FILE", "--task", "addition", "--out", "OUT"], "not both"),
        (["train", "--text", "FILE", "--positional", "rotary", "--out", "OUT"], "--layout"),
        (["train", "--text", "MISSING", "--out", "OUT"], "missing.txt: No such file"),
    ],
)
def test_text_options_are_checked(argv, message, text_file, tmp_path, capsys):
    argv = [a.replace("FILE", str(text_file)).replace("OUT", str(tmp_path / "o")) for a in argv]
    argv = [a.replace("MISSING", str(tmp_path / "missing.txt")) for a in argv]
    assert main([*argv, "--device", "cpu"]) == 2
    assert message in capsys.readouterr().err


def test_a_text_too_short_for_one_window_is_named_with_the_numbers(text_file, tmp_path, capsys):
    argv = ["train", "--text", str(text_file), "--n-ctx", "100000", "--vocab-size", "300"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert re.search(
        rf"--text {re.escape(str(text_file))}: split 'train' holds \d+ tokens; a window needs "
        "more than context=100000",
        err,
    ), err
