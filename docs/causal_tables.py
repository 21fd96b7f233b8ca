"""Print the tables of docs/causal.md from an ``adjpos reproduce`` run's causal stage.

    adjpos reproduce --out runs/full
    python docs/causal_tables.py runs/full

Reads ``results/numbers/causal.json`` (every tested cell with its control and paired
difference, per seed and read-out variant; nothing is remeasured) and the run's criteria, and
prints, per task, one row per counted layer (from ``Criteria.first_layer``) and intervention:
exact match and its control's (means over seeds), the paired difference of each seed
(intervention minus control), how many seeds the study's own rule (`causal.finding`) calls
"necessary" with the read-out kept (the verdicts' variant) and with it changed. Then the
position curve's arms from ``results/curve_arms.csv``: per task, counted layer, size and arm
(and the unchanged model), exact match (mean over seeds), each seed's paired difference from
the random change of the same size, how many seeds passed the arm's manipulation check and, for
the shifts, the share of wrong answer characters equal to the one at each offset of the one
asked for (mean over seeds).
"""

import argparse
import json
from pathlib import Path

import pandas as pd

from adjpos.interventions import SPECS
from adjpos.study.claim import Criteria
from adjpos.study.claims.causal import finding
from adjpos.study.format import table as markdown_table
from adjpos.study.rules import row_passed


def run_criteria(run: Path) -> Criteria:
    """The criteria the run recorded (today's defaults where it recorded none)."""
    record = run / "run.json"
    spec = json.loads(record.read_text())["spec"] if record.is_file() else {}
    return Criteria.recorded(spec.get("criteria", {}))


def causal_tables(run: Path) -> dict[str, pd.DataFrame]:
    """Task -> its table (the counted layers), from the run's ``results/numbers/causal.json``."""
    criteria = run_criteria(run)
    found = json.loads((run / "results" / "numbers" / "causal.json").read_text())["rows"]
    rows = pd.DataFrame([r | {"finding": finding(r, criteria)} for r in found])
    rows = rows[rows["layer"] >= criteria.first_layer]
    keys = ["task", "layer", "intervention"]
    kept = rows[rows["readout"] == "kept"]
    changed = rows[rows["readout"] == "changed"]
    tables = {}
    for task, group in kept.groupby("task", sort=False):
        out = []
        for (_, layer, name), cell in group.groupby(keys, sort=False):
            other = changed[(changed["task"] == task) & (changed["layer"] == layer)]
            other = other[other["intervention"] == name]
            differences = " / ".join(
                "-" if pd.isna(d) else f"{d:+.2f}" for d in cell.sort_values("seed")["difference"]
            )
            out.append(
                {
                    "layer": layer,
                    "intervention": name,
                    "control": cell["control"].iloc[0] or "(baseline)",
                    "exact match": f"{cell['exact_match'].mean():.2f}",
                    "control's": _mean(cell["control_exact_match"]),
                    "difference by seed": differences,
                    "necessary": _count(cell),
                }
                | ({"read-out changed: necessary": _count(other)} if len(changed) else {})
            )
        tables[task] = pd.DataFrame(out)  # the changed variant's column only where it ran
    return tables


# The norm interventions and every control of them, in the intervention table's order.
NORMS = tuple(name for name in SPECS if name.startswith("norm_"))


def norm_controls(run: Path, readout: str = "kept") -> pd.DataFrame:
    """Exact match (mean over seeds) of the norm interventions and all their controls, per task
    and counted layer, from the run's ``results/interventions.csv``."""
    table = pd.read_csv(run / "results" / "interventions.csv")
    table = table[(table["layer"] >= run_criteria(run).first_layer)]
    table = table[table["readout"] == readout]
    table = table[table["intervention"].isin(NORMS)]
    means = table.groupby(["task", "layer", "intervention"], sort=False)["exact_match"].mean()
    wide = means.unstack("intervention")
    return wide[[n for n in NORMS if n in wide.columns]].reset_index()


def arm_tables(run: Path) -> dict[str, pd.DataFrame]:
    """Task -> the position curve's arms at its counted layers, read-out kept (see the module
    doc), from the run's ``results/curve_arms.csv``; {} when the run has no arms."""
    path = run / "results" / "curve_arms.csv"
    if not path.is_file():
        return {}
    rows = pd.read_csv(path)
    criteria = run_criteria(run)
    rows = rows[(rows["layer"] >= criteria.first_layer) & (rows["readout"] == "kept")]
    rows = rows.assign(arm=rows["arm"].fillna("unchanged"), dose=rows["dose"].fillna(0))
    shares = [f"error_offset_share_{j}" for j in (-2, -1, 0, 1, 2)]
    tables = {}
    for task, group in rows.groupby("task", sort=False):
        out = []
        for (layer, dose, arm), cell in group.groupby(["layer", "dose", "arm"], sort=False):
            cell = cell.sort_values("seed")
            size = (int(dose) if float(dose).is_integer() else f"{dose:g}") if dose else "-"
            row = {"layer": layer, "size": size, "arm": arm}
            row["change"] = f"{cell['perturbation'].mean():.3f}"
            row["exact match"] = f"{cell['exact_match'].mean():.2f}"
            row["- random, by seed"] = " / ".join(
                "-" if pd.isna(d) else f"{d:+.2f}" for d in cell["difference"]
            )
            judged = [row_passed(r, criteria) for r in cell.to_dict("records")]
            passed = f"{sum(judged)} of {len(cell)}"
            row["check passed"] = "-" if arm == "unchanged" else passed
            for column in shares:
                value = cell[column].mean() if arm.startswith("shift") else float("nan")
                row[column.removeprefix("error_offset_share_")] = (
                    "-" if pd.isna(value) else f"{value:.2f}"
                )
            out.append(row)
        tables[task] = pd.DataFrame(out)
    return tables


def _mean(values: pd.Series) -> str:
    values = values.dropna()
    return f"{values.mean():.2f}" if len(values) else "-"


def _count(cell: pd.DataFrame) -> str:
    return f"{int((cell['finding'] == 'necessary').sum())} of {len(cell)}"


def main(run: Path) -> None:
    for task, table in causal_tables(run).items():
        print(f"### {task}\n")
        print(markdown_table(list(table.columns), table.values.tolist()))
        print()
    for readout in ("kept", "changed"):
        if not (run / "results" / "interventions.csv").is_file():
            break
        norms = norm_controls(run, readout)
        if len(norms):
            print(f"### the norms and their controls, read-out {readout}\n")
            print(markdown_table(list(norms.columns), norms.round(2).values.tolist()))
            print()
    for task, table in arm_tables(run).items():
        print(f"### the position curve's arms: {task}\n")
        print(markdown_table(list(table.columns), table.values.tolist()))
        print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the folder of an adjpos reproduce run")
    main(parser.parse_args().run)
