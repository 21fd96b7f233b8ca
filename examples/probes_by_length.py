"""Position probes by sequence length in a random-init NoPE model: does the similarity carrier
keep its resolution as sequences grow?

Ridge R^2 (5 folds grouped by sequence) of variance, the cosine profile and the raw residual,
at the deepest layer, and |Kendall's tau| of the order recovered from shuffled hidden states.
Public API only; ``--quick`` is the test suite's smoke run.

    python examples/probes_by_length.py [--quick]
"""

import argparse

import torch

import adjpos
import adjpos.probes

FEATURES = ["variance", "cosine_profile", "resid"]


def main(quick: bool) -> None:
    lengths = [8, 16] if quick else [16, 32, 64, 128, 256]
    cfg = adjpos.ModelConfig(n_layers=2 if quick else 4, n_ctx=max(lengths), d_vocab=512)
    model = adjpos.build_model(cfg)
    last = cfg.n_layers
    n_seq = 8 if quick else 32
    print(
        f"NoPE, {cfg.n_layers} layers, d_model {cfg.d_model}; {n_seq} random sequences per "
        f"length; layer {last}"
    )
    print(
        f"{'length':>6}"
        + "".join(f"{f:>16}" for f in FEATURES)
        + f"{'order: cosine':>15}{'order: variance':>17}{'chance tau':>12}"
    )
    gen = torch.Generator().manual_seed(0)
    for length in lengths:
        tokens = torch.randint(0, cfg.d_vocab, (n_seq, length), generator=gen)
        probes = adjpos.probe_positions(
            model,
            tokens,
            layers=[last],
            features=FEATURES,
            cv=2 if quick else 5,
            repeats=1,
            progress=False,
        )
        order = adjpos.reconstruct_order(model, tokens, layers=[last])
        r2 = [probes.value(last, f, "ridge", "r2") for f in FEATURES]
        taus = [
            order.value(last, "cosine_matrix", "spectral_seriation", "abs_kendall_tau"),
            order.value(last, "variance", "variance_sort", "abs_kendall_tau"),
        ]
        print(
            f"{length:>6}"
            + "".join(f"{v:>16.3f}" for v in r2)
            + f"{taus[0]:>15.3f}{taus[1]:>17.3f}{adjpos.probes.expected_abs_tau(length):>12.3f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    main(parser.parse_args().quick)
