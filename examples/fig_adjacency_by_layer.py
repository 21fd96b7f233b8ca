"""Adjacency score by layer for each task: trained NoPE vs random-init NoPE vs learned positions.

Held-out sequences of each task (right-padded; `lengths` keeps padding out of the score) are
scored at every layer by the shipped trained model, by random-init NoPE models of the same
architecture, and by random-init models with learned positional embeddings. Prints the table
and draws the figure. Uses only the public API; ``--quick`` is the test suite's smoke run.

    python examples/fig_adjacency_by_layer.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import torch

import adjpos
import adjpos.figures
from adjpos.pretrained import available_pretrained


def main(quick: bool, out: Path) -> None:
    n_sequences, seeds = (16, [0]) if quick else (256, [0, 1, 2])
    rows = []
    for name in available_pretrained()[:1] if quick else available_pretrained():
        trained, task = adjpos.load_pretrained(name, device="cpu")
        batch = task.sample(n_sequences, generator=torch.Generator().manual_seed(2), split="test")
        models = [("trained", None, trained)]
        for seed in seeds:
            for label, positional in (("random-init", "none"), ("learned positions", "learned")):
                cfg = trained.adjpos_config.with_changes(seed=seed, positional=positional)
                models.append((label, seed, adjpos.build_model(cfg, device="cpu")))
        for label, seed, model in models:
            scores = adjpos.adjacency_score(model, batch.tokens, lengths=batch.lengths)
            for layer, score in enumerate(scores.tolist()):
                rows.append(
                    {"task": name, "model": label, "seed": seed, "layer": layer, "adjacency": score}
                )
    for task in dict.fromkeys(r["task"] for r in rows):
        for label in dict.fromkeys(r["model"] for r in rows):
            mine = [r for r in rows if (r["task"], r["model"]) == (task, label)]
            layers = sorted({r["layer"] for r in mine})
            means = [
                sum(r["adjacency"] for r in mine if r["layer"] == layer)
                / sum(r["layer"] == layer for r in mine)
                for layer in layers
            ]
            print(f"{task:<9} {label:<18}" + "".join(f"{m:7.3f}" for m in means))
    fig = adjpos.figures.plot_adjacency_by_layer(rows, panel="task", line="model")
    saved = adjpos.figures.save_figure(fig, out / "adjacency_by_layer", png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one task, few sequences, no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
