"""``adjpos probe``, called in-process as a user would call it."""

import csv
import json

import pytest
import torch

from adjpos import build_model, get_task, probe_positions, reconstruct_order, save_model
from adjpos.cli import main
from adjpos.seeds import derive_seed
from adjpos.tasks import VOCAB_SIZE
from factories import tiny_config

SMALL = ["--n-sequences", "8", "--cv", "2", "--repeats", "1"]
RANDOM = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--seq-len", "8", *SMALL]
FAST = ["--features", "variance,cosine_profile", "--probe", "ridge"]


@pytest.fixture(autouse=True)
def no_png(monkeypatch):
    """Skip the PNG export (seconds of Chromium per figure); tests/figures exports one."""
    monkeypatch.setattr("adjpos.figures.save._write_png", lambda fig, path: "PNG skipped: test")


def _rows(folder):
    with open(folder / "probes.csv") as handle:
        return list(csv.DictReader(handle))


def _values(rows):
    return {(r["layer"], r["features"], r["probe"], r["metric"]): float(r["value"]) for r in rows}


def test_random_model_scores_are_those_of_the_library(capsys, tmp_path):
    out = tmp_path / "run"
    assert main(["probe", *RANDOM, *FAST, "--out", str(out)]) == 0
    assert "8 sequences x 8 tokens (random tokens)" in capsys.readouterr().out
    # The same model, tokens and settings through the library
    model = build_model(tiny_config(n_layers=1, d_vocab=64, n_ctx=128), device="cpu")
    tokens = torch.randint(0, 64, (8, 8), generator=torch.Generator().manual_seed(0))
    expected = probe_positions(
        model, tokens, features=["variance", "cosine_profile"], probe=["ridge"], cv=2, repeats=1
    ) + reconstruct_order(model, tokens)
    got = _values(_rows(out))
    assert got.keys() == {(str(s.layer), s.features, s.probe, s.metric) for s in expected.scores}
    for s in expected.scores:
        assert got[str(s.layer), s.features, s.probe, s.metric] == pytest.approx(s.value)
    saved = json.loads((out / "probes.json").read_text())
    assert [s["value"] for s in saved["scores"]] == [float(r["value"]) for r in _rows(out)]
    assert (out / "probes.html").is_file()


def test_options_reach_the_probes(tmp_path):
    out = tmp_path / "run"
    args = ["--features", "variance,shuffled:resid", "--probe", "logistic", "--layers", "1"]
    assert main(["probe", *RANDOM, *args, "--out", str(out)]) == 0
    rows = [r for r in _rows(out) if r["probe"] == "logistic"]
    assert {(r["features"], r["layer"]) for r in rows} == {
        ("variance", "1"),
        ("shuffled:resid", "1"),
    }
    assert {r["metric"] for r in rows} == {"accuracy", "mean_abs_distance"}


def test_a_rerun_reuses_the_results_and_other_settings_are_refused(capsys, tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert main(["probe", *RANDOM, *FAST, "--out", str(out)]) == 0
    first = capsys.readouterr().out
    run = json.loads((out / "run.json").read_text())
    assert run["kind"] == "probe" and run["spec"]["cv"] == 2
    assert run["spec"]["features"] == ["variance", "cosine_profile"]

    def no_refit(*args, **kwargs):
        raise AssertionError("refitted the probes of a finished run")

    monkeypatch.setattr("adjpos.probes.probe_positions", no_refit)
    assert main(["probe", *RANDOM, *FAST, "--out", str(out)]) == 0
    again = capsys.readouterr().out
    tables = first.split("\nwrote ")[0]
    assert again.startswith(tables) and "reused the results" in again
    assert main(["probe", *RANDOM, *FAST, "--data-seed", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos probe: error:") and "data_seed: 0 there, 1 here" in err


def test_a_folder_that_is_not_a_run_is_refused_before_any_work(capsys, tmp_path, monkeypatch):
    def no_probes(*args, **kwargs):
        raise AssertionError("probed before checking --out")

    monkeypatch.setattr("adjpos.probes.probe_positions", no_probes)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "a-file").write_text("")
    for out in (tmp_path, tmp_path / "a-file"):
        assert main(["probe", *RANDOM, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("adjpos probe: error:") and str(out) in err


def test_a_checkpoint_on_task_sequences(capsys, tmp_path):
    task = get_task("indexing", max_digits=4)
    model = build_model(tiny_config(d_vocab=VOCAB_SIZE, n_ctx=task.max_len))
    save_model(model, tmp_path / "ckpt")
    args = ["--model", str(tmp_path / "ckpt"), "--task", "indexing", "--task-param", "max_digits=4"]
    assert main(["probe", *args, *SMALL, *FAST, "--out", str(tmp_path / "run")]) == 0
    assert "(task indexing)" in capsys.readouterr().out
    assert {r["model"] for r in _rows(tmp_path / "run")} == {str(tmp_path / "ckpt")}


def test_a_shipped_model_is_probed_on_its_task(capsys, tmp_path):
    args = ["--model", "pretrained:addition", *SMALL, "--features", "variance", "--probe", "ridge"]
    assert main(["probe", *args, "--device", "cpu", "--out", str(tmp_path / "run")]) == 0
    assert "(task addition)" in capsys.readouterr().out
    assert {r["model"] for r in _rows(tmp_path / "run")} == {"pretrained:addition"}


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--features", "variance,cosine"], "--features: unknown feature sets ['cosine']"),
        (
            ["--probe", "svm"],
            "--probe: unknown probes ['svm']; choose from ['ridge', 'logistic', 'spline']",
        ),
        (["--layers", "0,5"], "--layers: layers must be a non-empty list of ints in [0, 1]"),
        (["--cv", "10"], "--n-sequences: 8 sequences are too few for --cv 10"),
        (["--cv", "1"], "--cv must be at least 2"),
        (["--seq-len", "2"], "--seq-len: probing needs at least 3 tokens"),
        (["--model", "/nonexistent/ckpt"], "--model /nonexistent/ckpt: no such checkpoint folder"),
        (["--model", "pretrained:division"], "unknown task or seed; choose one of"),
        (["--seq-len", "500"], "n_ctx"),
    ],
)
def test_bad_input_exits_2_before_any_work(capsys, tmp_path, monkeypatch, args, message):
    def no_capture(*args, **kwargs):
        raise AssertionError("probed before checking the input")

    monkeypatch.setattr("adjpos.probes.positions.iter_residuals", no_capture)
    monkeypatch.setattr("adjpos.probes.order.iter_residuals", no_capture)
    assert main(["probe", *RANDOM, *args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos probe: error:") and message in err, err
    assert not (tmp_path / "run").exists()  # a corrected command may use the folder


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-sequences", "-1"], "argument --n-sequences: expected an int >= 1, got '-1'"),
        (["--seq-len", "0"], "argument --seq-len: expected an int >= 1, got '0'"),
        (["--repeats", "0"], "argument --repeats: expected an int >= 1, got '0'"),
        (["--batch-size", "0"], "argument --batch-size: expected an int >= 1, got '0'"),
        (["--controls", "-1"], "argument --controls: expected an int >= 0, got '-1'"),
    ],
)
def test_a_count_out_of_range_names_its_option_and_the_range(capsys, tmp_path, args, message):
    with pytest.raises(SystemExit) as stopped:
        main(["probe", *RANDOM, *args, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


def test_a_list_option_that_does_not_parse_names_itself(capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        main(["probe", *RANDOM, "--layers", "0,one", "--out", str(tmp_path / "run")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "argument --layers: expected comma-separated ints, got '0,one'" in err


def test_a_missing_shipped_model_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("adjpos.pretrained.HERE", tmp_path)  # as if no model were shipped
    assert main(["probe", "--model", "pretrained:ordering", "--out", str(tmp_path / "r")]) == 2
    assert "no shipped model for task 'ordering' with seed 0" in capsys.readouterr().err


def test_controls_are_copies_of_the_architecture_on_the_same_sequences(tmp_path):
    out = tmp_path / "run"
    args = ["--seed", "3", "--controls", "2"]
    assert main(["probe", *RANDOM, *FAST, *args, "--out", str(out)]) == 0
    rows = _rows(out)
    other = derive_seed(3, "random-init control", 1, bits=32)  # the second: derived from 3
    assert list(dict.fromkeys(r["model"] for r in rows)) == [
        "random",
        "random-init (seed 3)",
        f"random-init (seed {other})",
    ]
    by_model = {
        m: _values([r for r in rows if r["model"] == m]) for m in ("random", "random-init (seed 3)")
    }
    assert by_model["random"] == by_model["random-init (seed 3)"]  # its own starting weights
    for stem in ("probes", "probes_control_seed3", f"probes_control_seed{other}"):
        assert (out / f"{stem}.json").is_file() and (out / f"{stem}.html").is_file()
    second = json.loads((out / f"probes_control_seed{other}.json").read_text())
    assert second["model"] == f"random-init (seed {other})" and second["n_sequences"] == 8
