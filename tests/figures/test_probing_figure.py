"""The probing figure: results in, go.Figure out."""

import plotly.graph_objects as go
import pytest

from adjpos.figures import plot_probe_scores
from adjpos.probes import ProbeResult, ProbeScore


def _result():
    scores = []
    for layer in range(3):
        for features in ("variance", "cosine_profile", "shuffled:resid"):
            for probe, metric in (("ridge", "r2"), ("logistic", "accuracy")):
                scores.append(ProbeScore(layer, features, probe, metric, 0.1 * layer, 0.0, 0.01))
        for features, method in (
            ("cosine_matrix", "spectral_seriation"),
            ("variance", "variance_sort"),
        ):
            scores.append(ProbeScore(layer, features, method, "abs_kendall_tau", 0.3, 0.1, 0.2))
    return ProbeResult("demo", tuple(scores), n_sequences=8, seq_len=16, cv=2, seeds=(0,))


def test_one_panel_per_probe_metric_and_one_legend_entry_per_feature_set():
    fig = plot_probe_scores(_result())
    assert isinstance(fig, go.Figure)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        "ridge: R^2",
        "logistic: accuracy",
        "order from shuffled states: |Kendall's tau|",
    ]
    legend = [t.name for t in fig.data if t.showlegend]
    assert legend == ["variance", "cosine_profile", "shuffled:resid", "cosine_matrix"]
    lines = [t for t in fig.data if t.name == "variance"]
    assert len(lines) == 3 and len({t.line.color for t in lines}) == 1  # one colour everywhere
    assert all(t.line.dash == "dot" for t in fig.data if t.name == "shuffled:resid")
    chance = [t for t in fig.data if t.name == "cosine_matrix chance"]
    assert list(chance[0].y) == [0.1, 0.1, 0.1]
    assert "demo: 8 sequences x 16 tokens" in fig.layout.title.text


def test_empty_result_is_an_error():
    with pytest.raises(ValueError, match="no scores"):
        plot_probe_scores(ProbeResult("demo", (), 1, 1, 2, (0,)))
