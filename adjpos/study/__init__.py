"""The paper's study on top of the core library: one module per claim (`claims`), the
pipeline that measures them (`reproduce`), the report that assembles them, and random-init
sweeps. Nothing in the core imports this package.

Submodules: `claims` (one module per claim, see `claim` for what each one is), `claim`
(`Claim`, `Verdict`, `Criteria`), `models` (the trained models and their controls), `views`
(measurements several claims share), `format` (how the report writes numbers and tables),
`pipeline`, `report`, `sizes`, `sweep`.
"""

from adjpos.study import claims as claims
from adjpos.study.claim import CRITERIA, Claim, Criteria, Verdict
from adjpos.study.models import Models
from adjpos.study.pipeline import ReproduceConfig, ReproduceResult, reproduce
from adjpos.study.sizes import FULL, QUICK, TINY, StudySizes
from adjpos.study.sweep import DEFAULT_GRID, SweepResult, read_sweep, rows_of_subgrid, sweep

__all__ = [
    "CRITERIA",
    "DEFAULT_GRID",
    "FULL",
    "QUICK",
    "TINY",
    "Claim",
    "Criteria",
    "Models",
    "ReproduceConfig",
    "ReproduceResult",
    "StudySizes",
    "SweepResult",
    "Verdict",
    "read_sweep",
    "reproduce",
    "rows_of_subgrid",
    "sweep",
]
