"""Decimal addition: ``a+b=`` -> ``a + b``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, no_type_check

from adjpos.tasks.base import Draws, Task, param
from adjpos.validation import UsageError


@dataclass(frozen=True)
class Addition(Task):
    """Decimal addition: ``a+b=`` -> the decimal sum, e.g. ``123+456=`` -> ``579``.

    Operands have `min_digits` to `max_digits` digits and no leading zeros (``0`` itself is a
    one-digit operand), and the prompt has at most `max_prompt_len` characters, ``=``
    included. With the defaults (1 to 4 digits, 9 characters) two 4-digit operands do not fit
    (``1234+5678=`` has 10 characters); the 15 other digit-count pairs do.

    Sampling: the pair of digit counts is uniform over the pairs that fit, then each operand
    is uniform over the numbers with its digit count (0 to 9 for one digit). Every pair of
    digit counts is equally likely, so short prompts are far more frequent than their share
    of all possible prompts.

    Example:
        >>> print(Addition().encode_batch(["123+456="]).show(0))
        char   1  2  3  +  4  5  6  =  5  7  9  .
        id     3  4  5 12  6  7  8 13  7  9 11  1
        loss   0  0  0  0  0  0  0  1  1  1  1  0
    """

    name: ClassVar[str] = "addition"
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"([0-9]+)\+([0-9]+)=")
    form: ClassVar[str] = "a+b="
    min_digits: int = param("fewest digits of an operand", 1)
    max_digits: int = param("most digits of an operand", 4)
    max_prompt_len: int = param("longest prompt in characters, '=' included", 9)

    def __post_init__(self) -> None:
        super().__post_init__()
        shortest = 2 * self.min_digits + 2
        if not isinstance(self.max_prompt_len, int) or self.max_prompt_len < shortest:
            raise UsageError(
                f"max_prompt_len must be an int >= {shortest} (two operands of min_digits="
                f"{self.min_digits} plus '+' and '='), got {self.max_prompt_len!r}"
            )

    @property
    def digit_pairs(self) -> tuple[tuple[int, int], ...]:
        """The (digits of a, digits of b) pairs that fit in `max_prompt_len`, sampled evenly."""
        counts = range(self.min_digits, self.max_digits + 1)
        return tuple((i, j) for i in counts for j in counts if i + j + 2 <= self.max_prompt_len)

    @property
    def max_answer_len(self) -> int:
        return max(max(pair) for pair in self.digit_pairs) + 1

    @property
    def prompt_format(self) -> str:
        return (
            f"'a+b=' with a, b of {self.min_digits} to {self.max_digits} digits without "
            f"leading zeros, at most {self.max_prompt_len} characters"
        )

    @property
    def draws_per_prompt(self) -> int:
        return 1 + 2 * self.max_digits

    def _parse(self, prompt: str) -> tuple[int, int]:
        operands = self._groups(prompt)
        for operand in operands:
            if len(operand) > 1 and operand[0] == "0":
                raise self._malformed(prompt, f"operand {operand!r} has a leading zero")
            if not self.min_digits <= len(operand) <= self.max_digits:
                raise self._malformed(prompt, f"operand {operand!r} has {len(operand)} digits")
        if len(prompt) > self.max_prompt_len:
            raise self._malformed(prompt, f"it has {len(prompt)} characters")
        return int(operands[0]), int(operands[1])

    def _answer(self, operands: tuple[int, int]) -> str:
        return str(operands[0] + operands[1])

    @no_type_check  # called per drawn prompt: kept out of the tests' type checker
    def _draw_prompt(self, draws: Draws) -> str:
        pairs = self.digit_pairs
        digits_a, digits_b = pairs[draws.integer(0, len(pairs))]
        return f"{_draw_number(draws, digits_a)}+{_draw_number(draws, digits_b)}="


@no_type_check  # called per drawn number: kept out of the tests' type checker
def _draw_number(draws: Draws, digits: int) -> str:
    """A uniform number of exactly `digits` digits, without leading zeros."""
    if digits == 1:
        return draws.digits(1)
    return str(draws.integer(1, 10)) + draws.digits(digits - 1)
