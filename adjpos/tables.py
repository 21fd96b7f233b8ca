"""Tidy tables: long-format results (one row per measurement) with declared column types.

Every CSV adjpos writes goes through `Table.write` and is read back by `Table.read`, so a
column's type never depends on guessing from the text (integers stay integers, a string column
never turns into numbers).

Example:
    >>> import tempfile
    >>> scores = Table(task="string", layer="int64", adjacency="float64")
    >>> path = tempfile.mkdtemp() + "/scores.csv"
    >>> _ = scores.write(path, [{"task": "addition", "layer": 1, "adjacency": 0.75}])
    >>> frame = scores.read(path)
    >>> frame.dtypes.astype(str).tolist(), frame.loc[0, "adjacency"]
    (['string', 'int64', 'float64'], np.float64(0.75))
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from adjpos.validation import UsageError

if TYPE_CHECKING:  # pandas is imported by the methods that use it: `import adjpos` stays light
    import pandas as pd

from adjpos.runs import write_text

DTYPES = ("string", "int64", "Int64", "float64", "boolean")


def with_interval(*names: str) -> dict[str, str]:
    """Float columns of each of `names` with its interval: ``NAME``, ``NAME_low``,
    ``NAME_high``."""
    return {f"{n}{end}": "float64" for n in names for end in ("", "_low", "_high")}


class Table:
    """The columns of one kind of table, in order, each with its pandas dtype (one of
    `DTYPES`; ``Int64`` is an integer column that may be missing)."""

    def __init__(self, **columns: str) -> None:
        bad = {name: kind for name, kind in columns.items() if kind not in DTYPES}
        if bad or not columns:
            raise ValueError(f"column types {bad} are not allowed; choose from {list(DTYPES)}")
        self.columns: dict[str, str] = dict(columns)

    def __repr__(self) -> str:
        return f"Table({', '.join(f'{k}={v!r}' for k, v in self.columns.items())})"

    def __add__(self, other: Table) -> Table:
        return Table(**self.columns, **other.columns)

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def frame(self, rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
        """`rows` (dicts or a DataFrame) as a DataFrame with exactly these columns and types
        (a `ValueError` for a missing or extra column, or a value that does not fit)."""
        import pandas as pd

        data = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        if data.empty and not len(data.columns):
            data = pd.DataFrame(columns=self.names)
        missing = [n for n in self.names if n not in data.columns]
        extra = [n for n in data.columns if n not in self.columns]
        if missing or extra:
            raise ValueError(
                f"table columns do not match: missing {missing}, unexpected {extra}; "
                f"expected {self.names}"
            )
        try:
            frame = data[self.names].astype(self.columns).reset_index(drop=True)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"a value does not fit its column type {self.columns}: {err}"
            ) from None
        for name in (n for n, kind in self.columns.items() if kind == "string"):
            if frame[name].str.contains(r"[\r\n]", regex=True).any():
                raise ValueError(f"column {name!r} holds a line break; table strings are one line")
            # CSV cannot tell an empty string from a missing one: both are missing here.
            frame[name] = frame[name].mask(frame[name] == "")
        return frame

    def write(self, path: str | os.PathLike, rows: Any) -> pd.DataFrame:
        """Write `rows` as CSV to `path` atomically; returns the typed frame."""
        frame = self.frame(rows)
        write_text(path, frame.to_csv(index=False, lineterminator="\n"))
        return frame

    def read(self, path: str | os.PathLike) -> pd.DataFrame:
        """The table at `path` with these columns and types (a `ValueError` when its header is
        not these columns)."""
        import pandas as pd

        header = pd.read_csv(path, nrows=0).columns.tolist()
        if header != self.names:
            raise UsageError(f"{path} has columns {header}; expected {self.names}")
        kinds = {n: ("string" if k == "string" else None) for n, k in self.columns.items()}
        frame = pd.read_csv(
            path,
            dtype={n: k for n, k in kinds.items() if k},
            keep_default_na=False,
            na_values={n: [""] for n in self.names},
        )
        return self.frame(frame)


def plain_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as plain JSON-able dicts (numpy and pandas scalars become Python ones,
    missing values None)."""
    import pandas as pd

    return [
        {k: None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]


def config_table(cls: Any, names: Iterable[str]) -> Table:
    """The columns of dataclass `cls`'s fields `names`, typed from their annotations (so a
    sweep over `ModelConfig` fields reads back as the config's types)."""
    fields = {f.name: str(f.type).replace(" ", "") for f in dataclasses.fields(cls)}
    dtypes = (("bool", "boolean"), ("int", "Int64"), ("float", "float64"))
    columns = {}
    for name in names:
        columns[name] = next((t for start, t in dtypes if fields[name].startswith(start)), "string")
    return Table(**columns)
