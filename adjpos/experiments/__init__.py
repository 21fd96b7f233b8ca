"""Compositions of capture and metrics (and, later, training and probes)."""

from adjpos.experiments.scoring import adjacency_score
from adjpos.experiments.sweep import (
    DEFAULT_GRID,
    SweepResult,
    read_sweep_csv,
    rows_of_subgrid,
    sweep,
)

__all__ = [
    "DEFAULT_GRID",
    "SweepResult",
    "adjacency_score",
    "read_sweep_csv",
    "rows_of_subgrid",
    "sweep",
]
