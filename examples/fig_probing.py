"""The probing figure: position read from variance, cosine similarity and the raw residual,
layer by layer, with order reconstruction, for one trained model and one random-init model.

Ridge probes with folds grouped by sequence, each score beside its chance level; shuffled
controls must sit at chance. For the full table over every model see
``examples/layerwise_probing.py``. Uses only the public API; ``--quick`` is the smoke run.

    python examples/fig_probing.py [--quick] [--task reversal] [--out figures]
"""

import argparse
from pathlib import Path

import torch

import adjpos
import adjpos.figures

FEATURES = ["variance", "cosine_profile", "cosine_first", "resid", "shuffled:cosine_profile"]


def main(quick: bool, task_name: str, out: Path) -> None:
    n_sequences, settings = (16, dict(cv=2, repeats=1)) if quick else (64, dict(cv=5, repeats=3))
    trained, task = adjpos.load_pretrained(task_name, device="cpu")
    gen = torch.Generator().manual_seed(4)
    cfg = adjpos.ModelConfig(n_layers=4, d_model=64, n_heads=4)  # the README's random model
    subjects = [
        (
            f"trained {task_name}",
            trained,
            adjpos.sequences_of_length(task, n_sequences, generator=gen),
        ),
        (
            "random-init",
            adjpos.build_model(cfg, device="cpu"),
            torch.randint(0, cfg.d_vocab, (n_sequences, 32), generator=gen),
        ),
    ]
    for label, model, tokens in subjects:
        result = adjpos.probe_positions(
            model, tokens, features=FEATURES, model_name=label, progress=False, **settings
        )
        result = result + adjpos.reconstruct_order(model, tokens, model_name=label)
        for name in ("variance", "cosine_profile", "resid"):
            best = max(
                (s for s in result.scores if (s.features, s.metric) == (name, "r2")),
                key=lambda s: s.value,
            )
            print(f"{label:<18} {name:<15} best R^2 {best.value:5.2f} at layer {best.layer}")
        stem = out / f"probes_{label.replace(' ', '_')}"
        fig = adjpos.figures.plot_probe_scores(result)
        saved = adjpos.figures.save_figure(fig, stem, png=not quick)
        print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few sequences and folds, no PNG")
    parser.add_argument("--task", default="reversal", help="which shipped model")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.task, args.out)
