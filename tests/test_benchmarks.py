"""Smoke test: each benchmark script runs end to end in its quick mode."""

import json
import runpy
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_bench_adjacency_quick_prints_tables_and_writes_json(tmp_path):
    # Its own small process, not this large one: a child's ru_maxrss starts at the resident
    # size of the process that started it, so the memory children would report 0 MB.
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_adjacency.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    stdout = proc.stdout
    lines = stdout.splitlines()
    assert any(line.split()[:3] == ["n", "adjacency", "ms"] for line in lines), stdout
    rows = [line.split() for line in lines if line[:6].strip().isdigit()]
    assert [row[0] for row in rows] == ["64", "128"], stdout
    assert any(line.startswith("streaming ") for line in lines)
    assert any(line.startswith("whole-cache ") for line in lines)
    assert "streaming / whole-cache:" in stdout

    result = json.loads(out.read_text())
    assert set(result) == {"machine", "speed", "memory"}
    assert [row["n"] for row in result["speed"]] == [64, 128]
    for row in result["speed"]:
        assert {"adjacency_ms", "sort_ms", "ratio_to_sort"} <= set(row)
        assert all(value > 0 for value in row.values())
    assert {"ratio_to_reference", "reference_ms"} <= set(result["speed"][0])
    memory = result["memory"]
    for key in ("streaming_mb", "whole_cache_mb", "ratio"):
        assert memory[key] > 0, memory


def test_bench_training_quick_prints_both_loops_and_the_ratio(monkeypatch, capsys):
    # In this process, as `python benchmarks/bench_training.py --quick` would run it: a new
    # interpreter spent most of the run importing torch.
    script = BENCHMARKS / "bench_training.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--quick"])
    runpy.run_path(str(script), run_name="__main__")
    stdout = capsys.readouterr().out
    rates = {
        line.rsplit(maxsplit=1)[0]: float(line.rsplit(maxsplit=1)[1])
        for line in stdout.splitlines()
        if line.startswith(("bare PyTorch", "adjpos.train"))
    }
    assert set(rates) == {"bare PyTorch", "adjpos.train"} and min(rates.values()) > 0
    assert "ratio adjpos/bare:" in stdout


def test_bench_probes_quick_compares_with_scikit_learn():
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_probes.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rows = {
        line.split()[0]: line.split()
        for line in lines[2:]
        if line.split()[0] in ("variance", "cosine_profile")
    }
    assert set(rows) == {"variance", "cosine_profile"}, proc.stdout
    for row in rows.values():
        accuracy_sk, accuracy_ours = float(row[4]), float(row[5])
        assert abs(accuracy_sk - accuracy_ours) <= 0.02  # same folds, same objective
    assert any(line.startswith("total: scikit-learn") and "ratio" in line for line in lines)


def test_bench_engines_quick_runs_every_engine_to_the_same_rows():
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_engines.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    engines = [line.split()[0] for line in lines[2:5]]
    assert engines == ["in-process", "process", "ray"], proc.stdout
    assert "same rows on every engine: True" in proc.stdout


def test_bench_time_to_99_quick_and_from_runs(tmp_path):
    """Quick: one row per task (a tiny model does not reach 99% in 4 steps). From runs: the
    first evaluation at 99% or more, read from each run's metrics.json."""
    out = tmp_path / "rows.json"
    script = str(BENCHMARKS / "bench_time_to_99.py")
    proc = subprocess.run(
        [sys.executable, script, "--quick", "--tasks", "addition", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "not reached" in proc.stdout
    assert json.loads(out.read_text()) == [
        {"task": "addition", "seed": 0, "steps": None, "seconds": None}
    ]
    run = tmp_path / "runs" / "reversal" / "seed2"
    run.mkdir(parents=True)
    history = [
        {"step": 250, "accuracy": 0.5, "seconds": 10.0},
        {"step": 500, "accuracy": 0.991, "seconds": 21.0},
        {"step": 750, "accuracy": 0.999, "seconds": 30.0},
    ]
    (run / "metrics.json").write_text(
        json.dumps({"task": {"name": "reversal"}, "history": history})
    )
    proc = subprocess.run(
        [sys.executable, script, "--from-runs", str(tmp_path / "runs"), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == [
        {"task": "reversal", "seed": 2, "steps": 500, "seconds": 21.0}
    ]
    assert "0.02" in proc.stdout  # 21 s of the 900 s budget
