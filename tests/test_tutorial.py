"""The tutorial notebook is in sync with its source, stored without outputs, and runs."""

import json
import runpy
from pathlib import Path

import nbclient
import nbformat

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_notebook_is_generated_from_its_source_with_outputs_cleared():
    render = runpy.run_path(str(DOCS / "make_tutorial.py"))["render"]
    assert (DOCS / "tutorial.ipynb").read_text() == render(), "run: python docs/make_tutorial.py"
    cells = json.loads((DOCS / "tutorial.ipynb").read_text())["cells"]
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code")


def test_notebook_runs_end_to_end(monkeypatch, tmp_path):
    monkeypatch.setenv("ADJPOS_TUTORIAL_SIZE", "tiny")
    notebook = nbformat.read(DOCS / "tutorial.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "['rope', 'rope', 'rope', 'nope']" in text and "all-RoPE" in text
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 3  # heatmaps, adjacency by layer, probes
