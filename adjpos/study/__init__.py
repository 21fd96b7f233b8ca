"""The paper's study on top of the core library: one module per claim (`claims`), the
pipeline that measures them (`reproduce`) and the report that assembles them. Nothing in the
core imports this package; the random-init sweep it runs is `adjpos.sweep`.

Submodules: `claims` (one module per claim, see `claim` for what each one is), `claim`
(`Claim`, `Verdict`, `Outcome`, `Status`, `Criteria`), `models` (the trained models and their
controls), `views` (measurements several claims share), `probe_units` (what one unit of the
probing stage measures and writes), `format` (how the report writes numbers and tables),
`pipeline`, `report`, `sizes`.
"""

from adjpos.study import claims as claims
from adjpos.study.claim import CRITERIA, Claim, Criteria, Outcome, Status, Verdict
from adjpos.study.models import Models
from adjpos.study.pipeline import ReproduceConfig, ReproduceResult, reproduce
from adjpos.study.sizes import FULL, QUICK, TINY, StudySizes

__all__ = [
    "CRITERIA",
    "FULL",
    "QUICK",
    "TINY",
    "Claim",
    "Criteria",
    "Models",
    "Outcome",
    "ReproduceConfig",
    "ReproduceResult",
    "Status",
    "StudySizes",
    "Verdict",
    "reproduce",
]
