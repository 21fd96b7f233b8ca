"""`reproduce` on Ray: the engine's stages give the in-process run's numbers (its own file, so
that xdist runs it beside the other tests of the tiny run)."""

import dataclasses
import runpy
import shutil
from pathlib import Path

from adjpos.study.pipeline import reproduce
from factories import TINY_REPRODUCE

ROOT = Path(__file__).resolve().parents[2]


def test_the_stages_give_the_same_numbers_on_ray(tiny_run, tmp_path, local_ray):
    """The stages that run their units on an engine (dynamics, probing, causal tests)
    measured again as Ray tasks in a copy of the in-process run: every result file the same,
    timings aside. (The sweep's units on Ray: tests/test_engines.py.)"""
    out, _ = tiny_run
    on_ray = tmp_path / "ray"
    shutil.copytree(out, on_ray)
    engine_stages = {"dynamics", "probing", "interventions", "causal"}
    for marker in (on_ray / "done").glob("*.json"):
        if marker.stem.split("_")[0] in engine_stages:
            marker.unlink()
    results = on_ray / "results"
    for pattern in ("probes*", "dynamics*", "interventions*"):
        for path in results.glob(pattern):
            path.unlink()
    again = reproduce(on_ray, dataclasses.replace(TINY_REPRODUCE, workers=2, engine="ray"))
    assert set(again.ran) == {"dynamics", "probing", "causal"}
    compare = runpy.run_path(str(ROOT / "docs" / "compare_runs.py"))["compare"]
    assert compare(out / "results", results)
