"""Bad input gets a clear error naming the option (or argument) and what is allowed, never a
traceback: one test per case, through the library and the command line called in-process."""

import sys

import pytest
import torch

from adjpos import adjacency_score, build_model, is_position_free, measure_layers, save_model
from adjpos.cli import main
from adjpos.engines import check_engine
from adjpos.probes import probe_positions
from adjpos.validation import UsageError
from factories import tiny_config

TINY = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--d-vocab", "20"]


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err


def _exits_2(capsys, argv: list[str]) -> str:
    """Run `argv` (an argparse error or a refused input: exit code 2 either way); stderr."""
    try:
        code = main(argv)
    except SystemExit as stopped:
        code = stopped.code
    assert code == 2
    return _err(capsys)


def _nan_model():
    model = build_model(tiny_config(), device="cpu")
    with torch.no_grad():  # a query weight: the scores would stay finite (the mask hides it)
        model.blocks[1].attn.W_Q[0, 0, 0] = float("nan")
    return model


# weights


def test_a_nan_weight_is_refused_by_every_measure_naming_the_parameter(tokens):
    model = _nan_model()
    size = model.blocks[1].attn.W_Q.numel()
    message = rf"parameter blocks\.1\.attn\.W_Q holds 1 NaN or infinite value of {size};"
    for measure in (adjacency_score, measure_layers, probe_positions):
        with pytest.raises(UsageError, match=message):
            measure(model, tokens)


def test_a_nan_weight_is_refused_by_the_command_line(capsys, tmp_path):
    save_model(_nan_model(), tmp_path / "m")
    err = _exits_2(capsys, ["score", "--model", str(tmp_path / "m")])
    assert "blocks.1.attn.W_Q holds 1 NaN" in err and "every weight must be finite" in err


def test_an_infinite_weight_whose_sum_overflows_is_told_from_a_large_finite_one(tokens):
    model = build_model(tiny_config(), device="cpu")
    with torch.no_grad():
        model.unembed.W_U.fill_(3e37)  # finite, though its float32 sum is not
    assert adjacency_score(model, tokens).isfinite().all()
    with torch.no_grad():
        model.unembed.W_U[0, 0] = float("inf")
    with pytest.raises(UsageError, match="unembed.W_U holds 1 NaN or infinite value"):
        adjacency_score(model, tokens)


def test_a_truncated_safetensors_in_an_hf_folder_names_the_folder(capsys, tmp_path):
    from adjpos.hf import hf_config, load_hf, save_hf

    small = {"num_hidden_layers": 1, "hidden_size": 16, "intermediate_size": 32}
    folder = save_hf(load_hf(hf_config("smollm3", small)), tmp_path / "hf")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    err = _exits_2(capsys, ["score", "--hf", str(folder), "--random-tokens"])
    assert f"cannot load the weights of '{folder}': Error while deserializing header" in err


# what is not a model


@pytest.mark.usefixtures("user_errors")
def test_a_model_that_is_not_a_model_is_named(tokens):
    with pytest.raises(TypeError, match=r"model_or_cache must be a TransformerLens model .*str"):
        adjacency_score("x", tokens)
    with pytest.raises(TypeError, match=r"model must be a TransformerLens model .*NoneType"):
        measure_layers(None, tokens)


@pytest.mark.usefixtures("user_errors")
def test_is_position_free_of_none_is_a_type_error():
    with pytest.raises(TypeError, match="is_position_free needs a model .*got NoneType"):
        is_position_free(None)
    assert is_position_free(torch.nn.Linear(2, 2)) is False  # a module without a cfg


# files


@pytest.mark.parametrize("command", ["score", "sweep", "intervene"])
def test_a_binary_text_or_grid_file_is_named(capsys, tmp_path, command):
    binary = tmp_path / "data.bin"
    binary.write_bytes(bytes(range(128, 256)))
    option = "--grid" if command == "sweep" else "--text"
    out = ["--out", str(tmp_path / "o")]
    argv = {
        "score": ["score", "--hf", "unused", "--text", str(binary)],
        "sweep": ["sweep", "--grid", str(binary), *out],
        "intervene": ["intervene", "--hf", "unused", "--text", str(binary), *out],
    }[command]
    err = _exits_2(capsys, argv)
    assert f"{option} {binary}: not a UTF-8 text file (byte 0x80 at offset 0)" in err


def _gguf_file(tmp_path, kind):
    """A file that is no complete GGUF file: text, empty, or a GGUF header cut short."""
    path = tmp_path / "model.gguf"
    if kind == "text":
        path.write_text("hello\n")
    elif kind == "empty":
        path.write_bytes(b"")
    else:  # the magic and part of the version: a GGUF file cut short in its header
        pytest.importorskip("gguf")
        path.write_bytes(b"GGUF\x03\x00")
    return path


GGUF_ERRORS = {
    "text": "not a GGUF file (it does not start with the GGUF magic bytes, b'GGUF')",
    "empty": "the file is empty, not a GGUF file",
    "truncated": "not a complete GGUF file (6 bytes): its header or the tensor data it "
    "announces is cut short or damaged",
}


@pytest.mark.parametrize("kind", GGUF_ERRORS)
def test_convert_gguf_names_a_file_that_is_no_complete_gguf_file(capsys, tmp_path, kind):
    path = _gguf_file(tmp_path, kind)
    err = _exits_2(capsys, ["convert-gguf", str(path), "--out", str(tmp_path / "o")])
    assert err == f"adjpos convert-gguf: error: {path}: {GGUF_ERRORS[kind]}\n"
    assert not (tmp_path / "o").exists()
    text = tmp_path / "notes.txt"  # any name: the file is read, not its suffix
    text.write_text("hello\n")
    err = _exits_2(capsys, ["convert-gguf", str(text), "--out", str(tmp_path / "o")])
    assert f"{text}: not a GGUF file" in err


def test_a_gguf_file_cut_short_in_its_tensors_is_named(capsys, tmp_path):
    pytest.importorskip("gguf")
    from factories import tiny_gguf

    path = tmp_path / "tiny.gguf"
    tiny_gguf(path)
    path.write_bytes(path.read_bytes()[:-100])
    for argv in (
        ["convert-gguf", str(path), "--out", str(tmp_path / "o")],
        ["score", "--hf", str(path), "--random-tokens"],
    ):
        err = _exits_2(capsys, argv)
        assert f"{path}: not a complete GGUF file" in err
    assert "error: --hf: " in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty; give a UTF-8 text to train on, of a few hundred lines at least"),
        (" \n\n", "the file holds only whitespace"),
        (
            "one line\n",
            "no validation part: of its 1 chunk of 40 lines (1 line), 10% by hash are held out "
            "for validation, here none; give a longer file",
        ),
    ],
)
def test_train_text_names_an_empty_or_short_file(capsys, tmp_path, monkeypatch, text, message):
    monkeypatch.setattr("adjpos.text.prepare.train_tokenizer", None)  # checked before it runs
    path = tmp_path / "t.txt"
    path.write_text(text)
    err = _exits_2(capsys, ["train", "--text", str(path), "--out", str(tmp_path / "o")])
    assert f"error: --text {path}: {message}" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "command",
    [["train", "--task", "addition"], ["probe"], ["sweep"], ["reproduce"], ["convert-gguf", "x"]],
)
def test_out_that_is_a_file_is_refused_before_any_work(capsys, tmp_path, command):
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile, afile / "sub"):
        assert main([*command, "--out", str(out)]) == 2
        what = "is a file" if out == afile else f"{afile} is a file"
        message = f"--out {out}: {what}; --out must be a folder (created if needed)\n"
        assert _err(capsys) == f"adjpos {command[0]}: error: {message}"


# counts


@pytest.mark.parametrize("command", ["score", "probe", "sweep"])
@pytest.mark.parametrize(("option", "value"), [("--n-sequences", "-1"), ("--seq-len", "0")])
def test_a_count_below_one_names_the_option_and_the_range(capsys, tmp_path, command, option, value):
    out = [] if command == "score" else ["--out", str(tmp_path / "o")]
    err = _exits_2(capsys, [command, option, value, *out])
    low = 3 if option == "--seq-len" and command != "probe" else 1  # the adjacency score's
    assert f"argument {option}: expected an int >= {low}, got '{value}'" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["score", "sweep"])
def test_a_sequence_too_short_to_score_names_the_option(capsys, tmp_path, command):
    out = [] if command == "score" else ["--out", str(tmp_path / "o")]
    err = _exits_2(capsys, [command, "--seq-len", "2", *out])
    assert "argument --seq-len: expected an int >= 3, got '2'" in err


# options a model does not take


def test_model_options_with_a_shipped_model_are_refused(capsys, tmp_path):
    argv = ["probe", "--model", "pretrained:indexing", "--d-model", "128"]
    err = _exits_2(capsys, [*argv, "--out", str(tmp_path / "o")])
    assert "--d-model 128: the ModelConfig options build a random model (--model random)" in err
    assert "--model pretrained:indexing brings its own architecture" in err
    assert not (tmp_path / "o").exists()


def test_model_options_with_a_hugging_face_model_are_refused(capsys, tmp_path):
    err = _exits_2(capsys, ["score", "--hf", "unused", "--random-tokens", "--n-layers", "3"])
    assert "--n-layers 3: the ModelConfig options build a random model" in err
    assert "--hf unused brings its own architecture" in err


# runs


def test_train_resume_on_an_empty_folder_is_refused(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        argv = ["train", "--task", "addition", "--resume", "--out", str(folder)]
        err = _exits_2(capsys, argv)
        assert f"--resume: {folder} holds no training run to continue (no run.json)" in err
        assert "leave --resume out to start one there" in err
    assert not any((tmp_path / "empty").iterdir()) and not (tmp_path / "missing").exists()


def test_train_refuses_layout_where_it_does_not_apply(capsys, tmp_path):
    argv = ["train", "--task", "reversal", "--layout", "hybrid", "--out", str(tmp_path / "o")]
    err = _exits_2(capsys, argv)
    assert (
        "error: --layout hybrid: applies with --text and --model random (a fresh language "
        "model); with --task a random model's positions come from --positional (one of none, "
        "learned, rotary, alibi)"
    ) in err
    text = tmp_path / "t.txt"
    text.write_text("some text\n")
    argv = ["train", "--text", str(text), "--model", "pretrained:reversal", "--layout", "rope"]
    err = _exits_2(capsys, [*argv, "--out", str(tmp_path / "o")])
    assert "--layout rope: applies with --model random (a fresh model); --model " in err
    assert not (tmp_path / "o").exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_a_ray_address_is_checked_before_any_work(capsys, tmp_path, monkeypatch, command):
    def refuse(*args, **kwargs):
        raise AssertionError("work started before --address was checked")

    monkeypatch.setattr("adjpos.study.pipeline.reproduce", refuse)
    monkeypatch.setattr("adjpos.sweep.sweep", refuse)
    port = _closed_port()
    argv = [command, "--engine", "ray", "--out", str(tmp_path / "o"), "--address"]
    err = _exits_2(capsys, [*argv, f"ray://127.0.0.1:{port}"])
    assert f"error: --address ray://127.0.0.1:{port}: cannot connect to 127.0.0.1:{port} (" in err
    assert "give the address of a running Ray cluster, or leave --address out" in err
    err = _exits_2(capsys, [*argv, "ray://head"])
    assert "--address ray://head: expected auto, HOST:PORT (" in err
    argv = [command, "--address", "auto", "--out", str(tmp_path / "o")]
    assert "--address auto: goes with --engine ray" in _exits_2(capsys, argv)
    assert not (tmp_path / "o").exists()


def test_a_ray_address_that_answers_passes():
    import socket

    from adjpos.cli._inputs import check_ray_address

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        for address in (f"ray://127.0.0.1:{port}", f"127.0.0.1:{port}"):
            assert check_ray_address("ray", address) is None


def test_a_ray_client_address_without_grpc_names_the_extra(monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setitem(sys.modules, "grpc", None)  # as if ray[client] were not installed
    with pytest.raises(UsageError, match=r"'ray://head:10001' connects through Ray Client.*grpcio"):
        check_engine("ray", address="ray://head:10001")
    assert check_engine("ray", address="auto") == "ray"  # no client needed there


def test_the_ray_extra_brings_the_client():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("ray[client]") for req in extras["ray"])
