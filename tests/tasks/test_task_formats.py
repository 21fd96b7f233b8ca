"""Each task's format, character by character, on the examples of the paper summary."""

import doctest
import importlib

import pytest
import torch

from adjpos.tasks import PAD_ID, TASKS, VOCAB, get_task

# Ids written out by hand: "_" 0, "." 1, digit d -> d + 2, "+=()," 12-16, "dehorvwx" 17-24.
KNOWN = [
    ("addition", "123+456=", "579", [3, 4, 5, 12, 6, 7, 8, 13, 7, 9, 11, 1]),
    ("reversal", "rev(1234)=", "4321", [21, 18, 22, 14, 3, 4, 5, 6, 15, 13, 6, 5, 4, 3, 1]),
    (
        "indexing",
        "wherex(134504392,4)=",
        "2",
        [23, 19, 18, 21, 18, 24, 14, 3, 5, 6, 7, 2, 6, 5, 11, 4, 16, 6, 15, 13, 4, 1],
    ),
    (
        "ordering",
        "ord(5831,3851)=",
        "2103",
        [20, 21, 17, 14, 7, 10, 5, 3, 16, 5, 10, 7, 3, 15, 13, 4, 3, 2, 5, 1],
    ),
]
LONGEST_PROMPT = {"addition": 9, "reversal": 22, "indexing": 20, "ordering": 17}


@pytest.mark.parametrize(("name", "prompt", "answer", "ids"), KNOWN)
def test_known_example_character_by_character(name, prompt, answer, ids):
    task = get_task(name)
    assert task.solve(prompt) == answer
    batch = task.encode_batch([prompt])
    length = len(prompt) + len(answer) + 1
    assert batch.lengths.tolist() == [length] == [len(ids)]
    assert batch.tokens[0, :length].tolist() == ids
    assert [VOCAB[i] for i in ids] == list(prompt + answer + ".")
    assert task.decode(batch.tokens[0, :length]) == prompt + answer + "."
    assert task.encode(prompt + answer + ".").tolist() == ids
    assert (batch.tokens[0, length:] == PAD_ID).all()
    expected_mask = [len(prompt) - 1 <= t < length - 1 for t in range(task.max_len)]
    assert batch.loss_mask[0].tolist() == expected_mask


@pytest.mark.parametrize("name", TASKS)
def test_default_longest_prompt(name):
    task = get_task(name)
    assert task.max_prompt_len == LONGEST_PROMPT[name] <= 22
    assert task.max_len == task.max_prompt_len + task.max_answer_len + 1


LONGEST_VALID = {
    "addition": ("9999+999=", "10998"),
    "reversal": ("rev(0123456789012345)=", "5432109876543210"),
    "indexing": ("wherex(123456789,9)=", "8"),
    "ordering": ("ord(01234,43210)=", "43210"),
}


@pytest.mark.parametrize("name", TASKS)
def test_longest_prompt_and_answer_fit(name):
    task = get_task(name)
    prompt, answer = LONGEST_VALID[name]
    assert len(prompt) == task.max_prompt_len
    assert len(answer) == task.max_answer_len
    assert task.solve(prompt) == answer
    batch = task.encode_batch([prompt])
    assert batch.tokens.shape == (1, task.max_len)
    assert int(batch.lengths[0]) == task.max_len


@pytest.mark.parametrize("name", TASKS)
def test_task_docstring_example_runs(name):
    module = importlib.import_module(type(get_task(name)).__module__)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1
    assert result.failed == 0


@pytest.mark.parametrize("module", ["adjpos.tasks", "adjpos.tasks.vocab", "adjpos.tasks.split"])
def test_package_doctests_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1
    assert result.failed == 0


def test_docstring_example_shows_every_character():
    task = get_task("addition")
    lines = task.encode_batch(["123+456="]).show(0).splitlines()
    assert lines[0].split()[1:] == list("123+456=579.")
    assert lines[1].split()[1:] == [str(i) for i in KNOWN[0][3]]
    assert lines[2].split()[1:] == list("000000011110")


def test_answers_with_leading_zero_and_repeated_digits():
    assert get_task("reversal").solve("rev(100)=") == "001"
    assert get_task("indexing").solve("wherex(7777,7)=") == "0"
    assert get_task("addition").solve("0+0=") == "0"
    assert get_task("ordering").solve("ord(0,0)=") == "0"
    assert torch.equal(
        get_task("reversal").encode("001."), torch.tensor([2, 2, 3, 1], dtype=torch.long)
    )


def _digit_stretches(prompt):
    """The reference: every maximal stretch of digit characters, as (first, last)."""
    stretches, start = [], None
    for position, char in enumerate(prompt + " "):
        if char.isdigit() and start is None:
            start = position
        elif not char.isdigit() and start is not None:
            stretches.append((start, position - 1))
            start = None
    return tuple(stretches)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_runs_are_the_digit_stretches_at_every_prompt_length(name):
    """A prompt's runs (what varies between prompts) are its stretches of digits, in token
    positions; every prompt length of the task is drawn, and the characters just outside a
    run are the format's fixed tokens."""
    task = get_task(name)
    prompts = task.draw_prompts(3000, generator=torch.Generator().manual_seed(1))
    lengths = {len(p) for p in prompts}
    assert len(lengths) >= 3
    for prompt in prompts:
        runs = task.runs(prompt)
        assert runs == _digit_stretches(prompt)
        tokens = task.encode(prompt).tolist()
        for first, last in runs:
            assert [VOCAB[i] for i in tokens[first : last + 1]] == list(prompt[first : last + 1])
            assert first == 0 or not prompt[first - 1].isdigit()
            assert not prompt[last + 1].isdigit()


def test_runs_of_the_known_examples_and_a_malformed_prompt():
    assert [get_task(n).runs(p) for n, p, _, _ in KNOWN] == [
        ((0, 2), (4, 6)),
        ((4, 7),),
        ((7, 15), (17, 17)),
        ((4, 7), (9, 12)),
    ]
    with pytest.raises(ValueError, match="not of the form 'rev"):
        get_task("reversal").runs("rev(12=")
