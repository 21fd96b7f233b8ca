"""`reproduce` end to end on tiny settings: files, numbers behind the report, resume, bad input."""

import csv
import json
import shutil
import sys
from statistics import mean

import pytest

from adjpos.cli import main
from adjpos.study import pipeline as reproduce_module
from adjpos.study.pipeline import STAGES, ReproduceConfig, reproduce
from adjpos.study.report import write_report

TINY = ReproduceConfig(size="tiny", device="cpu", workers=0)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce") / "run"
    return out, reproduce(out, TINY)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_every_stage_writes_its_results_and_the_report_shows_them(tiny_run):
    out, result = tiny_run
    assert result.ran == STAGES and result.skipped == ()
    results = out / "results"
    for stage in STAGES:
        assert json.loads((results / f"{stage}.done.json").read_text())["stage"] == stage
    run = json.loads((results / "run.json").read_text())
    assert run["settings"] == TINY.to_dict() and "transformer-lens" in run["versions"]
    adjacency = _rows(results / "adjacency_by_layer.csv")
    assert set(adjacency[0]) == {"task", "model", "seed", "layer", "adjacency"}
    assert {r["task"] for r in adjacency} == {"addition", "reversal", "indexing", "ordering"}
    assert {r["model"] for r in adjacency} == {
        "trained",
        "random-init",
        "random-init, learned positions",
    }
    probes = _rows(results / "probes.csv")
    assert set(probes[0]) == {"model", "layer", "features", "probe", "metric", "value", "baseline"}
    assert (results / "sweep" / "sweep.csv").is_file() and (results / "theory.csv").is_file()
    report = (out / "report.md").read_text()
    for stem in (
        "adjacency_by_layer",
        "cosine_addition",
        "variance_by_position",
        "sweep_histogram",
        "theory_first_layer",
        "probes_trained_reversal",
    ):
        assert (out / "figures" / f"{stem}.html").is_file()
        assert f"(figures/{stem}.html)" in report
    assert report.count("What it shows:") == 6
    html = (out / "report.html").read_text()
    assert html.count("<figure>") == len(list((out / "figures").glob("*.html")))
    assert "figures/plotly.min.js" in html and (out / "figures" / "plotly.min.js").is_file()


def test_report_tables_are_the_means_of_the_csv(tiny_run):
    out, _ = tiny_run
    rows = _rows(out / "results" / "adjacency_by_layer.csv")
    for task, model in (("addition", "trained"), ("ordering", "random-init")):
        values = [
            mean(
                float(r["adjacency"])
                for r in rows
                if (r["task"], r["model"], r["layer"]) == (task, model, str(layer))
            )
            for layer in range(5)
        ]
        line = f"| {task} | {model} | " + " | ".join(f"{v:.3f}" for v in values) + " |"
        assert line in (out / "report.md").read_text()


def test_a_rerun_skips_finished_stages_and_gives_the_same_report(tiny_run, tmp_path):
    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    # An interrupted run: the probing stage never finished (no marker, a stale partial file,
    # one model's probes not yet written).
    (copy / "results" / "probing.done.json").unlink()
    (copy / "results" / "probes.csv").write_text("model,layer\npartial")
    (copy / "results" / "probes_trained_indexing.json").unlink()
    again = reproduce(copy, TINY)
    assert again.ran == ("probing",) and len(again.skipped) == len(STAGES) - 1
    for name in (
        "report.md",
        "results/probes.csv",
        "results/probes_trained_indexing.json",
        "results/adjacency_by_layer.csv",
    ):
        assert (copy / name).read_text() == (out / name).read_text()


def test_a_folder_with_other_settings_or_sizes_is_refused(tiny_run, tmp_path, monkeypatch):
    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out / "results", copy / "results")
    with pytest.raises(ValueError, match="other settings.*use another --out"):
        reproduce(copy, ReproduceConfig(size="quick", device="cpu"))
    bigger = {**TINY.sizes, "n_sequences": TINY.sizes["n_sequences"] + 1}
    monkeypatch.setattr(reproduce_module.ReproduceConfig, "sizes", property(lambda s: bigger))
    with pytest.raises(ValueError, match="other sizes.*use another --out"):
        reproduce(copy, TINY)


def test_without_static_export_the_report_links_html_and_says_why(tiny_run, tmp_path, monkeypatch):
    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido -> ImportError
    figures, reason = write_report(copy)
    assert "kaleido is not installed" in reason and "apt-get install -y chromium" in reason
    assert figures and all(p.suffix in (".html",) or p.name == "plotly.min.js" for p in figures)
    assert not list((copy / "figures").glob("*.png"))  # no PNG left from an earlier run
    assert "![" not in (copy / "report.md").read_text()


def test_bad_settings_are_named(tmp_path):
    with pytest.raises(ValueError, match="size='huge' is not allowed"):
        ReproduceConfig(size="huge")
    with pytest.raises(ValueError, match="device='tpu' is not allowed.*auto"):
        ReproduceConfig(device="tpu")
    with pytest.raises(ValueError, match="workers must be an int >= 0"):
        ReproduceConfig(workers=-1)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(OSError, match="cannot write to the output folder"):
        reproduce(blocker / "run", TINY)


def test_cli_reports_bad_input_with_exit_code_2(tmp_path, capsys):
    assert main(["reproduce", "--device", "tpu", "--out", str(tmp_path / "r")]) == 2
    assert "device='tpu' is not allowed" in capsys.readouterr().err
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["reproduce", "--quick", "--out", str(blocker / "r")]) == 2
    assert "cannot write to the output folder" in capsys.readouterr().err


def test_cli_resumes_a_finished_run_and_prints_where_things_are(
    tiny_run, tmp_path, capsys, monkeypatch
):
    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    # The folder holds a tiny run: let --quick resume it.
    settings, sizes = TINY.to_dict(), TINY.sizes
    monkeypatch.setattr(reproduce_module.ReproduceConfig, "to_dict", lambda self: settings)
    monkeypatch.setattr(reproduce_module.ReproduceConfig, "sizes", property(lambda s: sizes))
    assert main(["reproduce", "--quick", "--device", "cpu", "--out", str(copy)]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("(done earlier, skipped)") == len(STAGES)
    assert f"report: {copy / 'report.md'}" in captured.out


def test_train_uses_the_shipped_recipe_and_resumes(tmp_path):
    from adjpos.pretrained import load_pretrained
    from adjpos.study.stages import Models

    first = Models(tmp_path, "cpu", train=True, train_steps=2)
    model, task = first.trained("addition")
    shipped, shipped_task = load_pretrained("addition", device="cpu")
    assert model.adjpos_config == shipped.adjpos_config and task == shipped_task
    metrics = json.loads((tmp_path / "models" / "addition" / "metrics.json").read_text())
    assert metrics["step"] == 2 and metrics["train"]["lr"] == 0.001  # the shipped lr
    weights = (tmp_path / "models" / "addition" / "model.safetensors").read_bytes()
    again, _ = Models(tmp_path, "cpu", train=True, train_steps=2).trained("addition")
    assert (tmp_path / "models" / "addition" / "model.safetensors").read_bytes() == weights
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert (a == b).all()
