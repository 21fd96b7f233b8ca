"""Task sequences for probing: one length, distinct, from the requested split."""

import pytest
import torch

from adjpos import get_task, sequences_of_length
from adjpos.tasks import EOS_ID, decode, split_of


def test_distinct_test_sequences_of_one_length():
    task = get_task("indexing")
    tokens = sequences_of_length(task, 30, generator=torch.Generator().manual_seed(0))
    assert tokens.ndim == 2 and tokens.shape[0] == 30
    assert len({tuple(row) for row in tokens.tolist()}) == 30
    assert (tokens[:, -1] == EOS_ID).all()
    for row in tokens.tolist():
        prompt = decode(row).split("=")[0] + "="
        assert split_of(prompt) == "test" and task.solve(prompt) == decode(row)[len(prompt) : -1]


def test_default_length_is_the_most_common_and_is_reproducible():
    task = get_task("reversal", max_digits=4)
    first = sequences_of_length(task, 5, generator=torch.Generator().manual_seed(1))
    again = sequences_of_length(task, 5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(first, again) and first.shape[1] in (15, 17)  # 3 or 4 digits


@pytest.mark.usefixtures("user_errors")
def test_too_few_distinct_sequences_is_a_clear_error():
    task = get_task("reversal")
    with pytest.raises(ValueError, match=r"gave only \d+ distinct sequences of length 9 .*per len"):
        sequences_of_length(task, 5, length=9, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"length must be an int in \[1, 39\]"):
        sequences_of_length(task, 5, length=40, generator=torch.Generator().manual_seed(0))
