"""Write docs/api.md from the public API's signatures and docstrings.

    python docs/make_api.py

The test suite checks that docs/api.md equals this script's output, so the page cannot rot.
"""

import dataclasses
import inspect
import sys
from pathlib import Path

import adjpos

HEADER = """# API reference

Everything below is importable from the top level (`import adjpos`). Shapes use
TransformerLens's dimension names; `*batch` is any number of leading dimensions.
This page is generated from the docstrings by `python docs/make_api.py`.
"""


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


def _section(name: str) -> str:
    obj = getattr(adjpos, name)
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
        return f"## `{name}`\n\n{inspect.getdoc(obj)}\n\n{table}"
    if callable(obj):
        signature = f"```text\nadjpos.{name}{_signature(obj)}\n```"
        return f"## `{name}`\n\n{signature}\n\n{inspect.getdoc(obj)}\n"
    return f"## `{name}`\n\n`{obj!r}`\n"


def render() -> str:
    """The whole page."""
    return HEADER + "\n" + "\n".join(_section(name) for name in adjpos.__all__)


if __name__ == "__main__":
    target = Path(__file__).with_name("api.md")
    target.write_text(render())
    sys.stdout.write(f"wrote {target}\n")
