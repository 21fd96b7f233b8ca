"""Variance of the hidden state over d_model, by position and layer, in the trained models.

Chi et al.'s carrier: in NoPE models causal averaging is said to shrink the variance of hidden
states as position grows. The study's own stage
(`adjpos.study.claims.variance.measure_variance`), figures and numbers: the variance per
position, and per layer the ratio of its last third to its first third and its Spearman
correlation with position, trained and random-init seeds, with bootstrap intervals.
``--quick`` runs the study's tiny sizes.

    python examples/fig_variance_by_position.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import pandas as pd

import adjpos.figures
import adjpos.study
from adjpos.study.claims import variance


def main(quick: bool, out: Path) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    models = adjpos.study.Models(device="cpu")
    profiles, layers, paired = variance.measure_variance(models, sizes)
    cells = pd.DataFrame(variance.variance_numbers(layers, paired)["cells"])
    print("variance of the last third of the positions / the first third (mean over seeds)")
    print(cells.set_index(["task", "model", "layer"])["ratio"].unstack().round(2).to_string())
    figures = {
        "variance_by_position": variance.variance_figure(profiles),
        "variance_by_layer": variance.variance_layers_figure(layers),
    }
    for stem, fig in figures.items():
        saved = adjpos.figures.save_figure(fig, out / stem, png=not quick)
        print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the study's tiny sizes, no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
