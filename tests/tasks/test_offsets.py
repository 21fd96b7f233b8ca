"""The error offsets of each task: what "the character at offset j of the one asked for" is,
and the shares of wrong answer characters there, against their definition."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.tasks import get_task
from adjpos.tasks.offsets import (
    OFFSETS,
    TASK_OFFSETS,
    error_offset_counts,
    error_offset_shares,
    reversal_source,
)


def test_the_reversal_source_is_prompt_digit_n_minus_1_minus_i():
    prompt = "rev(12345)="
    assert [prompt[reversal_source(prompt, i)] for i in range(5)] == list("54321")
    assert [reversal_source(prompt, i) for i in range(5)] == [8, 7, 6, 5, 4]
    candidate = TASK_OFFSETS["reversal"].candidate
    # answer digit 1 ("4", prompt digit 3): offset +1 is prompt digit 4 ("5"), -2 digit 1
    assert [candidate(prompt, "54321", 1, j) for j in OFFSETS] == [(c,) for c in "2345)"]
    with pytest.raises(ValueError, match="outside the 5 digits"):
        reversal_source(prompt, 5)


@pytest.mark.parametrize("name", sorted(TASK_OFFSETS))
def test_offset_zero_is_the_right_answer_on_every_task(name):
    task = get_task(name)
    prompts = task.draw_prompts(60, generator=torch.Generator().manual_seed(0), split="test")
    candidate = TASK_OFFSETS[name].candidate
    for prompt in prompts:
        answer = task.solve(prompt)
        for i, char in enumerate(answer):
            assert candidate(prompt, answer, i, 0) == (char,)


def test_offset_candidates_of_the_other_tasks():
    assert TASK_OFFSETS["addition"].candidate("123+456=", "579", 0, 1) == ("7",)
    assert TASK_OFFSETS["addition"].candidate("123+456=", "579", 2, 1) == ()
    assert TASK_OFFSETS["indexing"].candidate("wherex(134504392,4)=", "2", 0, -1) == ("1",)
    assert TASK_OFFSETS["indexing"].candidate("wherex(134504392,4)=", "2", 0, -2) == ("0",)
    assert TASK_OFFSETS["indexing"].candidate("wherex(1345,1)=", "0", 0, -1) == ()
    # ordering, read two ways: the index one place along in o ("3"), or the answer of r's
    # next digit ("1"); past the end, neither
    assert TASK_OFFSETS["ordering"].candidate("ord(5831,3851)=", "2103", 0, 1) == ("3", "1")
    assert TASK_OFFSETS["ordering"].candidate("ord(5831,3851)=", "2103", 2, -1) == ("1",)
    assert TASK_OFFSETS["ordering"].candidate("ord(5831,3851)=", "2103", 3, 1) == ()


def slow_shares(predicted, answers, prompts):
    """Reversal only, written from the definition: wrong digit i equal to prompt digit
    n-1-i+j (or the bracket there)."""
    hits = {j: 0 for j in OFFSETS}
    wrong = {j: 0 for j in OFFSETS}
    for got, right, prompt in zip(predicted, answers, prompts, strict=True):
        digits = prompt[4:-2]
        n = len(digits)
        if len(got) != len(right):  # counted apart
            continue
        for i in range(len(right)):
            if got[i] != right[i]:
                for j in OFFSETS:
                    at = 4 + (n - 1 - i) + j
                    if 0 <= at < len(prompt):
                        wrong[j] += 1
                        hits[j] += got[i] == prompt[at]
    return {j: hits[j] / wrong[j] if wrong[j] else math.nan for j in OFFSETS}


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(-2, 2), st.floats(0.0, 1.0))
def test_reversal_shares_match_the_definition_and_follow_a_shifted_copy(seed, k, noise):
    task = get_task("reversal")
    gen = torch.Generator().manual_seed(seed)
    prompts = task.draw_prompts(30, generator=gen, split="test")
    answers = [task.solve(p) for p in prompts]
    rng = np.random.default_rng(seed)
    predicted = []
    for prompt, answer in zip(prompts, answers, strict=True):  # the digit k off, or random
        n = len(answer)
        out = []
        for i in range(n):
            at = reversal_source(prompt, i) + k
            off = prompt[at] if 4 <= at < 4 + n else "0"
            out.append(off if rng.random() > noise else str(rng.integers(10)))
        predicted.append("".join(out))
    shares = error_offset_shares(predicted, answers, prompts, "reversal")
    want = slow_shares(predicted, answers, prompts)
    for j in OFFSETS:
        got = shares[f"error_offset_share_{j}"]
        assert (math.isnan(got) and math.isnan(want[j])) or got == pytest.approx(want[j])
    assert shares["error_offset_share_0"] in (0.0,) or math.isnan(shares["error_offset_share_0"])
    if k and noise < 0.3 and shares["n_wrong"] > 20:
        others = [shares[f"error_offset_share_{j}"] for j in OFFSETS if j != k]
        assert shares[f"error_offset_share_{k}"] > max(others)
        assert shares[f"error_offset_share_{k}_low"] <= shares[f"error_offset_share_{k}"]


def test_error_offset_counts_refuse_bad_input():
    with pytest.raises(ValueError, match="no error offsets for task"):
        error_offset_counts(["1"], ["1"], ["x"], "copying")
    with pytest.raises(ValueError, match="one entry per prompt"):
        error_offset_counts(["1"], ["1", "2"], ["rev(1)="], "reversal")
    matches, counted = error_offset_counts(["12"], ["12"], ["rev(21)="], "reversal")
    assert not matches.any() and not counted.any()


def test_wider_offsets_cover_a_longer_shift():
    prompts = ["rev(1234567)="]
    answers = ["7654321"]
    # the first four digits the prompt digit 3 before the one asked for, the rest wrong too
    predicted = ["4321765"]
    shares = error_offset_shares(predicted, answers, prompts, "reversal", offsets=range(-3, 4))
    assert shares["error_offset_share_-3"] == pytest.approx(4 / 7)
    assert shares["error_offset_share_3"] == 0.0 and shares["n_wrong"] == 7


def test_answers_of_another_length_are_counted_apart():
    prompts = ["rev(1234)=", "rev(1234)=", "rev(1234)=", "rev(1234)="]
    answers = ["4321"] * 4
    predicted = ["432", "43210", "4321", "3321"]  # one short, one long, right, one digit off
    shares = error_offset_shares(predicted, answers, prompts, "reversal")
    assert (shares["answers_shorter"], shares["answers_longer"]) == (0.25, 0.25)
    assert shares["n_wrong"] == 1  # only the right-length wrong answer is compared
    assert shares["error_offset_share_-1"] == 1.0  # "3": the prompt digit before the "4"
