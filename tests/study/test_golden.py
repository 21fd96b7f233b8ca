"""The report rendered from a fixed numbers folder (a tiny run's ``run.json`` and
``results/numbers/``) is the golden ``report.md`` beside it, word for word: a change of the
report's wording or of a claim's verdict shows here as a diff to read and accept.

Accept a deliberate change with
``ADJPOS_UPDATE_GOLDEN=1 python -m pytest tests/study/test_golden.py``.
"""

import os
from pathlib import Path

from adjpos.study.report import render, verdicts

GOLDEN = Path(__file__).parent / "golden"
CAPTIONS = {"adjacency_by_layer": "Adjacency by layer.", "cosine_addition": "Cosine, addition."}


def test_the_report_of_fixed_numbers_is_the_golden_one():
    text = render(GOLDEN, CAPTIONS, {"adjacency_by_layer"}, html=False)
    if os.environ.get("ADJPOS_UPDATE_GOLDEN"):
        (GOLDEN / "report.md").write_text(text)
    assert text == (GOLDEN / "report.md").read_text()


def test_the_golden_verdicts_are_counted_not_worded():
    found = {v.claim: v for v in verdicts(GOLDEN)}
    assert len(found) == 19
    for verdict in found.values():
        assert verdict.n_for + verdict.n_against + verdict.n_within == verdict.n_cells
        if verdict.status == "supported":
            assert verdict.n_for == verdict.n_cells > 0
        if verdict.status == "mixed":
            assert 0 < verdict.n_for < verdict.n_cells
