"""Layer-wise probes of token position: which carrier in the residual stream holds it.

`features` turns one layer's hidden states into per-position probe inputs, `fit`
cross-validates probes by sequence beside chance baselines, `order` recovers a shuffled
sequence's order, `positions` composes them for a model (results are `ProbeResult`s), and
`compare` compares two feature sets fairly.
"""

from adjpos.probes.compare import (
    COMPARISON_TABLE,
    SequenceScores,
    compare_feature_sets,
    compare_scores,
    score_sequences,
)
from adjpos.probes.data import sequences_of_length
from adjpos.probes.features import (
    BASE_FEATURE_SETS,
    FEATURE_SETS,
    check_feature_sets,
    position_features,
    shuffle_positions,
)
from adjpos.probes.fit import (
    METRICS,
    PROBES,
    check_probes,
    cross_validate,
    predict_out_of_fold,
)
from adjpos.probes.order import (
    expected_abs_tau,
    kendall_tau,
    order_scores,
    reconstruct_order,
    spectral_order,
    variance_order,
)
from adjpos.probes.positions import DEFAULT_FEATURES, probe_positions
from adjpos.probes.result import PROBE_TABLE, ProbeResult, ProbeScore

__all__ = [
    "BASE_FEATURE_SETS",
    "COMPARISON_TABLE",
    "DEFAULT_FEATURES",
    "FEATURE_SETS",
    "METRICS",
    "PROBES",
    "PROBE_TABLE",
    "ProbeResult",
    "ProbeScore",
    "SequenceScores",
    "check_feature_sets",
    "check_probes",
    "compare_feature_sets",
    "compare_scores",
    "cross_validate",
    "expected_abs_tau",
    "kendall_tau",
    "order_scores",
    "position_features",
    "predict_out_of_fold",
    "probe_positions",
    "reconstruct_order",
    "score_sequences",
    "sequences_of_length",
    "shuffle_positions",
    "spectral_order",
    "variance_order",
]
