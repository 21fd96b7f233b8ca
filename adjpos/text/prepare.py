"""From text to a `TextTask`: the corpus's splits (`corpus_task`) or a user's own file
(`file_task`), with a tokenizer trained on the train part only, or one given."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from adjpos.runs import atomic_write
from adjpos.text.corpus import SPLITS, read_split
from adjpos.text.data import TextTask
from adjpos.text.tokenizer import encode_text, train_tokenizer
from adjpos.validation import UsageError

VALIDATION_SHARE = 10  # percent of a user's file held out, by chunk hash
CHUNK_LINES = 40


def corpus_task(
    tokenizer: object, context: int, folder: str | os.PathLike | None = None
) -> TextTask:
    """The corpus's train, validation and test splits encoded with `tokenizer` (the corpus is
    fetched first when needed, see `adjpos.text.corpus`)."""
    splits = {name: _ids(tokenizer, read_split(name, folder)) for name in SPLITS}
    return TextTask(context, _vocab_size(tokenizer), splits)


def corpus_tokenizer(vocab_size: int, path: str | os.PathLike) -> object:
    """The tokenizer saved at `path` (a ``tokenizer.json``) or, when there is none yet, one
    trained on the corpus's train split and saved there."""
    from tokenizers import Tokenizer

    path = Path(path)
    if path.is_file():
        tokenizer = Tokenizer.from_file(str(path))
        if tokenizer.get_vocab_size() != vocab_size:
            raise UsageError(
                f"{path} has a vocabulary of {tokenizer.get_vocab_size()}, not {vocab_size}: "
                "remove it or ask for its size"
            )
        return tokenizer
    tokenizer = train_tokenizer(read_split("train"), vocab_size)
    atomic_write(path, lambda tmp: tokenizer.save(tmp))
    return tokenizer


def split_by_chunk_hash(text: str, share: int = VALIDATION_SHARE) -> dict[str, str]:
    """`text` cut into chunks of `CHUNK_LINES` lines; a chunk whose sha256 (as an integer)
    is below `share` percent goes to validation, the rest to train (order kept within each).

    >>> parts = split_by_chunk_hash("".join(f"line {i}\\n" for i in range(4000)))
    >>> sorted(parts), 0 < len(parts["validation"]) < len(parts["train"])
    (['train', 'validation'], True)
    """
    lines = text.splitlines(keepends=True)
    chunks = ["".join(lines[i : i + CHUNK_LINES]) for i in range(0, len(lines), CHUNK_LINES)]
    parts: dict[str, list[str]] = {"train": [], "validation": []}
    for chunk in chunks:
        held = int(hashlib.sha256(chunk.encode()).hexdigest(), 16) % 100 < share
        parts["validation" if held else "train"].append(chunk)
    return {name: "".join(chunks) for name, chunks in parts.items()}


def file_task(
    path: str | os.PathLike,
    context: int,
    *,
    vocab_size: int | None = None,
    tokenizer: object = None,
) -> tuple[TextTask, object]:
    """A `TextTask` from a UTF-8 text file split by chunk hash (`split_by_chunk_hash`), and
    its tokenizer: `tokenizer` when given, else one of `vocab_size` trained on the train part.

    Raises:
        ValueError: the file cannot be read as UTF-8 text, or a part is shorter than a window.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {str(path)!r} as UTF-8 text: {err}") from None
    parts = split_by_chunk_hash(text)
    if tokenizer is None:
        if vocab_size is None:
            raise UsageError("file_task needs a tokenizer or a vocab_size to train one")
        tokenizer = train_tokenizer(parts["train"], vocab_size)
    splits = {name: _ids(tokenizer, part) for name, part in parts.items() if part}
    return TextTask(context, _vocab_size(tokenizer), splits), tokenizer


def _ids(tokenizer: object, text: str) -> torch.Tensor:
    return torch.tensor(encode_text(tokenizer, text), dtype=torch.int32)


def _vocab_size(tokenizer: object) -> int:
    return getattr(tokenizer, "backend_tokenizer", tokenizer).get_vocab_size()
