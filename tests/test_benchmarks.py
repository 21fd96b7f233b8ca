"""Each benchmark script runs end to end in its quick mode and writes its numbers with
``--json PATH``; the tests read that JSON, never the printed table (which is for people).

Speed is a ratio against a reference measured in the same run, so the tests check that the
ratios are there and agree with the times they come from, never a time against a limit.
"""

import json
import runpy
import sys
from pathlib import Path

import pytest
import torch

from adjpos.pretrained import available_pretrained

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def run_in_process(monkeypatch, capsys, as_a_user):
    """Run ``benchmarks/NAME ARGS`` in this process, as ``python`` would run it (a new
    interpreter spends most of a quick run importing torch); its stdout. A benchmark sets
    torch's thread count for its timings; this process gets its own back."""

    def run(name: str, *args: str) -> str:
        script = BENCHMARKS / name
        monkeypatch.setattr(sys, "argv", [str(script), *args])
        threads = torch.get_num_threads()
        try:
            runpy.run_path(str(script), run_name="__main__")
        finally:
            torch.set_num_threads(threads)
        return capsys.readouterr().out

    return run


def test_bench_adjacency_quick(run_in_process, tmp_path):
    # The memory variants run in fresh processes of their own, which read their peaks as
    # VmHWM after resetting it, so the script that starts them can run in this one.
    out = tmp_path / "bench.json"
    assert run_in_process("bench_adjacency.py", "--quick", "--json", str(out)).strip()
    result = json.loads(out.read_text())
    assert set(result) == {"machine", "speed", "memory", "dtype"} and result["machine"]["quick"]
    assert [row["n"] for row in result["speed"]] == [64, 128]
    for row in result["speed"]:
        assert row["ratio_to_sort"] == pytest.approx(row["adjacency_ms"] / row["sort_ms"])
        assert all(value > 0 for value in row.values())
    first = result["speed"][0]  # the slow reference runs at the smallest size only
    assert first["ratio_to_reference"] == pytest.approx(
        first["adjacency_ms"] / first["reference_ms"]
    )
    memory = result["memory"]
    assert min(memory["streaming_mb"], memory["whole_cache_mb"]) > 0
    assert memory["ratio"] == pytest.approx(memory["streaming_mb"] / memory["whole_cache_mb"])
    for row in result["dtype"]["step"] + result["dtype"]["model"]:
        assert row["ratio"] == pytest.approx(row["float64_ms"] / row["float32_ms"])
        assert 0 <= row["max_score_difference"] < 0.5


def test_bench_training_quick(run_in_process, tmp_path):
    out = tmp_path / "bench.json"
    assert run_in_process("bench_training.py", "--quick", "--json", str(out)).strip()
    result = json.loads(out.read_text())
    rates, settings = result["tokens_per_s"], result["settings"]
    assert min(rates.values()) > 0 and settings["steps"] == 10 and settings["rounds"] == 1
    assert result["ratio_adjpos_to_bare"] == pytest.approx(rates["adjpos"] / rates["bare"])
    assert [row["task"] for row in result["shipped"]] == available_pretrained()


def test_bench_training_text_quick(run_in_process, tmp_path):
    """The text recipe's loop on a tiny model, without the corpus; one thread, so that the
    test keeps no second core from the other tests."""
    out = tmp_path / "bench.json"
    args = ("--text", "--quick", "--layout", "hybrid", "--threads", "1", "--json", str(out))
    assert run_in_process("bench_training.py", *args).strip()
    result = json.loads(out.read_text())
    settings, (row,) = result["settings"], result["rows"]
    assert settings["layout"] == "hybrid" and settings["steps"] == 10 and result["machine"]["quick"]
    assert row["threads"] == 1 and min(row["tokens_per_s"].values()) > 0
    assert row["ratio_adjpos_to_bare"] == pytest.approx(
        row["tokens_per_s"]["adjpos"] / row["tokens_per_s"]["bare"]
    )


def test_bench_probes_quick_agrees_with_scikit_learn(run_in_process, tmp_path):
    out = tmp_path / "bench.json"
    assert run_in_process("bench_probes.py", "--quick", "--json", str(out)).strip()
    result = json.loads(out.read_text())
    assert [row["features"] for row in result["sets"]] == ["variance", "cosine_profile"]
    for row in result["sets"]:
        assert 0 <= row["accuracy_adjpos"] <= 1
        assert abs(row["accuracy_sklearn"] - row["accuracy_adjpos"]) <= 0.02  # same folds
        assert row["ratio"] == pytest.approx(row["sklearn_s"] / row["adjpos_s"])
    total = result["total"]
    assert total["ratio"] == pytest.approx(total["sklearn_s"] / total["adjpos_s"])
    assert total["sklearn_s"] == pytest.approx(sum(r["sklearn_s"] for r in result["sets"]))


def test_bench_engines_quick_runs_both_local_engines_to_the_same_rows(run_in_process, tmp_path):
    out = tmp_path / "bench.json"
    assert run_in_process("bench_engines.py", "--quick", "--json", str(out)).strip()
    result = json.loads(out.read_text())
    assert result["same_rows"] is True
    rows = result["engines"]
    assert [row["engine"] for row in rows] == ["in-process", "process pool"]
    assert rows[0]["ratio_to_in_process"] == 1 and rows[1]["ratio_to_pool"] == 1
    for row in rows:
        assert row["ratio_to_in_process"] == pytest.approx(row["seconds"] / rows[0]["seconds"])


def test_bench_time_to_99_quick_and_from_runs(run_in_process, tmp_path):
    """Quick: one row per task (a tiny model does not reach 99% in 4 steps). From runs: the
    first evaluation at 99% or more, read from each run's metrics.json."""
    out = tmp_path / "rows.json"
    run_in_process("bench_time_to_99.py", "--quick", "--tasks", "addition", "--json", str(out))
    (row,) = json.loads(out.read_text())["rows"]
    unreached = {"steps": None, "seconds": None, "ratio_to_budget": None, "stop_step": 4}
    assert row == {"task": "addition", "seed": 0, **unreached, "stop_seconds": row["stop_seconds"]}
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
    run_in_process("bench_time_to_99.py", "--from-runs", str(tmp_path / "runs"), "--json", str(out))
    result = json.loads(out.read_text())
    assert result["rows"] == [
        {"task": "reversal", "seed": 2, "steps": 500, "seconds": 21.0, "ratio_to_budget": 21 / 900}
        | {"stop_step": 750, "stop_seconds": 30.0}
    ]
    assert result["settings"]["budget_s"] == 900 and result["settings"]["target"] == 0.99


def test_bench_one_pass_quick(run_in_process, tmp_path):
    # Each variant runs in a fresh child process of its own, which reads its peak as VmHWM
    # after resetting it, so the script that starts them can run in this one.
    out = tmp_path / "bench.json"
    assert run_in_process("bench_one_pass.py", "--quick", "--json", str(out)).strip()
    result = json.loads(out.read_text())
    assert result["machine"]["quick"] and result["n_layers"] == 4
    rows = {row["variant"]: row for row in result["rows"]}
    assert list(rows) == ["forward", "score", "measure_layers"]
    for row in rows.values():
        assert row["seconds"] > 0 and row["peak_mb"] >= 0
        assert row["time_ratio"] == pytest.approx(row["seconds"] / rows["forward"]["seconds"])
    assert rows["forward"]["time_ratio"] == 1


def test_bench_draws_quick_gives_every_draw_the_same_hits_three_ways(run_in_process, tmp_path):
    """The uncached one-by-one reference, the cached one-by-one and the stacked pass agree on
    every prompt of every draw, and each speed-up is the reference's time over its own."""
    out = tmp_path / "draws.json"
    assert run_in_process("bench_draws.py", "--quick", "--json", str(out)).strip()
    result = json.loads(out.read_text())
    assert result["settings"] == {"task": "addition", "draws": 3, "prompts": 24, "readout": "kept"}
    rows = result["rows"]
    assert [row["control"] for row in rows] == ["norm_scale_control", "subspace_swap_random"]
    for row in rows:
        assert row["same_hits"] is True
        assert row["speedup_cached"] == pytest.approx(row["reference_s"] / row["cached_s"])
        assert row["speedup_stacked"] == pytest.approx(row["reference_s"] / row["stacked_s"])


def test_bench_threads_quick(run_in_process, tmp_path):
    """The probe command runs in a process of its own; with no neighbour (--neighbours 0) it
    runs once and its time stands for the busy run too, so that the test keeps no core busy
    beside the other tests (the busy neighbour's measurement is the benchmark's own, in
    docs/benchmarks.md)."""
    out = tmp_path / "bench.json"
    args = ("--quick", "--n-sequences", "8", "--neighbours", "0", "--json", str(out))
    assert run_in_process("bench_threads.py", *args).strip()
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert row["threads"] == "adjpos" and min(row["idle_s"], row["busy_s"]) > 0
    assert row["busy_s"] == row["idle_s"] and row["ratio_busy_to_idle"] == 1.0
    assert result["settings"]["neighbours"] == 0 and result["settings"]["timeout_s"] > 0
    assert result["settings"]["command"][:4] == [
        "adjpos",
        "probe",
        "--model",
        "pretrained:addition",
    ]
