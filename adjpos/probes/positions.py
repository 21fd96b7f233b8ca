"""`probe_positions`: capture each layer, build per-position features, probe for the position.

Features are computed per sequence and only then flattened to one sample per position, each
sample keeping its sequence as its cross-validation group, so no sequence is split across
train and test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.capture import check_layers, check_tokens, iter_residuals
from adjpos.metrics.checks import check_finite, check_lengths
from adjpos.probes.features import (
    BASE_FEATURE_SETS,
    check_feature_sets,
    needs_one_length,
    position_features,
)
from adjpos.probes.fit import METRICS, check_probes, cross_validate
from adjpos.probes.result import ProbeResult, ProbeScore
from adjpos.types import TokenInput
from adjpos.validation import check_positive_int

DEFAULT_FEATURES = (*BASE_FEATURE_SETS, "shuffled:cosine_profile", "shuffled:resid")


def probe_positions(
    model: Any,
    tokens: TokenInput,
    *,
    lengths: Int[Tensor, " batch"] | None = None,
    layers: Sequence[int] | None = None,
    features: str | Sequence[str] = DEFAULT_FEATURES,
    probe: str | Sequence[str] = "ridge",
    cv: int = 5,
    seed: int = 0,
    repeats: int = 3,
    model_name: str = "model",
    batch_size: int | None = None,
    progress: bool | None = None,
) -> ProbeResult:
    """How well linear probes read each token's position from each layer's hidden states.

    For every layer and feature set (see `adjpos.probes.features`: ``variance``, ``norm``,
    ``cosine_profile``, ``cosine_sorted``, ``cosine_mean``, ``cosine_first``,
    ``cosine_previous``, ``resid`` and their ``shuffled:`` controls), each probe is
    cross-validated with the sequences as groups, once per seed ``seed, seed + 1, ...,
    seed + repeats - 1`` (the seed picks the folds and the shuffles).

    Args:
        model: a TransformerLens model.
        tokens: token ids [batch, pos], right-padded when `lengths` is given.
        lengths: true length of each sequence. Mixed lengths are allowed only for the sets
            that never look past the token (variance, norm, cosine_first, cosine_previous,
            resid; unshuffled); padding is never a sample.
        layers: residual-stream layers (default: all; 0 = token embeddings).
        features: one feature-set name or several.
        probe: "ridge", "logistic", or both as a list.
        cv: folds (at least 2, at most the number of sequences).
        seed: first seed.
        repeats: how many seeds.
        model_name: the result's `model` label.
        batch_size: sequences per forward pass (default: all at once).
        progress: show a progress bar (default: only on a terminal).

    Returns:
        `ProbeResult`: per layer x feature set x probe x metric, the mean over seeds of the
        mean over folds, its baseline (see `adjpos.probes.fit`) and the std over seeds.

    Raises:
        ValueError: an unknown feature set or probe, a layer out of range, fewer sequences
            than folds, mixed lengths for a set that needs one length, or sequences shorter
            than 3 tokens; all checked before any forward pass.
    """
    tokens = check_tokens(model, tokens)
    names, probes = check_feature_sets(features), check_probes(probe)
    layers = check_layers(model, "resid_post", layers)
    lens = check_lengths(lengths, (tokens.shape[0],), tokens.shape[1])
    _check_counts(tokens.shape[0], cv, repeats)
    _check_lengths_fit(names, lens)
    tokens = tokens[:, : int(lens.max())]  # columns that are padding in every row
    seeds = tuple(range(seed, seed + repeats))
    scores: list[ProbeScore] = []
    stream = iter_residuals(model, tokens, layers=layers, batch_size=batch_size, progress=progress)
    for layer, acts in stream:
        try:
            check_finite(acts, "activations")
        except ValueError as err:
            raise ValueError(f"layer {layer}: {err}") from None
        for name in names:
            runs = [_probe_once(acts.cpu(), lens, name, probes, cv, s) for s in seeds]
            scores += _summarise(layer, name, probes, runs)
    return ProbeResult(model_name, tuple(scores), tokens.shape[0], tokens.shape[1], cv, seeds)


def _probe_once(acts, lens, name, probes, cv, seed) -> dict[tuple[str, str], tuple[float, float]]:
    feats = position_features(acts, name, seed=seed)
    pos = torch.arange(acts.shape[1])
    # Samples: real tokens (not padding) that have the feature (NaN rows: position 0 of
    # cosine_first and cosine_previous).
    real = (pos < lens[:, None]) & feats.isfinite().all(dim=-1)
    x = feats[real].double().numpy()
    y = pos.expand_as(real)[real].numpy()
    groups = torch.arange(acts.shape[0])[:, None].expand_as(real)[real].numpy()
    out = {}
    for probe in probes:
        for metric, pair in cross_validate(x, y, groups, probe=probe, cv=cv, seed=seed).items():
            out[probe, metric] = pair
    return out


def _summarise(layer, name, probes, runs) -> list[ProbeScore]:
    scores = []
    for probe in probes:
        for metric in METRICS[probe]:
            values = np.array([run[probe, metric][0] for run in runs])
            baselines = np.array([run[probe, metric][1] for run in runs])
            std = float(values.std(ddof=1)) if len(runs) > 1 else math.nan
            mean, chance = float(values.mean()), float(baselines.mean())
            scores.append(ProbeScore(layer, name, probe, metric, mean, chance, std))
    return scores


def _check_counts(n_sequences: int, cv: Any, repeats: Any) -> None:
    for label, value in (("cv", cv), ("repeats", repeats)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{label} must be an int, got {value!r}")
    if cv < 2:
        raise ValueError(f"cv must be at least 2 folds, got {cv}")
    if n_sequences < cv:
        raise ValueError(
            f"{n_sequences} sequences are too few for cv={cv} folds grouped by sequence; "
            f"give at least {cv} sequences or lower cv"
        )
    check_positive_int("repeats", repeats)


def _check_lengths_fit(names: list[str], lens: Tensor) -> None:
    shortest, longest = int(lens.min()), int(lens.max())
    if shortest < 3:
        raise ValueError(
            f"{int((lens < 3).sum())} sequences are shorter than 3 tokens (shortest: "
            f"{shortest}); probing needs at least 3 positions per sequence"
        )
    one_length = [n for n in names if needs_one_length(n)]
    if one_length and shortest != longest:
        raise ValueError(
            f"feature sets {one_length} need sequences of one length, got lengths from "
            f"{shortest} to {longest}; probe one length at a time (e.g. "
            "adjpos.sequences_of_length), or use only the sets that never look past the token: "
            "variance, norm, cosine_first, cosine_previous, resid"
        )
