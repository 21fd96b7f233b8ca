"""Where the pattern lives: the position and context parts of the hidden states (Song and
Zhong, 2024, find position[t] a smooth, low-dimensional curve), trained models against their
own initial weights. If the pattern is the curve's smoothness, taking it away takes the pattern
with it: judged held out, each sequence losing the curve fitted on the other folds
(`adjpos.metrics.decomposition_shares`), so its own states never enter what it loses.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from adjpos.metrics import decompose, decomposition_shares, position_context_adjacency
from adjpos.metrics.decompose import SHARE_PARTS, position_curve_pcs
from adjpos.stats import bootstrap_interval, paired_difference
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Verdict, per_seed
from adjpos.study.models import layer_states
from adjpos.study.views import KEYS, paired_seeds, seed_summary, span_of
from adjpos.tables import Table

TITLE = "Position and context parts: does the position curve carry the pattern?"

N_PCS = 3
# Scored per sequence, with 95% bootstrap intervals over the sequences.
INTERVALS = ("whole", "rest", "difference")
SHARES = [f"{part}_share{fit}" for fit in ("", "_held_out") for part in SHARE_PARTS]
DECOMPOSITION = KEYS + Table(**dict.fromkeys(SHARES, "float64"))
DECOMPOSITION += Table(**{f"pc{i + 1}": "float64" for i in range(N_PCS)}, position="float64")
DECOMPOSITION += Table(**{f"{s}{e}": "float64" for s in INTERVALS for e in ("", "_low", "_high")})
DECOMPOSITION += Table(n_sequences="int64")


def measure(context: Context) -> dict[str, Any]:
    table = measure_decomposition(context.models, context.sizes, **context.criteria.draws)
    DECOMPOSITION.write(context.results / "decomposition_by_layer.csv", table)
    return decomposition_numbers(table)


def measure_decomposition(models: Any, sizes: Any, **draws: Any) -> pd.DataFrame:
    """Per layer, for each trained seed and its own initial weights on the same sequences of
    one length: the shares in sample and held out, the position curve's top principal
    components and adjacency score, and each sequence's score whole and without the held-out
    curve (both less the mean), with bootstrap intervals over the sequences (`draws`: n_boot
    and level), and their paired difference."""
    found = layer_states(models, sizes)
    return DECOMPOSITION.frame([key | layer_row(x, tokens, **draws) for key, tokens, x in found])


def layer_row(states: torch.Tensor, tokens: torch.Tensor, **draws: Any) -> dict[str, Any]:
    """The decomposition's numbers of one layer's states [sequence, position, d_model]."""
    parts, shares = decompose(states), decomposition_shares(states, tokens)
    pcs = position_curve_pcs(parts, k=min(N_PCS, *parts.position.shape))
    ratios = pcs.explained_variance_ratio.tolist() + [float("nan")] * N_PCS
    scores = position_context_adjacency(parts, curve=shares.held_out_curve)
    whole, rest = scores.whole.cpu().numpy(), scores.rest.cpu().numpy()
    row = {f"{p}_share": shares.in_sample[p] for p in SHARE_PARTS}
    row |= {f"{p}_share_held_out": shares.held_out[p] for p in SHARE_PARTS}
    row |= {f"pc{i + 1}": ratios[i] for i in range(N_PCS)} | {"position": float(scores.position)}
    for name, values in (("whole", whole), ("rest", rest)):
        low, high = bootstrap_interval(values, **draws)
        row |= {name: float(values.mean()), f"{name}_low": low, f"{name}_high": high}
    difference, low, high = paired_difference(whole, rest, **draws)
    row |= {"difference": difference, "difference_low": low, "difference_high": high}
    return row | {"n_sequences": len(whole)}


def decomposition_numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Per task, model kind and layer: the means over seeds of the shares, the components
    and the three scores, with the range of the seeds' curve scores and the spans of their
    intervals of the others; the whole minus the rest over seeds (t-interval) and each
    seed's paired interval."""
    keys = ["task", "model", "layer"]
    bounds = {"position": (), **{s: (f"{s}_low", f"{s}_high") for s in ("whole", "rest")}}
    spans = {s: seed_summary(table, s, *b).set_index(keys) for s, b in bounds.items()}
    cells = []
    for (task, model, layer), group in table.groupby(keys, sort=False):
        cell = {"task": task, "model": model, "layer": int(layer)}
        cell |= {share: float(group[share].mean()) for share in SHARES}
        cell |= {f"pc{i + 1}": float(group[f"pc{i + 1}"].mean()) for i in range(N_PCS)}
        for score, span in spans.items():
            cell |= span_of(score, span.loc[(task, model, layer)])
        cell |= paired_seeds(group, "difference", "difference_low", "difference_high")
        cells.append(cell | {"seeds": sorted(int(s) for s in group["seed"])})
    return {"cells": cells}


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    claim = "{kind} NoPE models: the position curve carries the pattern, removing it lowers "
    claim += "the score (Song and Zhong's decomposition, not a claim of the study)"
    evidence = "each sequence's score (states less their mean) minus its score without the "
    evidence += f"curve fitted on other sequences, paired {criteria.level:.0%} bootstrap interval "
    evidence += f"above 0 in every seed, layers >= {criteria.first_layer}"
    return Verdict.per_model_kind(numbers["cells"], criteria, claim, per_seed, evidence)


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    cells = numbers["cells"]
    rows = [
        [c["task"], c["model"], c["layer"]]
        + [" / ".join(fmt.n(c[f"{p}_share_held_out"]) for p in SHARE_PARTS), c["position_share"]]
        + [" / ".join(fmt.n(c[f"pc{i + 1}"]) for i in range(N_PCS))]
        + [fmt.span(c[s], c[f"{s}_low"], c[f"{s}_high"]) for s in ("position", "whole", "rest")]
        + [fmt.span(c["difference"], c["difference_low"], c["difference_high"]), per_seed(c)]
        for c in cells
    ]
    shares = "shares held out: mean / token means / position curve / context (per-sequence mean)"
    header = ["task", "model", "layer", f"{shares} / residual", "position share in sample"]
    header += [f"position curve: shares of its top {N_PCS} principal components"]
    header += ["adjacency of the curve alone (seed range)", "adjacency, whole (seed span)"]
    header += ["adjacency without the held-out curve (seed span)"]
    header += ["whole - without (t-interval over seeds)", "removing the curve lowers the score"]
    text = fmt.text("decomposition.section", level=f"{criteria.level:.0%}")
    return fmt.section(figures("decomposition"), fmt.table(header, rows), text)


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """The held-out shares stacked by layer, and the three scores by layer with seed spans,
    one panel per task and model kind."""
    from adjpos.figures import plot_intervals, plot_variance_shares

    table = DECOMPOSITION.read(results / "decomposition_by_layer.csv")
    shares = [f"{part}_share_held_out" for part in SHARE_PARTS]
    rows = table.melt(KEYS.names, shares, var_name="part", value_name="share")
    rows = rows.assign(part=rows["part"].str.removesuffix("_share_held_out"))
    frames = [seed_summary(table, "position").assign(part="position curve alone")]
    frames += [
        seed_summary(table, s, f"{s}_low", f"{s}_high").assign(part=label)
        for s, label in (("whole", "whole"), ("rest", "without the held-out curve"))
    ]
    axes = {"x": "layer", "y": "value", "low": "low", "high": "high", "color": "part"}
    facets = {"facet_col": "task", "facet_row": "model", "y_title": "adjacency"}
    shown = plot_variance_shares(rows, title="Shares of the decomposition by layer, held out")
    title = "Adjacency with and without the position curve (seed spans of intervals)"
    scores = plot_intervals(pd.concat(frames), **axes, **facets, title=title)
    captions = fmt.texts("decomposition.captions")
    return fmt.captioned(captions, decomposition_shares=shown, decomposition_adjacency=scores)
