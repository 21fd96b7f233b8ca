"""Shared fixtures: tiny model configs, built fresh on the CPU; one thread per library."""

import contextlib
import dataclasses
import json
import os
from pathlib import Path

# Imported before adjpos: while the shape checker's import hook runs an adjpos module, it
# looks for the bytecode of every module that one imports under its own name, misses it, and
# compiles them from source (a second a process for these).
import beartype.door  # noqa: F401
import numba  # noqa: F401
import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import pytest
import scipy.stats  # noqa: F401
import torch
from filelock import FileLock
from hypothesis import settings
from jaxtyping import install_import_hook
from threadpoolctl import threadpool_limits

# The shape checker: jaxtyping with beartype on every adjpos module that declares array
# shapes (imports jaxtyping), installed before adjpos is imported. The other modules hold no
# shapes to check, and checking their plain hints cost a fifth of the suite's time.
_ADJPOS = Path(__file__).parents[1] / "adjpos"
SHAPED = sorted(
    ".".join(path.relative_to(_ADJPOS.parent).with_suffix("").parts).removesuffix(".__init__")
    for path in _ADJPOS.rglob("*.py")
    if "from jaxtyping import" in path.read_text(encoding="utf-8")
)
install_import_hook(SHAPED, "beartype.beartype")

from adjpos.models import build_model  # noqa: E402
from factories import TINY_REPRODUCE, tiny_config  # noqa: E402

# The models and probes here are tiny, so threads buy nothing, and on a busy machine OpenMP
# and BLAS threads waiting for a free core made a small logistic fit 40x slower. The
# variables reach the libraries loaded later (SciPy's BLAS, with scikit-learn) and the
# subprocesses; the calls reach those already loaded. The adjacency kernel follows torch's
# count; tests/metrics/test_adjacency.py runs it on more threads too.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
torch.set_num_threads(1)
threadpool_limits(1)

# A busy machine must not turn a slow example into a failure; each test sets its own count.
settings.register_profile("adjpos", deadline=None)
settings.load_profile("adjpos")


# The slowest test files, in the order they go out. With ``--dist loadfile`` xdist hands out
# whole files, those with the most tests first, so files of a few slow tests came last and one
# worker ran them alone at the end; these go first instead (the first builds the shared tiny
# run, and the files that wait for it, test_docs.py and test_reproduce_ray.py, come after
# files that do not, so the other worker is not left waiting while it is built).
SLOW_FILES = (
    "tests/study/test_reproduce.py",
    "tests/test_benchmarks.py",
    "tests/test_engines.py",
    "tests/test_examples.py",
    "tests/interventions/test_measure.py",
    "tests/test_docs.py",
    "tests/study/test_reproduce_ray.py",
    "tests/study/test_sweep.py",
    "tests/test_tutorial.py",
)


# The test files that run units on the session's local Ray (`local_ray`) or on the process
# engine, whose fork server imports TransformerLens (about 5 s of a core) once per process
# (the benchmarks' fresh processes come from it too, and howto-scale.md's pool): one worker
# takes them all, so that Ray starts, and its workers and the fork server import
# TransformerLens, once per test run.
ENGINE_FILES = (
    "tests/study/test_reproduce_ray.py",
    "tests/test_engines.py",
    "tests/test_benchmarks.py",
    "tests/test_docs.py",
)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with `SLOW_FILES` handed out before the other files, and every one
    of `ENGINE_FILES` to the worker that took the first of them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SlowFilesFirst(LoadFileScheduling):
        engine_node = None

        def _assign_work_unit(self, node):
            for path in reversed(SLOW_FILES):
                if path in self.workqueue:
                    self.workqueue.move_to_end(path, last=False)
            if self.engine_node not in (None, node):  # the engines run elsewhere: another file
                others = [path for path in self.workqueue if path not in ENGINE_FILES]
                if others:
                    self.workqueue.move_to_end(others[0], last=False)
            elif next(iter(self.workqueue)) in ENGINE_FILES:
                self.engine_node = node
            super()._assign_work_unit(node)

    return SlowFilesFirst(config, log)


@pytest.fixture
def tiny_model():
    return build_model(tiny_config(), device="cpu")


@pytest.fixture
def tokens():
    return torch.randint(0, 20, (6, 12), generator=torch.Generator().manual_seed(0))


@contextlib.contextmanager
def shape_checks_off():
    """The test-time shape checker (`SHAPED`, above) switched off."""
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)


@pytest.fixture
def user_errors():
    """Switch off the test-time shape checker, so a test sees adjpos's own error for bad
    input exactly as a user does (the checker would otherwise reject bad shapes first)."""
    with shape_checks_off():
        yield


@pytest.fixture
def as_a_user():
    """The example scripts, the docs' code and the benchmarks' smoke runs go as a user runs
    them: without the test-time shape checker, which checks the functions they call in those
    functions' own tests, and made these runs a fifth slower."""
    with shape_checks_off():
        yield


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray of 2 CPUs for every test that runs units on Ray: `adjpos.engines` joins a
    Ray that is already running (and leaves it running), so its start and its workers' imports
    are paid once per test session, not once per test."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, worker_id):
    """(folder, what the run did): ``reproduce("run", TINY_REPRODUCE)`` called once for the
    whole session from inside the folder's parent, shared by every test file and xdist worker
    (tests/study, and howto-reproduce.md's example in tests/test_docs.py). The first worker to
    ask runs it under a file lock and records its `ReproduceResult` (its paths as `reproduce`
    gave them: relative to the folder's parent); the others read that record. Tests copy the
    folder before changing anything in it. It runs as a user runs it (`as_a_user`)."""
    from adjpos.study.pipeline import ReproduceResult, reproduce

    root = tmp_path_factory.getbasetemp()
    root = root if worker_id == "master" else root.parent
    base = root / "tiny-reproduce"
    out, record = base / "run", base / "result.json"
    with FileLock(str(root / "tiny-reproduce.lock")):
        if not record.is_file():
            base.mkdir(exist_ok=True)
            with contextlib.chdir(base), shape_checks_off():
                result = reproduce(out.name, TINY_REPRODUCE)
            fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
            record.write_text(json.dumps(fields, default=str))
    fields = json.loads(record.read_text())
    fields |= {"out_dir": Path(fields["out_dir"]), "report": Path(fields["report"])}
    fields |= {k: tuple(fields[k]) for k in ("ran", "skipped")}
    return out, ReproduceResult(**fields | {"figures": tuple(map(Path, fields["figures"]))})
