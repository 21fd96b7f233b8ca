"""The claims of the study, one module each, in the order the pipeline measures them and the
report shows them: its ``TITLE``, ``measure``, ``verdicts``, ``section`` and (optionally)
``figures`` make its `adjpos.study.claim.Claim`.
"""

from __future__ import annotations

import importlib

from adjpos.study.claim import Claim
from adjpos.validation import UsageError

# The one list of the study's claims: the pipeline's stages, the report's sections.
NAMES = ("models", "adjacency", "cosine", "variance", "decomposition", "dynamics", "probing")
NAMES += ("causal", "hypothesis", "sweep", "theory", "text")


def claim(name: str) -> Claim:
    """The registered claim `name`, made from its module."""
    if name not in NAMES:
        raise UsageError(f"no claim {name!r}; the claims are {list(NAMES)}")
    module = importlib.import_module(f"adjpos.study.claims.{name}")
    figures = getattr(module, "figures", lambda results, sizes: {})
    return Claim(name, module.TITLE, module.measure, module.verdicts, module.section, figures)


def claims() -> list[Claim]:
    """Every claim, in order."""
    return [claim(name) for name in NAMES]
