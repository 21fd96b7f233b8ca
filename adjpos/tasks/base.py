"""`Task`, the contract every synthetic task follows, and `TaskBatch`, what it samples.

Sequence layout, shared by all tasks: the prompt's characters, the answer's characters, then
`EOS`, right-padded with `PAD_ID` to the task's `max_len`. For a prompt of P characters and an
answer of A characters the sequence has L = P + A + 1 real tokens, and

    loss_mask[t] is True  <=>  P - 1 <= t <= L - 2,

i.e. exactly at the positions whose next token (t + 1) is an answer character or the EOS,
aligned for the standard next-token loss where the logits at position t predict token t + 1.
The EOS position itself and the padding are never in the mask.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, no_type_check

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from adjpos.tasks import vocab
from adjpos.tasks.split import TEST_FRACTION, check_split, split_of
from adjpos.validation import UsageError, check_generator, check_positive_int, help_field

# Every draw reduces a random 62-bit integer modulo a range of at most a few dozen values, so
# its bias (range / 2**62) is far below anything sampling could detect.
_RANDOM_HIGH = 2**62
# Rejection rounds before giving up on a split that holds (almost) no prompts of the task.
_MAX_ROUNDS = 20


param = help_field  # a task parameter: a dataclass field whose help documents it


@dataclass(frozen=True)
class TaskBatch:
    """A batch of ``prompt + answer + EOS`` sequences, right-padded with `PAD_ID`.

    Attributes:
        tokens: token ids; row i holds ``lengths[i]`` real tokens, then padding.
        loss_mask: True exactly where the next token is an answer character or the EOS (see
            the module docstring); ``tokens[i, 1:][loss_mask[i, :-1]]`` is answer + EOS.
        lengths: real tokens per row, EOS included.
        prompts: the prompt strings.
        answers: the answer strings, without the EOS.
    """

    tokens: Int[Tensor, "batch pos"]
    loss_mask: Bool[Tensor, "batch pos"]
    lengths: Int[Tensor, " batch"]
    prompts: tuple[str, ...]
    answers: tuple[str, ...]

    @property
    def answer_rows(self) -> Bool[Tensor, "batch pos"]:
        """True at the answer characters and the EOS (the rows a model writes); the prompt
        rows are ``~answer_rows`` within each length. For `adjacency_score(..., rows=...)`."""
        rows = torch.zeros_like(self.loss_mask)
        rows[:, 1:] = self.loss_mask[:, :-1]
        return rows

    def show(self, row: int) -> str:
        """Characters, ids and loss mask of one row, padding left out (`vocab.show_tokens`)."""
        length = int(self.lengths[row])
        return vocab.show_tokens(self.tokens[row, :length], self.loss_mask[row, :length])


@no_type_check  # called for every draw: kept out of the tests' runtime type checker
class Draws:
    """Uniform integer draws read off one row of random 62-bit integers.

    Each task draws its prompts from a fixed budget of random integers per prompt, so one
    call to the generator serves a whole batch.
    """

    def __init__(self, values: list[int]) -> None:
        self._values = iter(values)

    def integer(self, low: int, high: int) -> int:
        """A uniform integer in ``[low, high)``."""
        return low + next(self._values) % (high - low)

    def digits(self, count: int) -> str:
        """`count` independent uniform decimal digits."""
        return "".join(str(self.integer(0, 10)) for _ in range(count))

    def permutation(self, items: str) -> str:
        """A uniform permutation of `items` (Fisher-Yates, ``len(items) - 1`` draws)."""
        chars = list(items)
        for i in range(len(chars) - 1, 0, -1):
            j = self.integer(0, i + 1)
            chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)


class Task(abc.ABC):
    """A synthetic task: prompts with exactly one correct answer, sampled reproducibly.

    Subclasses are frozen dataclasses whose fields are the task's parameters, `min_digits` and
    `max_digits` among them; invalid values raise `ValueError`. Randomness comes only from the
    `torch.Generator` passed to `sample` or `draw_prompts` (a CPU generator).
    """

    name: ClassVar[str]
    digit_limit: ClassVar[int | None] = None  # the most digits a prompt's run may hold
    # A prompt matches `pattern` whole, one group per run (the stretches that vary between
    # prompts); `form` is the pattern in words.
    pattern: ClassVar[re.Pattern[str]]
    form: ClassVar[str]
    encode = staticmethod(vocab.encode)
    decode = staticmethod(vocab.decode)

    @property
    @abc.abstractmethod
    def max_prompt_len(self) -> int:
        """Longest prompt in characters, ``=`` included."""

    @property
    @abc.abstractmethod
    def max_answer_len(self) -> int:
        """Longest answer in characters, EOS excluded."""

    @property
    def prompt_format(self) -> str:
        """The prompt format in words, quoted by the error for a malformed prompt."""
        return f"{self.form!r} with {self.min_digits} to {self.max_digits} digits"

    @property
    @abc.abstractmethod
    def draws_per_prompt(self) -> int:
        """An upper bound on the `Draws` one call of `_draw_prompt` consumes."""

    @abc.abstractmethod
    def _parse(self, prompt: str) -> Any:
        """Operands of `prompt` (already known to use vocabulary characters only)."""

    @abc.abstractmethod
    def _answer(self, operands: Any) -> str:
        """The answer for parsed operands."""

    @abc.abstractmethod
    def _draw_prompt(self, draws: Draws) -> str:
        """One prompt from the task's distribution (both splits)."""

    def __post_init__(self) -> None:
        """Check ``1 <= min_digits <= max_digits (<= digit_limit)``, all ints."""
        check_positive_int("min_digits", self.min_digits)
        check_positive_int("max_digits", self.max_digits)
        if self.min_digits > self.max_digits:
            raise UsageError(
                f"min_digits={self.min_digits} must not exceed max_digits={self.max_digits}"
            )
        if self.digit_limit is not None and self.max_digits > self.digit_limit:
            raise UsageError(
                f"max_digits must be between 1 and {self.digit_limit}, got {self.max_digits}"
            )

    @property
    def max_len(self) -> int:
        """Width of a sampled batch: longest prompt + longest answer + EOS."""
        return self.max_prompt_len + self.max_answer_len + 1

    def to_dict(self) -> dict[str, Any]:
        """The task's parameters; ``get_task(task.name, **task.to_dict())`` rebuilds it."""
        return dataclasses.asdict(self)

    def check(self, prompt: str) -> None:
        """Raise `ValueError` naming the problem unless `prompt` is a valid prompt."""
        self.solve(prompt)

    def solve(self, prompt: str) -> str:
        """The answer to `prompt` (no EOS); a `ValueError` quotes a malformed prompt, says what
        is wrong and what was expected."""
        vocab.check_text(prompt)
        return self._answer(self._parse(prompt))

    def draw_prompts(
        self, n: int, *, generator: torch.Generator, split: str = "train"
    ) -> list[str]:
        """`n` prompts of `split`, by rejection: the task's distribution conditioned on it."""
        _check_count(n)
        check_split(split)
        check_generator(generator)
        share = TEST_FRACTION if split == "test" else 1 - TEST_FRACTION
        prompts: list[str] = []
        for _ in range(_MAX_ROUNDS):
            candidates = math.ceil(1.2 * (n - len(prompts)) / share) + 16
            shape = (candidates, self.draws_per_prompt)
            rows = torch.randint(0, _RANDOM_HIGH, shape, generator=generator).tolist()
            for row in rows:
                prompt = self._draw_prompt(Draws(row))
                if split_of(prompt) == split:
                    prompts.append(prompt)
                    if len(prompts) == n:
                        return prompts
        raise RuntimeError(
            f"drew only {len(prompts)} of {n} {split!r} prompts for {self!r}: this split holds "
            "too few of its prompts; widen the digit range"
        )

    def sample(self, n: int, *, generator: torch.Generator, split: str = "train") -> TaskBatch:
        """`n` sequences of `split` (see `draw_prompts`), padded to `max_len`."""
        return self.encode_batch(self.draw_prompts(n, generator=generator, split=split))

    def encode_batch(self, prompts: Sequence[str]) -> TaskBatch:
        """Solve and encode given prompts (at least one) into a `TaskBatch` padded to
        `max_len`."""
        _check_count(len(prompts))
        answers = [self.solve(prompt) for prompt in prompts]
        rows = [vocab.encode_ids(p + a + vocab.EOS) for p, a in zip(prompts, answers, strict=True)]
        tokens = torch.tensor([row + [vocab.PAD_ID] * (self.max_len - len(row)) for row in rows])
        lengths = torch.tensor([len(row) for row in rows])
        starts = torch.tensor([len(prompt) - 1 for prompt in prompts])
        positions = torch.arange(self.max_len)
        loss_mask = (positions >= starts[:, None]) & (positions < lengths[:, None] - 1)
        return TaskBatch(tokens, loss_mask, lengths, tuple(prompts), tuple(answers))

    def runs(self, prompt: str) -> tuple[tuple[int, int], ...]:
        """The runs of `prompt` (the stretches that vary between prompts, such as addition's
        two operands), each as its (first, last) token position, in order; `ValueError` for a
        prompt of another task.

        Example:
            >>> from adjpos.tasks import get_task
            >>> get_task("addition").runs("12+345=")
            ((0, 1), (3, 5))
        """
        self.check(prompt)
        match = self._match(prompt)
        return tuple((match.start(i), match.end(i) - 1) for i in range(1, len(match.groups()) + 1))

    def _groups(self, prompt: str) -> tuple[str, ...]:
        """The groups of `pattern` matching all of `prompt`, or the error naming `form`."""
        return self._match(prompt).groups()

    def _match(self, prompt: str) -> re.Match[str]:
        match = self.pattern.fullmatch(prompt)
        if match is None:
            raise self._malformed(prompt, f"not of the form {self.form!r}")
        return match

    def _malformed(self, prompt: str, reason: str) -> UsageError:
        return UsageError(
            f"malformed {self.name} prompt {prompt!r}: {reason}; expected {self.prompt_format}"
        )


def _check_count(n: Any) -> None:
    check_positive_int("the number of prompts", n)
