"""The held-out split: a fixed, deterministic function of the prompt string.

A prompt is in the test split when the first 8 bytes of its SHA-256 digest, read as a fraction
of 2**64, fall below `TEST_FRACTION`. The split depends on the prompt alone, not on any task
parameter, generator or run, so a test prompt stays a test prompt when, say, `max_digits`
grows, and ``sample(split="train")`` can never emit one.
"""

from __future__ import annotations

import hashlib
from typing import no_type_check

from adjpos.validation import UsageError, check_choice

SPLITS = ("train", "test")
TEST_FRACTION = 0.1


@no_type_check  # called for every drawn prompt; it checks its own input
def split_of(prompt: str) -> str:
    """``"test"`` for about `TEST_FRACTION` of all prompts (by hash), else ``"train"``.

    Example:
        >>> split_of("rev(1234)="), split_of("rev(5)=")
        ('train', 'test')
    """
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
    digest = hashlib.sha256(prompt.encode("utf-8")).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if unit < TEST_FRACTION else "train"


def check_split(split: str) -> None:
    """Raise `ValueError` unless `split` is one of `SPLITS`."""
    check_choice("split", split, SPLITS)
