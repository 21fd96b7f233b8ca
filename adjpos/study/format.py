"""How the report writes numbers, lists, tables and sections: one small set of helpers every
claim uses. Tables are markdown, number columns right-aligned, a ``|`` inside a cell escaped, a
column with nothing in any row left out (and named below the table), and no "-0.000".
"""

from __future__ import annotations

import functools
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# The most rows a table of the report shows: a longer one is summed up there and kept whole in
# the run's results/.
LONG = 50


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table: a column is right-aligned when every value in it is a number (or
    empty), left-aligned otherwise. A column that holds nothing in any row (blank, or one
    `MISSING` word such as "not probed" in every row) is left out, and a line below the table
    names it and why; a zero never prints as "-0.000"."""
    cells = [[_UNSIGNED_ZERO.sub(r"\1", n(v)) for v in row] for row in rows]
    empty = [i for i in range(len(header)) if rows and {row[i] for row in cells} <= MISSING]
    kept = [i for i in range(len(header)) if i not in empty]
    numeric = [
        all(_is_number(row[i]) or row[i] is None for row in rows) and any(rows) for i in kept
    ]
    lines = ["| " + " | ".join(header[i].replace("|", "\\|") for i in kept) + " |"]
    lines.append("|" + "|".join("---:" if num else ":---" for num in numeric) + "|")
    lines += ["| " + " | ".join(row[i].replace("|", "\\|") for i in kept) + " |" for row in cells]
    for word in dict.fromkeys(cells[0][i] for i in empty):
        names = [header[i] for i in empty if cells[0][i] == word]
        why = f"{word} in every row" if word else "no value in any row"
        lines.append(f"\n*Not shown: {'; '.join(names)} ({why}).*")
    return "\n".join(lines)


def n(value: Any) -> str:
    """A number or value as prose: floats to 3 decimals, lists joined, nothing (None or NaN) as
    a blank."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return join(value) or "none"
    if isinstance(value, dict):  # a sub-grid: its axes
        return " x ".join(f"{k} ({join(v)})" for k, v in value.items())
    return str(value)


def join(values: Sequence[Any]) -> str:
    """Values joined by commas (by semicolons when they are sub-grids); a None among them (an
    unset option, e.g. no normalization) as "none"."""
    joiner = "; " if any(isinstance(v, dict) for v in values) else ", "
    return joiner.join("none" if v is None else n(v) for v in values)


def span(value: Any, low: Any, high: Any, *, missing: str = "no interval") -> str:
    """'value (low to high)', or 'value (`missing`)' where a bound is missing (None or NaN):
    `missing` says why."""
    if n(low) == "" or n(high) == "":
        return f"{n(value)} ({missing})"
    return f"{n(value)} ({n(low)} to {n(high)})"


def layers(found: Sequence[int]) -> str:
    """'layer 2' or 'layers 1, 3'."""
    return f"layer{'s' if len(found) > 1 else ''} {join(found)}"


def score(entry: Mapping[str, Any] | None) -> str:
    """'value ± standard error (layer)'; the std over seeds where there is no standard error."""
    if entry is None:
        return "not probed"
    for key in ("sem", "std"):
        error = entry.get(key)
        if error is not None and error == error:  # NaN: not measured
            return f"{entry['value']:.2f} ± {error:.2f} ({entry['layer']})"
    return f"{entry['value']:.2f} ({entry['layer']})"


def captioned(captions: Mapping[str, str], **drawn: Any) -> dict[str, tuple[Any, str]]:
    """A claim's figures: each drawn figure (by stem) with its caption from `captions`."""
    return {stem: (fig, captions[stem]) for stem, fig in drawn.items()}


def section(*parts: str) -> str:
    """A report section: its parts (figures, tables, paragraphs) in order, a blank line
    apart, empty ones left out."""
    return "\n\n".join(part for part in parts if part)


def figure(path: str, caption: str, png: bool, *, links: bool, frame: tuple | None) -> str:
    """A figure embedded in a `frame` of (width, height) pixels that holds it whole (for
    ``report.html``), or with no frame its PNG inline with a link to the interactive HTML."""
    if frame is not None:
        width, height = frame
        return (
            f'<figure><iframe src="{path}.html" width="{width}" height="{height}" '
            f'scrolling="no" style="border:0;display:block"></iframe>'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    image = f"![{caption}]({path}.png)\n\n" if png else ""
    link = f" ([interactive figure]({path}.html))" if links else ""
    return f"{image}*{caption}*{link}"


def text(name: str, **values: Any) -> str:
    """The report's prose `name` (``CLAIM.PART``: in ``report.txt``, after a line ``[name]``),
    with `values` filled in."""
    return _texts()[name].format(**values) if values else _texts()[name]


def texts(prefix: str, **values: Any) -> dict[str, str]:
    """Every text named ``prefix.KEY`` (see `text`), by KEY: a claim's captions."""
    found = [k.removeprefix(f"{prefix}.") for k in _texts() if k.startswith(f"{prefix}.")]
    return {key: text(f"{prefix}.{key}", **values) for key in found}


@functools.cache
def _texts() -> dict[str, str]:
    found = re.split(r"^\[([\w.]+)\]\n", read("report.txt"), flags=re.MULTILINE)
    return {name: body.rstrip("\n") for name, body in zip(found[1::2], found[2::2], strict=True)}


def read(name: str) -> str:
    """A data file of the study's package (``report.txt``, ``report.html``)."""
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


# The words a cell says when it holds nothing.
MISSING = {"", "not probed", "not measured"}
# A zero printed with a sign ("-0.000", "-0.00"), from a tiny negative number.
_UNSIGNED_ZERO = re.compile(r"-(0\.0+)(?![0-9])")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)
