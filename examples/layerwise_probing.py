"""Layer-wise probing: which carrier holds token position (cosine similarity, variance, resid)?

Probes random-init NoPE models at a few weight-init scales (on uniformly random tokens) and,
when they are shipped, the four trained models (on held-out sequences of their task, one
length per task), and prints per model the best score of each feature set over the layers,
with the layer and the chance level. Uses only the public API. ``--out DIR`` also writes
every score to DIR/probes.csv, and per model a JSON file (with the std over seeds) and a
figure. ``--quick`` runs a tiny version (the test suite's smoke run).

``--only trained`` (or ``random``) probes one family of models.

    python examples/layerwise_probing.py [--quick] [--out DIR] [--only trained|random]
"""

import argparse
from pathlib import Path

import torch

import adjpos
import adjpos.figures
from adjpos.pretrained import available_pretrained, load_pretrained

SCALES = [0.02, 0.1, 0.5]
CARRIERS = [
    "variance",
    "norm",
    "cosine_profile",
    "cosine_sorted",
    "cosine_mean",
    "cosine_first",
    "cosine_previous",
    "resid",
]
CONTROLS = ["shuffled:cosine_profile", "shuffled:resid"]


def models(quick: bool, only: str | None = None):
    """(label, model, tokens) for every model to probe."""
    n_layers, n_seq, n_pos = (2, 16, 12) if quick else (4, 64, 32)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 64, (n_seq, n_pos), generator=gen)
    for scale in [] if only == "trained" else SCALES[1:2] if quick else SCALES:
        cfg = adjpos.ModelConfig(n_layers=n_layers, d_model=64, n_heads=4, init_range=scale)
        yield f"random init {scale}", adjpos.build_model(cfg, device="cpu"), tokens
    for name in [] if quick or only == "random" else available_pretrained():
        model, task = load_pretrained(name, device="cpu")
        gen = torch.Generator().manual_seed(0)
        yield f"trained {name}", model, adjpos.sequences_of_length(task, n_seq, generator=gen)


def best(result, features, metric, probe=None):
    """'value (layer)' at the best layer for one feature set and metric, and its chance."""
    scores = [s for s in result.scores if (s.features, s.metric) == (features, metric)]
    scores = [s for s in scores if probe is None or s.probe == probe]
    top = max(scores, key=lambda s: s.value)
    return f"{top.value:.2f} ({top.layer})", top.baseline


def print_table(results, title, features, metric, probe=None):
    print(f"\n{title}: best over layers, 'value (layer)'")
    print(f"{'model':<18}" + "".join(f"{name:>24}" for name in features) + f"{'chance':>8}")
    for label, result in results:
        cells = [best(result, name, metric, probe) for name in features]
        chance = sum(c for _, c in cells) / len(cells)
        print(f"{label:<18}" + "".join(f"{text:>24}" for text, _ in cells) + f"{chance:>8.2f}")


def main(quick: bool = False, out: Path | None = None, only: str | None = None) -> None:
    settings = dict(cv=2, repeats=1) if quick else dict(cv=5, repeats=3)
    probes = dict(features=CARRIERS + CONTROLS, probe=["ridge", "logistic", "spline"])
    results = []
    for label, model, tokens in models(quick, only):
        result = adjpos.probe_positions(
            model, tokens, model_name=label, progress=False, **probes, **settings
        )
        result = result + adjpos.reconstruct_order(model, tokens, model_name=label)
        results.append((label, result))
        print(f"{label}: {tokens.shape[0]} sequences x {tokens.shape[1]} tokens")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            slug = label.replace(" ", "_")
            result.to_json(out / f"probes_{slug}.json")
            fig = adjpos.figures.plot_probe_scores(result)
            adjpos.figures.save_figure(fig, out / f"probes_{slug}")
    print(f"cv={settings['cv']} folds grouped by sequence, {settings['repeats']} seeds")
    ridge = ["variance", "norm", "cosine_profile", "resid"]
    print_table(results, "ridge R^2", ridge, "r2", probe="ridge")
    backward = ["cosine_first", "cosine_previous", "cosine_mean", "cosine_sorted"]
    print_table(results, "ridge R^2, other cosine sets", backward, "r2", probe="ridge")
    print_table(results, "ridge R^2, shuffled controls", CONTROLS, "r2", probe="ridge")
    one_number = ["variance", "norm", "cosine_first", "cosine_previous", "cosine_mean"]
    print_table(results, "spline R^2, one number against one", one_number, "r2", probe="spline")
    accuracy = ["variance", "cosine_profile", "cosine_first", "resid"]
    print_table(results, "logistic accuracy", accuracy, "accuracy")
    order = ["cosine_matrix", "cosine_first", "variance"]
    print_table(results, "order from shuffled states, |Kendall's tau|", order, "abs_kendall_tau")
    if out is not None:
        header, *_ = results[0][1].to_csv().splitlines(keepends=True)
        rows = [line for _, r in results for line in r.to_csv().splitlines(keepends=True)[1:]]
        (out / "probes.csv").write_text(header + "".join(rows))
        print(f"\nwrote probes.csv, and a JSON file and a figure per model, to {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    parser.add_argument("--out", type=Path, help="also write probes.csv, JSON and figures here")
    parser.add_argument("--only", choices=["trained", "random"], help="one family of models")
    args = parser.parse_args()
    main(args.quick, args.out, args.only)
