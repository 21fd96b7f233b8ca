"""Compare the numbers of two `adjpos reproduce` runs, column by column.

    python docs/compare_runs.py RUN_A RUN_B

For every result table both runs hold, the columns they share are compared row by row (the
rows in the same order; `seconds`, a timing, is skipped), and so are the heatmap matrices.
Prints one line per table and exits 1 when any number differs. Used to check that a change of
the code leaves the study's numbers as they were.
"""

import json
import sys
from pathlib import Path

import pandas as pd

TABLES = (
    "adjacency_by_layer.csv",
    "cosine_scores.csv",
    "variance_by_position.csv",
    "variance_by_layer.csv",
    "decomposition_by_layer.csv",
    "dynamics.csv",
    "probes.csv",
    "interventions.csv",
    "theory.csv",
    "sweep/sweep.csv",
)


def _models(results: Path) -> pd.DataFrame:
    if (results / "models.csv").is_file():
        return pd.read_csv(results / "models.csv", keep_default_na=False)
    return pd.DataFrame(json.loads((results / "models.json").read_text())).astype(str)


def _matrices(path: Path) -> list:
    return [
        p.get("matrix", p.get("measured", p.get("predicted"))) for p in json.loads(path.read_text())
    ]


def compare(a: Path, b: Path) -> bool:
    same = True
    pairs = [(name, pd.read_csv(a / name), pd.read_csv(b / name)) for name in TABLES]
    pairs.append(("models", _models(a), _models(b)))
    for name, left, right in pairs:
        shared = [c for c in left.columns if c in right.columns and c != "seconds"]
        if len(left) != len(right):
            print(f"{name}: {len(left)} rows against {len(right)}")
            same = False
            continue
        equal = left[shared].astype(str).equals(right[shared].astype(str))
        extra = sorted(set(left.columns) ^ set(right.columns))
        print(
            f"{name}: {len(left)} rows, columns {shared} {'equal' if equal else 'DIFFER'}"
            + (f" (only in one run: {extra})" if extra else "")
        )
        same &= equal
    for name in ("cosine_heatmaps.json", "theory_matrices.json"):
        equal = _matrices(a / name) == _matrices(b / name)
        print(f"{name}: matrices {'equal' if equal else 'DIFFER'}")
        same &= equal
    return same


if __name__ == "__main__":
    first, second = (Path(arg) / "results" for arg in sys.argv[1:3])
    sys.exit(0 if compare(first, second) else 1)
