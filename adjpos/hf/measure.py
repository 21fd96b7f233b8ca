"""What the layers of each kind do, over the tables of `adjpos.measure_layers`.

`summarise_kinds` groups one table's rows by kind; `nope_layer_effects` compares each NoPE
layer of a released interleaving with the all-RoPE model of the same weights.
`measure_layers` itself lives in the core (`adjpos.layerwise`: it works on any TransformerLens
model) and is re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adjpos.layerwise import LAYERS, measure_layers
from adjpos.stats import OUTCOMES, compare_intervals
from adjpos.validation import UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LAYERS", "measure_layers", "nope_layer_effects", "summarise_kinds"]


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
    ``layout`` ("released", "none", ...) and ``seed``. For each (`by`, released NoPE layer),
    over the seeds: the change from the layer before (mean, and the span of the seeds'
    intervals), how many seeds' intervals lie above 0, below it or reach it (``n_above``,
    ``n_below``, ``n_within``: counts, not a verdict), the control's change, ``versus_rope``
    (`adjpos.stats.compare_intervals` of the two spans) and the paired ``difference`` of the
    adjacency (same seed, same weights; mean, min and max over the seeds).
    """
    import pandas as pd

    by = [by] if isinstance(by, str) else list(by)
    needed = {*by, "layout", "seed", "layer", "kind", "adjacency", "change"}
    needed |= {"change_low", "change_high"}
    if missing := needed - set(rows.columns):
        raise UsageError(f"rows lack the columns {sorted(missing)}")
    released = rows[(rows["layout"] == "released") & (rows["kind"] == "nope")]
    control = rows[rows["layout"] == "none"].set_index([*by, "layer", "seed"])
    out = []
    for key, part in released.groupby([*by, "layer"], sort=False):
        group, layer = key[:-1], key[-1]
        keys = [(*group, layer, seed) for seed in part["seed"]]
        if not all(k in control.index for k in keys):
            raise UsageError(f"no all-RoPE control (layout 'none') for {by}={group} layer {layer}")
        out.append({**dict(zip(by, group, strict=True)), **_effect(part, control.loc[keys])})
    return pd.DataFrame(out)


def _effect(part: pd.DataFrame, rope: pd.DataFrame) -> dict:
    """One released NoPE layer over its seeds (`part`), against its all-RoPE rows (`rope`)."""
    low, high = part["change_low"], part["change_high"]
    found = [compare_intervals(a, b, 0.0, 0.0) for a, b in zip(low, high, strict=True)]
    diff = part["adjacency"].to_numpy() - rope["adjacency"].to_numpy()
    versus = compare_intervals(
        low.min(), high.max(), rope["change_low"].min(), rope["change_high"].max()
    )
    return {
        "layer": int(part["layer"].iloc[0]),
        "seeds": len(part),
        "adjacency": float(part["adjacency"].mean()),
        "change": float(part["change"].mean()),
        "change_low": float(low.min()),
        "change_high": float(high.max()),
        **{f"n_{where}": found.count(where) for where in OUTCOMES},  # each seed's against 0
        "rope_change": float(rope["change"].mean()),
        "rope_change_low": float(rope["change_low"].min()),
        "rope_change_high": float(rope["change_high"].max()),
        "versus_rope": versus,
        "difference": float(diff.mean()),
        "difference_min": float(diff.min()),
        "difference_max": float(diff.max()),
    }
