"""``adjpos probe``, called in-process as a user would call it."""

import csv

import pytest

from adjpos import build_model, get_task, save_model
from adjpos.cli import main
from adjpos.pretrained import available_pretrained
from adjpos.tasks import VOCAB_SIZE
from factories import tiny_config

SMALL = ["--n-sequences", "8", "--cv", "2", "--repeats", "1"]
RANDOM = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--seq-len", "8", *SMALL]


@pytest.fixture
def no_png(monkeypatch):
    """Skip the PNG export (seconds of Chromium per figure); tests/figures exports one."""
    monkeypatch.setattr("adjpos.figures.save._write_png", lambda fig, path: "PNG skipped: test")


def _rows(folder):
    with open(folder / "probes.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.usefixtures("no_png")
def test_random_model_writes_csv_json_and_figure(capsys, tmp_path):
    out = tmp_path / "run"
    assert main(["probe", *RANDOM, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("random: 8 sequences x 8 tokens (random tokens)")
    assert "ridge r2" in text and "spectral_seriation abs_kendall_tau" in text
    rows = _rows(out)
    assert list(rows[0]) == ["model", "layer", "features", "probe", "metric", "value", "baseline"]
    assert {r["model"] for r in rows} == {"random"} and {r["layer"] for r in rows} == {"0", "1"}
    assert {r["probe"] for r in rows} == {
        "ridge",
        "logistic",
        "spectral_seriation",
        "variance_sort",
    }
    assert (out / "probes.json").is_file() and (out / "probes.html").is_file()
    assert text.rstrip().endswith(
        f"wrote probes.csv, probes.json, probes.html to {out}\nPNG skipped: test"
    )


@pytest.mark.usefixtures("no_png")
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


@pytest.mark.usefixtures("no_png")
def test_a_checkpoint_on_task_sequences(capsys, tmp_path):
    task = get_task("indexing", max_digits=4)
    model = build_model(tiny_config(d_vocab=VOCAB_SIZE, n_ctx=task.max_len))
    save_model(model, tmp_path / "ckpt")
    args = ["--model", str(tmp_path / "ckpt"), "--task", "indexing", "--task-param", "max_digits=4"]
    assert main(["probe", *args, *SMALL, "--out", str(tmp_path / "run")]) == 0
    assert "(task indexing)" in capsys.readouterr().out
    assert {r["model"] for r in _rows(tmp_path / "run")} == {str(tmp_path / "ckpt")}


@pytest.mark.usefixtures("no_png")
def test_pretrained_model_is_probed_on_its_task(capsys, tmp_path, monkeypatch):
    task = get_task("addition")
    model = build_model(tiny_config(d_vocab=VOCAB_SIZE, n_ctx=task.max_len))
    monkeypatch.setattr(
        "adjpos.pretrained.load_pretrained", lambda name, device=None: (model, task)
    )
    assert main(["probe", "--model", "pretrained:addition", *SMALL, "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("pretrained:addition: 8 sequences x ")


@pytest.mark.usefixtures("no_png")
@pytest.mark.parametrize("name", available_pretrained())
def test_shipped_models(name, tmp_path):
    assert main(["probe", "--model", f"pretrained:{name}", *SMALL, "--out", str(tmp_path)]) == 0
    assert {r["model"] for r in _rows(tmp_path)} == {f"pretrained:{name}"}


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--features", "variance,cosine"], "unknown feature sets ['cosine']; choose from"),
        (["--probe", "svm"], "unknown probes ['svm']; choose from ['ridge', 'logistic']"),
        (["--layers", "0,5"], "layers must be a non-empty list of ints in [0, 1]"),
        (["--cv", "10"], "8 sequences are too few for cv=10"),
        (["--model", "/nonexistent/ckpt"], "is not an adjpos checkpoint"),
        (["--model", "pretrained:division"], "unknown task; choose one of"),
        (["--seq-len", "500"], "n_ctx"),
    ],
)
def test_bad_input_exits_2_before_any_work(capsys, tmp_path, monkeypatch, args, message):
    def no_capture(*args, **kwargs):
        raise AssertionError("probed before checking the input")

    monkeypatch.setattr("adjpos.probes.positions.iter_residuals", no_capture)
    assert main(["probe", *RANDOM, *args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos probe: error:") and message in err, err
    assert not (tmp_path / "run").exists()


def test_missing_shipped_model_is_a_clear_error(capsys, tmp_path):
    missing = [
        n
        for n in ("addition", "reversal", "indexing", "ordering")
        if n not in available_pretrained()
    ]
    if not missing:
        pytest.skip("every task has a shipped model")
    assert main(["probe", "--model", f"pretrained:{missing[0]}", "--out", str(tmp_path)]) == 2
    assert "no shipped model" in capsys.readouterr().err


def test_help_states_the_random_default(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "4-layer NoPE ModelConfig" in text and "uniformly random token sequences" in text
