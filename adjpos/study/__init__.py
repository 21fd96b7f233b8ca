"""The paper's study on top of the core library: random-init sweeps, the stages of
`reproduce`, and its report. Nothing in the core imports this package.
"""

from adjpos.study.pipeline import ReproduceConfig, ReproduceResult, reproduce
from adjpos.study.sizes import FULL, QUICK, TINY, StudySizes
from adjpos.study.sweep import DEFAULT_GRID, SweepResult, read_sweep, rows_of_subgrid, sweep

__all__ = [
    "DEFAULT_GRID",
    "FULL",
    "QUICK",
    "TINY",
    "ReproduceConfig",
    "ReproduceResult",
    "StudySizes",
    "SweepResult",
    "read_sweep",
    "reproduce",
    "rows_of_subgrid",
    "sweep",
]
