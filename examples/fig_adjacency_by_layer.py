"""Adjacency score by layer for each task: trained NoPE vs random-init NoPE vs learned positions.

Held-out sequences of each task (right-padded; lengths keep padding out of the score) are
scored at every layer by the shipped trained model, by random-init NoPE models of the same
architecture, and by random-init models with learned positional embeddings: the study's own
stage (`adjpos.study.claims.adjacency.measure_adjacency`) and figures, at the study's sizes:
the study's score, and its six views against the controls. Prints the table. ``--quick``
runs the study's tiny sizes (the test suite's smoke run).

    python examples/fig_adjacency_by_layer.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import adjpos.figures
import adjpos.study
from adjpos.study.claims import adjacency


def main(quick: bool, out: Path) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    table, _ = adjacency.measure_adjacency(adjpos.study.Models(device="cpu"), sizes)
    study = adjacency.score_view(table, adjacency.MAIN_VIEW)
    means = study.groupby(["task", "model", "layer"], sort=False)["adjacency"].mean()
    print(means.unstack("layer").round(3).to_string())
    figures = {
        "adjacency_by_layer": adjpos.figures.plot_adjacency_by_layer(
            study, panel="task", line="model"
        ),
        "adjacency_views": adjacency.adjacency_views_figure(table),
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
