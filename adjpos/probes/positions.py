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
from tqdm.auto import tqdm

from adjpos.capture import check_layers, check_tokens, iter_residuals
from adjpos.engines import small_work_threads
from adjpos.metrics.checks import check_finite, check_lengths
from adjpos.probes.features import (
    BASE_FEATURE_SETS,
    ONE_NUMBER_SETS,
    SHUFFLED,
    backward_only,
    base_name,
    check_feature_sets,
    needs_one_length,
    position_features,
)
from adjpos.probes.fit import METRICS, check_probes, cross_validate, probe_applies
from adjpos.probes.result import TOKENS, ProbeResult, ProbeScore
from adjpos.seeds import derive_seed
from adjpos.types import TokenInput
from adjpos.validation import UsageError, check_model, check_positive_int, is_int

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
    """How well probes read each token's position from each layer's hidden states.

    For every layer and feature set (`adjpos.probes.features`), each probe is cross-validated
    with the sequences as groups, once per repeat (`repeat_seeds` picks the folds and the
    shuffles). ``spline`` skips the sets of more than one number; ``token_identity`` is
    probed once, reported at layer 0.

    Args:
        model, tokens, layers, batch_size: as in `adjpos.capture_residuals` (resid_post).
        lengths: true length of each right-padded sequence (mixed lengths only for the
            unshuffled backward-only sets); padding is never a sample.
        features, probe: one feature-set or probe name, or several.
        cv: folds (at least 2, at most the number of sequences).
        seed, repeats: the seed each repeat's seed is derived from, and how many repeats.
        model_name: the result's `model` label.
        progress: show a progress bar counting the fits (default: only on a terminal).

    Returns:
        `ProbeResult`: per layer x feature set x probe x metric, the mean over seeds of the
        mean over folds, its baseline (see `adjpos.probes.fit`) and the std over seeds.

    Raises:
        ValueError: bad names, layers, counts or lengths (sequences shorter than 3 tokens,
            mixed lengths for a set that needs one), all checked before any forward pass.
    """
    with small_work_threads(check_model(model)):
        tokens = check_tokens(model, tokens)
        names, probes = check_feature_sets(features), check_probes(probe)
        layers = check_layers(model, "resid_post", layers)
        lens = check_lengths(lengths, (tokens.shape[0],), tokens.shape[1])
        _check_counts(tokens.shape[0], cv, repeats)
        _check_lengths_fit(names, lens)
        tokens = tokens[:, : int(lens.max())]  # columns that are padding in every row
        seeds = repeat_seeds(seed, repeats)
        plan = _plan(names, probes, layers, tokens.shape[1])
        total = sum(len(p) for p in plan.values()) * repeats * cv
        bar = tqdm(
            total=total, desc="fits", unit="fit", disable=None if progress is None else not progress
        )
        data = _Data(tokens, lens, model.cfg.d_vocab)
        scores: list[ProbeScore] = []
        stream = iter_residuals(model, tokens, layers=layers, batch_size=batch_size, progress=False)
        for layer, acts in stream:
            check_finite(acts, f"layer {layer}: activations")
            for name in names:
                todo = plan.get((layer, name), ())
                if not todo:  # token_identity after the first layer: nothing to compute
                    continue
                # shuffled sets differ from seed to seed; the others are computed once
                per_seed = seeds if name.startswith(SHUFFLED) else seeds[:1]
                samples = [data.samples(acts, name, s) for s in per_seed]
                for p in todo:
                    runs = cross_validate(samples, probe=p, cv=cv, seeds=seeds)
                    scores += _summarise(0 if name == TOKENS else layer, name, p, runs)
                    bar.update(repeats * cv)
        bar.close()
        return ProbeResult(model_name, tuple(scores), tokens.shape[0], tokens.shape[1], cv, seeds)


def repeat_seeds(seed: int, repeats: int) -> tuple[int, ...]:
    """The seeds of the folds and shuffles of `repeats` repeats: one derived stream each
    (``derive_seed(seed, "probe repeat", r)``, 32 bits: scikit-learn's folds take no more),
    never ``seed + r``, which two runs with neighbouring seeds would share."""
    return tuple(derive_seed(seed, "probe repeat", r, bits=32) for r in range(repeats))


def _plan(names, probes, layers, n_pos) -> dict[tuple[int, str], list[str]]:
    """Which probes run on which (layer, feature set): spline only on one-number sets, and
    token_identity (the same at every layer) once, with the first layer streamed."""
    plan = {}
    for index, layer in enumerate(layers):
        for name in names:
            if base_name(name) == TOKENS and index > 0:
                continue
            width = 1 if base_name(name) in ONE_NUMBER_SETS else 2
            plan[layer, name] = [p for p in probes if probe_applies(p, width)]
    return plan


class _Data:
    """Samples of one feature set: the features of every real token (not padding) that has
    them, its position and its sequence."""

    def __init__(self, tokens, lens, d_vocab):
        self.tokens, self.lens, self.d_vocab = tokens, lens, d_vocab

    def samples(self, acts, name, seed) -> tuple[Tensor, Tensor, Tensor]:
        feats = position_features(acts, name, seed=seed, tokens=self.tokens, d_vocab=self.d_vocab)
        pos = torch.arange(acts.shape[1], device=feats.device)
        lens = self.lens.to(feats.device)
        # NaN rows: position 0 of cosine_first and cosine_previous.
        real = (pos < lens[:, None]) & feats.isfinite().all(dim=-1)
        groups = torch.arange(acts.shape[0], device=feats.device)[:, None].expand_as(real)
        return feats[real].double(), pos.expand_as(real)[real], groups[real]


def _summarise(layer, name, probe, runs) -> list[ProbeScore]:
    scores = []
    for metric in METRICS[probe]:
        values = np.array([run[metric][0] for run in runs])
        baselines = np.array([run[metric][1] for run in runs])
        std = float(values.std(ddof=1)) if len(runs) > 1 else math.nan
        mean, chance = float(values.mean()), float(baselines.mean())
        sem = float(np.mean([run[metric][2] for run in runs]))
        backward = backward_only(name)
        scores.append(ProbeScore(layer, name, probe, metric, mean, chance, std, backward, sem))
    return scores


def _check_counts(n_sequences: int, cv: Any, repeats: Any) -> None:
    if not is_int(cv) or cv < 2:
        raise UsageError(f"cv must be an int of at least 2 folds, got {cv!r}")
    if n_sequences < cv:
        raise UsageError(
            f"{n_sequences} sequences are too few for cv={cv} folds grouped by sequence; "
            f"give at least {cv} sequences or lower cv"
        )
    check_positive_int("repeats", repeats)


def _check_lengths_fit(names: list[str], lens: Tensor) -> None:
    shortest, longest = int(lens.min()), int(lens.max())
    if shortest < 3:
        raise UsageError(
            f"{int((lens < 3).sum())} sequences are shorter than 3 tokens (shortest: "
            f"{shortest}); probing needs at least 3 positions per sequence"
        )
    one_length = [n for n in names if needs_one_length(n)]
    if one_length and shortest != longest:
        raise UsageError(
            f"feature sets {one_length} need sequences of one length, got lengths from "
            f"{shortest} to {longest}; probe one length at a time (e.g. "
            "adjpos.sequences_of_length), or use only the sets that never look past the token: "
            "variance, norm, cosine_first, cosine_previous, resid"
        )
