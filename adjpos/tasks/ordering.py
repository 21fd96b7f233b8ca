"""Ordering: ``ord(o,r)=`` -> for each digit of ``r``, its index in ``o``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, no_type_check

from adjpos.tasks.base import Draws, Task, param


@dataclass(frozen=True)
class Ordering(Task):
    """Ordering: ``ord(o,r)=`` -> the 0-based index in ``o`` of each digit of ``r``, in order.

    ``o`` has `min_digits` to `max_digits` distinct digits (at most 10) and ``r`` is a
    permutation of ``o``, e.g. ``ord(5831,3851)=`` -> ``2103``: ``3`` is at index 2 of
    ``5831``, ``8`` at 1, ``5`` at 0 and ``1`` at 3. The answer has one character per digit.
    The longest prompt has ``2 * max_digits + 7`` characters (17 with the default 5 digits).

    Sampling: the digit count is uniform over `min_digits` .. `max_digits`, ``o`` is uniform
    over the sequences of that many distinct digits and ``r`` is a uniform permutation of
    ``o`` (so ``r == o``, the answer ``0123...``, is possible).

    Example:
        >>> print(Ordering().encode_batch(["ord(5831,3851)="]).show(0))
        char   o  r  d  (  5  8  3  1  ,  3  8  5  1  )  =  2  1  0  3  .
        id    20 21 17 14  7 10  5  3 16  5 10  7  3 15 13  4  3  2  5  1
        loss   0  0  0  0  0  0  0  0  0  0  0  0  0  0  1  1  1  1  1  0
    """

    name: ClassVar[str] = "ordering"
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"ord\(([0-9]+),([0-9]+)\)=")
    form: ClassVar[str] = "ord(o,r)="
    min_digits: int = param("fewest digits to order", 1)
    max_digits: int = param("most digits to order (at most 10: digits are distinct)", 5)
    digit_limit: ClassVar[int | None] = 10

    @property
    def max_prompt_len(self) -> int:
        return 2 * self.max_digits + len("ord(,)=")

    @property
    def max_answer_len(self) -> int:
        return self.max_digits

    @property
    def prompt_format(self) -> str:
        return (
            f"'ord(o,r)=' with o of {self.min_digits} to {self.max_digits} distinct digits "
            "and r a permutation of o"
        )

    @property
    def draws_per_prompt(self) -> int:
        return 1 + 9 + self.max_digits

    def _parse(self, prompt: str) -> tuple[str, str]:
        original, reordered = self._groups(prompt)
        if not self.min_digits <= len(original) <= self.max_digits:
            raise self._malformed(prompt, f"o has {len(original)} digits")
        if len(set(original)) != len(original):
            raise self._malformed(prompt, f"the digits of o={original!r} are not distinct")
        if sorted(reordered) != sorted(original):
            raise self._malformed(prompt, f"r={reordered!r} is not a permutation of o")
        return original, reordered

    def _answer(self, operands: tuple[str, str]) -> str:
        original, reordered = operands
        return "".join(str(original.index(digit)) for digit in reordered)

    @no_type_check  # called per drawn prompt: kept out of the tests' type checker
    def _draw_prompt(self, draws: Draws) -> str:
        count = draws.integer(self.min_digits, self.max_digits + 1)
        original = draws.permutation("0123456789")[:count]
        return f"ord({original},{draws.permutation(original)})="
