"""Shared option helpers: one option per config field, small parsers, atomic text files."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any


def add_config_args(
    parser: argparse.ArgumentParser,
    cls: Any = None,
    *,
    title: str = "model (ModelConfig fields)",
    overrides: dict[str, Any] | None = None,
    rename: dict[str, str] | None = None,
) -> None:
    """One option per field of a config dataclass; its help text is the field's own.

    `overrides` changes defaults (None: decided later); `rename` maps field -> option name
    (the parsed value lands under the new name).
    """
    if cls is None:
        from adjpos.models import ModelConfig as cls
    overrides, rename = overrides or {}, rename or {}
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        name = rename.get(field.name, field.name)
        default = overrides.get(field.name, field.default)
        shown = "fits the task" if field.name in overrides else default
        help_text = f"{field.metadata.get('help', '')} (default: {shown})"
        flag = "--" + name.replace("_", "-")
        if field.type in (bool, "bool"):
            group.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=help_text,
                dest=name,
            )
        else:
            group.add_argument(
                flag, type=parse_for(field), default=default, help=help_text, dest=name
            )


def parse_for(field: dataclasses.Field) -> Any:
    kinds = {"int": int, "float": float, "str": str}
    names = str(field.type).replace(" ", "").split("|")
    base = next((kinds[n] for n in names if n in kinds), str)

    def parse(text: str) -> Any:
        if "None" in names and text.lower() == "none" and field.name != "positional":
            return None
        return base(text)

    parse.__name__ = base.__name__
    return parse


def config_values(
    args: argparse.Namespace, cls: Any = None, rename: dict[str, str] | None = None
) -> dict[str, Any]:
    if cls is None:
        from adjpos.models import ModelConfig as cls
    rename = rename or {}
    return {f.name: getattr(args, rename.get(f.name, f.name)) for f in dataclasses.fields(cls)}


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def comma_ints(text: str) -> list[int]:
    try:
        return [int(item) for item in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None


def task_params(items: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--task-param takes NAME=VALUE, got {item!r}")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    return params


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, creating its folder."""
    from adjpos.runs import write_text as write_atomically

    write_atomically(path, text)
