"""`reproduce` end to end on tiny settings: files, numbers behind the report, resume, bad input."""

import dataclasses
import itertools
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from adjpos.cli import main
from adjpos.study import TINY as TINY_SIZES
from adjpos.study import pipeline, sizes
from adjpos.study.claim import CRITERIA, Status
from adjpos.study.claims import NAMES
from adjpos.study.claims.adjacency import ADJACENCY, over_layer0
from adjpos.study.claims.decomposition import DECOMPOSITION, SHARES
from adjpos.study.claims.variance import VARIANCE_LAYERS
from adjpos.study.pipeline import ReproduceConfig, reproduce, write_outputs
from adjpos.study.report import VERDICTS
from factories import TINY_REPRODUCE

ROOT = Path(__file__).resolve().parents[2]

TINY = TINY_REPRODUCE


def test_every_stage_writes_its_results_and_the_report_shows_them(tiny_run):
    out, result = tiny_run
    assert result.ran == NAMES and result.skipped == ()
    assert result.png_skipped == "PNG not requested"  # png=False: HTML only
    assert not list((out / "figures").glob("*.png"))
    run = json.loads((out / "run.json").read_text())
    assert run["kind"] == "reproduce" and run["spec"]["settings"] == TINY.to_dict()
    assert run["spec"]["sizes"]["n_eval"] == TINY_SIZES.n_eval
    assert (
        run["provenance"]["device"] == "cpu" and "transformer-lens" in run["provenance"]["versions"]
    )
    results = out / "results"
    adjacency = ADJACENCY.read(results / "adjacency_by_layer.csv")
    assert set(adjacency["task"]) == {"addition", "reversal", "indexing", "ordering"}
    assert set(adjacency["model"]) == {"trained", "random-init", "random-init, learned positions"}
    assert (adjacency["low"] <= adjacency["adjacency"]).all()
    assert (adjacency["adjacency"] <= adjacency["high"]).all()
    assert len(adjacency.groupby(["rows", "centred", "ties"])) == 12
    layers = VARIANCE_LAYERS.read(results / "variance_by_layer.csv")
    assert set(layers["model"]) == {"trained", "random-init"}
    assert (layers["ratio_low"] <= layers["ratio_high"]).all()
    parts = DECOMPOSITION.read(results / "decomposition_by_layer.csv")
    assert set(parts["model"]) == {"trained", "random-init"}
    shares = parts[SHARES].T.groupby(lambda s: s.endswith("_held_out")).sum()  # in, held out
    assert np.allclose(shares, 1.0) and (parts["rest_low"] <= parts["rest_high"]).all()
    for stage in NAMES:
        assert (results / "numbers" / f"{stage}.json").is_file()
    report = (out / "report.md").read_text()
    for stem in (
        "adjacency_by_layer",
        "adjacency_views",
        "cosine_addition",
        "variance_by_position",
        "variance_by_layer",
        "decomposition_shares",
        "decomposition_adjacency",
        "dynamics",
        "sweep_histogram",
        "theory_first_layer",
        "probes_trained_reversal_seed_0",
        "interventions",
    ):
        assert (out / "figures" / f"{stem}.html").is_file()
        assert f"(figures/{stem}.html)" in report
    assert (results / "claims.csv").is_file()
    assert "device used: cpu" in report and "| n_eval | 8 |" in report
    html = (out / "report.html").read_text()
    assert html.count("<iframe") == len(list((out / "figures").glob("*.html")))
    assert (out / "figures" / "plotly.min.js").is_file()


def test_the_claims_table_opens_the_report_and_follows_the_numbers(tiny_run):
    out, _ = tiny_run
    report = (out / "report.md").read_text()
    claims = report.split("## The claims at a glance")[1].split("##")[0]
    rows = [line for line in claims.splitlines() if line.startswith("| ") and "status" not in line]
    verdicts = VERDICTS.read(out / "results" / "claims.csv")
    assert len(rows) == len(verdicts) == 27
    for row, (_, v) in zip(rows, verdicts.iterrows(), strict=True):
        counts = f"{v['n_for']} for, {v['n_against']} against, {v['n_within']} within of "
        moved = [
            x for x in (v["at_half"], v["at_double"]) if isinstance(x, str) and x != v["status"]
        ]
        status = v["status"] + (" (sensitive)" if moved else "")
        assert row.startswith(f"| {v['claim']} | {status} | {counts}{v['n_cells']} ")
        assert v["n_for"] + v["n_against"] + v["n_within"] == v["n_cells"]
        assert v["status"] == Status.of(v["n_for"], v["n_against"], v["n_cells"])
    assert "np.float64" not in report and "Outcome." not in report  # no Python reprs
    numbers = json.loads((out / "results" / "numbers" / "adjacency.json").read_text())
    above = sum(t["outcome"] == "for" for t in over_layer0(numbers, "trained", CRITERIA))
    first = verdicts.iloc[1]  # after the premise: the study's first claim
    assert first["n_for"] == above and first["unit"] == "task"
    (probing,) = verdicts[verdicts["claim"].str.startswith("Probes read position")]["seeds"]
    assert probing == "0, 1" and "| seeds 0, 1 |" in report  # every trained seed of tiny
    causal = json.loads((out / "results" / "numbers" / "causal.json").read_text())["rows"]
    norm = {
        (r["task"], r["layer"], r["intervention"])  # a cell holds every seed's row
        for r in causal
        if r["intervention"].startswith("norm_permute") and r["layer"] >= 1
    }
    cells_of = {(r["task"], r["layer"], r["intervention"]) for r in causal}
    assert {r["readout"] for r in causal} == {"kept", "changed"}
    assert len(causal) == 2 * 2 * len(cells_of)  # two seeds, two read-out variants per cell
    (cells,) = verdicts[
        verdicts["claim"].str.startswith("The model reads position from the norms")
    ]["n_cells"]
    assert cells == len(norm)
    leace = verdicts[verdicts["claim"].str.startswith("The model needs linear position")]
    assert leace["status"].tolist() == ["not shown"] and leace["n_cells"].tolist() == [0]


def test_every_table_row_has_its_headers_cells_and_the_html_keeps_each_evidence(tiny_run):
    import html

    out, _ = tiny_run
    lines = (out / "report.md").read_text().splitlines()
    tables = 0
    for i, line in enumerate(lines[:-1]):
        if line.startswith("|") and re.fullmatch(r"\|(:?---:?\|)+", lines[i + 1]):
            tables += 1
            width = _cells(line)
            assert _cells(lines[i + 1]) == width
            for row in itertools.takewhile(lambda x: x.startswith("|"), lines[i + 2 :]):
                assert _cells(row) == width, row
    assert tables >= 10
    page = html.unescape((out / "report.html").read_text())
    for evidence in VERDICTS.read(out / "results" / "claims.csv")["evidence"]:
        assert evidence in page
    claims = (out / "report.md").read_text().split("## The claims at a glance")[1]
    assert claims.split("\n")[3] == "|:---|:---|:---|:---|:---|"  # text columns left-aligned
    models = (out / "report.md").read_text().split("## The models")[1].split("\n")[3]
    assert models.split("|")[2:5] == ["---:", ":---", "---:"]  # seed, model, parameters


def _cells(row: str) -> int:
    """The cells of a markdown table row: its unescaped pipes, less one."""
    return row.replace("\\|", "").count("|") - 1


def test_report_tables_are_the_means_of_the_csv(tiny_run):
    out, _ = tiny_run
    table = ADJACENCY.read(out / "results" / "adjacency_by_layer.csv")
    study = table[(table["rows"] == "all") & ~table["centred"] & (table["ties"] == "strict")]
    means = study.groupby(["task", "model", "layer"])["adjacency"].mean()
    for task, model in (("addition", "trained"), ("ordering", "random-init")):
        values = [means[(task, model, layer)] for layer in range(5)]
        line = f"| {task} | {model} | " + " | ".join(f"{v:.3f}" for v in values) + " |"
        assert line in (out / "report.md").read_text()


def test_a_rerun_skips_finished_units_and_gives_the_same_report(
    tiny_run, tmp_path, capsys, monkeypatch
):
    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    # An interrupted run: the probing stage never finished (no marker, a stale partial file,
    # one model's probes not yet done).
    (copy / "done" / "probing.json").unlink()
    (copy / "done" / "probing_indexing_seed_1.json").unlink()
    (copy / "results" / "probes.csv").write_text("model,layer\npartial")
    (copy / "results" / "probes_trained_indexing_seed_1.json").unlink()
    # The same command again, from the command line (the folder holds a tiny run: let --quick
    # resume it).
    settings = TINY.to_dict()
    monkeypatch.setattr(pipeline.ReproduceConfig, "to_dict", lambda self: settings)
    monkeypatch.setitem(sizes.SIZES, "quick", TINY_SIZES)
    argv = ["reproduce", "--quick", "--no-png", "--device", "cpu", "--workers", "0"]
    assert main([*argv, "--out", str(copy)]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("(done earlier, skipped)") == len(NAMES) - 1
    assert f"report: {copy / 'report.md'}" in captured.out
    for name in (
        "report.md",
        "results/probes.csv",
        "results/probes_trained_indexing_seed_1.json",
        "results/probe_comparisons.csv",
        "results/adjacency_by_layer.csv",
    ):
        assert (copy / name).read_text() == (out / name).read_text()


def test_a_folder_with_other_settings_or_sizes_is_refused(tiny_run, tmp_path, monkeypatch):
    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    with pytest.raises(ValueError, match="other settings.*settings.*use another folder"):
        reproduce(copy, ReproduceConfig(size="quick", device="cpu"))
    bigger = dataclasses.replace(TINY_SIZES, n_sequences=TINY_SIZES.n_sequences + 1)
    monkeypatch.setitem(sizes.SIZES, "tiny", bigger)
    with pytest.raises(ValueError, match="other settings.*sizes"):
        reproduce(copy, TINY)


def test_without_static_export_the_report_links_html_and_says_why(tiny_run, tmp_path, monkeypatch):
    """(Two of the run's figures, drawn as stand-ins: which figures does not matter here.)"""
    import plotly.graph_objects as go

    out, _ = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido -> ImportError
    stems = sorted(p.stem for p in (out / "figures").glob("*.html"))[:2]
    size = {"width": 100, "height": 100}
    stand_in = {s: (go.Figure(layout=size), f"caption {s}") for s in stems}
    monkeypatch.setattr(pipeline, "run_figures", lambda out: stand_in)
    (copy / "figures" / f"{stems[0]}.png").write_bytes(b"from an earlier run")
    figures, reason = write_outputs(copy)
    assert "kaleido is not installed" in reason and "apt-get install -y chromium" in reason
    assert {p.name for p in figures} >= {f"{s}.html" for s in stems}
    assert all(p.suffix in (".html",) or p.name == "plotly.min.js" for p in figures)
    assert not list((copy / "figures").glob("*.png"))  # no PNG left from an earlier run
    report = (copy / "report.md").read_text()
    assert "![" not in report and all(f"{s}.html" in report for s in stems)


def test_figures_drawn_from_the_same_results_are_kept(tiny_run, tmp_path, monkeypatch):
    """Unchanged result files, settings and png: the figures and their captions are kept and
    the report is written again from them; a figure gone, a result changed or another png
    draws them again."""
    import plotly.graph_objects as go

    out, result = tiny_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    drawn = []
    monkeypatch.setattr(pipeline, "run_figures", lambda out: drawn.append(out))
    (copy / "report.md").unlink()
    figures, _ = write_outputs(copy, png=False)
    assert not drawn and (copy / "report.md").read_text() == (out / "report.md").read_text()
    kept = [p.relative_to(out.name) for p in result.figures]
    assert [p.relative_to(copy) for p in figures] == kept
    # Drawing again (a stand-in figure, no report) after each change.
    one = {"one": (go.Figure(layout={"width": 100, "height": 100}), "a caption")}
    monkeypatch.setattr(pipeline, "run_figures", lambda out: drawn.append(out) or one)
    monkeypatch.setattr("adjpos.study.report.write_report", lambda *args: None)
    next(iter(copy.glob("figures/*.html"))).unlink()  # a figure gone
    write_outputs(copy, png=False)
    path = copy / "results" / "adjacency_by_layer.csv"  # a result changed
    path.write_text(path.read_text() + "\n")
    write_outputs(copy, png=False)
    write_outputs(copy, png=False)  # nothing changed since
    monkeypatch.setitem(sys.modules, "kaleido", None)
    write_outputs(copy, png=True)
    assert len(drawn) == 3


def test_study_sizes_name_every_change_and_refuse_bad_values():
    assert TINY_SIZES.probes == ("ridge", "spline") and sizes.QUICK.sweep_layers == 2
    assert sizes.FULL.grid == sizes.DEFAULT_GRID and TINY_SIZES.grid != sizes.FULL.grid
    with pytest.raises(ValueError, match="cv must be a positive int"):
        dataclasses.replace(TINY_SIZES, cv=0)
    with pytest.raises(ValueError, match="theory_heatmap_scale"):
        dataclasses.replace(TINY_SIZES, theory_heatmap_scale=0.3)


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
    with pytest.raises(SystemExit):
        main(["reproduce", "--device", "tpu", "--out", str(tmp_path / "r")])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["reproduce", "--quick", "--out", str(blocker / "r")]) == 2
    assert "a_file is a file; --out must be a folder" in capsys.readouterr().err


def test_train_uses_the_shipped_recipe_and_resumes(tmp_path):
    from adjpos.pretrained import load_pretrained, pretrained_folder
    from adjpos.study import Models

    first = Models(device="cpu", train_dir=tmp_path / "models", train_steps=2)
    model, task = first.trained("addition")
    shipped, shipped_task = load_pretrained("addition", device="cpu")
    assert model.adjpos_config == shipped.adjpos_config and task == shipped_task
    folder = tmp_path / "models" / "addition" / "seed0"
    recipe = json.loads((pretrained_folder("addition", 0) / "metrics.json").read_text())
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["step"] == 2 and metrics["train"]["lr"] == recipe["train"]["lr"]
    weights = (folder / "model.safetensors").read_bytes()
    again = Models(device="cpu", train_dir=tmp_path / "models", train_steps=2)
    again_model, _ = again.trained("addition")
    assert (folder / "model.safetensors").read_bytes() == weights
    for a, b in zip(model.parameters(), again_model.parameters(), strict=True):
        assert (a == b).all()


def test_the_causal_stage_resumes_seed_by_seed_and_part_by_part(tiny_run, tmp_path, monkeypatch):
    import pandas as pd

    from adjpos.interventions import INTERVENTION_TABLE

    out = tmp_path / "run"
    shutil.copytree(tiny_run[0], out)
    done = out / "done"
    units = {json.loads(p.read_text())["unit"]: p for p in done.glob("*.json")}
    before = INTERVENTION_TABLE.read(out / "results" / "interventions.csv")
    for task, seed in before[["task", "seed"]].drop_duplicates().itertuples(index=False):
        assert f"interventions {task} seed {seed}" in units
    parts = [u for u in units if u.startswith("interventions addition seed 0 layer")]
    assert len(parts) == len(before[(before["task"] == "addition") & (before["seed"] == 0)])
    # The stage and one of its units undone, the unit's parts kept: rebuilt, nothing measured.
    units["causal"].unlink()
    units["interventions addition seed 0"].unlink()

    def measured(*args, **kwargs):
        raise AssertionError("a finished part was measured again")

    monkeypatch.setattr("adjpos.interventions.task.measure_draws", measured)
    result = reproduce(out, TINY)
    assert result.ran == ("causal",)
    after = INTERVENTION_TABLE.read(out / "results" / "interventions.csv")
    pd.testing.assert_frame_equal(before, after)
