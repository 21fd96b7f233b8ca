"""The dependency direction of STYLE.md, read from the import statements of every module:
cli -> study -> (training, capture, probes, ...) -> (models, tasks, metrics) -> types.
A module that breaks it fails here, whatever the test run happens to import."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "adjpos"


def _imports(path: Path) -> set[str]:
    """Every module named by an import statement of `path` (module level or inside functions)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str) -> list[Path]:
    root = PACKAGE / package
    if root.is_dir():
        return sorted(root.rglob("*.py"))
    return [root if root.suffix == ".py" else PACKAGE / f"{package}.py"]


def _forbidden(package: str, prefixes: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in _modules(package)
        for name in sorted(_imports(path))
        if any(name == p or name.startswith(p + ".") for p in prefixes)
    ]


@pytest.mark.parametrize(
    ("package", "prefixes"),
    [
        ("metrics", ("transformer_lens", "sklearn", "plotly", "adjpos.capture", "adjpos.models")),
        ("figures", ("torch", "transformer_lens", "adjpos.metrics", "adjpos.capture")),
        ("capture", ("adjpos.metrics",)),
        (
            "study/report.py",
            ("torch", "plotly", "adjpos.metrics", "adjpos.figures", "adjpos.capture"),
        ),
        ("study/numbers.py", ("torch", "plotly", "adjpos.metrics", "adjpos.capture")),
    ],
)
def test_a_layer_never_imports_what_sits_beside_or_above_it(package, prefixes):
    assert _forbidden(package, prefixes) == []


@pytest.mark.parametrize(
    "package",
    [
        "capture",
        "figures",
        "metrics",
        "models",
        "probes",
        "tasks",
        "theory",
        "training",
        "pretrained",
        "scoring",
        "runs",
        "tables",
        "validation",
        "types",
    ],
)
def test_the_core_never_imports_the_study_or_the_cli(package):
    assert _forbidden(package, ("adjpos.study", "adjpos.cli")) == []


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
