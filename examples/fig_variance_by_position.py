"""Variance of the hidden state over d_model, by position and layer, in the trained models.

Chi et al.'s carrier: in NoPE models causal averaging is said to shrink the variance of hidden
states as position grows. The study's own stage (`adjpos.study.stages.measure_variance`),
figure and numbers: the variance per position, and the ratio of its last third to its first
third at every layer, trained and random-init. ``--quick`` runs the study's tiny sizes.

    python examples/fig_variance_by_position.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import pandas as pd

import adjpos.figures
import adjpos.study


def main(quick: bool, out: Path) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    table = adjpos.study.stages.measure_variance(adjpos.study.Models(device="cpu"), sizes)
    ratios = pd.DataFrame(adjpos.study.numbers.variance_numbers(table)["ratios"])
    print("variance of the last third of the positions / the first third")
    print(ratios.set_index(["task", "model", "layer"])["ratio"].unstack().round(2).to_string())
    fig = adjpos.study.figures.variance_figure(table)
    saved = adjpos.figures.save_figure(fig, out / "variance_by_position", png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the study's tiny sizes, no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
