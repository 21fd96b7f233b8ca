"""Threads: ``adjpos probe`` on an idle machine and beside a neighbour that keeps every core busy.

Runs the same ``adjpos probe --model pretrained:addition`` command (a fresh run folder each
time) twice per thread setting: alone, then beside ``--neighbours`` busy processes (default:
one per core; a Python loop that runs until this script ends). Prints each wall time, import
included, and the ratio busy / idle. The settings (``--settings``): adjpos's own (small work
on one thread, `adjpos.engines.small_work_threads`) and every core chosen with
OMP_NUM_THREADS (torch's default count, as before adjpos chose); ``--quick`` probes one
feature set with one probe and runs adjpos's setting only, unless ``--settings`` names both.
With ``--neighbours 0`` the command runs once and its time stands for both (a smoke test). A
run still going after ``--timeout`` seconds is stopped and reported as not finished (a lower
bound). ``--json PATH`` also writes the numbers to PATH, atomically.

    python benchmarks/bench_threads.py [--quick] [--n-sequences 32] [--settings adjpos,all-cores]
        [--neighbours N] [--timeout 600] [--json PATH]
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adjpos.engines import THREAD_VARIABLES
from adjpos.runs import versions, write_json

# One core kept busy until this script ends, however it ends (it checks its parent).
BUSY = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""
SETTINGS = ("adjpos", "all-cores")


def main(args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    neighbours = cores if args.neighbours is None else args.neighbours
    probe = ["--model", "pretrained:addition", "--n-sequences", str(args.n_sequences)]
    probe += ["--device", "cpu"]
    if args.quick:
        probe += ["--features", "variance", "--probe", "ridge", "--repeats", "1", "--cv", "2"]
    names = args.settings.split(",") if args.settings else SETTINGS[: 1 if args.quick else 2]
    if set(names) - set(SETTINGS) or not names:
        raise SystemExit(f"--settings must name some of {list(SETTINGS)}, got {args.settings!r}")
    threads = {"adjpos": None, "all-cores": str(cores)}
    print(f"adjpos probe {' '.join(probe)}; {cores} cores, {neighbours} busy processes beside it")
    print(f"{'threads':<12}{'idle s':>9}{'busy s':>9}{'busy / idle':>13}")
    rows = []
    for name in names:
        idle = run_probe(probe, threads[name], args.timeout)
        # With no neighbours the busy run would be a second idle one: it is the idle run.
        busy = run_probe(probe, threads[name], args.timeout, neighbours) if neighbours else idle
        ratio = busy / idle if idle and busy else None
        row = {"threads": name, "omp_num_threads": threads[name], "idle_s": idle, "busy_s": busy}
        rows.append(row | {"ratio_busy_to_idle": ratio})
        print(f"{name:<12}{_seconds(idle):>9}{_seconds(busy):>9}{_ratio(ratio):>13}")
    if args.json is not None:
        machine = {"platform": platform.platform(), "cpus": cores, "quick": args.quick}
        machine |= {"load_average": os.getloadavg(), "versions": versions()}
        run = {"command": ["adjpos", "probe", *probe], "neighbours": neighbours}
        run["timeout_s"] = args.timeout
        write_json(args.json, {"machine": machine, "settings": run, "rows": rows})


def run_probe(
    probe: list[str], threads: str | None, timeout: float, neighbours: int = 0
) -> float | None:
    """Seconds of one ``adjpos probe`` in a fresh process, beside `neighbours` busy ones; None
    when it ran past `timeout` seconds (then it is stopped)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(neighbours)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            command = [sys.executable, "-m", "adjpos.cli", "probe", *probe, "--out", tmp + "/run"]
            start = time.perf_counter()
            try:
                subprocess.run(
                    command, env=env, check=True, capture_output=True, cwd=Path(tmp),
                    timeout=timeout,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                return None
            return time.perf_counter() - start
    finally:
        for process in busy:
            process.kill()
            process.wait()


def _seconds(value: float | None) -> str:
    return "not done" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few fits, one setting (smoke test)")
    parser.add_argument("--n-sequences", type=int, default=32, help="sequences probed")
    parser.add_argument("--settings", help=f"comma-separated, of {', '.join(SETTINGS)}")
    parser.add_argument("--neighbours", type=int, help="busy processes (default: one per core)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    main(parser.parse_args())
