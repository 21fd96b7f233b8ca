"""The report's tables as a reader reads them (a tiny run's ``report.md``): every proportion
with a Wilson interval, integers as integers, no "nan", no "-0.000", no column empty in every
row, and no table too long to read."""

import re

import pandas as pd
import pytest

from adjpos.stats import wilson_interval

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
