"""The verdicts of a fixed numbers folder (a tiny run's ``run.json`` and ``results/numbers/``)
are the golden ``claims.csv`` beside it: each claim's status and counts, not its wording. A
change of a claim's rule shows here as a changed count to read and accept.

Accept a deliberate change with
``ADJPOS_UPDATE_GOLDEN=1 python -m pytest tests/study/test_golden.py``.
"""

import os
from pathlib import Path

import pandas as pd

from adjpos.study.report import render, verdicts

GOLDEN = Path(__file__).parent / "golden"
COUNTED = ["claim", "status", "n_for", "n_against", "n_within", "n_cells", "seeds"]


def test_the_verdicts_of_fixed_numbers_are_the_golden_ones():
    found = pd.DataFrame([v.row() for v in verdicts(GOLDEN)])[COUNTED]
    if os.environ.get("ADJPOS_UPDATE_GOLDEN"):
        found.to_csv(GOLDEN / "claims.csv", index=False)
    golden = pd.read_csv(GOLDEN / "claims.csv", dtype={"seeds": str})
    pd.testing.assert_frame_equal(found, golden, check_dtype=False)


def test_the_report_of_fixed_numbers_lists_every_verdict_once():
    text = render(GOLDEN, {"adjacency_by_layer": "Adjacency by layer."}, set())
    glance = text.split("## The claims at a glance")[1].split("\n## ")[0]
    for verdict in verdicts(GOLDEN):
        assert glance.count(f"| {verdict.claim} | {verdict.status} | {verdict.counts} |") == 1
