"""Self-cosine heatmaps of each task's example prompt at every layer, trained and random-init.

The study's own stage (`adjpos.study.claims.cosine.measure_cosine`) and figures: one grid of
heatmaps per task (each shipped seed and its own initial weights), axes labelled by the
prompt's characters, and the adjacency score of each matrix. ``--quick`` draws seed 0 only
and skips the PNGs (the test suite's smoke run).

    python examples/fig_cosine_heatmaps.py [--quick] [--out figures]
"""

import argparse
import dataclasses
from pathlib import Path

import adjpos.figures
import adjpos.study
from adjpos.study.claims import cosine


def main(quick: bool, out: Path) -> None:
    sizes = adjpos.study.FULL
    sizes = dataclasses.replace(sizes, trained_seeds=(0,)) if quick else sizes
    scores, panels = cosine.measure_cosine(adjpos.study.Models(device="cpu"), sizes)
    table = scores.set_index(["task", "model", "seed", "layer"])["adjacency"].unstack()
    print(table.round(3).to_string())
    figures = cosine.cosine_figures(panels)
    saved = adjpos.figures.save_figures(figures, out, png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
