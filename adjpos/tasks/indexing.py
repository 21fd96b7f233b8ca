"""Indexing: ``wherex(d...,q)=`` -> the 0-based position of the first ``q``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, no_type_check

from adjpos.tasks.base import Draws, Task, param


@dataclass(frozen=True)
class Indexing(Task):
    """Indexing: ``wherex(d...,q)=`` -> the 0-based position of the first occurrence of ``q``.

    For example ``wherex(134504392,4)=`` -> ``2``. The sequence has `min_digits` to
    `max_digits` digits and ``q`` always occurs in it; the longest prompt has
    ``max_digits + 11`` characters (20 with the default 9 digits). The answer is written in
    decimal (one character while `max_digits` <= 10).

    Sampling: the digit count is uniform over `min_digits` .. `max_digits`, each digit is
    uniform and independent, and ``q`` is the digit at a uniformly chosen position. The answer
    is the first occurrence of that digit, so small answers are more frequent than large ones.

    Example:
        >>> print(Indexing().encode_batch(["wherex(134504392,4)="]).show(0))
        char   w  h  e  r  e  x  (  1  3  4  5  0  4  3  9  2  ,  4  )  =  2  .
        id    23 19 18 21 18 24 14  3  5  6  7  2  6  5 11  4 16  6 15 13  4  1
        loss   0  0  0  0  0  0  0  0  0  0  0  0  0  0  0  0  0  0  0  1  1  0
    """

    name: ClassVar[str] = "indexing"
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"wherex\(([0-9]+),([0-9])\)=")
    form: ClassVar[str] = "wherex(d...,q)="
    min_digits: int = param("fewest digits to search", 1)
    max_digits: int = param("most digits to search", 9)

    @property
    def max_prompt_len(self) -> int:
        return self.max_digits + len("wherex(,q)=")

    @property
    def max_answer_len(self) -> int:
        return len(str(self.max_digits - 1))

    @property
    def prompt_format(self) -> str:
        return super().prompt_format + " and a digit q that occurs among them"

    @property
    def draws_per_prompt(self) -> int:
        return 2 + self.max_digits

    def _parse(self, prompt: str) -> tuple[str, str]:
        digits, query = self._groups(prompt)
        if not self.min_digits <= len(digits) <= self.max_digits:
            raise self._malformed(prompt, f"it has {len(digits)} digits")
        if query not in digits:
            raise self._malformed(prompt, f"q={query!r} does not occur in {digits!r}")
        return digits, query

    def _answer(self, operands: tuple[str, str]) -> str:
        digits, query = operands
        return str(digits.index(query))

    @no_type_check  # called per drawn prompt: kept out of the tests' type checker
    def _draw_prompt(self, draws: Draws) -> str:
        count = draws.integer(self.min_digits, self.max_digits + 1)
        digits = draws.digits(count)
        query = digits[draws.integer(0, count)]
        return f"wherex({digits},{query})="
