"""`reproduce` on Ray: the engine's stages give the in-process run's numbers (its own file, so
that xdist runs it beside the other tests of the tiny run)."""

import dataclasses
import runpy
import shutil
from pathlib import Path

from adjpos.study.pipeline import reproduce
from factories import TINY_REPRODUCE

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("dynamics", "probing", "causal")  # the stages that run their units on an engine
TABLES = ("dynamics", "probes", "probe_comparisons", "probe_copies", "interventions")
UNITS = ("addition_seed_1",)  # one unit of each stage, with its parts


def test_the_stages_give_the_same_numbers_on_ray(tiny_run, tmp_path, local_ray):
    """The stages that run their units on an engine (dynamics, probing, causal tests), in a
    copy of the in-process run without one unit of each (addition's, trained seed 1): that
    unit measured again as a Ray task, the others read back, every stage's tables and
    numbers written again; every result file the same as in-process, timings aside. (Every
    unit of a stage is one function of its arguments; the sweep's units on Ray:
    tests/test_engines.py.)"""
    out, _ = tiny_run
    on_ray = tmp_path / "ray"
    shutil.copytree(out, on_ray)
    gone = [
        path
        for folder in ("done", "results")
        for path in (on_ray / folder).rglob("*.*")
        if path.stem in STAGES + TABLES or any(unit in path.stem for unit in UNITS)
    ]
    assert {p.stem for p in gone} >= {*STAGES, *(f"{s}_addition_seed_1" for s in STAGES[:2])}
    for path in gone:
        path.unlink()
    again = reproduce(on_ray, dataclasses.replace(TINY_REPRODUCE, workers=2, engine="ray"))
    assert again.ran == STAGES
    assert all(path.is_file() for path in gone)
    compare = runpy.run_path(str(ROOT / "docs" / "compare_runs.py"))["compare"]
    assert compare(out / "results", on_ray / "results")
