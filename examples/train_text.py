"""Train the text models: the three layouts (all-NoPE, all-RoPE, hybrid) with one recipe and
three seeds each, on the Shakespeare corpus (`adjpos.text.corpus`), one run after another.

Each (layout, seed) is one `adjpos.train` run in ``OUT/LAYOUT-seed-S`` (resumable: run the
script again and every run continues from its last checkpoint; finished runs are left as they
are). The tokenizer is trained once on the train split into ``OUT/tokenizer.json`` and copied
into every run folder. The recipe is ``adjpos.text.recipe`` (the seeds differ only in the seed).
``--d-model D`` trains the recipe at width D instead of 64 (everything else kept, 4 heads of
D / 4), into ``OUT/LAYOUT-dD-seed-S``, installed as ``text-LAYOUT-dD/seedS``.

    python examples/train_text.py [--out runs/text] [--layouts nope rope hybrid]
        [--seeds 0 1 2] [--d-model D] [--quick] [--install] [--snapshots K]

``--quick`` trains a tiny model a few steps on a generated text (the smoke test; no download).
``--install`` copies the finished runs into ``adjpos/pretrained/text-LAYOUT/seedS`` (the final
weights in float16, which `adjpos.load_model` reads back as float32; `SNAPSHOTS` of the
training snapshots, in float16, none by default: the study reads none; the tokenizer, the run's
metrics and a ``train.json`` summary), without training anything; the summary's ``seconds``
is the run's wall time (the training loop's, evaluations included, summed over the sessions of
a resumed run). ``--measure N`` times N training steps of each layout with the recipe on one
thread and prints the CPU seconds per step (``time.process_time``, which a busy machine does
not inflate as it does the wall time).
"""

import argparse
import json
import logging
import shlex
import shutil
import sys
import time
from pathlib import Path

import torch

import adjpos
from adjpos.models import save_snapshot, snapshot_steps
from adjpos.models.checkpoint import WEIGHTS, write_weights
from adjpos.pretrained import HERE
from adjpos.runs import write_json
from adjpos.text.prepare import corpus_task, corpus_tokenizer, file_task
from adjpos.text.recipe import (
    LAYOUTS,
    RECIPE_DATA,
    RECIPE_MODEL,
    RECIPE_TRAIN,
    layout_config,
    sized,
)
from adjpos.text.tokenizer import TOKENIZER_FILE, save_tokenizer

QUICK_MODEL = {"n_layers": 4, "d_model": 16, "n_heads": 2}
QUICK_TRAIN = {"steps": 6, "eval_every": 3, "eval_size": 4, "batch_size": 4}
QUICK_DATA = {"vocab_size": 300, "context": 16}
# Snapshots each installed run keeps (float16): none, the study reads none of a text model
# (every layout's step 0 is `build_model` of its config and seed).
SNAPSHOTS = 0
RECIPE_WIDTH = RECIPE_MODEL["d_model"]


def size_tag(d_model: int) -> str:
    """What names a run of width `d_model` after its layout: nothing at the recipe's width."""
    return sized("", d_model)


def generated_text(n_lines: int = 2000) -> str:
    """A small English-like text for the smoke test (no corpus needed)."""
    words = "the king and queen of a land far away did speak with love to all".split()
    gen = torch.Generator().manual_seed(0)
    picks = torch.randint(0, len(words), (n_lines, 8), generator=gen).tolist()
    return "".join(" ".join(words[i] for i in row).capitalize() + ".\n" for row in picks)


def run_all(
    out: Path, layouts: list[str], seeds: list[int], quick: bool, d_model: int = RECIPE_WIDTH
) -> None:
    data = QUICK_DATA if quick else RECIPE_DATA
    if quick:
        source = out / "generated.txt"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(generated_text())
        task, tokenizer = file_task(source, data["context"], vocab_size=data["vocab_size"])
        save_tokenizer(tokenizer, out)
    else:
        tokenizer = corpus_tokenizer(data["vocab_size"], out / TOKENIZER_FILE)
        task = corpus_task(tokenizer, data["context"])
    logging.info("tokens per split: %s", {k: int(v.numel()) for k, v in task.splits.items()})
    for seed in seeds:
        for layout in layouts:
            folder = out / f"{layout}{size_tag(d_model)}-seed-{seed}"
            model_options = {**RECIPE_MODEL, **(QUICK_MODEL if quick else {})}
            if size_tag(d_model):  # another width than the recipe's, the smoke test's too
                model_options["d_model"] = d_model
            cfg = layout_config(
                layout, **model_options, d_vocab=task.d_vocab, n_ctx=task.context, seed=seed
            )
            train_cfg = adjpos.TrainConfig(
                **{**RECIPE_TRAIN, **(QUICK_TRAIN if quick else {})}, seed=seed, device="cpu"
            )
            start = time.time()
            logging.info("start %s (%s)", folder.name, adjpos.layer_kinds(adjpos.build_model(cfg)))
            result = adjpos.train(
                adjpos.build_model(cfg, device="cpu"), task, train_cfg, out_dir=folder, resume=True
            )
            shutil.copyfile(out / TOKENIZER_FILE, folder / TOKENIZER_FILE)
            last = result.history[-1] if result.history else {}
            logging.info("done %s in %.0f s now", folder.name, time.time() - start)
            print(
                f"{folder.name}: {result.steps} steps, validation loss {last['val_loss']:.4f}, "
                f"{result.seconds:.0f} s of training"
            )


def install(
    out: Path,
    layout: str,
    seed: int,
    *,
    keep: int = SNAPSHOTS,
    into: Path = HERE,
    d_model: int = RECIPE_WIDTH,
) -> Path:
    """Copy the finished run ``OUT/LAYOUT[-dD]-seed-S`` into ``INTO/text-LAYOUT[-dD]/seedS``,
    with `keep` of its snapshots in float16 (spread evenly by index, the first and the last
    among them)."""
    from adjpos.models.checkpoint import spread_evenly

    tag = size_tag(d_model)
    source = out / f"{layout}{tag}-seed-{seed}"
    target = into / f"text-{layout}{tag}" / f"seed{seed}"
    metrics = json.loads((source / "metrics.json").read_text())
    if metrics["step"] != metrics["train"]["steps"]:
        raise SystemExit(f"{source} is not finished: step {metrics['step']}")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("config.json", "metrics.json", "tokenizer.json"):
        shutil.copy2(source / name, target / name)
    for step in spread_evenly(snapshot_steps(source), keep) if keep else ():
        model = adjpos.load_model(source, step=step, device="cpu")
        save_snapshot(model, target, step, dtype=torch.float16)
    model = adjpos.load_model(source, device="cpu")
    write_weights(model, target / WEIGHTS, dtype=torch.float16)
    last = metrics["history"][-1]
    command = f"python examples/train_text.py --out {out} --layouts {layout} --seeds {seed}"
    summary = {
        "command": command + (f" --d-model {d_model}" if tag else ""),
        "layout": layout,
        "layer_kinds": adjpos.layer_kinds(model),
        "steps": metrics["step"],
        "seconds": round(metrics["seconds"], 1),  # wall time of the training loop
        "val_loss": last["val_loss"],
        "accuracy": last["accuracy"],
        "eval_size": metrics["train"]["eval_size"],
        "position_free": adjpos.is_position_free(model),
        "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }
    write_json(target / "train.json", summary)
    return target


def measure(steps: int, layouts: list[str], d_model: int = RECIPE_WIDTH) -> None:
    """Print the CPU seconds per training step of each layout (the recipe at width `d_model`,
    random windows)."""
    from adjpos.training.loop import _step

    context, d_vocab = RECIPE_DATA["context"], RECIPE_DATA["vocab_size"]
    ids = torch.randint(0, d_vocab, (100_000,), generator=torch.Generator().manual_seed(0))
    task = adjpos.text.TextTask(context, d_vocab, {"train": ids})
    train_cfg = adjpos.TrainConfig(**RECIPE_TRAIN, device="cpu")
    for layout in layouts:
        model_options = {**RECIPE_MODEL, "d_model": d_model}
        cfg = layout_config(layout, **model_options, d_vocab=d_vocab, n_ctx=context)
        model = adjpos.build_model(cfg, device="cpu")
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
        _step(model, task, train_cfg, opt, 0, torch.device("cpu"))  # warm-up
        start = time.process_time()
        for step in range(steps):
            _step(model, task, train_cfg, opt, step, torch.device("cpu"))
        per_step = (time.process_time() - start) / steps
        print(
            f"{layout}{size_tag(d_model)}: {per_step:.3f} CPU s per step, "
            f"{per_step * train_cfg.steps / 60:.1f} min per run"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/text"))
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--d-model", type=int, default=RECIPE_WIDTH, help="width (the recipe's: 64)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--install", action="store_true", help="copy finished runs into the package"
    )
    parser.add_argument("--snapshots", type=int, default=SNAPSHOTS, metavar="K")
    parser.add_argument("--measure", type=int, metavar="N", help="time N steps per layout")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    if args.measure:
        measure(args.measure, args.layouts, args.d_model)
        return
    if args.install:
        for seed in args.seeds:
            for layout in args.layouts:
                target = install(args.out, layout, seed, keep=args.snapshots, d_model=args.d_model)
                print("installed", target)
        return
    logging.info("%s", shlex.join([sys.executable, *sys.argv]))
    run_all(args.out, args.layouts, args.seeds, args.quick, args.d_model)


if __name__ == "__main__":
    main()
