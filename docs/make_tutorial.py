"""Write docs/tutorial.ipynb from its source docs/tutorial.py (jupytext), outputs cleared.

    python docs/make_tutorial.py

The test suite checks that the notebook is in sync with its source and runs it.
"""

from pathlib import Path

import jupytext

HERE = Path(__file__).resolve().parent
SOURCE, NOTEBOOK = HERE / "tutorial.py", HERE / "tutorial.ipynb"


def render() -> str:
    """The notebook's JSON text, outputs and execution counts cleared."""
    notebook = jupytext.read(SOURCE)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index}"  # stable ids: the same source always gives the same file
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return jupytext.writes(notebook, fmt="ipynb")


if __name__ == "__main__":
    NOTEBOOK.write_text(render())
    print("wrote", NOTEBOOK)
