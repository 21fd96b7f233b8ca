"""Training throughput: `adjpos.train` against a bare PyTorch loop, same model, same batches.

Prints tokens per second of each and their ratio, then, for the synthetic tasks, the wall time
to reach the held-out accuracy of each shipped model. Targets: adjpos within 15% of the bare
loop on a synthetic task (ratio >= 0.85), within 20% on text (ratio >= 0.8).
``--json PATH`` also writes those numbers to PATH, atomically.

``--text`` times the text recipe's model (`adjpos.text.recipe`: 8 layers, width 64, 4 heads,
vocabulary 2,048, batches of 16 windows of 128 tokens, the loss on every next token) in the
layout ``--layout``, at width ``--d-model``, on each thread count of ``--threads``. Its windows
are cut from random token ids (no corpus is read: a step's work does not depend on which
tokens it sees).

    python benchmarks/bench_training.py [--quick] [--task addition] [--steps 100] [--json PATH]
    python benchmarks/bench_training.py --text [--layout nope] [--d-model 64] [--threads 1 2]
"""

import argparse
import copy
import os
import platform
import statistics
import time

import torch

import adjpos
from adjpos.pretrained import available_pretrained, pretrained_info
from adjpos.runs import versions, write_json
from adjpos.text import TextTask
from adjpos.text.recipe import LAYOUTS, RECIPE_DATA, RECIPE_MODEL, RECIPE_TRAIN, layout_config
from adjpos.training.loop import answer_loss, batch_generator, sequence_mask

TARGETS = {"task": 0.85, "text": 0.8}
QUICK_TEXT = {"n_layers": 4, "d_model": 16, "n_heads": 2, "vocab_size": 300, "context": 16}


def step_window(stamps: list[float]) -> float:
    """Seconds per step from the times after each step, the first and the last step left out:
    the first builds AdamW's state, the last is where `adjpos.train` evaluates (and the bare
    loop does not), so both loops are timed on the same steps 2 to N - 1."""
    return (stamps[-2] - stamps[0]) / (len(stamps) - 2)


def bare_loop(model, task, cfg) -> float:
    """The reference: the same batches, loss mask, optimiser, schedule and clipping, nothing
    else (the batches are drawn before the clock starts); seconds per step."""
    batches = []
    for step in range(cfg.steps):
        batch = task.sample(cfg.batch_size, generator=batch_generator(cfg.seed, step))
        answer = cfg.loss == "answer"
        mask = batch.loss_mask if answer else sequence_mask(batch.lengths, batch.tokens)
        batches.append((batch.tokens, mask))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    stamps = []
    for step, (tokens, mask) in enumerate(batches):
        for group in opt.param_groups:
            group["lr"] = cfg.lr_at(step)
        loss = answer_loss(model(tokens), tokens, mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()  # adjpos.train reads every loss; so does the reference
        stamps.append(time.perf_counter())
    return step_window(stamps)


def ours(model, task, cfg) -> float:
    """`adjpos.train` (batch sampling included); seconds per step."""
    stamps = []
    adjpos.train(
        model, task, cfg, on_step=lambda info: stamps.append(time.perf_counter()), progress=False
    )
    return step_window(stamps)


def compare(model, task, cfg, rounds: int) -> dict:
    """Both loops on copies of `model`, alternated for `rounds` rounds after a warm-up, so
    that a slow spell of the machine hits both alike; medians."""
    bare_loop(copy.deepcopy(model), task, adjpos.TrainConfig(**{**cfg.to_dict(), "steps": 3}))
    seconds: dict[str, list[float]] = {"bare": [], "adjpos": []}
    for _ in range(rounds):
        seconds["bare"].append(bare_loop(copy.deepcopy(model), task, cfg))
        seconds["adjpos"].append(ours(copy.deepcopy(model), task, cfg))
    bare, mine = statistics.median(seconds["bare"]), statistics.median(seconds["adjpos"])
    tokens = cfg.batch_size * task.max_len  # per step
    return {
        "seconds_per_step": seconds,
        "tokens_per_s": {"bare": tokens / bare, "adjpos": tokens / mine},
        "ratio_adjpos_to_bare": bare / mine,
    }


def measure(task_name: str, steps: int, quick: bool, rounds: int) -> dict:
    """A synthetic task: a 4-layer model of width 128 (quick: 1 layer of 32)."""
    task = adjpos.get_task(task_name)
    size = dict(n_layers=1, d_model=32, n_heads=2) if quick else dict(n_layers=4, d_model=128)
    model = adjpos.build_model(
        adjpos.ModelConfig(**size, d_vocab=25, n_ctx=task.max_len), device="cpu"
    )
    cfg = adjpos.TrainConfig(
        steps=steps, eval_every=steps + 1, eval_size=8, device="cpu", target_accuracy=None
    )
    settings = {"task": task_name, "parameters": sum(p.numel() for p in model.parameters())}
    settings |= {"steps": steps, "batch_size": cfg.batch_size, "seq_len": task.max_len}
    shipped = []
    for name in available_pretrained():  # their wall time to target, from train.json
        info = pretrained_info(name)
        shipped.append({"task": name} | {k: info[k] for k in ("steps", "seconds", "accuracy")})
    return {
        "settings": settings | {"rounds": rounds},
        **compare(model, task, cfg, rounds),
        "shipped": shipped,
    }


def measure_text(
    layout: str, d_model: int, threads: list[int], steps: int, quick: bool, rounds: int
) -> dict:
    """The text recipe's model and training settings (quick: a tiny model on short windows),
    one comparison per thread count."""
    sizes = QUICK_TEXT if quick else {**RECIPE_MODEL, **RECIPE_DATA, "d_model": d_model}
    context, d_vocab = sizes["context"], sizes["vocab_size"]
    gen = torch.Generator().manual_seed(0)
    splits = {
        name: torch.randint(0, d_vocab, (n,), generator=gen, dtype=torch.int32)
        for name, n in (("train", 1_000_000), ("validation", 100_000))
    }
    task = TextTask(context, d_vocab, splits)
    model_cfg = layout_config(
        layout, **{k: sizes[k] for k in RECIPE_MODEL}, d_vocab=d_vocab, n_ctx=context
    )
    model = adjpos.build_model(model_cfg, device="cpu")
    train = {**RECIPE_TRAIN, "steps": steps, "eval_every": steps + 1, "eval_size": 8}
    if quick:
        train["batch_size"] = 4
    cfg = adjpos.TrainConfig(**train, device="cpu")
    rows = []
    for count in threads:
        torch.set_num_threads(count)
        rows.append({"threads": count, **compare(model, task, cfg, rounds)})
    settings = {"layout": layout, "parameters": sum(p.numel() for p in model.parameters())}
    settings |= {k: sizes[k] for k in RECIPE_MODEL} | {"d_vocab": d_vocab}
    settings |= {"steps": steps, "batch_size": cfg.batch_size, "seq_len": context}
    return {"settings": settings | {"rounds": rounds}, "rows": rows}


def print_results(results: dict) -> None:
    s, rates = results["settings"], results["tokens_per_s"]
    print(
        f"task {s['task']}, {s['parameters']} parameters, steps 2 to {s['steps'] - 1} of "
        f"{s['batch_size']} x {s['seq_len']} tokens, median of {s['rounds']} alternating rounds"
    )
    print(f"{'loop':<14}{'tokens/s':>12}")
    print(f"{'bare PyTorch':<14}{rates['bare']:>12.0f}")
    print(f"{'adjpos.train':<14}{rates['adjpos']:>12.0f}")
    ratio = results["ratio_adjpos_to_bare"]
    print(f"ratio adjpos/bare: {ratio:.3f} (target >= {TARGETS['task']})")
    print()
    print(f"{'shipped model':<14}{'steps':>7}{'seconds':>9}{'eval acc':>10}")
    for row in results["shipped"]:
        print(f"{row['task']:<14}{row['steps']:>7}{row['seconds']:>9.0f}{row['accuracy']:>10.4f}")


def print_text_results(results: dict) -> None:
    s = results["settings"]
    print(
        f"text, {s['layout']}, {s['n_layers']} layers of width {s['d_model']}, "
        f"{s['parameters']} parameters, steps 2 to {s['steps'] - 1} of {s['batch_size']} x "
        f"{s['seq_len']} tokens, median of {s['rounds']} alternating rounds"
    )
    print(f"{'threads':>7}{'bare tokens/s':>15}{'adjpos tokens/s':>17}{'ratio':>8}")
    for row in results["rows"]:
        rates = row["tokens_per_s"]
        print(
            f"{row['threads']:>7}{rates['bare']:>15.0f}{rates['adjpos']:>17.0f}"
            f"{row['ratio_adjpos_to_bare']:>8.3f}"
        )
    print(f"target: ratio adjpos/bare >= {TARGETS['text']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="addition", choices=adjpos.TASKS)
    parser.add_argument("--text", action="store_true", help="the text recipe's model instead")
    parser.add_argument("--layout", default="nope", choices=LAYOUTS, help="with --text")
    parser.add_argument(
        "--d-model", type=int, default=RECIPE_MODEL["d_model"], help="with --text (recipe: 64)"
    )
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="with --text: torch thread counts"
    )
    parser.add_argument("--steps", type=int, help="steps per loop (default 100; text 40)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (quick: 1)")
    parser.add_argument("--quick", action="store_true", help="tiny model, few steps")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args()
    steps = 10 if args.quick else args.steps or (40 if args.text else 100)
    rounds = 1 if args.quick else args.rounds
    if steps < 3:
        parser.error("--steps must be at least 3 (the first and the last are not timed)")
    # torch's own thread count, before --text sets one per row
    machine = {"platform": platform.platform(), "threads": torch.get_num_threads()}
    machine |= {"cores": os.cpu_count(), "quick": args.quick, "versions": versions()}
    if args.text:
        results = measure_text(args.layout, args.d_model, args.threads, steps, args.quick, rounds)
        print_text_results(results)
    else:
        results = measure(args.task, steps, args.quick, rounds)
        print_results(results)
    if args.json:
        write_json(args.json, {"machine": machine, **results})
