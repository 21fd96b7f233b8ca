"""Training throughput: `adjpos.train` against a bare PyTorch loop, same model, same batches.

Prints tokens per second of each and their ratio (target: adjpos within 15% of the bare loop,
ratio >= 0.85), then the wall time to reach the held-out accuracy of each shipped model.
``--json PATH`` also writes those numbers to PATH, atomically.

    python benchmarks/bench_training.py [--quick] [--task addition] [--steps 100] [--json PATH]
"""

import argparse
import copy
import platform
import statistics
import time

import torch

import adjpos
from adjpos.pretrained import available_pretrained, pretrained_info
from adjpos.runs import versions, write_json
from adjpos.training.loop import answer_loss, batch_generator


def bare_loop(model, task, cfg):
    """The reference: the same batches and optimiser, nothing else; returns seconds."""
    batches = [
        task.sample(cfg.batch_size, generator=batch_generator(cfg.seed, s))
        for s in range(cfg.steps)
    ]
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        betas=(0.9, 0.98),
    )
    start = time.perf_counter()
    for batch in batches:
        loss = answer_loss(model(batch.tokens), batch.tokens, batch.loss_mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def ours(model, task, cfg):
    """`adjpos.train` (batch sampling included), timed from the first to the last step."""
    stamps = []
    adjpos.train(
        model, task, cfg, on_step=lambda info: stamps.append(time.perf_counter()), progress=False
    )
    per_step = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    return per_step * cfg.steps


def measure(task_name: str, steps: int, quick: bool, rounds: int) -> dict:
    """Both loops over the same model and batches, alternated for `rounds` rounds."""
    task = adjpos.get_task(task_name)
    size = dict(n_layers=1, d_model=32, n_heads=2) if quick else dict(n_layers=4, d_model=128)
    model = adjpos.build_model(
        adjpos.ModelConfig(**size, d_vocab=25, n_ctx=task.max_len), device="cpu"
    )
    cfg = adjpos.TrainConfig(
        steps=steps, eval_every=steps + 1, eval_size=8, device="cpu", target_accuracy=None
    )
    tokens = steps * cfg.batch_size * task.max_len
    bare_loop(copy.deepcopy(model), task, adjpos.TrainConfig(steps=3))  # warm-up
    # Alternate the two loops, so a slow spell of the machine hits both alike; take medians.
    times: dict[str, list[float]] = {"bare": [], "adjpos": []}
    for _ in range(rounds):
        times["bare"].append(bare_loop(copy.deepcopy(model), task, cfg))
        times["adjpos"].append(ours(copy.deepcopy(model), task, cfg))
    bare, mine = statistics.median(times["bare"]), statistics.median(times["adjpos"])
    settings = {"task": task_name, "parameters": sum(p.numel() for p in model.parameters())}
    settings |= {"steps": steps, "batch_size": cfg.batch_size, "seq_len": task.max_len}
    shipped = []
    for name in available_pretrained():  # their wall time to target, from train.json
        info = pretrained_info(name)
        shipped.append({"task": name} | {k: info[k] for k in ("steps", "seconds", "accuracy")})
    return {
        "settings": settings | {"rounds": rounds},
        "seconds": times,
        "tokens_per_s": {"bare": tokens / bare, "adjpos": tokens / mine},
        "ratio_adjpos_to_bare": bare / mine,
        "shipped": shipped,
    }


def print_results(results: dict) -> None:
    s, rates = results["settings"], results["tokens_per_s"]
    print(
        f"task {s['task']}, {s['parameters']} parameters, {s['steps']} steps of "
        f"{s['batch_size']} x {s['seq_len']} tokens, median of {s['rounds']} alternating rounds"
    )
    print(f"{'loop':<14}{'tokens/s':>12}")
    print(f"{'bare PyTorch':<14}{rates['bare']:>12.0f}")
    print(f"{'adjpos.train':<14}{rates['adjpos']:>12.0f}")
    print(f"ratio adjpos/bare: {results['ratio_adjpos_to_bare']:.3f} (target >= 0.85)")
    print()
    print(f"{'shipped model':<14}{'steps':>7}{'seconds':>9}{'eval acc':>10}")
    for row in results["shipped"]:
        print(f"{row['task']:<14}{row['steps']:>7}{row['seconds']:>9.0f}{row['accuracy']:>10.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="addition", choices=adjpos.TASKS)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="tiny model, few steps")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args()
    steps, rounds = (10, 1) if args.quick else (args.steps, 3)
    results = measure(args.task, steps, args.quick, rounds)
    print_results(results)
    if args.json:
        machine = {"platform": platform.platform(), "threads": torch.get_num_threads()}
        machine |= {"quick": args.quick, "versions": versions()}
        write_json(args.json, {"machine": machine, **results})
