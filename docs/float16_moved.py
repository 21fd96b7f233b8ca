"""What shipping the text models in float16 moved (docs/text-models.md, "Weights"): each shipped
text model (float16 weights) against the float32 weights its training run wrote, both run in
float32 on the study's held-out windows of the training context (the text shipped with adjpos,
`adjpos.text_layers.held_out_windows`): the loss (every token a window predicts) and its
difference paired by window, the largest change of a logit, and the largest change of the
adjacency score (raw states, sink left out; the text stage's view) over the layers.

    python docs/float16_moved.py RUNS [--models nope-seed-0 rope-d128-seed-0 ...] [--windows 64]

RUNS is the folder examples/train_text.py wrote its runs into (``RUNS/LAYOUT-seed-S/`` and
``RUNS/LAYOUT-dD-seed-S/``, each holding ``model.safetensors`` in float32); every run found
there is compared with the shipped model of its name (``pretrained:text-LAYOUT[-dD]:S``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import torch

from adjpos.capture import capture_residuals
from adjpos.models import load_model
from adjpos.pretrained import load_pretrained
from adjpos.scoring import sequence_scores
from adjpos.stats import paired_difference
from adjpos.text.evaluate import token_losses
from adjpos.text.recipe import RECIPE_DATA
from adjpos.text_layers import held_out_windows

RUN = re.compile(r"(?P<name>[a-z]+(?:-d\d+)?)-seed-(?P<seed>\d+)")


def compare(run: Path, windows: int) -> dict:
    """One run's float32 weights against the shipped float16 ones: the numbers of the doc."""
    match = RUN.fullmatch(run.name)
    shipped, tokenizer = load_pretrained(f"text-{match['name']}", int(match["seed"]), device="cpu")
    models = {"float32": load_model(run, device="cpu"), "float16": shipped}
    context = RECIPE_DATA["context"]
    window = held_out_windows(tokenizer, windows, context)
    losses, logits, scores = {}, {}, {}
    for kind, model in models.items():
        model.eval()
        with torch.no_grad():
            losses[kind] = token_losses(model, window, context)[:, 1:].mean(dim=1).numpy()
            logits[kind] = model(window[:8])
        stack = capture_residuals(model, window, progress=False).double()
        lengths = torch.full((len(window),), context)
        scores[kind] = [float(sequence_scores(s, lengths, skip_first=1).mean()) for s in stack]
    d, low, high = paired_difference(losses["float16"], losses["float32"], seed=0)
    moved = np.abs(np.subtract(scores["float16"], scores["float32"]))
    return {
        "model": run.name,
        "loss32": float(losses["float32"].mean()),
        "difference": (d, low, high),
        "logit": float((logits["float16"] - logits["float32"]).abs().max()),
        "adjacency": (float(moved.max()), int(moved.argmax())),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--models", nargs="+", default=None)
    parser.add_argument("--windows", type=int, default=64)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs = sorted(p for p in args.runs.iterdir() if RUN.fullmatch(p.name))
    runs = [p for p in runs if args.models is None or p.name in args.models]
    if not runs:
        raise SystemExit(f"no training run (LAYOUT[-dD]-seed-S) in {args.runs}")
    print("| model | loss, float32 | float16 - float32 [paired interval] "
          "| largest logit change | largest adjacency change (layer) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for run in runs:
        r = compare(run, args.windows)
        d, low, high = r["difference"]
        moved, layer = r["adjacency"]
        print(f"| {r['model']} | {r['loss32']:.4f} | {d:+.5f} [{low:+.5f}, {high:+.5f}] "
              f"| {r['logit']:.4f} | {moved:.5f} ({layer}) |")  # fmt: skip


if __name__ == "__main__":
    main()
