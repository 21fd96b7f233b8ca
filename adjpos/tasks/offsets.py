"""Where a task's wrong answers point: of the wrong answer characters, the share equal to the
character "at offset j of the one asked for", j = -2..2 (`TASK_OFFSETS` says what that is on
each task, and which way a shift of the position curve moves it): `error_offset_counts` per
prompt, `error_offset_shares` pooled with intervals. The position curve's arms
(`adjpos.interventions.curve`) report them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from adjpos.stats import wilson_interval
from adjpos.validation import UsageError

OFFSETS = (-2, -1, 0, 1, 2)


@dataclass(frozen=True)
class OffsetMap:
    """What "the character at offset j of the one asked for" is on one task.

    Attributes:
        candidate: ``(prompt, answer, i, j) -> tuple[str, ...]``, the characters answer
            position i would hold if the model read the prompt j places off (none: no such
            character; a task read two ways has two); at j = 0 the right answer.
        direction: +1 when a shift of the curve by k (every state carrying the curve of
            t - k) makes an address reader answer with offset +k, -1 when with offset -k.
        meaning: the definition, in words.
    """

    candidate: Callable[[str, str, int, int], tuple[str, ...]]
    direction: int
    meaning: str


def reversal_source(prompt: str, i: int) -> int:
    """The prompt position answer digit i of a reversal copies: ``rev(d0..dn-1)=`` answers
    d[n-1-i], which sits at 4 + n - 1 - i (after ``rev(``)."""
    n = len(prompt) - len("rev()=")
    if not 0 <= i < n:
        raise UsageError(f"answer position {i} is outside the {n} digits of {prompt!r}")
    return len("rev(") + n - 1 - i


def _reversal(prompt: str, answer: str, i: int, j: int) -> tuple[str, ...]:
    at = reversal_source(prompt, i) + j
    return (prompt[at],) if 0 <= at < len(prompt) else ()


def _addition(prompt: str, answer: str, i: int, j: int) -> tuple[str, ...]:
    at = i + j
    return (answer[at],) if 0 <= at < len(answer) else ()


def _index_value(prompt: str, answer: str, i: int, j: int, count: int) -> tuple[str, ...]:
    value = int(answer) + j
    text = str(value)
    return (text[i],) if 0 <= value < count and len(text) == len(answer) else ()


def _indexing(prompt: str, answer: str, i: int, j: int) -> tuple[str, ...]:
    digits = prompt[len("wherex(") : prompt.index(",")]
    return _index_value(prompt, answer, i, j, len(digits))


def _ordering(prompt: str, answer: str, i: int, j: int) -> tuple[str, ...]:
    original = prompt[len("ord(") : prompt.index(",")]
    # the index read j places along in o, or the answer of r's digit j places along
    neighbour = (answer[i + j],) if j and 0 <= i + j < len(answer) else ()
    return tuple(dict.fromkeys(_index_value(prompt, answer[i], 0, j, len(original)) + neighbour))


TASK_OFFSETS = {
    "reversal": OffsetMap(
        _reversal,
        +1,
        "answer digit i copies prompt digit n-1-i; offset j: the prompt character j places "
        "after it (prompt digit n-1-i+j, or a bracket at the ends)",
    ),
    "addition": OffsetMap(
        _addition,
        +1,
        "answer digit i sums the operand digits of one place value; offset j: the right "
        "answer's digit j places to its right (the sum of the place value j lower)",
    ),
    "indexing": OffsetMap(
        _indexing,
        -1,
        "the answer is the position a of the first q; offset j: the answer a + j (reading "
        "the position of the digit j places after it)",
    ),
    "ordering": OffsetMap(
        _ordering,
        -1,
        "answer i is the index x in o of r's digit i; offset j: the index x + j (reading the "
        "position of o's digit j places after it), or answer i + j (the index of r's digit j "
        "places after it)",
    ),
}


def error_offset_counts(
    predicted: Sequence[str],
    answers: Sequence[str],
    prompts: Sequence[str],
    task: str,
    *,
    offsets: Sequence[int] = OFFSETS,
) -> tuple[np.ndarray, np.ndarray]:
    """``(matches, counted)``, int arrays [prompt, len(offsets)]: per prompt and offset j,
    how many wrong answer characters equal the character at offset j (`TASK_OFFSETS`), and
    how many wrong characters have one there. Only answers of the right length are compared
    character by character; one character can match several offsets (a repeated digit), so
    the shares need not sum to 1.
    """
    if task not in TASK_OFFSETS:
        raise UsageError(f"no error offsets for task {task!r}; known: {list(TASK_OFFSETS)}")
    if not len(predicted) == len(answers) == len(prompts):
        raise UsageError("predicted, answers and prompts must have one entry per prompt")
    candidate = TASK_OFFSETS[task].candidate
    matches = np.zeros((len(prompts), len(offsets)), dtype=int)
    counted = np.zeros_like(matches)
    for row, (got, right, prompt) in enumerate(zip(predicted, answers, prompts, strict=True)):
        if len(got) != len(right):
            continue
        for i in range(len(right)):
            if got[i] == right[i]:
                continue
            for col, j in enumerate(offsets):
                expected = candidate(prompt, right, i, j)
                if expected:
                    counted[row, col] += 1
                    matches[row, col] += got[i] in expected
    return matches, counted


def error_offset_shares(
    predicted: Sequence[str],
    answers: Sequence[str],
    prompts: Sequence[str],
    task: str,
    *,
    offsets: Sequence[int] = OFFSETS,
) -> dict[str, float]:
    """``error_offset_share_{j}`` for each offset j: the pooled share of wrong answer
    characters equal to the character at offset j, with its 95% Wilson interval (``_low``,
    ``_high``); ``n_wrong`` (NaN shares without one); and ``answers_shorter`` /
    ``answers_longer``, the shares of answers of another length than the right one."""
    offsets = sorted(set(offsets) | {0})
    matches, counted = error_offset_counts(predicted, answers, prompts, task, offsets=offsets)
    out: dict[str, float] = {"n_wrong": float(counted[:, offsets.index(0)].sum())}
    gaps = np.array([len(got) - len(right) for got, right in zip(predicted, answers, strict=True)])
    out["answers_shorter"] = float((gaps < 0).mean()) if len(gaps) else np.nan
    out["answers_longer"] = float((gaps > 0).mean()) if len(gaps) else np.nan
    for col, j in enumerate(offsets):
        name = f"error_offset_share_{j}"
        weights = counted[:, col]
        if not weights.sum():
            out |= {name: np.nan, f"{name}_low": np.nan, f"{name}_high": np.nan}
            continue
        low, high = wilson_interval(int(matches[:, col].sum()), int(weights.sum()))
        out |= {name: float(matches[:, col].sum() / weights.sum())}
        out |= {f"{name}_low": low, f"{name}_high": high}
    return out
