"""The paper's study on top of the core library: random-init sweeps, the stages of
`reproduce`, the numbers behind each claim, its figures and its report. Nothing in the core
imports this package.

Submodules: `stages` (the measurements, as tidy tables), `numbers` (the numbers each claim
needs), `figures` (each figure from its stage's table), `report`, `pipeline`, `sizes`, `sweep`.
"""

from adjpos.study import dynamics as dynamics
from adjpos.study import figures as figures
from adjpos.study import numbers as numbers
from adjpos.study import stages as stages
from adjpos.study import trained as trained
from adjpos.study.pipeline import ReproduceConfig, ReproduceResult, reproduce
from adjpos.study.sizes import FULL, QUICK, TINY, StudySizes
from adjpos.study.stages import Models
from adjpos.study.sweep import DEFAULT_GRID, SweepResult, read_sweep, rows_of_subgrid, sweep

__all__ = [
    "DEFAULT_GRID",
    "FULL",
    "QUICK",
    "TINY",
    "Models",
    "ReproduceConfig",
    "ReproduceResult",
    "StudySizes",
    "SweepResult",
    "read_sweep",
    "reproduce",
    "rows_of_subgrid",
    "sweep",
]
