import json

import pytest
import torch

from adjpos import build_model, is_position_free, load_model, save_model
from adjpos.models import save_snapshot, snapshot_steps
from adjpos.tasks import EOS_ID, VOCAB_SIZE, get_task
from adjpos.training import TrainConfig, evaluate, predict, train
from adjpos.training import loop as loop_module
from adjpos.training.loop import answer_loss, sequence_mask
from factories import tiny_config

TASK = get_task("addition", max_digits=2)
FAST = dict(steps=6, batch_size=8, eval_every=3, eval_size=8, warmup_steps=2, device="cpu")


def _model(**overrides):
    return build_model(tiny_config(d_vocab=VOCAB_SIZE, n_ctx=TASK.max_len, **overrides))


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_answer_loss_counts_only_answer_positions():
    batch = TASK.sample(4, generator=torch.Generator().manual_seed(0))
    logits = torch.randn(4, TASK.max_len, VOCAB_SIZE, generator=torch.Generator().manual_seed(1))
    terms = []
    for row in range(4):
        for t in range(TASK.max_len - 1):
            if batch.loss_mask[row, t]:
                target = batch.tokens[row, t + 1]
                terms.append(-torch.log_softmax(logits[row, t], -1)[target])
    expected = torch.stack(terms).mean()
    torch.testing.assert_close(answer_loss(logits, batch.tokens, batch.loss_mask), expected)


@pytest.mark.parametrize("name", ["addition", "ordering"])
def test_sequence_mask_is_every_real_next_token(name):
    task = get_task(name)
    batch = task.sample(16, generator=torch.Generator().manual_seed(3))
    mask = sequence_mask(batch.lengths, batch.tokens)
    for row in range(16):
        for t in range(task.max_len):
            real_next = t + 1 < task.max_len and t + 1 < int(batch.lengths[row])
            assert bool(mask[row, t]) == real_next
    assert not (batch.loss_mask & ~mask).any()  # the answer is part of the sequence
    assert (mask & ~batch.loss_mask).any()  # and the prompt is counted too


def test_sequence_loss_trains_on_the_prompt_as_well(monkeypatch):
    seen = []
    real = loop_module.answer_loss

    def spy(logits, tokens, mask):
        seen.append(mask.clone())
        return real(logits, tokens, mask)

    monkeypatch.setattr(loop_module, "answer_loss", spy)
    weights = []
    for loss in ("answer", "sequence"):
        model = _model()
        train(model, TASK, TrainConfig(**FAST, loss=loss))
        weights.append(_weights(model))
    batch = TASK.sample(FAST["batch_size"], generator=loop_module.batch_generator(0, 0))
    assert torch.equal(seen[0], batch.loss_mask)
    assert torch.equal(seen[FAST["steps"]], sequence_mask(batch.lengths, batch.tokens))
    assert not _same(weights[0], weights[1])


def test_training_lowers_the_loss_and_keeps_nope():
    model = _model()
    losses = []
    cfg = TrainConfig(**{**FAST, "steps": 40, "eval_every": 40, "lr": 3e-3})
    result = train(model, TASK, cfg, on_step=lambda info: losses.append(info["loss"]))
    assert len(losses) == 40 and sum(losses[-5:]) < sum(losses[:5])
    assert result.steps == 40 and result.position_free and is_position_free(model)
    assert not model.pos_embed.W_pos.any()
    assert set(result.per_length_accuracy) <= set(range(4, 7))
    assert [h["step"] for h in result.history] == [40]


def test_same_seed_same_weights_other_seed_differs():
    runs = []
    for seed in (0, 0, 1):
        model = _model()
        train(model, TASK, TrainConfig(**FAST, seed=seed))
        runs.append(_weights(model))
    assert _same(runs[0], runs[1]) and not _same(runs[0], runs[2])


def test_resume_equals_uninterrupted(tmp_path):
    straight = _model()
    whole = train(straight, TASK, TrainConfig(**FAST), out_dir=tmp_path / "a")

    class Interrupt(Exception):
        pass

    def stop_after_checkpoint(info):
        if info["step"] == 4:  # the checkpoint of step 3 is on disk; step 4 is lost
            raise Interrupt

    with pytest.raises(Interrupt):
        train(
            _model(),
            TASK,
            TrainConfig(**FAST),
            out_dir=tmp_path / "b",
            on_step=stop_after_checkpoint,
        )
    resumed_model = _model()
    with torch.no_grad():  # resume must overwrite every weight
        for p in resumed_model.parameters():
            p.add_(1.0)
    resumed = train(resumed_model, TASK, TrainConfig(**FAST), out_dir=tmp_path / "b", resume=True)
    assert _same(_weights(straight), _weights(resumed_model))
    assert resumed.steps == whole.steps == 6
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in whole.history]
    metrics = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert metrics["step"] == 6 and metrics["task"]["name"] == "addition"
    loaded = load_model(tmp_path / "b")
    assert _same(_weights(loaded), _weights(straight)) and is_position_free(loaded)


def test_early_stop_at_target(monkeypatch):
    monkeypatch.setattr(loop_module, "evaluate", lambda model, task, prompts: (1.0, {5: 1.0}))
    result = train(_model(), TASK, TrainConfig(**{**FAST, "steps": 30}))
    assert result.stopped_early and result.steps == 3


def test_learning_rate_schedule():
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    lrs = [cfg.lr_at(s) for s in range(100)]
    assert lrs[0] < lrs[5] < lrs[9] < 1.0 and lrs[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


class Oracle(torch.nn.Module):
    """A stand-in model that puts all logit mass on the correct next token."""

    def __init__(self, task):
        super().__init__()
        self.task = task
        self.cfg = type("cfg", (), {"n_ctx": task.max_len, "d_vocab": VOCAB_SIZE})()

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, VOCAB_SIZE)
        for row, ids in enumerate(tokens):
            text = self.task.decode(ids)
            prompt = text[: text.index("=") + 1]
            target = self.task.encode(self.task.solve(prompt) + ".")
            done = len(text) - len(prompt)
            logits[row, -1, target[min(done, len(target) - 1)]] = 1.0
        return logits


@pytest.mark.parametrize("name", ["addition", "reversal", "indexing", "ordering"])
def test_predict_decodes_greedily_until_the_end_token(name):
    task = get_task(name)
    prompts = task.draw_prompts(20, generator=torch.Generator().manual_seed(0), split="test")
    assert predict(Oracle(task), task, prompts) == [task.solve(p) for p in prompts]
    accuracy, per_length = evaluate(Oracle(task), task, prompts)
    assert accuracy == 1.0 and set(per_length.values()) == {1.0}


class OddOracle(Oracle):
    """The oracle on prompts of even length; an empty answer (wrong) on odd ones."""

    def forward(self, tokens):
        logits = super().forward(tokens)
        for row, ids in enumerate(tokens):
            text = self.task.decode(ids)
            if text.index("=") % 2 == 0:  # the prompt (up to and with "=") has odd length
                logits[row, -1] = torch.nn.functional.one_hot(torch.tensor(EOS_ID), VOCAB_SIZE)
        return logits


@pytest.mark.parametrize("name", ["addition", "reversal"])
def test_per_prompt_hits_are_predict_against_solve(name):
    task = get_task(name)
    prompts = task.draw_prompts(30, generator=torch.Generator().manual_seed(1), split="test")
    model = OddOracle(task)
    hits = evaluate(model, task, prompts, per_prompt=True)
    answers = predict(model, task, prompts)
    expected = [a == task.solve(p) for p, a in zip(prompts, answers, strict=True)]
    assert hits == expected and all(isinstance(h, bool) for h in hits)
    assert 0 < sum(hits) < len(hits)  # both outcomes occur, in the order of the prompts
    accuracy, per_length = evaluate(model, task, prompts)
    assert accuracy == sum(hits) / len(hits)
    for length, value in per_length.items():
        own = [h for p, h in zip(prompts, hits, strict=True) if len(p) == length]
        assert value == sum(own) / len(own)


@pytest.mark.usefixtures("user_errors")
def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="n_ctx=8 is below"):
        train(build_model(tiny_config(d_vocab=VOCAB_SIZE, n_ctx=8)), TASK, TrainConfig(**FAST))
    with pytest.raises(ValueError, match="d_vocab=20 is below"):
        train(build_model(tiny_config(n_ctx=TASK.max_len)), TASK, TrainConfig(**FAST))
    with pytest.raises(TypeError, match="adjpos task"):
        train(_model(), "addition", TrainConfig(**FAST))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not empty"):
        train(_model(), TASK, TrainConfig(**FAST), out_dir=tmp_path / "other")
    train(_model(), TASK, TrainConfig(**FAST), out_dir=tmp_path / "run")
    with pytest.raises(ValueError, match="already holds a training run"):
        train(_model(), TASK, TrainConfig(**FAST), out_dir=tmp_path / "run")
    with pytest.raises(ValueError, match="other settings.*train.lr: 0.001 there, 0.5 here"):
        train(
            _model(),
            TASK,
            TrainConfig(**{**FAST, "lr": 0.5}),
            out_dir=tmp_path / "run",
            resume=True,
        )
    with pytest.raises(ValueError, match="malformed addition prompt"):
        predict(_model(), TASK, ["12+=", "1+1="])
    for field, value in [
        ("steps", 0),
        ("device", "tpu"),
        ("target_accuracy", 1.5),
        ("min_lr_ratio", 2.0),
        ("loss", "prompt"),
    ]:
        with pytest.raises(ValueError, match=field):
            TrainConfig(**{field: value})


def test_a_higher_target_continues_an_early_stopped_run(tmp_path, monkeypatch):
    scores = iter([0.5, 0.9, 0.95, 0.99])
    monkeypatch.setattr(loop_module, "evaluate", lambda model, task, prompts: (next(scores), {}))
    cfg = {**FAST, "steps": 12}
    first = train(_model(), TASK, TrainConfig(**cfg, target_accuracy=0.8), out_dir=tmp_path / "r")
    assert first.stopped_early and first.steps == 6
    again = train(
        _model(), TASK, TrainConfig(**cfg, target_accuracy=0.8), out_dir=tmp_path / "r", resume=True
    )
    assert again.steps == 6  # same target: nothing more to do
    longer = train(
        _model(),
        TASK,
        TrainConfig(**cfg, target_accuracy=0.97),
        out_dir=tmp_path / "r",
        resume=True,
    )
    assert longer.stopped_early and longer.steps == 12 and longer.accuracy == 0.99


def test_snapshots_hold_the_weights_of_their_steps(tmp_path):
    """Each snapshot equals the weights of the same run interrupted at that step; the last
    step is kept too and equals model.safetensors."""
    cfg = TrainConfig(**{**FAST, "snapshots": "0,2,5"})
    train(_model(), TASK, cfg, out_dir=tmp_path / "run")
    assert snapshot_steps(tmp_path / "run") == [0, 2, 5, 6]

    class Interrupt(Exception):
        pass

    def stop_at(step):
        def hook(info):
            if info["step"] == step:
                raise Interrupt

        return hook

    for step in (0, 2, 5):
        reference = _model()
        if step:
            with pytest.raises(Interrupt):
                train(reference, TASK, cfg, on_step=stop_at(step))
        snap = load_model(tmp_path / "run", step=step)
        assert _same(_weights(snap), _weights(reference)) and is_position_free(snap)
    final = load_model(tmp_path / "run")
    assert _same(_weights(load_model(tmp_path / "run", step=6)), _weights(final))
    with pytest.raises(ValueError, match=r"no snapshot of step 3; it has \[0, 2, 5, 6\]"):
        load_model(tmp_path / "run", step=3)


def test_snapshot_steps_and_their_errors(tmp_path):
    assert sorted(TrainConfig(steps=100).snapshot_steps()) == [0, 32, 64, 100]
    assert TrainConfig(snapshots="none").snapshot_steps() == frozenset()
    for bad in ("", "often", "1,-2", "1,,2"):
        with pytest.raises(ValueError, match="snapshots must be 'log', 'none'"):
            TrainConfig(snapshots=bad)
    train(_model(), TASK, TrainConfig(**FAST, snapshots="none"), out_dir=tmp_path / "n")
    assert snapshot_steps(tmp_path / "n") == []


def test_float16_snapshots_load_as_the_model_dtype(tmp_path):
    model = _model()
    save_model(model, tmp_path)
    save_snapshot(model, tmp_path, 7, dtype=torch.float16)
    loaded = load_model(tmp_path, step=7)
    for name, value in _weights(loaded).items():
        original = model.state_dict()[name]
        expected = original.half().float() if original.is_floating_point() else original
        assert value.dtype == original.dtype and torch.equal(value, expected)
