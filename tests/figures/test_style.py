"""The shared style: one colour per model kind in every figure, log ticks printed as numbers,
axes titled by their quantity. Checked on figures built from the same tables, whatever the
order or the subset of the lines they draw."""

import itertools
import math
import random

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.figures import (
    plot_adjacency_by_layer,
    plot_cosine_heatmaps,
    plot_first_layer_theory,
    plot_head_similarity,
    plot_intervals,
    plot_interventions,
    plot_variance_by_position,
    plot_variance_shares,
)
from adjpos.figures.decomposition import PARTS
from adjpos.figures.style import KIND_COLORS, MODEL_KINDS, label, line_colors, log_ticks
from figure_checks import (
    assert_axes_named,
    assert_log_ticks_are_numbers,
    assert_one_colour_per_kind,
    kind_colours,
)

OTHERS = ("whole", "position curve alone", "layer 0", "variance", "learned")


def test_the_kinds_are_the_studys():
    from adjpos.study.models import LEARNED, RANDOM, TRAINED

    assert MODEL_KINDS[:3] == (TRAINED, RANDOM, LEARNED)


@given(
    st.lists(st.sampled_from(MODEL_KINDS + OTHERS), unique=True),
    st.lists(st.sampled_from(MODEL_KINDS + OTHERS), unique=True),
)
def test_a_kind_keeps_its_colour_and_no_other_line_takes_it(first, second):
    a, b = line_colors(first), line_colors(second)
    for kind in set(first) & set(second) & set(MODEL_KINDS):
        assert a[kind] == b[kind]
    for colours, values in ((a, first), (b, second)):
        assert set(colours) == set(values)
        assert len(set(colours.values())) == len(values)  # distinct lines, distinct colours
        others = [colours[v] for v in values if v not in MODEL_KINDS]
        assert not set(others) & set(KIND_COLORS.values())
        assert list(colours)[: len(set(values) & set(MODEL_KINDS))] == [
            k for k in MODEL_KINDS if k in values
        ]  # the kinds lead the legend, in the study's order


def _layer_rows(kinds, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {"task": task, "model": kind, "seed": s, "layer": layer, "view": view,
             "adjacency": a, "value": a, "low": a - 0.1, "high": a + 0.1}
            for kind in kinds
            for task in ("addition", "reversal")
            for view in ("whole", "prompt rows")
            for s in (0, 1)
            for layer in range(3)
            for a in [float(rng.uniform(0.3, 0.9))]
        ]
    )  # fmt: skip


def test_figures_from_the_same_tables_draw_each_kind_in_one_colour():
    """Every kind alone, every pair of kinds and all of them, each in a seeded random order (the
    order their rows come in), through each figure that draws lines per kind: all those
    figures together give each kind one colour (every kind beside every other one)."""
    figures, rng = [], random.Random(0)
    for count in (1, 2, len(MODEL_KINDS)):
        for subset in itertools.combinations(MODEL_KINDS, count):
            kinds = rng.sample(subset, len(subset))
            rows = _layer_rows(kinds, seed=len(figures))
            figures += [
                plot_adjacency_by_layer(rows, panel="task", line="model"),
                plot_intervals(rows, x="layer", y="value", low="low", high="high",
                               color="model", facet_col="task", facet_row="view", title="t",
                               y_title="adjacency"),
                plot_variance_by_position(rows.rename(columns={"layer": "position",
                                                               "value": "variance"}),
                                          panel="task", line="model"),
            ]  # fmt: skip
            assert set(kind_colours(figures[-3:])) == set(kinds)
    assert_one_colour_per_kind(figures)


log_values = st.lists(st.floats(1e-4, 1e5), min_size=1, max_size=12)


@given(log_values)
def test_log_ticks_print_numbers(values):
    ticks = log_ticks(values)
    assert assert_log_ticks_are_numbers(go.Figure(layout={"xaxis": ticks})) == 1
    if ticks["tickmode"] == "array":  # few, spread values: each is a tick
        assert ticks["tickvals"] == sorted(set(values))


@settings(max_examples=10)
@given(log_values)
def test_a_log_axis_takes_the_ticks_of_the_values_it_draws(values):
    fig = plot_intervals(
        [{"step": v, "y": 0.5, "model": "trained"} for v in values],
        x="step", y="y", color="model", log_x=True, title="t", y_title="score",
    )  # fmt: skip
    assert assert_log_ticks_are_numbers(fig) == 1
    ticks = go.layout.XAxis(log_ticks(values))
    assert all(fig.layout.xaxis[key] == ticks[key] for key in log_ticks(values))


def test_the_theory_figure_labels_its_init_scales():
    rows = [
        {"init_range": r, "measured_adjacency": 0.7, "predicted_adjacency": 0.8,
         "entropy_ratio": 0.9}
        for r in (0.02, 0.1, 0.5)
    ]  # fmt: skip
    fig = plot_first_layer_theory(rows)
    assert assert_log_ticks_are_numbers(fig) == 2
    assert [float(t) for t in fig.layout.xaxis.ticktext] == [0.02, 0.1, 0.5]


def _figures():
    rows = _layer_rows(MODEL_KINDS)
    shares = pd.DataFrame(
        [{"task": "a", "model": m, "layer": k, "part": p, "share": 0.25}
         for m in ("trained", "random-init") for k in range(2) for p in PARTS]
    )  # fmt: skip
    heads = [
        {"task": t, "layer": k, "head": h, "logit_cosine_pearson": 0.1, "previous_mass": 0.2}
        for t in ("a", "b") for k in range(2) for h in range(3)
    ]  # fmt: skip
    interventions = [
        {"task": t, "seed": s, "layer": k, "intervention": n, "control": c,
         "exact_match": 0.5, "exact_match_low": 0.4, "exact_match_high": 0.6}
        for t in ("a", "b", "c") for s in (0, 1) for k in layers
        for n, c in (("none", "none"), ("norm_permute", "norm_scale_control"),
                     ("norm_scale_control", "none"))
    ] if (layers := (1,)) else []  # fmt: skip
    return [
        plot_adjacency_by_layer(rows, panel="task", line="model"),
        plot_intervals(rows, x="layer", y="value", low="low", high="high", color="model",
                       facet_col="task", facet_row="view", title="t"),
        plot_intervals(rows, x="layer", y="adjacency", color="model", title="t"),
        plot_variance_shares(shares),
        plot_cosine_heatmaps([np.eye(4)] * 5, titles=list("abcde"), columns=3),
        plot_head_similarity(heads),
        plot_interventions(interventions),
        plot_interventions([dict(r, layer=k) for r in interventions for k in (0, 2)]),
    ]  # fmt: skip


def test_every_figure_titles_its_axes_with_a_quantity():
    for fig in _figures():
        assert_axes_named(fig)


def test_no_figure_is_wider_than_a_report_frame_allows():
    from adjpos.figures.style import MAX_WIDTH

    many = plot_cosine_heatmaps([np.eye(6)] * 10, titles=[str(i) for i in range(10)], columns=5)
    heads = plot_head_similarity(
        [{"task": str(t), "layer": 0, "head": 0, "logit_cosine_pearson": 0.1,
          "previous_mass": 0.2} for t in range(8)]
    )  # fmt: skip
    for fig in (*_figures(), many, heads):
        assert fig.layout.width <= MAX_WIDTH and not math.isnan(fig.layout.height)


def test_the_text_models_of_the_second_width_are_named_in_words():
    assert label("nope") == "NoPE" and label("nope-d128") == "NoPE, width 128"
    assert label("hybrid-d128") == "hybrid, width 128"
