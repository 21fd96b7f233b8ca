"""The paper's study on top of the core library (nothing in the core imports it): one module
per claim (`claims`; what each is: `claim`), the `pipeline` that measures them (`reproduce`)
and the `report` that assembles them; `models` (the trained models and their controls),
`views` and `probe_units` (measurements the claims share), `format`, `sizes`.
"""

from adjpos.study import claims as claims
from adjpos.study.claim import CRITERIA, Claim, Criteria, Outcome, Status, Verdict
from adjpos.study.models import Models
from adjpos.study.pipeline import ReproduceConfig, ReproduceResult, reproduce
from adjpos.study.sizes import FULL, QUICK, TINY, StudySizes

__all__ = ["CRITERIA", "FULL", "QUICK", "TINY", "Claim", "Criteria", "Models", "Outcome"]
__all__ += ["ReproduceConfig", "ReproduceResult", "Status", "StudySizes", "Verdict", "reproduce"]
