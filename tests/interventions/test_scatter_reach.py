"""docs/scatter_reach.py: per prompt length, the doses' sizes beside the scatter's fullest
change, and which sizes it reaches."""

import runpy
from pathlib import Path

from adjpos.interventions.curve.arms import TOLERANCE

SCRIPT = Path(__file__).parents[2] / "docs" / "scatter_reach.py"


def test_the_reach_column_follows_from_the_sizes(capsys):
    main = runpy.run_path(str(SCRIPT), run_name="not_main")["main"]
    main(["reversal", "--layers", "1", "--draws", "2", "--prompts", "24"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(rows) > 3 and {r[0] for r in rows} == {"reversal"}
    lengths = [int(r[2]) for r in rows]
    assert lengths == sorted(lengths)
    for r in rows:
        shift1, shift2, least = float(r[4]), float(r[5]), float(r[6].rstrip(","))
        assert 0 < shift1 <= shift2 and least <= float(r[7])
        want = [f"shift{m}" for m, t in ((1, shift1), (2, shift2)) if least >= t * (1 - TOLERANCE)]
        assert r[8:] == (want or ["-"])
    assert {r[8] for r in rows} >= {"-", "shift1"}  # short lengths fall short, longer reach
