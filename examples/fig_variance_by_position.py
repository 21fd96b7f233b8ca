"""Variance of the hidden state over d_model, by position and layer, in the trained models.

Chi et al.'s carrier: in NoPE models causal averaging is said to shrink the variance of hidden
states as position grows. For each shipped model, held-out sequences of one length are
captured at every layer and the variance per position is averaged over them. Uses only the
public API; ``--quick`` is the test suite's smoke run.

    python examples/fig_variance_by_position.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import torch

import adjpos
import adjpos.figures
from adjpos.pretrained import available_pretrained


def main(quick: bool, out: Path) -> None:
    n_sequences = 8 if quick else 64
    rows = []
    for name in available_pretrained()[:1] if quick else available_pretrained():
        model, task = adjpos.load_pretrained(name, device="cpu")
        gen = torch.Generator().manual_seed(3)
        tokens = adjpos.sequences_of_length(task, n_sequences, generator=gen)
        variance = adjpos.position_variance(adjpos.capture_residuals(model, tokens)).mean(dim=1)
        for layer, per_position in enumerate(variance.tolist()):
            rows += [
                {"task": name, "layer": layer, "position": k, "variance": v}
                for k, v in enumerate(per_position)
            ]
        last = variance[-1]
        third = max(1, len(last) // 3)
        ratio = float(last[-third:].mean() / last[:third].mean())
        print(
            f"{name}: {tokens.shape[1]} positions; deepest layer, variance of the last third "
            f"over the first third: {ratio:.2f}"
        )
    fig = adjpos.figures.plot_variance_by_position(rows, panel="task", line="layer")
    saved = adjpos.figures.save_figure(fig, out / "variance_by_position", png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one task, few sequences, no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
