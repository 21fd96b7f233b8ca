"""The engines run the same units to the same results: in-process, a local process pool, and a
real local Ray; a run interrupted on one engine finishes on the other."""

import operator
import sys

import pytest
import torch

from adjpos.engines import Resources, check_engine, run_units
from adjpos.sweep import sweep

JOBS = [(1, 2), (3, 4), (5, 6)]
GRID = {"init_range": [0.05, 0.1], "d_model": [16, 32]}
SMALL = dict(seeds=[0], n_sequences=4, seq_len=8, progress=False)


def _threads() -> int:
    return torch.get_num_threads()


def test_every_engine_gives_the_same_results(local_ray):
    expected = {job: sum(job) for job in JOBS}
    for kwargs in (dict(workers=0), dict(workers=2), dict(engine="ray", workers=2)):
        assert dict(run_units(operator.add, JOBS, **kwargs)) == expected, kwargs
    assert list(run_units(operator.add, [], engine="ray")) == []


def test_every_unit_runs_with_the_threads_it_asked_for(local_ray):
    """So a solver that stops at a tolerance stops at the same point on every engine."""
    before = torch.get_num_threads()
    for kwargs in (dict(workers=0), dict(workers=2), dict(workers=1), dict(engine="ray")):
        for cpus in (1, 2):
            (_, threads), *_ = run_units(_threads, [()], resources=Resources(cpus=cpus), **kwargs)
            assert threads == cpus, kwargs
    assert torch.get_num_threads() == before  # in-process units leave the threads as they were


def _table(result):
    return result.table.drop(columns=["seconds"])


def test_the_sweep_rows_do_not_depend_on_the_engine(tmp_path, local_ray):
    serial = sweep(GRID, out_dir=tmp_path / "serial", workers=0, **SMALL)
    pooled = sweep(GRID, out_dir=tmp_path / "pool", workers=2, engine="process", **SMALL)
    on_ray = sweep(GRID, out_dir=tmp_path / "ray", workers=2, engine="ray", **SMALL)
    assert _table(serial).equals(_table(pooled))
    assert _table(serial).equals(_table(on_ray))


@pytest.mark.parametrize(("first", "second"), [("ray", "process"), ("process", "ray")])
def test_an_interrupted_sweep_finishes_on_the_other_engine(tmp_path, first, second, local_ray):
    """Interrupted: two units' markers and the table are gone, as if the run was killed."""
    out = tmp_path / "run"
    whole = sweep(GRID, out_dir=out, workers=2, engine=first, **SMALL)
    markers = sorted((out / "done").glob("*.json"))
    for marker in markers[:2]:
        marker.unlink()
    (out / "sweep.csv").unlink()
    resumed = sweep(GRID, out_dir=out, workers=2, engine=second, **SMALL)
    assert resumed.ran == 2
    assert _table(resumed).equals(_table(whole))


def test_resources_follow_the_device():
    assert Resources.for_device("cuda:0") == Resources(cpus=1, gpus=1.0)
    assert Resources.for_device("cpu", cpus=2) == Resources(cpus=2, gpus=0.0)


def test_bad_engines_are_named(monkeypatch):
    with pytest.raises(ValueError, match=r"engine=.dask. is not allowed; choose one of"):
        check_engine("dask")
    with pytest.raises(ValueError, match="an address is for engine 'ray', not 'process'"):
        check_engine("process", address="auto")
    with pytest.raises(ValueError, match="workers must be an int >= 0"):
        check_engine("process", workers=-1)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ValueError, match=r"needs Ray, which is not installed: pip install -e"):
        check_engine("ray")
    with pytest.raises(ValueError, match="needs Ray"):
        sweep(GRID, out_dir="unused", engine="ray", **SMALL)


def test_the_sweep_command_gives_the_same_csv_on_both_engines(tmp_path, monkeypatch, local_ray):
    from adjpos.cli import main
    from adjpos.sweep import read_sweep

    monkeypatch.setattr("adjpos.figures.save._write_png", lambda fig, path: "PNG skipped: test")
    common = ["--param", "init_range=0.05,0.1", "--param", "d_model=16,32", "--seeds", "0"]
    common += ["--n-sequences", "4", "--seq-len", "8", "--workers", "2"]
    for engine in ("process", "ray"):
        assert main(["sweep", "--engine", engine, *common, "--out", str(tmp_path / engine)]) == 0
    tables = [read_sweep(tmp_path / e).drop(columns=["seconds"]) for e in ("process", "ray")]
    assert tables[0].equals(tables[1]) and len(tables[0]) == 4 * 5  # cells x layers 0..4
