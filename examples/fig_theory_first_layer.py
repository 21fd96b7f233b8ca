"""The first-layer argument against one-layer random-init NoPE models, across init scales.

The study's own stage (`adjpos.study.claims.theory.measure_theory`) and figures: the measured
first-layer adjacency beside the prediction for near-uniform attention, how uniform attention
is, and the measured and predicted self-cosine matrices. The fuller tables of docs/theory.md
come from ``examples/theory_first_layer_table.py``. ``--quick`` runs the study's tiny sizes.

    python examples/fig_theory_first_layer.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import pandas as pd

import adjpos.figures
import adjpos.study
from adjpos.study.claims import theory


def main(quick: bool, out: Path) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    table, matrices = theory.measure_theory(sizes, device="cpu")
    rows = pd.DataFrame(theory.theory_numbers(table)["rows"])
    print(rows.round(3).to_string(index=False))
    figures = theory.theory_figures(table, matrices, sizes.theory_heatmap_scale)
    saved = adjpos.figures.save_figures(figures, out, png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the study's tiny sizes, no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
