"""The layers of adjpos, declared once from the bottom up, and every import statement of every
module (module level, inside functions, under TYPE_CHECKING), read with ast, checked against
them. A module may import from its own layer or a lower one, never a higher one; imports
within a layer are allowed but may not form a cycle, and no module imports itself back through
others. A violation fails here, whatever the test run happens to import."""

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "adjpos"
FACADE = "adjpos"  # adjpos/__init__.py: the verbs, and the namespaces by name (PEP 562)

# Bottom to top. Each entry is a package (adjpos/<name>/) or a top-level module (adjpos/<name>.py).
LAYERS = (
    ("validation", "types", "seeds"),  # checks of user input; shape aliases; derived seeds
    ("runs", "tables", "stats", "engines"),  # bookkeeping on plain data and files
    # pure tensor metrics; the tasks; models and checkpoints; text corpus, tokenizer, layouts
    ("metrics", "tasks", "models", "text"),
    ("capture",),  # hook names and residual streams
    # what is measured or done with a model
    (
        "scoring",
        "layerwise",
        "text_layers",
        "heads",
        "probes",
        "theory",
        "training",
        "interventions",
        "pretrained",
    ),
    ("sweep",),  # random-init models over a grid (uses the engines and the measures)
    ("hf",),  # Hugging Face families, tokenizers, summaries by layer kind
    ("figures",),  # tidy tables in, plotly figures out
    ("study",),  # the paper's study
    (FACADE,),  # the public API
    ("cli",),  # argv, printing, files and exit codes
)
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}

# (part of adjpos, modules it must never import): bans the layers alone do not express.
BANS = [
    ("metrics", ("transformer_lens", "sklearn", "plotly", "adjpos.models")),
    ("figures", ("torch", "transformer_lens", "adjpos.metrics", "adjpos.capture")),
    ("capture", ("adjpos.metrics",)),
    ("study/report.py", ("torch", "plotly")),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    """`name` (dotted, under adjpos) is a module or package of the source tree."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every import statement of `source`, the source of `module`: for
    ``from a import b`` the module ``a.b`` when it is one, else ``a``; relative imports
    resolved against `module`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.append((node.lineno, child if _is_module(child) else base))
    return found


def unit_of(module: str) -> str | None:
    """The layered part of adjpos that `module` belongs to (None outside adjpos)."""
    parts = module.split(".")
    if parts[0] != "adjpos":
        return None
    return parts[1] if len(parts) > 1 else FACADE


def layer_violation(unit: str, target: str) -> str | None:
    """Why `unit` may not import `target`, or None when it may."""
    for name in (unit, target):
        if name not in LEVEL:
            return f"{name!r} has no layer: add it to LAYERS in tests/test_layers.py"
    if LEVEL[target] > LEVEL[unit]:
        return f"{unit} (layer {LEVEL[unit]}) imports {target} (layer {LEVEL[target]})"
    return None


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the directed `graph` ([a, b, ..., a]), or [] when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, node])):
                return cycle
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return []


def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _edges() -> Iterable[tuple[str, int, str]]:
    """(module, line, imported module) for every import of every module of adjpos."""
    for module, path in _sources().items():
        is_package = path.name == "__init__.py"
        for line, target in imported_modules(path.read_text(), module, is_package):
            yield module, line, target


def _files(part: str) -> list[Path]:
    root = PACKAGE / part
    return (
        sorted(root.rglob("*.py"))
        if root.is_dir()
        else [PACKAGE / f"{part.removesuffix('.py')}.py"]
    )


# The layers of the real package


def test_every_package_and_top_level_module_has_a_layer():
    found = {unit_of(module) for module in _sources()}
    declared = set(LEVEL)
    assert found - declared == set(), "declare these in LAYERS"
    assert declared - found == set(), "these are declared but do not exist"
    assert sum(len(units) for units in LAYERS) == len(declared)  # each declared once


def test_every_import_goes_down_or_sideways():
    violations = [
        f"{module}:{line}: {why}"
        for module, line, target in _edges()
        if unit_of(target) not in (None, unit_of(module))
        and (why := layer_violation(unit_of(module), unit_of(target)))
    ]
    assert violations == []


def test_the_parts_import_each_other_without_cycles():
    graph: dict[str, set[str]] = {}
    for module, _, target in _edges():
        if unit_of(target) not in (None, unit_of(module)):
            graph.setdefault(unit_of(module), set()).add(unit_of(target))
    assert find_cycle(graph) == []


def test_no_module_imports_itself_back_through_others():
    graph: dict[str, set[str]] = {}
    for module, _, target in _edges():
        if unit_of(target) is not None and target != module:
            graph.setdefault(module, set()).add(target)
    assert find_cycle(graph) == []


@pytest.mark.parametrize(("part", "banned"), BANS, ids=[part for part, _ in BANS])
def test_bans_the_layers_do_not_express(part, banned):
    files = [path for path in _files(part) if path.is_file()]
    if not files:
        pytest.skip(f"adjpos/{part} does not exist")
    hits = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in files
        for line, name in imported_modules(path.read_text(), _module_name(path))
        if any(name == b or name.startswith(b + ".") for b in banned)
    ]
    assert hits == []


def test_no_module_imports_a_private_name_of_another_package():
    crossings = []
    for path in PACKAGE.rglob("*.py"):
        own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("adjpos."):
                target = node.module.split(".")[1]
                private = any(part.startswith("_") for part in node.module.split(".")[2:]) or any(
                    a.name.startswith("_") for a in node.names
                )
                if private and target != own:
                    crossings.append(f"{path.relative_to(PACKAGE)}: from {node.module}")
    assert crossings == []


# The checker itself, on synthetic sources


def test_the_checker_sees_imports_inside_functions_and_flags_an_upward_one():
    source = (
        "import torch\n"
        "from adjpos.validation import UsageError\n"
        "def f():\n"
        "    from adjpos.hf import load_hf\n"
        "    import adjpos.figures.style\n"
        "    from adjpos import study, adjacency_score\n"
        "    from .cosine import cosine_matrix\n"
    )
    edges = imported_modules(source, "adjpos.metrics.variance")
    assert edges == [
        (1, "torch"),
        (2, "adjpos.validation"),
        (4, "adjpos.hf"),
        (5, "adjpos.figures.style"),
        (6, "adjpos.study"),
        (6, "adjpos"),
        (7, "adjpos.metrics.cosine"),
    ]
    flagged = {
        unit_of(target)
        for _, target in edges
        if unit_of(target) not in (None, "metrics") and layer_violation("metrics", unit_of(target))
    }
    assert flagged == {"hf", "figures", "study", FACADE}
    assert layer_violation("metrics", "validation") is None
    assert layer_violation("layerwise", "scoring") is None  # sideways, within a layer
    assert "has no layer" in layer_violation("metrics", "newpackage")


def test_the_checker_finds_a_cycle_within_a_layer():
    assert find_cycle({"scoring": {"probes"}, "probes": {"capture"}}) == []
    cycle = find_cycle({"scoring": {"probes"}, "probes": {"theory"}, "theory": {"scoring"}})
    assert cycle[0] == cycle[-1] and set(cycle) == {"scoring", "probes", "theory"}
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
