"""Every residual layer of a model measured once and labelled with its kind (NoPE, RoPE, ...).

`measure_layers` gives one row per layer: its kind (`adjpos.layer_kinds`), the adjacency score
and its change from the layer before (paired over the same sequences, so a NoPE layer after
RoPE layers can be seen to keep, sharpen or wash out the pattern), the variance ratio and its
Spearman correlation with position, each with an interval over sequences, and optionally the
probes' R^2 for position; in one forward pass (`adjpos.capture.reduce_residuals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from jaxtyping import Bool, Int
from torch import Tensor

from adjpos.capture import check_tokens, reduce_residuals
from adjpos.metrics import DEFAULT_TIES, position_variance
from adjpos.metrics.checks import check_ties
from adjpos.models import capture_kinds
from adjpos.scoring import check_rows, check_skip_first, sequence_scores
from adjpos.stats import VARIANCE_SUMMARY, bootstrap_interval, variance_summary
from adjpos.tables import Table, with_interval
from adjpos.validation import UsageError, check_model

if TYPE_CHECKING:
    import pandas as pd

N_BOOT = 1000
LAYERS = Table(
    layer="int64", kind="string", **with_interval("adjacency", "change"), **VARIANCE_SUMMARY
)


def measure_layers(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    *,
    rows: Bool[Tensor, "batch pos"] | None = None,
    center: bool = False,
    ties: str = DEFAULT_TIES,
    skip_first: int = 0,
    probe_features: Sequence[str] = (),
    batch_size: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    progress: bool | None = None,
) -> pd.DataFrame:
    """One row per residual layer (0 = embeddings) of `model` on `tokens` (one length).

    ``adjacency`` is the mean of the sequences' scores S_b (`adjpos.adjacency_score` with
    ``per_sequence=True``) with its bootstrap interval, ``change`` at layer l the mean of
    S_b(l) - S_b(l - 1) with its own paired interval. The variance columns
    (`adjpos.stats.variance_summary`) read every position from `skip_first` on, whatever
    `rows` and `center` say.

    Args:
        model: any TransformerLens model (adjpos's, a HookedTransformer, `adjpos.load_hf`).
        tokens: token ids [batch, pos], all sequences of one length (at least 3 tokens and
            2 sequences).
        rows, center, ties, skip_first: as in `adjpos.adjacency_score`; a sequence with no
            selected row k >= 2 is left out of the adjacency columns (at least 2 must remain).
        probe_features: feature sets to probe with ridge regression (`adjpos.probe_positions`),
            each adding a column ``r2_<name>``, the cross-validated R^2 of position.
        batch_size, progress: as in `adjpos.capture_residuals`.
        n_boot, seed: bootstrap resamples of the sequences, and their seed.

    Returns:
        A frame with the columns of `LAYERS` (``change`` is NaN at layer 0), plus the probes'.

    Raises:
        ValueError: fewer than 2 sequences or 3 tokens (after `skip_first`), or bad `rows`
            (scorable rows in fewer than 2 sequences) or `ties`.

    Example:
        >>> import adjpos, torch
        >>> model = adjpos.load_hf(adjpos.hf_config("smollm3", nope="all"))
        >>> table = adjpos.measure_layers(model, torch.randint(3, 256, (8, 12)))
        >>> list(table["kind"][:3])
        ['embed', 'nope', 'nope']
    """
    check_model(model)
    tokens = check_tokens(model, tokens)
    scored = _check_measurable(tokens, rows, center, ties, skip_first)
    lengths = torch.full((tokens.shape[0],), tokens.shape[1])
    kinds = capture_kinds(model)

    def reduce(layer: int, acts: Tensor, seqs: slice) -> tuple[Tensor, Tensor]:
        acts = acts.double()
        picked = None if rows is None else rows[seqs]
        scores = sequence_scores(
            acts, lengths[seqs], ties=ties, center=center, rows=picked, skip_first=skip_first
        )
        return scores, position_variance(acts[:, skip_first:]).cpu()

    parts = reduce_residuals(model, tokens, reduce, batch_size=batch_size, progress=progress)
    records, before = [], None
    for layer, chunks in parts.items():
        scores = torch.cat([c[0] for c in chunks]).numpy()[scored]
        variance = torch.cat([c[1] for c in chunks]).numpy()
        records.append(
            {
                "layer": layer,
                "kind": kinds[layer],
                **_adjacency_columns(scores, before, n_boot, seed),
                **variance_summary(variance, n_boot=n_boot, seed=seed),
            }
        )
        before = scores
    table = LAYERS.frame(records)
    if probe_features:
        table = table.join(_probe_r2(model, tokens, probe_features, seed), on="layer")
    return table


def _check_measurable(
    tokens: Tensor, rows: Tensor | None, center: Any, ties: str, skip_first: Any
) -> np.ndarray:
    """The options' checks; returns which sequences have a row to score."""
    batch, n = tokens.shape
    if batch < 2 or n < 3:
        raise UsageError(
            f"measure_layers needs at least 2 sequences of at least 3 tokens, got "
            f"{tuple(tokens.shape)}"
        )
    check_ties(ties)
    check_rows(rows, batch, n)
    check_skip_first(skip_first, torch.tensor([n]))
    if not isinstance(center, bool):
        raise TypeError(f"center must be True or False, got {center!r}")
    first = skip_first + 2  # the first defined row
    scored = (
        np.ones(batch, dtype=bool) if rows is None else rows[:, first:].any(dim=1).cpu().numpy()
    )
    if scored.sum() < 2:
        raise UsageError(
            f"rows selects a row k >= {first} in {int(scored.sum())} sequence(s); measure_layers "
            "needs at least 2 to bootstrap over"
        )
    return scored


def _adjacency_columns(
    scores: np.ndarray, before: np.ndarray | None, n_boot: int, seed: int
) -> dict[str, float]:
    """The adjacency score of a layer and its change from the layer before, with intervals."""
    columns = {"change": np.nan, "change_low": np.nan, "change_high": np.nan}  # layer 0
    change = None if before is None else scores - before
    for name, values in (("adjacency", scores), ("change", change)):
        if values is not None:
            low, high = bootstrap_interval(values, n_boot=n_boot, seed=seed)
            columns |= {name: float(values.mean()), f"{name}_low": low, f"{name}_high": high}
    return columns


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
