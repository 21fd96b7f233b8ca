"""The text models' tokenizer: byte-level BPE (Hugging Face ``tokenizers``), trained on the
train split only and shipped beside each model as ``tokenizer.json``.

Byte-level means any text encodes (no unknown token): the 256 byte symbols are always in the
vocabulary, and the merges learned from the train split only make common strings shorter. There
is no special token: the text models see windows cut from running text, never a document start.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from adjpos.runs import atomic_write
from adjpos.validation import UsageError, check_positive_int

TOKENIZER_FILE = "tokenizer.json"
MIN_VOCAB = 257  # the 256 byte symbols and at least one merge


def train_tokenizer(text: str, vocab_size: int) -> object:
    """A byte-level BPE tokenizer with `vocab_size` tokens learned from `text` (deterministic:
    the same text and size give the same tokenizer).

    Example:
        >>> tok = train_tokenizer("to be or not to be " * 50, 300)
        >>> tok.decode(tok.encode("to be, or not").ids)
        'to be, or not'
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    check_positive_int("vocab_size", vocab_size)
    if vocab_size < MIN_VOCAB:
        raise UsageError(
            f"vocab_size must be at least {MIN_VOCAB} (256 bytes + 1), got {vocab_size}"
        )
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=alphabet, show_progress=False
    )
    tokenizer.train_from_iterator(_pieces(text), trainer=trainer)
    return tokenizer


def save_tokenizer(tokenizer: object, folder: str | os.PathLike) -> Path:
    """Write `tokenizer` as ``tokenizer.json`` in `folder` (atomically); returns the file."""
    path = Path(folder) / TOKENIZER_FILE
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)  # a transformers wrapper
    atomic_write(path, lambda tmp: backend.save(tmp))
    return path


def load_tokenizer(folder: str | os.PathLike) -> Any:
    """The tokenizer saved in `folder` (or the ``tokenizer.json`` file itself), as a
    `transformers.PreTrainedTokenizerFast`: ``tok(text)["input_ids"]``, ``tok.decode(ids)``,
    and `adjpos.hf.text_tokens` take it like any Hugging Face tokenizer.

    Raises:
        ValueError: there is no tokenizer file there.
    """
    from transformers import PreTrainedTokenizerFast

    path = Path(folder)
    path = path / TOKENIZER_FILE if path.is_dir() else path
    if not path.is_file():
        raise UsageError(
            f"no {TOKENIZER_FILE} at {path.parent}: a text model's folder holds the tokenizer "
            "it was trained with"
        )
    return PreTrainedTokenizerFast(tokenizer_file=str(path))


def encode_text(tokenizer: object, text: str) -> list[int]:
    """Token ids of `text`: the ids of one ``tokenizer.encode(text)`` call, computed piece by
    piece (`_pieces`) in one batch, which is faster on a long text. `tokenizer` is a
    `tokenizers.Tokenizer` or a `transformers` fast tokenizer wrapping one."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    return [i for enc in backend.encode_batch(_pieces(text)) for i in enc.ids]


def _pieces(text: str) -> list[str]:
    r"""`text` cut before the last newline of each blank line that precedes a non-blank
    character; joined back they give `text`. The byte-level pre-tokenizer (GPT-2's pattern)
    never joins such a newline to what comes before it, and a whitespace run cut before its
    last character splits at the end of a piece just as it does inside the whole text, so the
    pieces encode to the same ids.

    >>> _pieces("a\n\nb\n \n\nc")
    ['a\n', '\nb\n \n', '\nc']
    """
    return [piece for piece in re.split(r"(?<=\n)(?=\n\S)", text) if piece]
