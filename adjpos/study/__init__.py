"""The paper's study on top of the core library: random-init sweeps, the stages of
`reproduce`, and its report. Nothing in the core imports this package.
"""

from adjpos.study.pipeline import ReproduceConfig, ReproduceResult, reproduce
from adjpos.study.sweep import DEFAULT_GRID, SweepResult, read_sweep_csv, rows_of_subgrid, sweep

__all__ = [
    "DEFAULT_GRID",
    "ReproduceConfig",
    "ReproduceResult",
    "SweepResult",
    "read_sweep_csv",
    "reproduce",
    "rows_of_subgrid",
    "sweep",
]
