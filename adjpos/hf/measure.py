"""Every residual layer of a model measured once and labelled with its kind (NoPE, RoPE, ...).

`measure_layers` gives one row per layer: its kind (`adjpos.layer_kinds`), the adjacency score
with a bootstrap interval over sequences, the change from the layer before (paired over the
same sequences, so a NoPE layer after RoPE layers can be seen to keep, sharpen or wash out
the pattern), the variance ratio and its Spearman correlation with position (intervals over
sequences), and optionally the linear probes' R^2 for position. `summarise_kinds` groups the
rows by kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from jaxtyping import Int
from torch import Tensor

from adjpos.capture import check_tokens, iter_residuals
from adjpos.hf.kinds import capture_kinds
from adjpos.metrics import adjacency_probability, cosine_matrix, position_variance
from adjpos.stats import VARIANCE_SUMMARY, bootstrap_interval, variance_summary
from adjpos.tables import Table

if TYPE_CHECKING:
    import pandas as pd

N_BOOT = 1000
LAYERS = Table(
    layer="int64",
    kind="string",
    adjacency="float64",
    adjacency_low="float64",
    adjacency_high="float64",
    change="float64",
    change_low="float64",
    change_high="float64",
    **VARIANCE_SUMMARY,
)


def measure_layers(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    *,
    probe_features: Sequence[str] = (),
    ties: str = "half",
    batch_size: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    progress: bool | None = None,
) -> pd.DataFrame:
    """One row per residual layer (0 = embeddings) of `model` on `tokens` (one length).

    Args:
        model: any TransformerLens model (adjpos's, a HookedTransformer, `adjpos.load_hf`).
        tokens: token ids [batch, pos], all sequences of one length (at least 3 tokens and
            2 sequences).
        probe_features: feature sets to probe with ridge regression (e.g. ``("variance",
            "resid")``, see `adjpos.probe_positions`); each adds a column ``r2_<name>``
            (cross-validated R^2 of position, 1 = read exactly).
        ties: how the adjacency score counts tied pairs ("half" by default, so chance is 0.5
            on any data, text with repeated tokens included; "strict" is the study's rule).
        batch_size: sequences per forward pass.
        n_boot: bootstrap resamples of the sequences.
        seed: seed of the bootstrap.
        progress: show progress bars.

    Returns:
        A frame with the columns of `LAYERS` (``change`` is NaN at layer 0), plus the probes'.

    Example:
        >>> import adjpos, torch
        >>> model = adjpos.load_hf(adjpos.hf_config("smollm3", nope="all"))
        >>> table = adjpos.measure_layers(model, torch.randint(3, 256, (8, 12)))
        >>> list(table["kind"][:3])
        ['embed', 'nope', 'nope']
    """
    tokens = check_tokens(model, tokens)
    batch, n = tokens.shape
    if batch < 2 or n < 3:
        raise ValueError(
            f"measure_layers needs at least 2 sequences of at least 3 tokens, got "
            f"{tuple(tokens.shape)}"
        )
    kinds = capture_kinds(model)
    rows, before = [], None
    stream = iter_residuals(model, tokens, batch_size=batch_size, progress=progress)
    for layer, acts in stream:
        acts = acts.double()
        per_sequence = adjacency_probability(cosine_matrix(acts), ties=ties).cpu()
        scores = per_sequence.numpy()
        low, high = bootstrap_interval(scores, n_boot=n_boot, seed=seed)
        change = (np.nan, np.nan, np.nan)
        if before is not None:
            diff = scores - before
            change = (float(diff.mean()), *bootstrap_interval(diff, n_boot=n_boot, seed=seed))
        variance = variance_summary(position_variance(acts).cpu().numpy(), n_boot=n_boot, seed=seed)
        rows.append(
            {
                "layer": layer,
                "kind": kinds[layer],
                "adjacency": float(scores.mean()),
                "adjacency_low": low,
                "adjacency_high": high,
                "change": change[0],
                "change_low": change[1],
                "change_high": change[2],
                **variance,
            }
        )
        before = scores
    table = LAYERS.frame(rows)
    if probe_features:
        table = table.join(_probe_r2(model, tokens, probe_features, seed), on="layer")
    return table


def summarise_kinds(table: pd.DataFrame) -> pd.DataFrame:
    """Mean of each measure over the layers of each kind (and how many layers it has)."""
    measures = ["adjacency", "change", "ratio", "spearman"]
    measures += [c for c in table.columns if c.startswith("r2_")]
    grouped = table.groupby("kind", sort=False)[measures]
    return grouped.mean().assign(layers=table.groupby("kind", sort=False).size()).reset_index()


def nope_layer_effects(rows: pd.DataFrame, *, by: str | list[str] = "family") -> pd.DataFrame:
    """What each NoPE layer of the released interleaving does to the adjacency score, against
    the all-RoPE model of the same architecture at the same layer (the matched control).

    `rows`: `measure_layers` tables stacked, with the columns `by` (one name or several),
    ``layout`` ("released",
    "none", ...) and ``seed``. For each (`by`, NoPE layer of the released layout), over the
    seeds: the change from the layer before (mean, and the span of the seeds' bootstrap
    intervals), its verdict (``sharpens``: every seed's interval above 0; ``washes out``:
    every one below; ``keeps``: every one contains 0; ``mixed`` otherwise), the control's
    change at that layer, and ``versus_rope`` ("above", "below": the two spans of intervals
    apart; "within" otherwise). Same seed, same weights: the layouts differ only in where RoPE
    is applied, so ``difference`` (released minus all-RoPE adjacency at that layer; mean, min
    and max over the seeds) is a paired comparison.

    Raises:
        ValueError: `rows` lack a column, or a released NoPE layer has no all-RoPE control.
    """
    import pandas as pd

    by = [by] if isinstance(by, str) else list(by)
    needed = {*by, "layout", "seed", "layer", "kind", "adjacency", "change"}
    needed |= {"change_low", "change_high"}
    if missing := needed - set(rows.columns):
        raise ValueError(f"rows lack the columns {sorted(missing)}")
    released = rows[(rows["layout"] == "released") & (rows["kind"] == "nope")]
    control = rows[rows["layout"] == "none"].set_index([*by, "layer", "seed"])
    out = []
    for key, part in released.groupby([*by, "layer"], sort=False):
        group, layer = key[:-1], key[-1]
        keys = [(*group, layer, seed) for seed in part["seed"]]
        if not all(k in control.index for k in keys):
            raise ValueError(f"no all-RoPE control (layout 'none') for {by}={group} layer {layer}")
        rope = control.loc[keys]
        low, high = part["change_low"], part["change_high"]
        verdict = (
            "sharpens"
            if (low > 0).all()
            else "washes out"
            if (high < 0).all()
            else "keeps"
            if ((low <= 0) & (high >= 0)).all()
            else "mixed"
        )
        versus = (
            "above"
            if low.min() > rope["change_high"].max()
            else "below"
            if high.max() < rope["change_low"].min()
            else "within"
        )
        diff = part["adjacency"].to_numpy() - rope["adjacency"].to_numpy()
        out.append(
            {
                **dict(zip(by, group, strict=True)),
                "layer": int(layer),
                "seeds": len(part),
                "adjacency": float(part["adjacency"].mean()),
                "change": float(part["change"].mean()),
                "change_low": float(low.min()),
                "change_high": float(high.max()),
                "verdict": verdict,
                "rope_change": float(rope["change"].mean()),
                "rope_change_low": float(rope["change_low"].min()),
                "rope_change_high": float(rope["change_high"].max()),
                "versus_rope": versus,
                "difference": float(diff.mean()),
                "difference_min": float(diff.min()),
                "difference_max": float(diff.max()),
            }
        )
    return pd.DataFrame(out)


def _probe_r2(model: Any, tokens: Tensor, features: Sequence[str], seed: int) -> pd.DataFrame:
    import pandas as pd

    from adjpos.probes import probe_positions

    names = list(features)
    result = probe_positions(
        model, tokens, features=names, probe="ridge", seed=seed, repeats=1, progress=False
    )
    layers = sorted({s.layer for s in result.scores})
    columns = {
        f"r2_{name}": [result.value(layer, name, "ridge", "r2") for layer in layers]
        for name in names
    }
    return pd.DataFrame(columns, index=pd.Index(layers, name="layer"))
