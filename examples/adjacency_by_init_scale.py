"""Adjacency score per layer of random-init NoPE models across weight-init scales.

Answers: for which init scales does the adjacency pattern appear at initialisation?
Uses only the public API. ``--quick`` runs a tiny version (the test suite's smoke run).

    python examples/adjacency_by_init_scale.py [--quick]
"""

import argparse

import torch

import adjpos

SCALES = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]


def main(quick: bool = False) -> None:
    n_layers, seeds, n_seq = (2, [0], 8) if quick else (4, [0, 1, 2], 64)
    scales = SCALES[2:4] if quick else SCALES
    cfg = adjpos.ModelConfig(n_layers=n_layers, d_model=64, n_heads=4)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.d_vocab, (n_seq, 32), generator=gen)
    print(f"mean adjacency score over seeds {seeds}; d_model=64, LN, GELU, {n_seq} x 32 tokens")
    print(f"{'init_range':>10}  " + "  ".join(f"layer {i}" for i in range(n_layers + 1)))
    for scale in scales:
        scores = torch.stack(
            [
                adjpos.adjacency_score(
                    adjpos.build_model(
                        adjpos.ModelConfig(**{**cfg.to_dict(), "init_range": scale, "seed": seed})
                    ),
                    tokens,
                )
                for seed in seeds
            ]
        ).mean(0)
        default = " (default)" if abs(scale - 0.8 / 64**0.5) < 1e-9 else ""
        print(f"{scale:>10}  " + "  ".join(f"{s:>7.3f}" for s in scores.tolist()) + default)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    main(parser.parse_args().quick)
