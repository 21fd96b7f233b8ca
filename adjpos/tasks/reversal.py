"""Reversal: ``rev(d...)=`` -> the digits in reverse order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, no_type_check

from adjpos.tasks.base import Draws, Task, param


@dataclass(frozen=True)
class Reversal(Task):
    """Reversal: ``rev(d...)=`` -> the digits reversed, e.g. ``rev(1234)=`` -> ``4321``.

    The sequence has `min_digits` to `max_digits` digits, leading zeros allowed (it is a
    string of digits, not a number); the longest prompt has ``max_digits + 6`` characters
    (22 with the default 16 digits).

    Sampling: the digit count is uniform over `min_digits` .. `max_digits`, then each digit
    is uniform and independent, so every length is equally likely.

    Example:
        >>> print(Reversal().encode_batch(["rev(1234)="]).show(0))
        char   r  e  v  (  1  2  3  4  )  =  4  3  2  1  .
        id    21 18 22 14  3  4  5  6 15 13  6  5  4  3  1
        loss   0  0  0  0  0  0  0  0  0  1  1  1  1  1  0
    """

    name: ClassVar[str] = "reversal"
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"rev\(([0-9]+)\)=")
    form: ClassVar[str] = "rev(d...)="
    min_digits: int = param("fewest digits to reverse", 1)
    max_digits: int = param("most digits to reverse", 16)

    @property
    def max_prompt_len(self) -> int:
        return self.max_digits + len("rev()=")

    @property
    def max_answer_len(self) -> int:
        return self.max_digits

    @property
    def draws_per_prompt(self) -> int:
        return 1 + self.max_digits

    def _parse(self, prompt: str) -> str:
        (digits,) = self._groups(prompt)
        if not self.min_digits <= len(digits) <= self.max_digits:
            raise self._malformed(prompt, f"it has {len(digits)} digits")
        return digits

    def _answer(self, operands: str) -> str:
        return operands[::-1]

    @no_type_check  # called per drawn prompt: kept out of the tests' type checker
    def _draw_prompt(self, draws: Draws) -> str:
        count = draws.integer(self.min_digits, self.max_digits + 1)
        return f"rev({draws.digits(count)})="
