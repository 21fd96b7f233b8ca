"""The random-initialisation sweep: adjacency score over init scale, width, depth,
normalization and positional scheme, with its heatmaps, layer lines and histogram.

The study's own stage (`adjpos.study.claims.sweep.measure_sweep`) and figures at the study's
sizes and grid; resumable (re-run the same command). ``--quick`` runs the study's tiny grid.

    python examples/fig_random_init_sweep.py [--quick] [--out sweep-results] [--workers N]
"""

import argparse
from pathlib import Path

import adjpos.figures
import adjpos.study
import adjpos.sweep
from adjpos.study.claims import sweep


def main(out: Path, quick: bool, workers: int | None) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    result = sweep.measure_sweep(out, sizes, workers=0 if quick else workers, device="cpu")
    base = sweep.sweep_base(sizes)
    figures = sweep.sweep_figures(result.table, sizes.grid, base)
    saved = adjpos.figures.save_figures(figures, out, png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written))
    numbers = sweep.sweep_numbers(
        result.table, adjpos.sweep.rows_of_subgrid(result.table, sizes.grid[0], base)
    )
    every, nope = (numbers[k] for k in ("deepest", "nope_deepest"))
    print(
        f"{sum(a > 0.5 for a in every)} of {len(every)} models above 0.5 at their deepest "
        f"layer ({sum(a > 0.5 for a in nope)} of {len(nope)} NoPE)"
    )
    for row in numbers["by_init"]:
        print(f"init_range {row['init_range']:<5} mean adjacency {row['mean']:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the study's tiny grid, no PNG")
    parser.add_argument("--out", type=Path, default=Path("sweep-results"))
    parser.add_argument("--workers", type=int, default=None, help="default: all cores")
    args = parser.parse_args()
    main(args.out, args.quick, args.workers)
