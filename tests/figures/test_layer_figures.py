"""Adjacency by layer and variance by position: panels, lines, means over seeds."""

import pytest

from adjpos.figures import plot_adjacency_by_layer, plot_variance_by_position, save_figure
from figure_checks import assert_y_titles_fit


def _adjacency_rows():
    rows = []
    for task in ("addition", "reversal"):
        for model in ("trained", "random"):
            for seed in (0, 1):
                for layer in (0, 1, 2):
                    score = 0.5 + 0.1 * layer + (0.1 * seed if model == "trained" else 0.0)
                    row = dict(task=task, model=model, seed=seed, layer=layer, adjacency=score)
                    rows.append(row)
    return rows


def _by_name(fig, name):
    return [t for t in fig.data if t.name == name]


def test_adjacency_one_panel_per_task_one_colour_and_legend_entry_per_model():
    fig = plot_adjacency_by_layer(_adjacency_rows())
    assert [a.text for a in fig.layout.annotations] == ["addition", "reversal"]
    assert len(fig.data) == 4  # two models in two panels
    for name in ("trained", "random"):
        traces = _by_name(fig, name)
        assert [t.xaxis for t in traces] == ["x", "x2"]
        assert len({t.line.color for t in traces}) == 1
        assert [t.showlegend for t in traces] == [True, False]
    assert _by_name(fig, "trained")[0].line.color != _by_name(fig, "random")[0].line.color
    low, high = fig.layout.yaxis.range
    assert low <= 0.0 and high >= 1.0  # the whole range a probability can take
    chance = [s for s in fig.layout.shapes if s.y0 == 0.5 and s.y1 == 0.5]
    assert {s.yref for s in chance} == {"y", "y2"} and chance[0].line.dash == "dash"


def test_adjacency_mean_and_std_over_seeds():
    fig = plot_adjacency_by_layer(_adjacency_rows())
    trained, random = _by_name(fig, "trained")[0], _by_name(fig, "random")[0]
    assert list(trained.x) == [0, 1, 2]
    assert list(trained.y) == pytest.approx([0.55, 0.65, 0.75])  # seeds add 0 and 0.1
    assert list(trained.error_y.array) == pytest.approx([0.1 / 2**0.5] * 3)  # sample std
    assert list(random.y) == pytest.approx([0.5, 0.6, 0.7])
    assert list(random.error_y.array) == pytest.approx([0.0] * 3)


def test_adjacency_single_rows_have_no_error_bars_and_panel_none_is_one_panel():
    rows = [r for r in _adjacency_rows() if r["seed"] == 0 and r["task"] == "addition"]
    fig = plot_adjacency_by_layer(rows, panel=None)
    assert len(fig.data) == 2 and {t.xaxis for t in fig.data} == {"x"}
    assert all(t.error_y.array is None for t in fig.data)
    assert list(_by_name(fig, "trained")[0].y) == pytest.approx([0.5, 0.6, 0.7])


def test_adjacency_missing_column():
    rows = [{"task": "addition", "layer": 0, "adjacency": 0.5}]
    with pytest.raises(ValueError, match=r"rows lack column\(s\) \['model'\]"):
        plot_adjacency_by_layer(rows)
    with pytest.raises(ValueError, match="no rows"):
        plot_adjacency_by_layer([])


def _variance_rows():
    rows = []
    for task in ("addition", "ordering"):
        for layer in (2, 0, 1):  # out of order on purpose
            for seed in (0, 1):
                for position in range(4):
                    variance = (1 + layer) / (1 + position) + seed
                    row = dict(task=task, layer=layer, position=position, variance=variance)
                    rows.append(dict(row, seed=seed))
    return rows


def test_variance_lines_by_layer_light_to_dark_and_mean_over_seeds():
    fig = plot_variance_by_position(_variance_rows())
    first_panel = [t for t in fig.data if t.xaxis == "x"]
    assert [t.name for t in first_panel] == ["layer 0", "layer 1", "layer 2"]
    assert list(first_panel[1].x) == [0, 1, 2, 3]
    assert list(first_panel[1].y) == pytest.approx([2 / (1 + p) + 0.5 for p in range(4)])
    assert first_panel[0].error_y.array is None

    def lightness(rgb):
        return sum(int(v) for v in rgb[rgb.index("(") + 1 : -1].split(","))

    shades = [lightness(t.line.color) for t in first_panel]
    assert shades == sorted(shades, reverse=True)  # deeper layers are darker
    for name in ("layer 0", "layer 2"):
        traces = _by_name(fig, name)
        assert len(traces) == 2 and len({t.line.color for t in traces}) == 1
        assert [t.showlegend for t in traces] == [True, False]
    assert fig.layout.xaxis.title.text == "position"
    title = "variance of the hidden state over its dimensions"
    assert fig.layout.yaxis.title.text.replace("<br>", " ") == title
    assert_y_titles_fit(fig)


def test_variance_title_fits_a_row_of_panels():
    """Four tasks, two rows: the y title is in two lines, each within its panel's height
    (in one line it ran into the figure's title and out of the figure below)."""
    rows = [dict(r, task=f"{r['task']}{i}") for r in _variance_rows() for i in (1, 2)]
    fig = plot_variance_by_position(rows)
    assert fig.layout.yaxis.title.text == "variance of the hidden<br>state over its dimensions"
    assert_y_titles_fit(fig)


def test_variance_other_line_key_uses_the_palette_and_missing_columns_raise():
    rows = [dict(r, model="trained") for r in _variance_rows()]
    fig = plot_variance_by_position(rows, panel="layer", line="model")
    assert [a.text for a in fig.layout.annotations] == ["layer 2", "layer 0", "layer 1"]
    assert len({t.line.color for t in fig.data}) == 1  # one model: one colour in every panel
    with pytest.raises(ValueError, match=r"rows lack column\(s\) \['variance'\]"):
        plot_variance_by_position([{"task": "a", "layer": 0, "position": 0, "var": 1.0}])


def test_can_be_saved(tmp_path):
    for fig in (
        plot_adjacency_by_layer(_adjacency_rows()),
        plot_variance_by_position(_variance_rows()),
    ):
        saved = save_figure(fig, tmp_path / "x", png=False)
        assert saved.written[0].stat().st_size > 0


def test_plot_layer_kinds_rings_the_nope_layers_of_each_panel():
    from adjpos.figures import plot_layer_kinds

    rows = [
        {"family": f, "layout": lay, "layer": k, "adjacency": 0.5 + k / 10,
         "kind": "nope" if (lay == "all" or k == n) and k else ("embed" if k == 0 else "rope")}
        for f, n in (("a", 2), ("b", 3)) for lay in ("released", "all") for k in range(4)
    ]  # fmt: skip
    fig = plot_layer_kinds(rows, color="layout", facet_col="family", title="t", ring="released")
    rings = [t for t in fig.data if t.name == "NoPE layer"]
    assert [[int(x) for x in t.x] for t in rings] == [[2], [3]]
    assert [t.xaxis for t in rings] == ["x", "x2"]
    everything = plot_layer_kinds(rows, color="layout", facet_col="family", title="t")
    assert sum(len(t.x) for t in everything.data if t.name == "NoPE layer") == 2 + 2 * 3
    with pytest.raises(ValueError, match="lack the columns"):
        plot_layer_kinds([{"layer": 0}], color="layout", title="t")
