"""Slow, obviously correct answers to the four tasks, written independently of adjpos."""

from types import SimpleNamespace

import pytest


def add_digits(a: str, b: str) -> str:
    """Schoolbook addition of two decimal strings, right to left with a carry."""
    a, b = a.zfill(len(b)), b.zfill(len(a))
    out, carry = [], 0
    for x, y in zip(reversed(a), reversed(b), strict=True):
        carry, digit = divmod(int(x) + int(y) + carry, 10)
        out.append(str(digit))
    if carry:
        out.append(str(carry))
    return "".join(reversed(out)).lstrip("0") or "0"


def reverse_digits(digits: str) -> str:
    out = ""
    for char in digits:
        out = char + out
    return out


def first_index(digits: str, query: str) -> str:
    for position, char in enumerate(digits):
        if char == query:
            return str(position)
    raise AssertionError("query does not occur")


def order_indices(original: str, reordered: str) -> str:
    where = {char: position for position, char in enumerate(original)}
    return "".join(str(where[char]) for char in reordered)


def reference_answer(name: str, prompt: str) -> str:
    """The answer to a well-formed prompt of task `name`, by plain string slicing."""
    body = prompt[:-1]  # drop "="
    if name == "addition":
        return add_digits(*body.split("+"))
    inner = body[body.index("(") + 1 : -1]
    if name == "reversal":
        return reverse_digits(inner)
    if name == "indexing":
        return first_index(*inner.split(","))
    if name == "ordering":
        return order_indices(*inner.split(","))
    raise AssertionError(name)


@pytest.fixture(scope="session")
def reference():
    """The slow reference functions, by name (test modules cannot import a conftest)."""
    return SimpleNamespace(
        add_digits=add_digits,
        reverse_digits=reverse_digits,
        first_index=first_index,
        order_indices=order_indices,
        answer=reference_answer,
    )
