"""The one character vocabulary every synthetic task shares.

A token id is the index of its character in `VOCAB` (25 characters, fixed):

=======  =========================================================
ids      characters
=======  =========================================================
0        ``_`` padding (`PAD`, `PAD_ID`)
1        ``.`` end of answer (`EOS`, `EOS_ID`)
2 - 11   the digits ``0`` - ``9`` (id = digit + 2)
12 - 16  ``+ = ( ) ,``
17 - 24  ``d e h o r v w x``, the letters of ``rev``, ``wherex`` and ``ord``
=======  =========================================================

Padding is id 0, so a zero-filled tensor is all padding. ``_`` and ``.`` occur in no prompt and
no answer, so the string form of a padded sequence reads unambiguously, e.g. ``12+3=15.___``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from adjpos.validation import UsageError

PAD = "_"
EOS = "."
VOCAB = PAD + EOS + "0123456789" + "+=()," + "dehorvwx"
VOCAB_SIZE = len(VOCAB)
PAD_ID = VOCAB.index(PAD)
EOS_ID = VOCAB.index(EOS)

_IDS = {char: index for index, char in enumerate(VOCAB)}


def check_text(text: str) -> None:
    """Raise `ValueError` naming the first character of `text` outside `VOCAB`.

    Example:
        >>> check_text("12+3=")
        >>> check_text("12*3=")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        adjpos.validation.UsageError: character '*' at index 2 of '12*3=' is not in the ...
    """
    if not isinstance(text, str):
        raise UsageError(f"text must be a str, got {type(text).__name__}")
    for index, char in enumerate(text):
        if char not in _IDS:
            raise UsageError(
                f"character {char!r} at index {index} of {text!r} is not in the vocabulary; "
                f"allowed characters: {VOCAB!r}"
            )


def encode_ids(text: str) -> list[int]:
    """Token ids of `text` as a list (see `encode`)."""
    check_text(text)
    return [_IDS[char] for char in text]


def encode(text: str) -> Int[Tensor, " pos"]:
    """Token ids of `text`, one per character, as an int64 tensor.

    Raises:
        ValueError: a character is not in `VOCAB` (the message names it and the allowed set).

    Example:
        >>> encode("rev(07)=")
        tensor([21, 18, 22, 14,  2,  9, 15, 13])
    """
    return torch.tensor(encode_ids(text), dtype=torch.long)


def decode(tokens: Int[Tensor, " pos"] | Sequence[int]) -> str:
    """The characters of a 1-D sequence of token ids; padding decodes to ``_``.

    Raises:
        ValueError: an id is outside ``0 .. VOCAB_SIZE - 1``.

    Example:
        >>> decode(encode("1+2=3."))
        '1+2=3.'
    """
    ids = tokens.tolist() if isinstance(tokens, Tensor) else list(tokens)
    bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < VOCAB_SIZE]
    if bad:
        raise UsageError(
            f"token ids {bad[:5]} are not in the vocabulary; ids run from 0 to {VOCAB_SIZE - 1}"
        )
    return "".join(VOCAB[i] for i in ids)


def show_tokens(tokens: Int[Tensor, " pos"], loss_mask: Bool[Tensor, " pos"] | None = None) -> str:
    """Aligned rows of characters, ids and (when given) the loss mask as 1 / 0.

    Example:
        >>> print(show_tokens(encode("1+2=3.")))
        char   1  +  2  =  3  .
        id     3 12  4 13  5  1
    """
    rows = {"char": list(decode(tokens)), "id": tokens.tolist()}
    if loss_mask is not None:
        rows["loss"] = [int(flag) for flag in loss_mask.tolist()]
    return "\n".join(f"{label:<5}" + "".join(f"{v:>3}" for v in row) for label, row in rows.items())
