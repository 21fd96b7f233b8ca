"""Checks of inputs that the commands share and that need a look outside: a GGUF file, read
before a model is built from it."""

from __future__ import annotations

from pathlib import Path

from adjpos.cli._options import for_option
from adjpos.validation import UsageError


def check_hf_gguf(source: str) -> None:
    """``--hf SOURCE`` naming a GGUF file (or a folder holding one): a complete one."""
    from adjpos.models.gguf import find_gguf

    gguf = for_option("--hf", find_gguf, source)
    if gguf is not None:
        for_option("--hf", check_gguf_file, gguf)


def check_gguf_file(path: Path) -> None:
    """Raise naming `path` unless it is a complete GGUF file: it starts with the GGUF magic, and
    the gguf package reads its header, metadata and the tensors the header announces (a file
    cut short fails there). Checked before a model is built from it."""
    import struct

    from adjpos.models.gguf import check_gguf_reader

    with path.open("rb") as handle:
        magic = handle.read(4)
    if not magic:
        raise UsageError(f"{path}: the file is empty, not a GGUF file")
    if magic != b"GGUF":
        raise UsageError(
            f"{path}: not a GGUF file (it does not start with the GGUF magic bytes, b'GGUF')"
        )
    check_gguf_reader()
    from gguf import GGUFReader

    try:
        GGUFReader(path)
    except (ValueError, IndexError, struct.error):  # the reader's errors on a short file
        raise UsageError(
            f"{path}: not a complete GGUF file ({path.stat().st_size} bytes): its header or "
            "the tensor data it announces is cut short or damaged"
        ) from None

