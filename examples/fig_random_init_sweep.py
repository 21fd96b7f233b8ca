"""The random-initialisation sweep: adjacency score over init scale, width, depth,
normalization and positional scheme, with its heatmaps, layer lines and histogram.

Uses only the public API. ``--quick`` runs a tiny grid (the test suite's smoke run).

    python examples/fig_random_init_sweep.py [--quick] [--out sweep-results] [--workers N]
"""

import argparse
from pathlib import Path

import adjpos
import adjpos.study
from adjpos.figures import save_figure, sweep_heatmap, sweep_histogram, sweep_layer_lines
from adjpos.study.sweep import DEFAULT_GRID, read_sweep_csv

QUICK_GRID = [{"init_range": [0.05, 0.5], "d_model": [16, 32]}, {"positional": ["none", "rotary"]}]


def main(out: Path, quick: bool, workers: int | None) -> None:
    base = adjpos.ModelConfig(n_layers=2 if quick else 4)
    adjpos.study.sweep(
        QUICK_GRID if quick else DEFAULT_GRID,
        seeds=[0] if quick else [0, 1, 2],
        n_sequences=4 if quick else 32,
        seq_len=8 if quick else 32,
        out_dir=out,
        workers=workers,
        base=base,
    )
    rows = read_sweep_csv(out / "sweep.csv")
    figures = {
        "sweep_init_by_width": sweep_heatmap(rows, "init_range", "d_model"),
        "sweep_by_positional": sweep_layer_lines(rows, "positional"),
        "sweep_histogram": sweep_histogram(rows),
    }
    if not quick:
        figures["sweep_depth_by_norm"] = sweep_heatmap(rows, "n_layers", "normalization_type")
        figures["sweep_by_depth"] = sweep_layer_lines(rows, "n_layers")
    for name, fig in figures.items():
        saved = save_figure(fig, out / name, png=not quick)
        print(f"{name}: {', '.join(str(p) for p in saved.written)}")
        if saved.png_skipped and not quick:
            print(f"  {saved.png_skipped}")
    last = max(r["layer"] for r in rows)
    scores = sorted(r["adjacency"] for r in rows if r["layer"] == last)
    print(
        f"{len(scores)} models; adjacency at layer {last}: min {scores[0]:.3f}, "
        f"median {scores[len(scores) // 2]:.3f}, max {scores[-1]:.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny grid, no PNG")
    parser.add_argument("--out", type=Path, default=Path("sweep-results"))
    parser.add_argument("--workers", type=int, default=None, help="default: all cores")
    args = parser.parse_args()
    main(args.out, args.quick, args.workers)
