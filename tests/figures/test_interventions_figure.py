"""The interventions figure: each change beside its own control, one family of carriers per
panel, each seed a point around the seeds' mean."""

import pytest

from adjpos.figures import plot_interventions

NAMES = (
    ("none", "none"),
    ("norm_permute", "norm_scale_control"),
    ("norm_scale_control", "none"),
    ("subspace_swap", "subspace_swap_random"),
    ("subspace_swap_random", "none"),
)
FAMILIES = {"norm_permute": "norms", "norm_scale_control": "norms"}
FAMILIES |= {"subspace_swap": "position subspace", "subspace_swap_random": "position subspace"}


def _rows(layers, seeds=(0, 1, 2)):
    return [
        {"task": t, "seed": s, "layer": k, "intervention": n, "control": c,
         "exact_match": 0.1 * s + 0.05 * i}
        for t in ("addition", "reversal") for s in seeds for k in layers
        for i, (n, c) in enumerate(NAMES)
    ]  # fmt: skip


def _panel(fig, title):
    index = [a.text for a in fig.layout.annotations].index(title)
    axis = "x" if index == 0 else f"x{index + 1}"
    return [t for t in fig.data if (t.xaxis or "x") == axis]


def test_each_family_has_its_panel_and_each_change_stands_beside_its_control():
    fig = plot_interventions(_rows([1, 2]), families=FAMILIES)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        f"{t}: {f}" for t in ("addition", "reversal") for f in dict.fromkeys(FAMILIES.values())
    ]
    norms = _panel(fig, "reversal: norms")
    means = {t.name: list(t.x) for t in norms if t.name.endswith("(mean)")}
    assert set(means) == {"norm_permute (mean)", "norm_scale_control (mean)"}
    change, control = means["norm_permute (mean)"], means["norm_scale_control (mean)"]
    assert [b - a for a, b in zip(change, control, strict=True)] == [1, 1]  # side by side
    assert {t.name for t in norms if t.mode == "lines"} == {"unchanged model"}


def test_seeds_are_points_around_their_mean_and_controls_are_open():
    fig = plot_interventions(_rows([1]), families=FAMILIES)
    norms = _panel(fig, "addition: norms")
    points = next(t for t in norms if t.name == "norm_permute")
    mean = next(t for t in norms if t.name == "norm_permute (mean)")
    assert len(points.x) == 3 and len(set(points.x)) == 3  # no seed hides another
    assert max(abs(x - mean.x[0]) for x in points.x) < 0.5
    assert mean.y[0] == pytest.approx(sum(points.y) / 3)
    control = next(t for t in norms if t.name == "norm_scale_control")
    assert control.marker.symbol == "circle-open" and points.marker.symbol == "circle"
    assert control.marker.color == points.marker.color


def test_labels_name_the_changes_and_layers_name_the_groups():
    labels = {"norm_permute": "norms moved", "norm_scale_control": "their ratios at random"}
    fig = plot_interventions(_rows([0, 1, 2], seeds=(0,)), labels=labels)
    assert len(fig.layout.annotations) == 2  # no families: one panel per task
    names = {t.name for t in fig.data if t.showlegend}
    assert {"norms moved", "their ratios at random", "unchanged model"} <= names
    assert list(fig.layout.xaxis.ticktext) == ["layer 0", "layer 1", "layer 2"]
    assert fig.layout.xaxis2.title.text == "layer intervened at"
