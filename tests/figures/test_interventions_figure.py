"""The interventions figure with a single layer: the interventions along x, no point on
another's place."""

from adjpos.figures import plot_interventions

NAMES = (("none", "none"), ("norm_permute", "norm_scale_control"), ("norm_scale_control", "none"))


def _rows(layers, seeds=(0, 1, 2)):
    return [
        {"task": t, "seed": s, "layer": k, "intervention": n, "control": c,
         "exact_match": 0.5, "exact_match_low": 0.4, "exact_match_high": 0.6}
        for t in ("addition", "reversal") for s in seeds for k in layers for n, c in NAMES
    ]  # fmt: skip


def test_one_layer_puts_the_interventions_along_x_each_seed_apart():
    fig = plot_interventions(_rows([1]))
    axis = fig.layout.xaxis
    assert list(axis.ticktext) == [n for n, _ in NAMES]
    assert list(axis.tickvals) == [0, 1, 2]
    for panel in ("x", "x2"):
        places = [(t.name, t.x[0]) for t in fig.data if (t.xaxis or "x") == panel]
        assert len({x for _, x in places}) == len(places) == 3 * 3  # no point hides another
        for name, x in places:  # each seed near its intervention's tick
            assert abs(x - [n for n, _ in NAMES].index(name)) < 0.5
    assert "layer 1" in fig.layout.xaxis.title.text or "layer 1" in fig.layout.xaxis2.title.text


def test_several_layers_keep_layers_along_x():
    fig = plot_interventions(_rows([0, 1, 2], seeds=(0,)))
    assert all(list(t.x) == [0, 1, 2] for t in fig.data)
    assert fig.layout.xaxis.title.text == "layer intervened at"


def test_controls_have_open_markers():
    fig = plot_interventions(_rows([1], seeds=(0,)))
    symbols = {t.name: t.marker.symbol for t in fig.data}
    assert symbols["norm_scale_control"].endswith("-open")
    assert not symbols["norm_permute"].endswith("-open")
