"""The shares of the decomposition: stacked bars, one panel per task and model."""

import pytest

from adjpos.figures import plot_variance_shares
from adjpos.figures.decomposition import PARTS


def _rows():
    rows = []
    for task in ("addition", "reversal"):
        for model in ("trained", "random-init"):
            for seed in (0, 1):
                for layer in (0, 1):
                    shares = (0.1 * (seed + 1), 0.3, 0.1, 0.2, 0.4 - 0.1 * (seed + 1))
                    rows += [
                        {"task": task, "model": model, "seed": seed, "layer": layer}
                        | {"part": part, "share": share}
                        for part, share in zip(PARTS, shares, strict=True)
                    ]
    return rows


def test_parts_stack_in_order_one_panel_per_task_and_model_seeds_averaged():
    fig = plot_variance_shares(_rows())
    assert fig.layout.barmode == "relative"
    assert list(dict.fromkeys(t.name for t in fig.data)) == list(PARTS.values())
    assert len(fig.data) == 5 * 4  # five parts in four panels
    assert {a.text for a in fig.layout.annotations} == {"addition", "reversal"}
    # each row of panels names its model on its y axis, the first seen on top
    titled = sorted((a.domain[0], a.title.text) for a in fig.select_yaxes() if a.title.text)
    assert titled == [(0.0, "share<br>random-init"), (pytest.approx(0.515), "share<br>trained")]
    mean = next(t for t in fig.data if t.name == "mean")
    assert list(mean.x) == [0, 1] and list(mean.y) == pytest.approx([0.15, 0.15])
    assert len({t.marker.color for t in fig.data if t.name == PARTS["position"]}) == 1
    assert list(fig.layout.yaxis.range) == [0.0, 1.0]


def test_a_negative_share_stacks_below_zero_on_a_free_axis():
    rows = [{"layer": 0, "part": p, "share": s} for p, s in (("mean", 0.6), ("position", -0.1))]
    rows.append({"layer": 0, "part": "residual", "share": 0.5})
    fig = plot_variance_shares(rows, facet_col=None, facet_row=None)
    assert [float(t.y[0]) for t in fig.data] == [0.6, -0.1, 0.5]
    assert fig.layout.barmode == "relative" and fig.layout.yaxis.range is None


def test_missing_columns_and_unknown_parts_are_refused():
    with pytest.raises(ValueError, match=r"rows lack the columns \['share'\]"):
        plot_variance_shares([{"task": "a", "model": "m", "layer": 0, "part": "mean"}])
    with pytest.raises(ValueError, match="part must be one of"):
        plot_variance_shares(
            [{"layer": 0, "part": "noise", "share": 1.0}], facet_col=None, facet_row=None
        )
