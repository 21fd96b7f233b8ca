"""Malformed prompts, bad characters and invalid parameters raise ValueError naming the problem."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.tasks import TASKS, VOCAB, get_task

MALFORMED = [
    ("addition", "12+3", "not of the form 'a+b='"),
    ("addition", "+3=", "not of the form 'a+b='"),
    ("addition", "1+2+3=", "not of the form 'a+b='"),
    ("addition", "rev(12)=", "not of the form 'a+b='"),
    ("addition", "12+3=15", "not of the form 'a+b='"),
    ("addition", "012+3=", "operand '012' has a leading zero"),
    ("addition", "12345+1=", "operand '12345' has 5 digits"),
    ("addition", "1234+5678=", "it has 10 characters"),
    ("reversal", "rev()=", "not of the form 'rev(d...)='"),
    ("reversal", "rev(12)", "not of the form 'rev(d...)='"),
    ("reversal", "rev(1,2)=", "not of the form 'rev(d...)='"),
    ("reversal", "rev(12)=._", "not of the form 'rev(d...)='"),
    ("reversal", f"rev({'1' * 17})=", "it has 17 digits"),
    ("indexing", "wherex(,1)=", "not of the form 'wherex(d...,q)='"),
    ("indexing", "wherex(123,45)=", "not of the form 'wherex(d...,q)='"),
    ("indexing", "where(123,1)=", "not of the form 'wherex(d...,q)='"),
    ("indexing", "wherex(1234567890,1)=", "it has 10 digits"),
    ("indexing", "wherex(123,4)=", "q='4' does not occur in '123'"),
    ("ordering", "ord(12,21)", "not of the form 'ord(o,r)='"),
    ("ordering", "ord(12)=", "not of the form 'ord(o,r)='"),
    ("ordering", "ord(123456,654321)=", "o has 6 digits"),
    ("ordering", "ord(112,121)=", "the digits of o='112' are not distinct"),
    ("ordering", "ord(123,124)=", "r='124' is not a permutation of o"),
    ("ordering", "ord(123,12)=", "r='12' is not a permutation of o"),
]


@pytest.mark.parametrize(("name", "prompt", "reason"), MALFORMED)
def test_malformed_prompt_names_prompt_and_reason(name, prompt, reason):
    task = get_task(name)
    with pytest.raises(ValueError) as info:
        task.solve(prompt)
    message = str(info.value)
    assert f"malformed {name} prompt {prompt!r}" in message
    assert reason in message
    assert f"expected {task.prompt_format}" in message
    with pytest.raises(ValueError, match="malformed"):
        task.check(prompt)
    with pytest.raises(ValueError, match="malformed"):
        task.encode_batch([prompt])


VALID = {
    "addition": "12+3=",
    "reversal": "rev(123)=",
    "indexing": "wherex(123,2)=",
    "ordering": "ord(123,321)=",
}


@pytest.mark.parametrize("name", TASKS)
def test_valid_prompt_passes_check(name):
    assert get_task(name).check(VALID[name]) is None


@settings(deadline=None)
@given(
    name=st.sampled_from(TASKS),
    bad=st.characters(codec="utf-8").filter(lambda c: c not in VOCAB),
    data=st.data(),
)
def test_character_outside_vocabulary_is_named(name, bad, data):
    prompt = VALID[name]
    at = data.draw(st.integers(0, len(prompt)))
    with pytest.raises(ValueError, match="not in the vocabulary") as info:
        get_task(name).solve(prompt[:at] + bad + prompt[at:])
    assert f"character {bad!r} at index {at}" in str(info.value)
    assert repr(VOCAB) in str(info.value)


INVALID_PARAMS = [
    ("addition", {"max_digits": 0}, "max_digits must be a positive int"),
    ("addition", {"min_digits": 3, "max_digits": 2}, "min_digits=3 must not exceed max_digits=2"),
    ("addition", {"max_prompt_len": 3}, "max_prompt_len must be an int >= 4"),
    ("addition", {"min_digits": 2, "max_prompt_len": 5}, "max_prompt_len must be an int >= 6"),
    ("reversal", {"min_digits": 0}, "min_digits must be a positive int"),
    ("reversal", {"max_digits": -3}, "max_digits must be a positive int"),
    ("indexing", {"min_digits": 5, "max_digits": 4}, "must not exceed"),
    ("ordering", {"max_digits": 11}, "max_digits must be between 1 and 10"),
]


@pytest.mark.parametrize(("name", "params", "match"), INVALID_PARAMS)
def test_invalid_parameters_raise(name, params, match):
    with pytest.raises(ValueError, match=match):
        get_task(name, **params)


@pytest.mark.parametrize("name", TASKS)
def test_non_int_parameter_raises_value_error(user_errors, name):
    with pytest.raises(ValueError, match="max_digits must be a positive int, got '4'"):
        get_task(name, max_digits="4")


def test_unknown_task_lists_allowed_names():
    with pytest.raises(ValueError, match="unknown task 'sorting'") as info:
        get_task("sorting")
    assert str(list(TASKS)) in str(info.value)


def test_unknown_parameter_lists_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown parameters \['digits'\]") as info:
        get_task("reversal", digits=3)
    assert "['min_digits', 'max_digits']" in str(info.value)


@pytest.mark.parametrize("n", [0, -1])
def test_sample_rejects_non_positive_counts(n):
    with pytest.raises(ValueError, match="positive int"):
        get_task("addition").sample(n, generator=torch.Generator())


def test_sample_rejects_unknown_split():
    with pytest.raises(ValueError, match=r"split='valid' is not allowed.*\['train', 'test'\]"):
        get_task("addition").sample(4, generator=torch.Generator(), split="valid")


def test_sample_requires_an_explicit_generator(user_errors):
    with pytest.raises(TypeError, match="generator must be a CPU torch.Generator"):
        get_task("addition").sample(4, generator=None)


def test_encode_batch_rejects_empty_list():
    with pytest.raises(ValueError, match="positive int, got 0"):
        get_task("addition").encode_batch([])
