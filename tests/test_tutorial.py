"""The tutorial notebook is in sync with its source, stored without outputs, and runs."""

import contextlib
import io
import json
import runpy
from pathlib import Path

import nbformat

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_notebook_is_generated_from_its_source_with_outputs_cleared():
    render = runpy.run_path(str(DOCS / "make_tutorial.py"))["render"]
    assert (DOCS / "tutorial.ipynb").read_text() == render(), "run: python docs/make_tutorial.py"
    cells = json.loads((DOCS / "tutorial.ipynb").read_text())["cells"]
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code")


def test_notebook_runs_end_to_end(monkeypatch, tmp_path, as_a_user):
    """Each code cell of the notebook runs in IPython's shell, as a Jupyter kernel runs it, in
    this process (a kernel of its own spent 8 s importing torch and transformers again); a
    cell's value is taken as a notebook receives it: its mime bundle, under plotly's notebook
    renderer."""
    import plotly.io as pio
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("ADJPOS_TUTORIAL_SIZE", "tiny")
    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")
    monkeypatch.chdir(tmp_path)
    notebook = nbformat.read(DOCS / "tutorial.ipynb", as_version=4)
    shell = InteractiveShell.instance()
    text, shown = io.StringIO(), []
    try:
        for cell in (c for c in notebook.cells if c.cell_type == "code"):
            with contextlib.redirect_stdout(text):
                result = shell.run_cell(cell.source, store_history=False)
            result.raise_error()
            if result.result is not None:
                shown.append(shell.display_formatter.mimebundle_formatter(result.result)[0])
    finally:
        InteractiveShell.clear_instance()
    assert "['rope', 'rope', 'rope', 'nope']" in text.getvalue() and "all-RoPE" in text.getvalue()
    figures = [data for data in shown if "application/vnd.plotly.v1+json" in data]
    assert len(figures) == 3  # heatmaps, adjacency by layer, probes
