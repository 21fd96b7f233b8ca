"""sample(): padding, loss-mask alignment, determinism, splits and the length distribution."""

from collections import Counter

import pytest
import torch

from adjpos.tasks import EOS, PAD_ID, TASKS, TEST_FRACTION, get_task, split_of


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def batches():
    return {name: get_task(name).sample(3000, generator=generator(0)) for name in TASKS}


@pytest.mark.parametrize("name", TASKS)
def test_shapes_dtypes_lengths_and_right_padding(batches, name):
    task, batch = get_task(name), batches[name]
    assert batch.tokens.shape == batch.loss_mask.shape == (3000, task.max_len)
    assert batch.tokens.dtype == torch.int64 and batch.loss_mask.dtype == torch.bool
    assert len(batch.prompts) == len(batch.answers) == batch.lengths.shape[0] == 3000
    for i, (prompt, answer) in enumerate(zip(batch.prompts, batch.answers, strict=True)):
        length = int(batch.lengths[i])
        assert length == len(prompt) + len(answer) + 1
        assert task.decode(batch.tokens[i, :length]) == prompt + answer + EOS
        assert (batch.tokens[i, length:] == PAD_ID).all()


@pytest.mark.parametrize("name", TASKS)
def test_loss_mask_selects_exactly_the_answer_and_eos(batches, name):
    task, batch = get_task(name), batches[name]
    positions = torch.arange(task.max_len)
    for i, (prompt, answer) in enumerate(zip(batch.prompts, batch.answers, strict=True)):
        mask = batch.loss_mask[i]
        predicted = positions[mask] + 1  # logits at t predict token t + 1
        assert task.decode(batch.tokens[i, predicted]) == answer + EOS
        assert predicted.tolist() == list(range(len(prompt), int(batch.lengths[i])))
        assert not mask[int(batch.lengths[i]) - 1 :].any()


@pytest.mark.parametrize("name", TASKS)
def test_sampled_prompts_are_valid_and_answers_match_reference(batches, reference, name):
    task, batch = get_task(name), batches[name]
    for prompt, answer in zip(batch.prompts, batch.answers, strict=True):
        task.check(prompt)
        assert answer == task.solve(prompt) == reference.answer(name, prompt)
        assert len(prompt) <= task.max_prompt_len
        assert len(answer) <= task.max_answer_len


@pytest.mark.parametrize("name", TASKS)
def test_longest_prompt_is_reached(batches, name):
    task = get_task(name)
    assert max(len(p) for p in batches[name].prompts) == task.max_prompt_len


def digit_count(name: str, prompt: str) -> int | tuple[int, int]:
    if name == "addition":
        a, b = prompt[:-1].split("+")
        return len(a), len(b)
    return len(prompt[prompt.index("(") + 1 :].split(",")[0].rstrip(")="))


@pytest.mark.parametrize("name", TASKS)
def test_digit_counts_are_roughly_uniform(batches, name):
    task = get_task(name)
    counts = Counter(digit_count(name, p) for p in batches[name].prompts)
    expected = (
        set(task.digit_pairs)
        if name == "addition"
        else set(range(task.min_digits, task.max_digits + 1))
    )
    assert set(counts) == expected
    share = 3000 / len(expected)
    # One-digit strata hold only 10 prompts, so the hash split moves them most.
    assert all(0.6 * share < c < 1.4 * share for c in counts.values()), counts


@pytest.mark.parametrize("name", ["reversal", "indexing", "ordering"])
def test_digit_range_parameters_are_respected(name):
    task = get_task(name, min_digits=3, max_digits=4)
    prompts = task.draw_prompts(500, generator=generator(1))
    assert {digit_count(name, p) for p in prompts} == {3, 4}


def test_addition_prompt_limit_excludes_widest_pair():
    task = get_task("addition")
    assert (4, 4) not in task.digit_pairs and len(task.digit_pairs) == 15
    wide = get_task("addition", max_prompt_len=10)
    assert (4, 4) in wide.digit_pairs
    prompts = wide.draw_prompts(2000, generator=generator(2))
    assert max(len(p) for p in prompts) == 10


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_same_seed_same_batch_other_seed_other_batch(name, split):
    task = get_task(name)
    first = task.sample(64, generator=generator(7), split=split)
    again = task.sample(64, generator=generator(7), split=split)
    other = task.sample(64, generator=generator(8), split=split)
    assert first.prompts == again.prompts
    assert torch.equal(first.tokens, again.tokens)
    assert torch.equal(first.loss_mask, again.loss_mask)
    assert torch.equal(first.lengths, again.lengths)
    assert first.prompts != other.prompts


@pytest.mark.parametrize("name", TASKS)
def test_sampling_leaves_global_rng_alone(name):
    state = torch.random.get_rng_state()
    get_task(name).sample(32, generator=generator(0))
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("name", TASKS)
def test_train_never_yields_a_test_prompt(batches, name):
    task = get_task(name)
    train = set(batches[name].prompts)
    test = set(task.sample(500, generator=generator(3), split="test").prompts)
    assert all(split_of(p) == "train" for p in train)
    assert all(split_of(p) == "test" for p in test)
    assert not train & test


def test_split_of_holds_out_about_a_tenth():
    prompts = [f"{a}+{b}=" for a in range(100) for b in range(100)]
    share = sum(split_of(p) == "test" for p in prompts) / len(prompts)
    assert abs(share - TEST_FRACTION) < 0.01
    assert split_of("12+3=") == split_of("12+3=")


def test_split_without_prompts_raises():
    task = get_task("indexing", max_digits=1)
    assert all(split_of(f"wherex({d},{d})=") == "train" for d in "0123456789")
    with pytest.raises(RuntimeError, match="too few"):
        task.sample(3, generator=generator(0), split="test")


def test_encode_batch_pads_to_task_width():
    task = get_task("reversal", max_digits=4)
    batch = task.encode_batch(["rev(1)=", "rev(1234)="])
    assert batch.tokens.shape == (2, task.max_len) == (2, 15)
    assert batch.lengths.tolist() == [9, 15]
    assert batch.answers == ("1", "4321")
    assert batch.loss_mask.sum(dim=1).tolist() == [2, 5]
