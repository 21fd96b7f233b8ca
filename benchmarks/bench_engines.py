"""Engines: the same sweep in-process, on the local process pool and on a local Ray.

Runs one grid of random-init models (cells x seeds) three times in one process: in-process
(``workers=0``, the reference), on the process pool and on a local Ray that adjpos starts,
each with ``--workers`` workers, each into a fresh folder. Prints the wall time of each (the
pool's includes starting its processes, Ray's starting and stopping Ray) and its ratios to the
reference and to the pool, and checks that all three wrote the same rows (timings aside).
``--quick``: a tiny grid, in-process and on the pool only (tests/test_engines.py checks Ray's
rows against the pool's).
``--json PATH`` also writes those numbers to PATH, atomically.

    python benchmarks/bench_engines.py [--quick] [--workers 2] [--json PATH]
"""

import argparse
import platform
import tempfile
import time
from pathlib import Path

from adjpos.runs import versions, write_json
from adjpos.sweep import sweep


def main(quick: bool, workers: int, json_path: str | None) -> None:
    grid = {"init_range": [0.05, 0.1], "d_model": [16, 32]}
    if not quick:
        grid = {"init_range": [0.02, 0.05, 0.1, 0.2], "d_model": [128, 256]}
    seeds = [0] if quick else [0, 1, 2]
    size = dict(n_sequences=4, seq_len=8) if quick else dict(n_sequences=64, seq_len=128)
    runs = [("in-process", dict(workers=0)), ("process pool", dict(workers=workers))]
    if not quick:
        runs.append(("ray", dict(workers=workers, engine="ray")))
    cells = len(grid["init_range"]) * len(grid["d_model"]) * len(seeds)
    print(f"sweep of {cells} cells x seeds, {size}; {workers} workers")
    print(f"{'engine':<14}{'seconds':>9}{'ratio to in-process':>21}{'ratio to the pool':>19}")
    tables, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in runs:
            start = time.perf_counter()
            out = Path(tmp) / name.replace(" ", "_")
            result = sweep(grid, seeds=seeds, out_dir=out, progress=False, **size, **options)
            rows.append({"engine": name, "seconds": time.perf_counter() - start})
            rows[-1]["ratio_to_in_process"] = rows[-1]["seconds"] / rows[0]["seconds"]
            if len(rows) > 1:
                rows[-1]["ratio_to_pool"] = rows[-1]["seconds"] / rows[1]["seconds"]
            print_row(rows[-1])
            tables.append(result.table.drop(columns=["seconds"]))
    same = all(t.equals(tables[0]) for t in tables[1:])
    print(f"same rows on every engine: {same}")
    if json_path is not None:
        machine = {"platform": platform.platform(), "quick": quick, "versions": versions()}
        settings = {"grid": grid, "seeds": seeds, **size, "workers": workers}
        results = {"engines": rows, "same_rows": same}
        write_json(json_path, {"machine": machine, "settings": settings, **results})
    if not same:
        raise SystemExit("the engines wrote different rows")


def print_row(row: dict) -> None:
    pool = f"{row['ratio_to_pool']:>19.2f}" if "ratio_to_pool" in row else f"{'':>19}"
    print(f"{row['engine']:<14}{row['seconds']:>9.1f}{row['ratio_to_in_process']:>21.2f}{pool}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny grid, no Ray (a smoke test)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the pool and of Ray")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args()
    main(args.quick, args.workers, args.json)
