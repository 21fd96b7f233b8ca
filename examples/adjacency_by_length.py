"""Adjacency score by sequence length, random-init NoPE models, up to 1,024 tokens.

Does the pattern keep its resolution as sequences grow? Prints the score at every layer for
each length, beside the idealised first-layer prediction at the same width. Public API only;
``--quick`` is the test suite's smoke run.

    python examples/adjacency_by_length.py [--quick]
"""

import argparse

import torch

import adjpos
import adjpos.theory


def main(quick: bool) -> None:
    lengths = [8, 16, 32] if quick else [16, 32, 64, 128, 256, 512, 1024]
    n_sequences = 4 if quick else 16
    cfg = adjpos.ModelConfig(n_layers=2 if quick else 4, n_ctx=max(lengths), d_vocab=512)
    model = adjpos.build_model(cfg)
    gen = torch.Generator().manual_seed(0)
    # The prediction keeps the residual: its weight is measured on this model's embeddings.
    probe = torch.randint(0, cfg.d_vocab, (8, 32), generator=torch.Generator().manual_seed(2))
    rho = adjpos.theory.estimate_residual_ratio(model, probe)
    predicted = adjpos.theory.predicted_adjacency(
        lengths,
        d_model=cfg.d_model,
        residual_ratio=rho,
        n_samples=32,
        generator=torch.Generator().manual_seed(1),
    )
    print(
        f"NoPE, {cfg.n_layers} layers, d_model {cfg.d_model}, d_vocab {cfg.d_vocab}, "
        f"{n_sequences} random sequences per length"
    )
    header = "  ".join(f"layer {i}" for i in range(cfg.n_layers + 1))
    print(f"{'length':>6}  {header}  first-layer prediction")
    for length, pred in zip(lengths, predicted.tolist(), strict=True):
        tokens = torch.randint(0, cfg.d_vocab, (n_sequences, length), generator=gen)
        scores = adjpos.adjacency_score(model, tokens, batch_size=4)
        row = "  ".join(f"{s:>7.3f}" for s in scores.tolist())
        print(f"{length:>6}  {row}  {pred:>7.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    main(parser.parse_args().quick)
