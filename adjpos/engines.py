"""Where the units of a long job run: in this process, in a local process pool, or as Ray tasks.

A long job is a list of independent units, each a call ``fn(*args)`` of a module-level
function returning JSON-able results that the job records in its `adjpos.runs.RunFolder`.
`run_units` is the only place that decides where the calls run:

- ``workers=0``: in this process, one after the other;
- ``engine="process"`` (default): a local pool of processes (default: one per core) forked
  from a server that has torch imported (spawned where there is none);
- ``engine="ray"``: Ray tasks, on a local Ray that adjpos starts (``workers`` CPUs) or on an
  existing cluster (``address``, e.g. ``"auto"`` or ``"ray://host:10001"``), each asking for
  `Resources` (CPUs, and a GPU when the job runs on CUDA). Needs the ``ray`` extra:
  ``pip install -e ".[ray]"``.

Every unit runs with `Resources.cpus` torch threads (1 by default) wherever it runs, so the
results do not depend on the engine (a solver that stops at a tolerance, the logistic probe,
would stop elsewhere with another thread count), and a run started on one engine can be
finished on another. Results come back in completion order.

Example:
    >>> from operator import add
    >>> sorted(result for _, result in run_units(add, [(1, 2), (3, 4)], workers=0))
    [3, 7]
"""

from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from adjpos.validation import UsageError, check_choice, is_int

__all__ = ["ENGINES", "Resources", "check_engine", "run_units", "set_threads", "small_work_threads"]

ENGINES = ("process", "ray")
RAY_EXTRA = 'pip install -e ".[ray]"'
SMALL_MODEL = 20_000_000  # parameters: up to this many, `small_work_threads` uses one thread
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_THREADS_AT_IMPORT = torch.get_num_threads()  # torch's own choice, unless the user's
_UNIT_THREADS: list[int] = []  # the threads of the units running in this process
# What the process engine's fork server imports once, before it forks the workers.
PRELOAD = ("torch", "transformer_lens", "adjpos.engines")


@dataclass(frozen=True)
class Resources:
    """What one unit needs: CPUs (its torch threads) and GPUs (a fraction shares one)."""

    cpus: int = 1
    gpus: float = 0.0

    @classmethod
    def for_device(cls, device: str | None, *, cpus: int = 1) -> Resources:
        """One GPU per unit when `device` is CUDA, none otherwise."""
        return cls(cpus=cpus, gpus=1.0 if str(device).startswith("cuda") else 0.0)


def check_engine(engine: Any, workers: Any = None, address: Any = None) -> str:
    """`engine`, checked with the options that go with it before any work (a `ValueError`
    names the extra when Ray is not installed)."""
    check_choice("engine", engine, ENGINES)
    if workers is not None and (not is_int(workers) or workers < 0):
        raise UsageError(f"workers must be an int >= 0 (0 runs in-process), got {workers!r}")
    if address is not None and engine != "ray":
        raise UsageError(f"an address is for engine 'ray', not {engine!r}")
    if engine == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError(
                f"engine 'ray' needs Ray, which is not installed: {RAY_EXTRA}"
            ) from None
    if str(address).startswith("ray://"):
        try:
            import grpc  # noqa: F401
        except ImportError:
            raise UsageError(
                f"address {address!r} connects through Ray Client, which needs grpcio, not "
                f"installed: {RAY_EXTRA} (or pip install 'ray[client]'); or give the address "
                "of the cluster's head without ray:// from a machine of the cluster (e.g. auto)"
            ) from None
    return engine


def run_units(
    fn: Callable[..., Any],
    jobs: Sequence[tuple],
    *,
    engine: str = "process",
    workers: int | None = None,
    address: str | None = None,
    resources: Resources = Resources(),
) -> Iterator[tuple[tuple, Any]]:
    """Call ``fn(*job)`` for every job and yield ``(job, result)`` as each finishes.

    Args:
        fn: a module-level function (it is sent to other processes by reference).
        jobs: the argument tuples, one per unit.
        engine: "process" or "ray" (see the module docstring).
        workers: processes of the local pool, or CPUs of a local Ray that adjpos starts
            (default: the machine's cores); 0 runs every unit in this process.
        address: an existing Ray cluster to join (engine "ray" only).
        resources: what each unit asks of Ray, and its torch threads on every engine.
    """
    check_engine(engine, workers, address)
    jobs = list(jobs)
    if not jobs:
        return
    if workers == 0:
        for job in jobs:
            with _threads(resources.cpus, unit=True):
                result = fn(*job)
            yield job, result
    elif engine == "ray":
        yield from _ray(fn, jobs, workers, address, resources)
    else:
        yield from _pool(fn, jobs, workers, resources.cpus)


def _pool(fn: Callable[..., Any], jobs: list[tuple], workers: int | None, threads: int) -> Iterator:
    workers = workers or os.cpu_count() or 1
    pool = futures.ProcessPoolExecutor(
        workers, mp_context=_context(), initializer=_start_worker, initargs=(threads, os.getpid())
    )
    try:
        pending = {pool.submit(fn, *job): job for job in jobs}
        for done in futures.as_completed(pending):
            yield pending[done], done.result()
    except BaseException:  # Ctrl-C, a unit's error, or a caller that stopped reading
        _stop(pool)
        raise
    pool.shutdown()


def _stop(pool: futures.ProcessPoolExecutor) -> None:
    """Drop the units not started and end the running ones now: leaving the pool the usual
    way would wait for every unit submitted. What the units finished is already recorded."""
    for process in list((pool._processes or {}).values()):  # its workers (no public API)
        process.terminate()
    pool.shutdown(cancel_futures=True)  # the pool sees its workers gone and closes its queues


def _start_worker(threads: int, job: int) -> None:
    """Set up a pool worker: `threads` torch threads, Ctrl-C left to the job (which ends its
    workers itself: one message, not a traceback per worker), and an exit as soon as process
    `job` ends, however it ends (``kill -9``, an out-of-memory killer, a preempted node): a
    worker waiting for units would otherwise live on, and keep the fork server alive."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: _quit())
    set_threads(threads)
    _UNIT_THREADS[:] = [threads]
    threading.Thread(target=_exit_after, args=(job,), daemon=True, name="adjpos-job").start()


def _exit_after(pid: int) -> None:
    """Wait for process `pid` to end, then end this process at once."""
    try:
        handle = os.pidfd_open(pid)  # Linux: readable once the process has ended
    except (AttributeError, OSError):  # elsewhere, or already gone: poll
        while _alive(pid):
            time.sleep(0.5)
    else:
        select.select([handle], [], [])
    _quit()


def _quit() -> None:
    """End this worker now, the unit it runs included, after releasing what multiprocessing
    made in it (numba's process lock, a named semaphore: left behind, the resource tracker
    would warn of a leak)."""
    from multiprocessing import util

    util._run_finalizers()  # what a normal exit runs (no public API)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def start_early(engine: str, workers: int | None) -> None:
    """Start the process engine's fork server now, to import torch while the caller works."""
    if engine == "process" and workers != 0 and _context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _context() -> Any:
    """Where the pool's workers come from: a fork server started once per process with
    `PRELOAD` imported, so no worker imports TransformerLens again (about 5 s each; fork
    itself is unsafe once torch threads exist); "spawn" where there is none (Windows)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def _ray(fn, jobs, workers, address, resources: Resources) -> Iterator:
    import ray

    started = not ray.is_initialized()
    if started:
        cpus = None if address is not None else (workers or os.cpu_count() or 1)
        ray.init(address=address, num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=resources.cpus, num_gpus=resources.gpus)(_call)
        pending = {task.remote(resources.cpus, fn, job): job for job in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready[0])
            yield job, ray.get(ready[0])
    finally:
        if started:
            ray.shutdown()


@contextmanager
def small_work_threads(model: Any) -> Iterator[None]:
    """Run the block on one thread (torch's, and numpy's and scipy's BLAS) when `model` has
    at most `SMALL_MODEL` parameters and nobody chose a thread count, then restore the counts.

    Small work runs ops too small to share out, and shared out they wait at every op for a
    thread another busy process keeps off its core (``benchmarks/bench_threads.py``). The
    threads count as chosen when OMP_NUM_THREADS or MKL_NUM_THREADS is set, when torch's count
    changed since ``import adjpos``, and inside a unit of `run_units`.
    """
    size = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else 0
    if threads_chosen() or size > SMALL_MODEL:
        yield
        return
    from threadpoolctl import threadpool_limits

    with _threads(1), threadpool_limits(1):
        yield


def threads_chosen() -> bool:
    """Whether the user (or an engine) chose the thread count: see `small_work_threads`."""
    chosen = any(os.environ.get(name) for name in THREAD_VARIABLES)
    return chosen or bool(_UNIT_THREADS) or torch.get_num_threads() != _THREADS_AT_IMPORT


@contextmanager
def _threads(threads: int, *, unit: bool = False) -> Iterator[None]:
    """Run the block with `threads` torch threads, then restore them. A `unit` runs as a
    worker would, so the solvers that stop at a tolerance (the logistic probe) stop where a
    worker's would (`small_work_threads` leaves its count alone)."""
    before = torch.get_num_threads()
    set_threads(threads)
    if unit:
        _UNIT_THREADS.append(threads)
    try:
        yield
    finally:
        if unit:
            _UNIT_THREADS.pop()
        set_threads(before)


def _call(threads: int, fn: Callable[..., Any], job: tuple) -> Any:
    set_threads(threads)
    _UNIT_THREADS[:] = [threads]
    return fn(*job)


def set_threads(threads: int) -> None:
    """Limit numba's parallel kernel and torch to `threads` threads in this process (numba
    first: starting its thread pool resets the OpenMP thread count torch reads)."""
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(threads)
