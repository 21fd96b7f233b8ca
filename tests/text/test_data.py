"""`TextTask`: windows are contiguous slices of a split at reproducible random starts, its
evaluation agrees with a per-position reference, and `adjpos.train` trains on it."""

import math

import pytest
import torch
import torch.nn.functional as F

import adjpos
from adjpos.text import TextTask, file_task, layout_config
from adjpos.text.prepare import split_by_chunk_hash

STREAM = torch.arange(200) % 37


def _task(context=8):
    return TextTask(context, 40, {"train": STREAM, "validation": STREAM[:50]})


def test_windows_are_contiguous_slices_drawn_from_the_generator():
    task = _task()
    windows = task.windows(32, generator=torch.Generator().manual_seed(3))
    again = task.windows(32, generator=torch.Generator().manual_seed(3))
    assert torch.equal(windows, again)
    for row in windows:
        start = int(torch.nonzero(STREAM == row[0])[0])  # the stream repeats every 37 tokens
        assert torch.equal(row, STREAM[start : start + 8])
    other = task.windows(32, generator=torch.Generator().manual_seed(4))
    assert not torch.equal(windows, other)
    starts = torch.randint(0, 50 - 8 + 1, (5,), generator=torch.Generator().manual_seed(0))
    expected = torch.stack([STREAM[s : s + 8] for s in starts.tolist()])
    got = task.windows(5, generator=torch.Generator().manual_seed(0), split="validation")
    assert torch.equal(got, expected)


def test_sample_is_a_full_batch_for_the_sequence_loss():
    batch = _task().sample(4, generator=torch.Generator().manual_seed(0))
    assert batch.tokens.shape == (4, 8) and batch.tokens.dtype == torch.long
    assert batch.lengths.tolist() == [8] * 4
    assert batch.loss_mask[:, :-1].all() and not batch.loss_mask[:, -1].any()


def test_evaluate_agrees_with_a_position_by_position_reference():
    task = _task()
    model = adjpos.build_model(adjpos.ModelConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=40))
    windows = task.windows(5, generator=torch.Generator().manual_seed(1), split="validation")
    scores = task.evaluate(model, windows, batch_size=2)
    losses, hits = [], []
    with torch.no_grad():
        for row in windows:
            logits = model(row[None])[0]
            for t in range(7):
                losses.append(float(F.cross_entropy(logits[t], row[t + 1])))
                hits.append(int(logits[t].argmax()) == int(row[t + 1]))
    assert scores["loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-5)
    assert scores["accuracy"] == pytest.approx(sum(hits) / len(hits))


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("splits", "match"),
    [
        ({"validation": STREAM}, "needs a 'train' split"),
        ({"train": STREAM[:8]}, "needs more than context=8"),
        ({"train": STREAM, "dev": STREAM}, "unknown split"),
        ({"train": STREAM + 10}, "outside"),
    ],
)
def test_bad_splits_are_refused(splits, match):
    with pytest.raises(ValueError, match=match):
        TextTask(8, 40, splits)


def test_chunk_hash_split_keeps_every_line_once():
    text = "".join(f"line {i}\n" for i in range(2000))
    parts = split_by_chunk_hash(text)
    assert sorted(parts["train"].splitlines() + parts["validation"].splitlines()) == sorted(
        text.splitlines()
    )
    assert parts == split_by_chunk_hash(text)


def test_train_on_text_lowers_the_validation_loss(tmp_path):
    source = tmp_path / "text.txt"
    words = "the king and queen of a land far away did speak".split()
    picks = torch.randint(0, len(words), (3000, 6), generator=torch.Generator().manual_seed(0))
    source.write_text("".join(" ".join(words[i] for i in row) + ".\n" for row in picks.tolist()))
    task, tokenizer = file_task(source, 16, vocab_size=300)
    cfg = layout_config("hybrid", n_layers=4, d_model=32, n_heads=2, d_vocab=task.d_vocab, n_ctx=16)
    model = adjpos.build_model(cfg, device="cpu")
    train_cfg = adjpos.TrainConfig(
        steps=60, batch_size=8, lr=3e-3, warmup_steps=5, eval_every=30, eval_size=8,
        loss="sequence", target_accuracy=None, device="cpu",
    )  # fmt: skip
    result = adjpos.train(model, task, train_cfg, out_dir=tmp_path / "run")
    first, last = (entry["val_loss"] for entry in (result.history[0], result.history[-1]))
    assert last < first < math.log(task.d_vocab) + 1
    assert adjpos.layer_kinds(adjpos.load_model(tmp_path / "run")) == ["rope"] * 3 + ["nope"]
    with pytest.raises(ValueError, match="loss='sequence'"):
        adjpos.train(model, task, adjpos.TrainConfig(steps=1, device="cpu"))
