"""The tables of docs/theory.md: the first-layer prediction against random-init NoPE models.

For each init scale: how uniform block 0's attention is (entropy, logit variance), and how close
the measured self-cosine matrices and adjacency scores of the first layer come to
`adjpos.theory.predicted_cosine` (closed form) and `adjpos.theory.predicted_adjacency` (Monte
Carlo at the model's width and at a third of it), without and with the residual. The figure of
the same comparison is ``examples/fig_theory_first_layer.py``. Uses only the public API;
``--quick`` runs a tiny version (the test suite's smoke run).

    python examples/theory_first_layer_table.py [--quick]
"""

import argparse
import math

import torch

import adjpos
import adjpos.theory
from adjpos.seeds import derived_generator

SCALES = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
D_MODEL, N_POS = 64, 32


def distinct_tokens(n_seq: int, d_vocab: int, seed: int) -> torch.Tensor:
    """Random sequences without repeated tokens, so the value vectors are independent."""
    keys = torch.rand(n_seq, d_vocab, generator=derived_generator(seed, "theory tokens"))
    return keys.argsort(dim=1)[:, :N_POS]


def predicted_score(width: int, rho: float, *, n_samples: int, seed: int) -> float:
    """Monte Carlo adjacency score of the idealised first layer at this width and rho."""
    gen = derived_generator(seed, "theory prediction")
    score = adjpos.theory.predicted_adjacency(
        N_POS, d_model=width, residual_ratio=rho, n_samples=n_samples, generator=gen
    )
    return float(score[0])


def measure(scale: float, seeds: list[int], n_seq: int, n_samples: int) -> dict[str, float]:
    """Every number of one table row, averaged over the seeds."""
    rows = []
    for seed in seeds:
        cfg = adjpos.ModelConfig(n_layers=1, d_model=D_MODEL, init_range=scale, seed=seed)
        model = adjpos.build_model(cfg, device="cpu")
        tokens = distinct_tokens(n_seq, cfg.d_vocab, seed=seed)
        out, mid, post = (
            adjpos.theory.compare_first_layer(model, tokens, site=site)
            for site in ("attn_out", "resid_mid", "resid_post")
        )
        below = out.error.isfinite()
        predict = {"n_samples": n_samples, "seed": seed}
        rows.append(
            {
                "entropy": out.entropy_ratio,
                "logit_var": out.attention_logit_var,
                "shrink": math.exp(-out.attention_logit_var),
                "cos_ratio": float((out.measured[below] / out.predicted[below]).mean()),
                "out_meas": out.measured_adjacency,
                "out_pred": predicted_score(D_MODEL, 0.0, **predict),
                "out_pred_3": predicted_score(D_MODEL // 3, 0.0, **predict),
                "out_mae": out.mean_abs_error,
                "rho": mid.residual_ratio,
                "mid_meas": mid.measured_adjacency,
                "mid_pred": predicted_score(D_MODEL, mid.residual_ratio, **predict),
                "mid_mae": mid.mean_abs_error,
                "post_meas": post.measured_adjacency,
                "post_mae": post.mean_abs_error,
            }
        )
    return {key: sum(row[key] for row in rows) / len(rows) for key in rows[0]}


def print_table(title: str, columns: list[tuple[str, str]], results: dict) -> None:
    print(f"\n{title}")
    print(f"{'init_range':>10}  " + "  ".join(f"{head:>10}" for head, _ in columns))
    for scale, row in results.items():
        print(f"{scale:>10}  " + "  ".join(f"{row[key]:>10.3f}" for _, key in columns))


def main(quick: bool = False) -> None:
    seeds, n_seq, n_samples = ([0], 16, 64) if quick else ([0, 1, 2], 256, 512)
    scales = SCALES[2:4] if quick else SCALES
    results = {scale: measure(scale, seeds, n_seq, n_samples) for scale in scales}
    print(
        f"1-layer NoPE models, d_model={D_MODEL}, 4 heads, LN, GELU; {n_seq} sequences of "
        f"{N_POS} distinct tokens; mean over seeds {seeds}"
    )
    attention = [
        ("H/log(k+1)", "entropy"),
        ("logit var", "logit_var"),
        ("exp(-var)", "shrink"),
        ("cos m/p", "cos_ratio"),
        ("score", "out_meas"),
        ("pred d", "out_pred"),
        ("pred d/3", "out_pred_3"),
        ("cos MAE", "out_mae"),
    ]
    residual = [
        ("rho", "rho"),
        ("pred", "mid_pred"),
        ("mid score", "mid_meas"),
        ("mid MAE", "mid_mae"),
        ("post score", "post_meas"),
        ("post MAE", "post_mae"),
    ]
    print_table("attention output alone (attn_out, rho = 0)", attention, results)
    print_table("with the residual (resid_mid; resid_post adds the MLP)", residual, results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    main(args.quick)
