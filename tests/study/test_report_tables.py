"""The report's tables as a reader reads them (a tiny run's ``report.md``): every proportion
with a Wilson interval, integers as integers, no "nan", no "-0.000", no column empty in every
row, and no table too long to read."""

import re

import pandas as pd
import pytest

from adjpos.stats import wilson_interval
from adjpos.study.report import _size

# "0.50 [0.17, 0.83]" or "0.991 (0.986 to 0.994)": a value and its interval.
INTERVAL = re.compile(r"(-?\d+\.\d+) [\[(](-?\d+\.\d+)(?:,| to) (-?\d+\.\d+)[\])]")
PROPORTION = re.compile(r"exact match|accuracy", re.IGNORECASE)


def report_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each markdown table of `text` as (header, rows of cells)."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines[:-1]):
        if line.startswith("|") and re.fullmatch(r"\|(:?---:?\|)+", lines[i + 1]):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            found.append((_cells(line), rows))
    return found


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


@pytest.fixture(scope="module")
def tables(tiny_run):
    return report_tables((tiny_run[0] / "report.md").read_text())


def test_every_exact_match_interval_is_wilsons(tiny_run, tables):
    """A proportion's interval never collapses to a point (a bootstrap's does when every
    prompt is right), in the report and in the table behind the causal figure."""
    proportions = 0
    for header, rows in tables:
        for column in (i for i, h in enumerate(header) if PROPORTION.search(h)):
            for row in rows:
                for value, low, high in INTERVAL.findall(row[column]):
                    proportions += 1
                    assert float(low) < float(high), (header[column], row)
                    assert float(low) <= float(value) <= float(high)
    assert proportions >= 20
    table = pd.read_csv(tiny_run[0] / "results" / "interventions.csv")
    for row in table.itertuples():
        wilson = wilson_interval(row.exact_match * row.n_prompts, row.n_prompts)
        assert (row.exact_match_low, row.exact_match_high) == pytest.approx(wilson)


def test_no_cell_prints_nan_a_signed_zero_or_an_integer_with_decimals(tables):
    for header, rows in tables:
        for row in rows:
            for name, cell in zip(header, row, strict=True):
                assert not re.search(r"\bnan\b", cell), (name, row)  # says why instead
                assert not re.search(r"-0\.0+(?![0-9])", cell), (name, row)
                assert not re.search(r"\b\d{3,}\.0+\b", cell), (name, row)  # a step, a count


def test_no_column_is_empty_in_every_row_and_no_size_is_blank(tiny_run, tables):
    for header, rows in tables:
        for index, name in enumerate(header):
            assert {row[index] for row in rows} - {"", "not probed", "not measured"}, name
    sizes = next(rows for header, rows in tables if header == ["size", "value"])
    assert all(value for _, value in sizes)
    assert ["trained_seeds", "0, 1"] in sizes
    assert _size("trained_seeds", None) == "every shipped seed"  # what None means, not a blank


def test_no_column_is_headed_by_a_field_name(tables):
    """A column says what it holds in words ("initial weight scale (std)", not "init_range");
    the size and criterion names of the last two tables are their own names."""
    for header, _ in tables:
        assert not [h for h in header if re.fullmatch(r"[a-z][a-z0-9]*_[a-z0-9_]+", h)], header


def test_an_unset_value_in_a_listed_size_prints_as_none():
    grid = [{"n_layers": [1, 2], "normalization_type": ["LN", None]}]
    assert _size("grid", grid) == "n_layers (1, 2) x normalization_type (LN, none)"


def test_long_tables_are_summed_up_and_kept_whole_in_results(tiny_run, tables):
    """The dynamics table counts layers per metric (64 rows of one per layer before); every
    layer's trajectory is in results/."""
    assert max(len(rows) for _, rows in tables) <= 50
    whole = pd.read_csv(tiny_run[0] / "results" / "dynamics_trajectories.csv")
    assert len(whole) > 50 and {"start", "peak", "end", "peak_step"} <= set(whole.columns)
    findings = pd.read_csv(tiny_run[0] / "results" / "causal_findings.csv")  # the causal rows
    causal = next(rows for header, rows in tables if "finding, read-out kept" in header)
    assert len(findings[findings["readout"] == "kept"]) == len(causal)
    assert findings["finding"].notna().all()
