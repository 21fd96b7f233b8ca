"""docs/causal_tables.py: causal.md's tables read from a run's causal numbers."""

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = runpy.run_path(str(ROOT / "docs" / "causal_tables.py"))
causal_tables, norm_controls = SCRIPT["causal_tables"], SCRIPT["norm_controls"]
arm_tables = SCRIPT["arm_tables"]


# What each row is built to be under the package's own rule (`causal.finding`).
MADE = {
    "necessary": {"low": 0.1, "high": 0.3, "difference_low": -0.6, "difference_high": -0.3},
    "no more than its control": {"low": 0.1, "high": 0.3, "difference_low": -0.2},
    "not needed": {"low": 0.9, "high": 1.0, "difference_low": -0.1},
}


def _row(seed, layer, readout, verdict, exact, control_exact, difference, name="norm_permute"):
    return {
        "task": "addition", "seed": seed, "layer": layer, "intervention": name,
        "readout": readout, "control": "norm_scale_control", "exact_match": exact,
        "control_exact_match": control_exact, "difference": difference,
        "difference_high": 0.1, "baseline_low": 0.95, "baseline_high": 1.0,
        "perturbation": 0.5, "control_perturbation": 0.5,
    } | MADE[verdict]  # fmt: skip


def test_counts_and_means_are_those_of_the_seeds(tmp_path):
    rows = [
        _row(0, 1, "kept", "necessary", 0.2, 0.6, -0.4),
        _row(1, 1, "kept", "no more than its control", 0.5, 0.5, 0.0),
        _row(2, 1, "kept", "necessary", 0.2, 0.7, -0.5),
        _row(0, 1, "changed", "necessary", 0.0, 0.3, -0.3),
        _row(1, 1, "changed", "not needed", 1.0, 1.0, 0.0),
        _row(2, 1, "changed", "not needed", 1.0, 1.0, 0.0),
        _row(0, 0, "kept", "necessary", 0.0, 1.0, -1.0),  # layer 0: not counted
    ]
    numbers = tmp_path / "results" / "numbers"
    numbers.mkdir(parents=True)
    (numbers / "causal.json").write_text(json.dumps({"rows": rows}))
    (table,) = causal_tables(tmp_path).values()
    assert len(table) == 1  # from the package's first counted layer
    row = table.iloc[0]
    assert row["layer"] == 1 and row["control"] == "norm_scale_control"
    assert row["exact match"] == "0.30" and row["control's"] == "0.60"
    assert row["difference by seed"] == "-0.40 / +0.00 / -0.50"
    assert row["necessary"] == "2 of 3"
    assert row["read-out changed: necessary"] == "1 of 3"


def test_the_golden_run_prints(capsys):
    runpy.run_path(str(ROOT / "docs" / "causal_tables.py"), run_name="not_main")["main"](
        ROOT / "tests" / "study" / "golden"
    )
    assert "| 1 | norm_permute | norm_scale_control |" in capsys.readouterr().out


def test_norm_controls_average_the_seeds_per_layer_and_read_out(tmp_path):
    import pandas as pd

    rows = [
        (seed, layer, readout, name, exact)
        for seed in (0, 1)
        for layer in (0, 1)
        for readout in ("kept", "changed")
        for name, exact in (("norm_permute", 0.1 * (seed + 1)), ("norm_common_scale", 0.9))
    ]
    table = pd.DataFrame(rows, columns=["seed", "layer", "readout", "intervention", "exact_match"])
    table["task"] = "reversal"
    (tmp_path / "results").mkdir()
    table.to_csv(tmp_path / "results" / "interventions.csv", index=False)
    norms = norm_controls(tmp_path, "kept")
    assert list(norms.columns) == ["task", "layer", "norm_permute", "norm_common_scale"]
    assert norms["layer"].tolist() == [1]
    assert norms["norm_permute"].iloc[0] == pytest.approx(0.15)
    assert norms["norm_common_scale"].iloc[0] == pytest.approx(0.9)


def test_the_arms_table_is_the_seeds_means_differences_checks_and_shares(tmp_path):
    """Per layer, size and arm: means over seeds, each seed's difference from the random
    change, the checks passed, and error offsets for the shifts only; layer 0 and the
    read-out changed left out."""
    import pandas as pd

    shares = {f"error_offset_share_{j}": 0.1 * (j + 2) for j in (-2, -1, 0, 1, 2)}
    base = {"task": "reversal", "layer": 1, "readout": "kept", "perturbation": 0.1}
    rows = [base | {"seed": s, "intervention": "none", "exact_match": 1.0} for s in (0, 1)]
    for seed, (exact, difference, passed) in enumerate([(0.2, -0.5, True), (0.4, -0.3, False)]):
        arm = {"intervention": "position_shift", "arm": "shift+1", "dose": 1.0, "seed": seed}
        rows.append(base | arm | shares | {"exact_match": exact, "difference": difference}
                    | {"size_error": 0.0, "check_value": 1.0 if passed else 0.0})  # fmt: skip
        rows.append(base | arm | {"arm": "rotate", "intervention": "position_rotate"} | shares
                    | {"exact_match": 0.9, "difference": 0.0, "size_error": 0.0}
                    | {"check_value": 0.0})  # fmt: skip
    rows.append(rows[-1] | {"layer": 0, "arm": "scatter"})
    rows.append(rows[-2] | {"readout": "changed", "arm": "remove"})
    (tmp_path / "results").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "results" / "curve_arms.csv", index=False)
    (table,) = arm_tables(tmp_path).values()
    table = table.set_index("arm")
    assert list(table.index) == ["unchanged", "shift+1", "rotate"]
    shift = table.loc["shift+1"]
    assert shift["exact match"] == "0.30" and shift["- random, by seed"] == "-0.50 / -0.30"
    assert shift["check passed"] == "1 of 2" and shift["size"] == 1
    assert [shift[str(j)] for j in (-2, -1, 0, 1, 2)] == ["0.00", "0.10", "0.20", "0.30", "0.40"]
    assert table.loc["rotate", "1"] == "-" and table.loc["unchanged", "check passed"] == "-"
    assert table.loc["unchanged", "exact match"] == "1.00"
    assert arm_tables(tmp_path / "elsewhere") == {}
