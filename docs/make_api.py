"""Write docs/api.md from the public API's signatures and docstrings.

    python docs/make_api.py

The test suite checks that docs/api.md equals this script's output, so the page cannot rot.
"""

import dataclasses
import inspect
import sys
from pathlib import Path

import adjpos
import adjpos.engines  # noqa: F401  (the namespaces documented below)
import adjpos.figures  # noqa: F401
import adjpos.interventions  # noqa: F401
import adjpos.stats  # noqa: F401
import adjpos.study  # noqa: F401
import adjpos.sweep  # noqa: F401
import adjpos.theory  # noqa: F401

HEADER = """# API reference

The first section is the top level (`import adjpos`); the others are namespaces, imported as
`import adjpos.figures`, `import adjpos.theory`, `import adjpos.interventions`,
`import adjpos.hf`, `import adjpos.sweep`, `import adjpos.study`, `import adjpos.engines` and
`import adjpos.stats`.
Shapes use TransformerLens's dimension names; `*batch` is any number of leading dimensions.
This page is generated from the docstrings by `python docs/make_api.py`.
"""
NAMESPACES = {
    "adjpos": "The core verbs",
    "adjpos.figures": "Figures: results in, plotly figures out",
    "adjpos.theory": "The first-layer argument",
    "adjpos.interventions": "Interventions: change one carrier of position inside a model",
    "adjpos.hf": "Hugging Face models with NoPE layers",
    "adjpos.sweep": "Random-init sweeps over a grid of model configs",
    "adjpos.study": "The paper's study: reproduce, the report",
    "adjpos.engines": "Engines: where the units of a long job run",
    "adjpos.stats": "Statistics on plain arrays",
}


def _annotation(annotation) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _signature(obj) -> str:
    sig = inspect.signature(obj)
    parts, star_done = [], False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    result = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty:
        result += f" -> {_annotation(sig.return_annotation)}"
    return result


def _default(f) -> str:
    if f.default is not dataclasses.MISSING:
        return f"`{f.default!r}`"
    return "(required)"


def _cells(*cells: str) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _section(module, name: str) -> str:
    obj = getattr(module, name)
    qualified = f"{module.__name__}.{name}"
    if dataclasses.is_dataclass(obj):
        fields = "\n".join(
            _cells(
                f"`{f.name}`",
                f"`{_annotation(f.type)}`",
                _default(f),
                f.metadata.get("help", ""),
            )
            for f in dataclasses.fields(obj)
        )
        table = f"| field | type | default | meaning |\n|---|---|---|---|\n{fields}\n"
        return f"### `{qualified}`\n\n{inspect.getdoc(obj)}\n\n{table}"
    if callable(obj):
        signature = f"```text\n{qualified}{_signature(obj)}\n```"
        return f"### `{qualified}`\n\n{signature}\n\n{inspect.getdoc(obj)}\n"
    return f"### `{qualified}`\n\n`{obj!r}`\n"


def render() -> str:
    """The whole page."""
    parts = [HEADER]
    for name, title in NAMESPACES.items():
        module = sys.modules[name]
        parts.append(f"## {title} (`{name}`)\n")
        parts += [_section(module, item) for item in module.__all__]
    return "\n".join(parts)


if __name__ == "__main__":
    target = Path(__file__).with_name("api.md")
    target.write_text(render())
    sys.stdout.write(f"wrote {target}\n")
