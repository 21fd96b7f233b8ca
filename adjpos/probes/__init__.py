"""Layer-wise probes of token position: which carrier in the residual stream holds it.

`features` turns one layer's hidden states into per-position probe inputs (variance, norm,
cosine-similarity sets, the raw residual, and shuffled controls), `fit` cross-validates
scikit-learn probes by sequence beside chance baselines, `order` recovers a shuffled sequence's
order from its cosine matrix or its variances, and `positions` composes capture, features and
probes for a model. Results are `ProbeResult`s.
"""

from adjpos.probes.data import sequences_of_length
from adjpos.probes.features import (
    BASE_FEATURE_SETS,
    FEATURE_SETS,
    check_feature_sets,
    position_features,
    shuffle_positions,
)
from adjpos.probes.fit import METRICS, PROBES, check_probes, cross_validate
from adjpos.probes.order import (
    expected_abs_tau,
    kendall_tau,
    reconstruct_order,
    spectral_order,
    variance_order,
)
from adjpos.probes.positions import DEFAULT_FEATURES, probe_positions
from adjpos.probes.result import PROBE_TABLE, ProbeResult, ProbeScore

__all__ = [
    "BASE_FEATURE_SETS",
    "DEFAULT_FEATURES",
    "FEATURE_SETS",
    "METRICS",
    "PROBES",
    "PROBE_TABLE",
    "ProbeResult",
    "ProbeScore",
    "check_feature_sets",
    "check_probes",
    "cross_validate",
    "expected_abs_tau",
    "kendall_tau",
    "position_features",
    "probe_positions",
    "reconstruct_order",
    "sequences_of_length",
    "shuffle_positions",
    "spectral_order",
    "variance_order",
]
