"""Claim 4: the first-layer averaging argument (with near-uniform attention nearby positions
share most of their average of the value vectors; `adjpos.theory`) against one-layer random-init
models over init scales and seeds, at the full width and the values' effective width.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import torch

from adjpos.models import ModelConfig, build_model
from adjpos.runs import write_json
from adjpos.stats import seed_interval
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, every_seed, judge, seeds_text
from adjpos.study.models import gen, rounded
from adjpos.tables import Table
from adjpos.theory import compare_first_layer, effective_width, predicted_adjacency

TITLE = "Claim 4: the first-layer argument"

THEORY = Table(init_range="float64", seed="int64", site="string", residual_ratio="float64")
THEORY += Table(measured_adjacency="float64", predicted_adjacency="float64")
THEORY += Table(effective_width="float64", predicted_effective="float64")
THEORY += Table(entropy_ratio="float64", mean_abs_error="float64")
N_POS, WIDTH = 32, 64


def measure(context: Context) -> dict[str, Any]:
    table, matrices = measure_theory(context.sizes, context.models.device)
    THEORY.write(context.results / "theory.csv", table)
    write_json(context.results / "theory_matrices.json", matrices)
    return theory_numbers(table, context.criteria.level)


def measure_theory(sizes: Any, device: str) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """First-layer measurements against the prediction, across init scales and seeds; and the
    measured and predicted matrices at `sizes.theory_heatmap_scale` (first seed)."""
    rows, matrices = [], []
    for scale in sizes.theory_scales:
        for seed in sizes.theory_seeds:
            cfg = ModelConfig(n_layers=1, d_model=WIDTH, init_range=scale, seed=seed)
            model = build_model(cfg, device=device)
            keys = torch.rand(sizes.theory_sequences, cfg.d_vocab, generator=gen("theory", seed))
            tokens = keys.argsort(dim=1)[:, :N_POS]  # distinct tokens: independent values
            d_eff = effective_width(model, tokens)
            for site in ("attn_out", "resid_mid"):
                comp = compare_first_layer(model, tokens, site=site)
                rows.append(_row(comp, sizes, scale, seed, site, d_eff))
                if seed == sizes.theory_seeds[0] and scale == sizes.theory_heatmap_scale:
                    for kind in ("measured", "predicted"):
                        matrices.append({"site": site, "kind": kind})
                        matrices[-1]["matrix"] = rounded(getattr(comp, kind))
    return THEORY.frame(rows), matrices


def _row(comp: Any, sizes: Any, scale: float, seed: int, site: str, d_eff: float) -> dict:
    options = {"residual_ratio": comp.residual_ratio, "n_samples": sizes.theory_samples}
    predicted, at_effective = (
        predicted_adjacency(N_POS, d_model=d, generator=gen("theory prediction", seed), **options)
        for d in (WIDTH, max(1, round(d_eff)))
    )
    return (
        {"init_range": scale, "seed": seed, "site": site, "residual_ratio": comp.residual_ratio}
        | {"measured_adjacency": comp.measured_adjacency}
        | {"predicted_adjacency": float(predicted[0]), "effective_width": d_eff}
        | {"predicted_effective": float(at_effective[0]), "entropy_ratio": comp.entropy_ratio}
        | {"mean_abs_error": comp.mean_abs_error}
    )


def theory_numbers(table: pd.DataFrame, level: float = 0.95) -> dict[str, Any]:
    """Measured first-layer adjacency against the prediction by init scale and site: the
    mean over seeds with its Student-t interval at `level` (std beside), the predictions and
    how uniform attention is."""
    rows = []
    for (scale, site), group in table.groupby(["init_range", "site"]):
        mean, low, high = seed_interval(group["measured_adjacency"], level=level)
        std = group["measured_adjacency"].std()
        rows.append(
            {"init_range": float(scale), "site": site, "seeds": len(group)}
            | {"measured": mean, "measured_low": low, "measured_high": high}
            | {"measured_std": None if pd.isna(std) else float(std)}
            | {k: float(group[k].mean()) for k in ("entropy_ratio", "effective_width")}
            | {k: float(group[f"{k}_adjacency" if k == "predicted" else k].mean())
               for k in ("predicted", "predicted_effective")}
        )  # fmt: skip
    return {"rows": rows, "seeds": sorted(int(s) for s in table["seed"].unique())}


def agrees(row: dict[str, Any], key: str, criteria: Criteria) -> Outcome:
    """For when the measured interval over seeds lies inside the prediction `key` +- the
    tolerance, against when it lies wholly outside, within otherwise (one seed: no
    interval, so within)."""
    band = row[key] - criteria.theory_tolerance, row[key] + criteria.theory_tolerance
    interval = row["measured_low"], row["measured_high"]
    sides = [judge(*interval, band[0], band[0]), judge(*interval, band[1], band[1], favour="below")]
    return Outcome.AGAINST if Outcome.AGAINST in sides else every_seed(sides)


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    claim = "The first-layer averaging argument predicts the first layer"
    evidence = f"attention output's {criteria.level:.0%} t-interval over seeds inside the "
    evidence += f"full-width prediction +- {fmt.n(criteria.theory_tolerance)}"
    words = {"seeds": seeds_text(numbers["seeds"]), "unit": "init scale"}
    found = [agrees(r, "predicted", criteria) for r in numbers["rows"] if r["site"] == "attn_out"]
    return [Verdict.tally(claim, found, **words, evidence=evidence)]


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    header = ["initial weight scale (std)", "site", "attention entropy ratio"]
    header += ["measured (t over seeds)", "std", "predicted (full width)", "agrees (full width)"]
    header += ["effective width", "predicted (effective width)", "agrees (effective width)"]
    one_seed = "one seed: no interval"  # why a scale's interval over seeds is missing
    rows = [
        [r["init_range"], r["site"], r["entropy_ratio"]]
        + [fmt.span(r["measured"], r["measured_low"], r["measured_high"], missing=one_seed)]
        + [r["measured_std"]]
        + [r["predicted"], agrees(r, "predicted", criteria), r["effective_width"]]
        + [r["predicted_effective"], agrees(r, "predicted_effective", criteria)]
        for r in numbers["rows"]
    ]
    text = fmt.text("theory.section", tolerance=fmt.n(criteria.theory_tolerance))
    return fmt.section(figures("theory"), fmt.table(header, rows), text)


def theory_figures(table: pd.DataFrame, matrices: list[dict[str, Any]], scale: float) -> dict:
    """Measured against predicted first-layer adjacency by init scale, and the heatmaps."""
    from adjpos.figures import plot_cosine_heatmaps, plot_first_layer_theory
    from adjpos.figures.style import label

    heatmaps = plot_cosine_heatmaps(
        [m["matrix"] for m in matrices],
        titles=[f"{label(m['site'])}, {m['kind']}" for m in matrices],
        title=f"First layer at initial weight scale {scale}: measured and predicted self-cosine",
        columns=2,
    )
    return {"theory_first_layer": plot_first_layer_theory(table), "theory_cosine": heatmaps}


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    table = THEORY.read(results / "theory.csv")
    matrices = json.loads((results / "theory_matrices.json").read_text())
    scale = sizes["theory_heatmap_scale"]
    captions = fmt.texts("theory.captions", scale=scale)
    return fmt.captioned(captions, **theory_figures(table, matrices, scale))
