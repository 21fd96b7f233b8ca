"""The engines run the same units to the same results: in-process, a local process pool, and a
real local Ray; a run interrupted on one engine finishes on the other."""

import operator
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def test_the_sweep_rows_do_not_depend_on_the_engine(tmp_path, monkeypatch, local_ray):
    """In-process (the API), and the sweep command on a process pool and on Ray: one table."""
    from adjpos.cli import main
    from adjpos.sweep import read_sweep

    serial = sweep(GRID, out_dir=tmp_path / "serial", workers=0, **SMALL)
    monkeypatch.setattr("adjpos.figures.save._write_png", lambda fig, path: "PNG skipped: test")
    common = ["--param", "init_range=0.05,0.1", "--param", "d_model=16,32", "--seeds", "0"]
    common += ["--n-sequences", "4", "--seq-len", "8", "--workers", "2"]
    for engine in ("process", "ray"):
        assert main(["sweep", "--engine", engine, *common, "--out", str(tmp_path / engine)]) == 0
    tables = [read_sweep(tmp_path / e).drop(columns=["seconds"]) for e in ("process", "ray")]
    assert len(tables[0]) == 4 * 5  # cells x layers 0..4
    for table in tables:
        assert table.equals(_table(serial)) and table.equals(tables[0])


# A job that dies: its workers go with it


# Its units only sleep: its fork server imports no TransformerLens (`PRELOAD`), which would
# add seconds to each test and nothing to what they test.
JOB = (
    "import sys, time\n"
    "from adjpos import engines\n"
    "engines.PRELOAD = ('adjpos.engines',)\n"
    "try:\n"
    "    for _ in engines.run_units(time.sleep, [(600,), (600,)], workers=2):\n"
    "        pass\n"
    "except KeyboardInterrupt:\n"
    "    print('stopped', file=sys.stderr)\n"
)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # a process that just ended
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for init, which may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _as_from_a_shell() -> None:
    """Ctrl-C delivered and at its default, as in a job started from a shell: a test process
    may have blocked or ignored SIGINT (Ray does, in the worker that ran its tests), and a
    child inherits both."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sleeping_for(pid: int, seconds: float) -> bool:
    """Process `pid` reads as sleeping ("S") at every look over `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "S":
            return False
        time.sleep(0.05)
    return True


def _poll(condition, seconds: float) -> bool:
    """Poll `condition` until it holds or `seconds` pass (a busy machine is slow, not wrong)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.2)
    return True


def _start_job(tmp_path):
    """The job in a process of its own, and its processes once both workers run: the fork
    server (and the resource tracker) it started, and the workers forked by the server."""
    job = subprocess.Popen(
        [sys.executable, "-c", JOB],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=_as_from_a_shell,
    )
    workers: list[int] = []

    def both_run() -> bool:
        workers[:] = [w for c in _children(job.pid) for w in _children(c)]
        return len(workers) == 2

    assert _poll(both_run, 300), "the workers never started"
    return job, workers, _children(job.pid)


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


@needs_proc
def test_the_workers_of_a_killed_job_exit(tmp_path):
    """``kill -9`` of the job (an out-of-memory killer, a preempted node): its workers see it
    gone and exit, and the fork server and resource tracker follow them."""
    job, workers, helpers = _start_job(tmp_path)
    job.kill()
    job.wait()
    assert _poll(lambda: not any(map(_running, workers)), 60), "workers outlived their job"
    assert _poll(lambda: not any(map(_running, helpers)), 120), "the fork server lived on"


@needs_proc
def test_ctrl_c_ends_the_workers_and_prints_no_traceback(tmp_path):
    job, workers, _ = _start_job(tmp_path)
    # Ctrl-C while the job waits for its units (a busy machine can still be submitting them
    # when the workers appear): its state has read "sleeping" for a second.
    assert _poll(lambda: _sleeping_for(job.pid, 1.0), 120), "the job never waited"
    job.send_signal(signal.SIGINT)  # the job only: the workers must not need their own
    _, err = job.communicate(timeout=300)
    assert err == "stopped\n"  # no worker's traceback, no leaked-semaphore warning
    assert not any(map(_running, workers))


# Threads of small work


@pytest.fixture
def two_threads_unchosen(monkeypatch):
    """torch on 2 threads as if by its own choice (no OMP_NUM_THREADS; conftest chose 1)."""
    from adjpos import engines

    for name in engines.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(engines, "_THREADS_AT_IMPORT", 2)
    yield engines
    torch.set_num_threads(before)


def _tiny_model(**overrides):
    # Imported here: Ray's workers load this module, and cannot import the tests' factories.
    from adjpos.models import build_model
    from factories import tiny_config

    return build_model(tiny_config(**overrides))


def _threads_inside(model) -> tuple[int, set[int]]:
    from threadpoolctl import threadpool_info

    from adjpos.engines import small_work_threads

    with small_work_threads(model):
        blas = {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
        return torch.get_num_threads(), blas


def test_small_work_runs_on_one_thread_and_gives_the_threads_back(two_threads_unchosen):
    threads, blas = _threads_inside(_tiny_model())
    assert threads == 1 and blas <= {1}
    assert torch.get_num_threads() == 2


def test_small_work_keeps_threads_someone_chose(two_threads_unchosen, monkeypatch):
    engines, model = two_threads_unchosen, _tiny_model()
    with monkeypatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "2")
        assert _threads_inside(model)[0] == 2
    with monkeypatch.context() as patch:
        patch.setattr(engines, "_THREADS_AT_IMPORT", 4)  # torch.set_num_threads(2) since
        assert _threads_inside(model)[0] == 2
    with monkeypatch.context() as patch:
        patch.setattr(engines, "SMALL_MODEL", 100)  # a large model shares out its ops
        assert _threads_inside(model)[0] == 2
    # A unit keeps the threads its Resources ask for, in-process too.
    (_, threads), *_ = run_units(_threads_inside, [(model,)], workers=0, resources=Resources(2))
    assert threads[0] == 2


def test_probes_and_decoding_run_on_one_thread(two_threads_unchosen, monkeypatch, tokens):
    from adjpos import evaluate, get_task, probe_positions
    from adjpos.probes import positions
    from adjpos.tasks import VOCAB_SIZE
    from adjpos.training import decode

    seen = []
    for module, name in ((positions, "cross_validate"), (decode, "_greedy")):
        real = getattr(module, name)

        def spy(*args, real=real, **kwargs):
            seen.append(torch.get_num_threads())
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    task = get_task("addition", max_digits=2)
    model = _tiny_model(d_vocab=VOCAB_SIZE, n_ctx=task.max_len)
    probe_positions(model, tokens, features="variance", probe="ridge", cv=2, repeats=1)
    evaluate(model, task, task.draw_prompts(4, generator=torch.Generator().manual_seed(0)))
    assert seen and set(seen) == {1} and torch.get_num_threads() == 2
