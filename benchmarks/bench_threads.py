"""Threads: ``adjpos probe`` on an idle machine and beside a neighbour that keeps every core busy.

Runs the same ``adjpos probe --model pretrained:addition`` command (a fresh run folder each
time) twice per thread setting: alone, then beside one busy process per core (a Python loop
that runs until this script ends). Prints each wall time, import included, and the ratio
busy / idle. The settings: adjpos's own (small work on one thread,
`adjpos.engines.small_work_threads`) and, unless ``--quick``, every core chosen with
OMP_NUM_THREADS (torch's default count, as before adjpos chose). ``--json PATH`` also writes
the numbers to PATH, atomically.

    python benchmarks/bench_threads.py [--quick] [--n-sequences 32] [--json PATH]
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


def main(quick: bool, n_sequences: int, json_path: str | None) -> None:
    cores = os.cpu_count() or 1
    probe = ["--model", "pretrained:addition", "--n-sequences", str(n_sequences), "--device", "cpu"]
    if quick:
        probe += ["--features", "variance", "--probe", "ridge", "--repeats", "1", "--cv", "2"]
    settings = {"adjpos": None} if quick else {"adjpos": None, "all cores": str(cores)}
    print(f"adjpos probe {' '.join(probe)}; {cores} cores, {cores} busy processes beside it")
    print(f"{'threads':<12}{'idle s':>9}{'busy s':>9}{'busy / idle':>13}")
    rows = []
    for name, threads in settings.items():
        idle = run_probe(probe, threads)
        busy = run_probe(probe, threads, neighbours=cores)
        rows.append({"threads": name, "omp_num_threads": threads, "idle_s": idle, "busy_s": busy})
        rows[-1]["ratio_busy_to_idle"] = busy / idle
        print(f"{name:<12}{idle:>9.1f}{busy:>9.1f}{busy / idle:>13.2f}")
    if json_path is not None:
        machine = {"platform": platform.platform(), "cpus": cores, "quick": quick}
        machine["versions"] = versions()
        run = {"command": ["adjpos", "probe", *probe], "neighbours": cores}
        write_json(json_path, {"machine": machine, "settings": run, "rows": rows})


def run_probe(probe: list[str], threads: str | None, neighbours: int = 0) -> float:
    """Seconds of one ``adjpos probe`` in a fresh process, beside `neighbours` busy ones."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(neighbours)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            command = [sys.executable, "-m", "adjpos.cli", "probe", *probe, "--out", tmp + "/run"]
            start = time.perf_counter()
            subprocess.run(command, env=env, check=True, capture_output=True, cwd=Path(tmp))
            return time.perf_counter() - start
    finally:
        for process in busy:
            process.kill()
            process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one setting, few fits (smoke test)")
    parser.add_argument("--n-sequences", type=int, default=32, help="sequences probed")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args()
    main(args.quick, args.n_sequences, args.json)
