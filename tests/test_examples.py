"""Each example script runs in its smoke mode (``--quick``) as a user would run it.

The scripts run in this process, as ``python examples/X.py --quick`` would run them (argv, the
script's folder on the path, a fresh working folder), not in a subprocess: a new interpreter
spent most of each run importing torch.
"""

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
# The scripts that draw the paper's figures: listed so that none can vanish unnoticed.
FIGURE_SCRIPTS = {
    "fig_adjacency_by_layer.py",
    "fig_cosine_heatmaps.py",
    "fig_probing.py",
    "fig_random_init_sweep.py",
    "fig_theory_first_layer.py",
    "fig_variance_by_position.py",
}


def test_every_figure_script_is_there():
    assert FIGURE_SCRIPTS <= {script.name for script in EXAMPLES}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_smoke_run(script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # examples write their outputs into the working folder
    monkeypatch.setattr(sys, "argv", [str(script), "--quick"])
    monkeypatch.syspath_prepend(str(script.parent))
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip()
