import json
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

from adjpos import adjacency_score, build_model
from adjpos.models import ModelConfig
from adjpos.seeds import derived_generator
from adjpos.sweep import read_sweep, sweep

BASE = ModelConfig(n_layers=2, d_model=16, n_heads=2, d_vocab=20, n_ctx=16)
GRID = {"init_range": [0.05, 0.2], "normalization_type": ["LN", None]}
SMALL = dict(seeds=[0, 1], n_sequences=4, seq_len=8, base=BASE, progress=False)


def _without_seconds(table):
    return table.drop(columns="seconds")


def test_rows_columns_and_values(tmp_path):
    result = sweep(GRID, out_dir=tmp_path / "s", workers=0, **SMALL)
    assert result.ran == 8 and len(result.table) == 8 * 3
    header = (tmp_path / "s" / "sweep.csv").read_text().splitlines()[0]
    assert header == "init_range,normalization_type,seed,layer,adjacency,variance_slope,seconds"
    rows = read_sweep(tmp_path / "s")
    assert rows.equals(result.table)  # types and floats round-trip exactly
    assert str(rows["normalization_type"].dtype) == "string" and rows["seed"].dtype == "int64"
    cell = rows[
        (rows["init_range"] == 0.2) & rows["normalization_type"].isna() & (rows["seed"] == 1)
    ]
    model = build_model(
        ModelConfig(**{**BASE.to_dict(), "init_range": 0.2, "normalization_type": None, "seed": 1})
    )
    tokens = torch.randint(0, 20, (4, 8), generator=derived_generator(1, "sweep tokens"))
    expected = adjacency_score(model, tokens)
    assert cell["adjacency"].tolist() == pytest.approx(expected.tolist())
    meta = json.loads((tmp_path / "s" / "run.json").read_text())
    assert meta["spec"]["grid"] == [GRID] and "torch" in meta["provenance"]["versions"]


def test_a_rerun_skips_every_finished_cell(tmp_path):
    """(The same rows on a process pool and on Ray: tests/test_engines.py.)"""
    first = sweep(GRID, out_dir=tmp_path / "a", workers=0, **SMALL)
    again = sweep(GRID, out_dir=tmp_path / "a", workers=0, **SMALL)
    assert again.ran == 0 and again.table.equals(first.table)


def test_killed_run_resumes_to_the_same_rows(tmp_path):
    whole = sweep(GRID, out_dir=tmp_path / "whole", workers=0, **SMALL)
    script = (
        "from adjpos.sweep import sweep\n"
        "from adjpos.models import ModelConfig\n"
        f"base = ModelConfig(**{BASE.to_dict()!r})\n"
        f"sweep({GRID!r}, seeds=[0, 1], n_sequences=4, seq_len=8, base=base,\n"
        f"      out_dir={str(tmp_path / 'cut')!r}, workers=0, progress=False)\n"
        "import time; time.sleep(60)\n"  # never reached before the kill when cells are slow
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    cells = tmp_path / "cut" / "done"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(cells.glob("*.json")) if cells.exists() else []) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list(cells.glob("*.json")))
    assert 2 <= done_before
    resumed = sweep(GRID, out_dir=tmp_path / "cut", workers=0, **SMALL)
    assert resumed.ran == 8 - done_before
    assert _without_seconds(resumed.table).equals(_without_seconds(whole.table))


def test_width_changes_rederive_head_and_mlp_widths(tmp_path):
    rows = sweep({"d_model": [32]}, out_dir=tmp_path / "w", workers=0, **SMALL).table
    assert len(rows) and (rows["d_model"] == 32).all()
    cfg = BASE.with_changes(d_model=32)
    assert (cfg.d_head, cfg.d_mlp) == (16, 128)
    assert BASE.with_changes(d_model=32, d_head=4).d_head == 4


def test_union_of_subgrids_fills_every_column(tmp_path):
    grid = [{"init_range": [0.1]}, {"n_layers": [1]}]
    rows = sweep(grid, out_dir=tmp_path / "u", workers=0, **SMALL).table
    pairs = {(None if pd.isna(i) else i, n) for i, n in rows[["init_range", "n_layers"]].values}
    assert pairs == {(0.1, 2), (None, 1)}


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("grid", "match"),
    [
        ({"width": [1]}, "not a ModelConfig field"),
        ({"seed": [1]}, "seeds are given separately"),
        ({}, "grid is empty"),
        ([], "grid is empty"),
        ({"d_model": []}, "non-empty list"),
        ({"d_model": "64"}, "non-empty list"),
        ({"d_model": [15]}, "not divisible"),
        ({"d_model": ["wide"]}, "positive int"),
        ({"positional": ["sine"]}, "choose one of"),
    ],
)
def test_bad_grids_fail_before_any_cell(tmp_path, grid, match):
    with pytest.raises(ValueError, match=match):
        sweep(grid, out_dir=tmp_path / "x", workers=0, **SMALL)
    assert not (tmp_path / "x").exists()


@pytest.mark.usefixtures("user_errors")
def test_other_grid_in_the_folder_is_refused(tmp_path):
    sweep({"init_range": [0.1]}, out_dir=tmp_path / "s", workers=0, **SMALL)
    with pytest.raises(ValueError, match="other settings.*grid"):
        sweep({"init_range": [0.2]}, out_dir=tmp_path / "s", workers=0, **SMALL)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        sweep(GRID, out_dir=tmp_path / "other", workers=0, **SMALL)
    with pytest.raises(ValueError, match="seeds"):
        sweep(GRID, out_dir=tmp_path / "t", workers=0, **{**SMALL, "seeds": []})
    with pytest.raises(ValueError, match="exceeds n_ctx"):
        sweep(GRID, out_dir=tmp_path / "t", workers=0, **{**SMALL, "seq_len": 17})


def test_rows_of_subgrid_keep_other_parameters_at_base(tmp_path):
    from adjpos.sweep import rows_of_subgrid

    grid = [{"init_range": [0.05, 0.2]}, {"positional": ["rotary"], "init_range": [0.05]}]
    rows = sweep(grid, out_dir=tmp_path / "g", workers=0, **SMALL).table
    first = rows_of_subgrid(rows, grid[0], BASE)
    assert set(first["positional"]) == {"none"} and len(first) == 2 * 2 * 3
    second = rows_of_subgrid(rows, grid[1], BASE)
    assert {tuple(r) for r in second[["positional", "init_range"]].values} == {("rotary", 0.05)}
