"""Trained models against random-init controls, every number with its uncertainty.

Adjacency by layer is scored in twelve views, so that what the whole-sequence score mixes can
be told apart: the rows scored (all, the prompt's, the answer's: a model knows where ``=``
is, and each answer digit resembles the digit it copies), the states as they are or centred
(each sequence's mean state subtracted: random-init states point nearly the same way), and
ties strict (the study's definition) or counted as half (chance 0.5 on any data). Variance
by layer is summarised by the last-third / first-third ratio and the Spearman correlation of
variance with position. Each (model, seed, layer) value carries a percentile bootstrap
interval over sequences; `adjpos.study.numbers` compares seeds' intervals, never one seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import torch

from adjpos.capture import capture_residuals, iter_residuals
from adjpos.metrics import adjacency_rows, center_states, cosine_matrix, position_variance
from adjpos.probes import sequences_of_length
from adjpos.stats import VARIANCE_SUMMARY, bootstrap_interval, variance_summary
from adjpos.study.numbers import LEARNED, RANDOM, TRAINED
from adjpos.study.sizes import StudySizes
from adjpos.tables import Table
from adjpos.tasks import TASKS

ROWS = ("all", "prompt", "answer")
TIES = ("strict", "half")
# Resamples of each interval: enough for a 95% percentile interval to two decimals.
N_BOOT = 1000

ADJACENCY = Table(
    task="string",
    model="string",
    seed="Int64",
    layer="int64",
    rows="string",
    centred="boolean",
    ties="string",
    adjacency="float64",
    low="float64",
    high="float64",
    mean_cosine="float64",
    n_sequences="int64",
)
VARIANCE = Table(
    task="string", model="string", seed="Int64", layer="int64", position="int64", variance="float64"
)
VARIANCE_LAYERS = Table(
    task="string", model="string", seed="Int64", layer="int64", **VARIANCE_SUMMARY
)


def variants(models: Any, sizes: StudySizes, name: str, *, learned: bool = True):
    """(label, seed, model) of task `name`: each trained seed, then the random-init NoPE
    controls (and, with `learned`, learned-position controls) of its architecture."""
    for seed in models.seeds(name, sizes):
        yield TRAINED, seed, models.trained(name, seed)[0]
    for seed in sizes.control_seeds:
        yield RANDOM, seed, models.control(name, seed)
        if learned:
            yield LEARNED, seed, models.control(name, seed, positional="learned")


def measure_adjacency(models: Any, sizes: StudySizes) -> pd.DataFrame:
    """Adjacency per layer on held-out task sequences in every view, for every trained seed
    and control seed, each with a 95% bootstrap interval over the sequences."""
    out = []
    for name in TASKS:
        task = models.trained(name)[1]
        batch = task.sample(sizes.n_sequences, generator=_gen(2), split="test")
        n = int(batch.lengths.max())
        tokens, answer = batch.tokens[:, :n], batch.answer_rows[:, :n]
        prompt = (torch.arange(n) < batch.lengths[:, None]) & ~answer
        masks = {"all": None, "prompt": prompt, "answer": answer}
        for label, seed, model in variants(models, sizes, name):
            for layer, views, cosines in sequence_views(model, tokens, batch.lengths, masks):
                for (rows, centred, ties), scores in views.items():
                    kept = scores[~np.isnan(scores)]
                    low, high = bootstrap_interval(kept, n_boot=N_BOOT)
                    out.append(
                        {
                            "task": name,
                            "model": label,
                            "seed": seed,
                            "layer": layer,
                            "rows": rows,
                            "centred": centred,
                            "ties": ties,
                            "adjacency": float(kept.mean()),
                            "low": low,
                            "high": high,
                            "mean_cosine": float(cosines[centred].mean()),
                            "n_sequences": kept.size,
                        }
                    )
    return ADJACENCY.frame(out)


def sequence_views(
    model: Any, tokens: torch.Tensor, lengths: torch.Tensor, masks: dict[str, Any]
) -> Iterator[tuple[int, dict[tuple[str, bool, str], np.ndarray], dict[bool, np.ndarray]]]:
    """Per layer: each sequence's adjacency in every (rows, centred, ties) view (NaN where a
    sequence has no defined row of the view), and each sequence's mean cosine between two
    different real positions, as they are and centred."""
    real_pairs = _pairs(lengths, tokens.shape[1])
    for layer, acts in iter_residuals(model, tokens, progress=False):
        views, cosines = {}, {}
        for centred in (False, True):
            states = center_states(acts, lengths.to(acts.device)) if centred else acts
            sim = cosine_matrix(states.double())
            pairs = real_pairs.to(sim.device)
            cosines[centred] = ((sim * pairs).sum((1, 2)) / pairs.sum((1, 2))).cpu().numpy()
            for ties in TIES:
                per_row = adjacency_rows(sim, lengths=lengths.to(sim.device), ties=ties).cpu()
                for rows in ROWS:
                    mask = masks[rows]
                    picked = per_row if mask is None else torch.where(mask, per_row, torch.nan)
                    views[rows, centred, ties] = picked.nanmean(dim=1).numpy()
        yield layer, views, cosines


def measure_variance(models: Any, sizes: StudySizes) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Variance of the hidden state over d_model by position (mean over sequences of one
    length), and per layer its ratio and Spearman correlation with position, each with a
    95% bootstrap interval over the sequences; trained seeds and random-init control seeds."""
    profiles, summary = [], []
    for name in TASKS:
        tokens = sequences_of_length(models.trained(name)[1], sizes.n_sequences, generator=_gen(3))
        for label, seed, model in variants(models, sizes, name, learned=False):
            per_sequence = position_variance(capture_residuals(model, tokens).double()).numpy()
            for layer, values in enumerate(per_sequence):  # values: [sequence, position]
                key = {"task": name, "model": label, "seed": seed, "layer": layer}
                profile = values.mean(axis=0)
                profiles += [{**key, "position": k, "variance": v} for k, v in enumerate(profile)]
                summary.append({**key, **variance_summary(values)})
    return VARIANCE.frame(profiles), VARIANCE_LAYERS.frame(summary)


def _pairs(lengths: torch.Tensor, n: int) -> torch.Tensor:
    """[batch, pos, pos] mask of the pairs i < k of real positions."""
    k = torch.arange(n)
    return (k[None, :] < k[:, None]) & (k[:, None] < lengths[:, None, None])


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
