"""The top level: the verbs imported statically, every namespace an attribute imported on first
use (PEP 562), and ``import adjpos`` light (none of the heavy libraries it wraps)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import adjpos

PACKAGE = Path(adjpos.__file__).parent
HEAVY = ("transformer_lens", "transformers", "plotly", "sklearn")


def _namespaces() -> list[str]:
    """Every subpackage and top-level module of adjpos, from the source tree."""
    modules = [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    packages = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + packages)


def _fresh(code: str):
    """What `code` prints as JSON, run in a new interpreter (nothing imported yet)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    )
    return json.loads(done.stdout)


def test_import_adjpos_loads_none_of_the_heavy_libraries():
    code = (
        f"import json, sys, adjpos; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    assert _fresh(code) == []


def test_a_namespace_is_imported_on_first_use_only():
    code = (
        "import json, sys, adjpos\n"
        "before = 'adjpos.theory' in sys.modules\n"
        "compare = adjpos.theory.compare_first_layer\n"
        "print(json.dumps([before, 'adjpos.theory' in sys.modules, compare.__module__]))"
    )
    assert _fresh(code) == [False, True, "adjpos.theory.comparison"]


@pytest.mark.parametrize("name", _namespaces())
def test_every_namespace_is_an_attribute_and_listed(name):
    module = getattr(adjpos, name)
    assert module.__name__ == f"adjpos.{name}"
    assert name in dir(adjpos)


def test_the_names_readme_and_docs_use():
    assert callable(adjpos.theory.compare_first_layer)
    assert adjpos.hf.layer_kinds is adjpos.layer_kinds
    assert adjpos.hf.measure_layers is adjpos.measure_layers
    assert adjpos.hf.load_hf is adjpos.load_hf
    assert callable(adjpos.figures.plot_layer_kinds)
    assert adjpos.interventions.SPECS and adjpos.study.__all__


def test_every_public_name_exists_and_unknown_names_say_what_there_is():
    assert [name for name in adjpos.__all__ if not hasattr(adjpos, name)] == []
    with pytest.raises(AttributeError, match=r"no attribute 'theroy'.*'theory'"):
        adjpos.theroy  # noqa: B018
    assert not hasattr(adjpos, "__wrapped__")  # tools probing for attributes get a clean no
