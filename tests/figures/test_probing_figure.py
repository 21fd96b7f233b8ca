"""The probing figure: results in, go.Figure out."""

import plotly.graph_objects as go
import pytest

from adjpos.figures import plot_probe_scores
from adjpos.figures.style import label
from adjpos.probes import DEFAULT_FEATURES, ProbeResult, ProbeScore
from adjpos.probes.features import FEATURE_SETS, ONE_NUMBER_SETS, backward_only
from figure_checks import assert_no_field_names


def _result(features=("variance", "cosine_profile", "shuffled:resid"), layers=3):
    scores = []
    for layer in range(layers):
        for name in features:
            pairs = [("ridge", "r2"), ("logistic", "accuracy")]
            pairs += [("spline", "r2")] if name in ONE_NUMBER_SETS else []
            for probe, metric in pairs:
                value = 0.1 * layer
                scores.append(
                    ProbeScore(layer, name, probe, metric, value, 0.0, 0.01, backward_only(name))
                )
        for name, method, backward in (
            ("cosine_matrix", "spectral_seriation", False),
            ("variance", "variance_sort", True),
        ):
            scores.append(
                ProbeScore(layer, name, method, "abs_kendall_tau", 0.3, 0.1, 0.2, backward)
            )
    scores = [s for s in scores if s.features != "token_identity" or s.layer == 0]
    return ProbeResult("demo", tuple(scores), n_sequences=8, seq_len=16, cv=2, seeds=(0,))


def test_panels_split_by_probe_metric_and_group():
    fig = plot_probe_scores(_result())
    assert isinstance(fig, go.Figure)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        "ridge: R^2<br>backward-only sets",
        "logistic: accuracy<br>backward-only sets",
        "spline: R^2<br>backward-only sets",
        "ridge: R^2<br>sets using later tokens",
        "logistic: accuracy<br>sets using later tokens",
        "ridge: R^2<br>shuffled controls",
        "logistic: accuracy<br>shuffled controls",
        "order of shuffled states: |Kendall's tau|<br>sets using later tokens",
        "order of shuffled states: |Kendall's tau|<br>backward-only sets",
    ]
    legend = [t.name for t in fig.data if t.showlegend]
    assert legend == [
        "variance",
        "chance: variance",
        "cosines to every other position",
        "chance: cosines to every other position",
        "shuffled: residual stream",
        "chance: shuffled: residual stream",
        "cosine matrix (all pairs)",
        "chance: cosine matrix (all pairs)",
    ]  # in words, not field names
    lines = [t for t in fig.data if t.name == "variance"]
    assert len(lines) == 4 and len({t.line.color for t in lines}) == 1  # one colour everywhere
    assert all(t.line.dash == "dot" for t in fig.data if t.name == "shuffled: residual stream")
    profile = [t for t in fig.data if t.name == "cosines to every other position"]
    assert profile and all(t.line.dash == "dashdot" for t in profile)
    chance = [t for t in fig.data if t.name == "chance: cosine matrix (all pairs)"]
    assert list(chance[0].y) == [0.1, 0.1, 0.1]
    assert "demo: 8 sequences x 16 tokens" in fig.layout.title.text


def test_no_empty_panels_and_few_series_per_panel():
    fig = plot_probe_scores(_result(DEFAULT_FEATURES), columns=3)
    panels = len(fig.layout.annotations)
    used = {t.xaxis for t in fig.data}
    axes = [key for key in fig.layout.to_plotly_json() if key.startswith("xaxis")]
    assert len(used) == len(axes) == panels and panels % 3 != 0  # unused cells get no axes
    for axis in used:
        names = {t.name for t in fig.data if t.xaxis == axis and not t.name.startswith("chance")}
        assert len(names) <= 6, (axis, names)
    level = [t for t in fig.data if t.name == "token identity (the prompt format)"]
    assert level and all(list(t.x) == [0, 1, 2] and len(set(t.y)) == 1 for t in level)


def test_a_feature_set_keeps_its_colour_in_every_probe_figure():
    """Whichever sets a result holds, a set is drawn in one colour, its shuffled control in the
    same colour (dotted), and no two sets share one (with eight sets they had cycled round)."""
    every = (*FEATURE_SETS[:9], "shuffled:cosine_profile", "shuffled:resid")
    colours = [_colours(plot_probe_scores(_result(names))) for names in (every, every[2:])]
    assert all(colours[0][name] == colour for name, colour in colours[1].items())
    assert colours[0]["shuffled: residual stream"] == colours[0]["residual stream"]
    bases = [colours[0][label(name)] for name in (*FEATURE_SETS[:9], "cosine_matrix")]
    assert len(set(bases)) == len(bases) == 10


def test_every_feature_set_is_named_in_words():
    """The full run's sets (cosine_previous, cosine_mean, cosine_sorted among them) in words;
    the cosine profile holds every other position's cosine, later ones too."""
    fig = plot_probe_scores(_result(FEATURE_SETS))
    assert_no_field_names(fig, "probes")
    assert "cosines to every other position" in {t.name for t in fig.data}


def _colours(fig):
    return {t.name: t.line.color for t in fig.data if not t.name.startswith("chance")}


def test_empty_result_is_an_error():
    with pytest.raises(ValueError, match="no scores"):
        plot_probe_scores(ProbeResult("demo", (), 1, 1, 2, (0,)))
