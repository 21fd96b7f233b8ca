"""What several claims measure the same way: each sequence's adjacency in twelve views of the
score, so that what the whole-sequence score mixes can be told apart (the rows scored: all, the
prompt's, the answer's; the states as they are or centred; ties strict, the study's, or half,
chance 0.5 on any data), and the summary of a group of seeds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import torch

from adjpos.capture import iter_residuals
from adjpos.metrics import center_states, cosine_matrix
from adjpos.tables import Table

ROWS = ("all", "prompt", "answer")
TIES = ("strict", "half")
# Columns the claims' tables share.
KEYS = Table(task="string", model="string", seed="Int64", layer="int64")
VIEW = Table(rows="string", centred="boolean", ties="string")
INTERVAL = Table(low="float64", high="float64")


def task_masks(batch: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:
    """The tokens of a `TaskBatch` cut to its longest sequence, and the row masks of each
    view: every row (None), the prompt's rows, the answer's rows."""
    n = int(batch.lengths.max())
    tokens, answer = batch.tokens[:, :n], batch.answer_rows[:, :n]
    prompt = (torch.arange(n) < batch.lengths[:, None]) & ~answer
    return tokens, {"all": None, "prompt": prompt, "answer": answer}


def sequence_views(
    model: Any, tokens: torch.Tensor, lengths: torch.Tensor, masks: dict[str, Any]
) -> Iterator[tuple[int, dict[tuple[str, bool, str], np.ndarray], dict[bool, np.ndarray]]]:
    """Per layer: each sequence's adjacency in every (rows, centred, ties) view
    (`adjpos.scoring.sequence_scores`; NaN where a sequence has no defined row of the view),
    and each sequence's mean cosine between two different real positions, as they are and
    centred."""
    from adjpos.scoring import sequence_scores

    real_pairs = _pairs(lengths, tokens.shape[1])
    for layer, acts in iter_residuals(model, tokens, progress=False):
        acts, views, cosines = acts.double(), {}, {}
        for centred in (False, True):
            states = center_states(acts, lengths.to(acts.device)) if centred else acts
            sim, pairs = cosine_matrix(states), real_pairs.to(acts.device)
            cosines[centred] = ((sim * pairs).sum((1, 2)) / pairs.sum((1, 2))).cpu().numpy()
            for ties, rows in itertools.product(TIES, ROWS):
                views[rows, centred, ties] = sequence_scores(
                    acts, lengths, ties=ties, center=centred, rows=masks[rows]
                ).numpy()
        yield layer, views, cosines


def seed_summary(frame: pd.DataFrame, value: str, low: str | None = None, high: str | None = None):
    """Per (task, model, layer): the mean over seeds, the span of the seeds' intervals (their
    lowest low to their highest high; the values' own range without intervals) and the
    number of seeds."""
    groups = frame.groupby(["task", "model", "layer"], sort=False)
    spans = {"low": (low or value, "min"), "high": (high or value, "max")}
    return groups.agg(value=(value, "mean"), **spans, seeds=(value, "size")).reset_index()


def span_of(name: str, row: Any) -> dict[str, float]:
    """A `seed_summary` row's value and span as ``{name, name_low, name_high}``."""
    keys = {name: "value", f"{name}_low": "low", f"{name}_high": "high"}
    return {key: float(row[column]) for key, column in keys.items()}


def paired_seeds(group: pd.DataFrame, value: str, low: str, high: str) -> dict[str, Any]:
    """A group of seeds' paired differences `value` with their intervals (`low`, `high`): the
    mean with its Student-t interval over the seeds, and each seed's interval (``per_seed``)."""
    from adjpos.stats import seed_interval

    mean, lo, hi = seed_interval(group[value])
    per_seed = group[[low, high]].astype(float).to_numpy().tolist()
    return {"difference": mean, "difference_low": lo, "difference_high": hi, "per_seed": per_seed}


def seed_spans_figure(frame: pd.DataFrame, *, row: str, title: str, y_title: str | None = None):
    """`seed_summary` rows by layer: one line per model, one panel per (`row`, task)."""
    from adjpos.figures import plot_intervals

    axes = {"x": "layer", "y": "value", "low": "low", "high": "high", "color": "model"}
    return plot_intervals(
        frame, **axes, facet_col="task", facet_row=row, title=title, y_title=y_title
    )


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain JSON-able dicts (numpy and pandas scalars become Python ones)."""
    return [
        {k: None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]


def _pairs(lengths: torch.Tensor, n: int) -> torch.Tensor:
    """[batch, pos, pos] mask of the pairs i < k of real positions."""
    k = torch.arange(n)
    return (k[None, :] < k[:, None]) & (k[:, None] < lengths[:, None, None])
