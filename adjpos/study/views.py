"""What several claims share: the row masks of a task batch's views of the score (measured by
`adjpos.scoring.sequence_views`), the tables' common columns and the summary of a group of seeds.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from adjpos.stats import seed_interval
from adjpos.tables import Table

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
