"""The variance shares of the decomposition: stacked bars, one panel per task and model."""

import pytest

from adjpos.figures import plot_variance_shares
from adjpos.figures.decomposition import PARTS


def _rows():
    rows = []
    for task in ("addition", "reversal"):
        for model in ("trained", "random-init"):
            for seed in (0, 1):
                for layer in (0, 1):
                    shares = (0.1 * (seed + 1), 0.4, 0.2, 0.4 - 0.1 * (seed + 1))
                    rows += [
                        {"task": task, "model": model, "seed": seed, "layer": layer}
                        | {"part": part, "share": share}
                        for part, share in zip(PARTS, shares, strict=True)
                    ]
    return rows


def test_parts_stack_in_order_one_panel_per_task_and_model_seeds_averaged():
    fig = plot_variance_shares(_rows())
    assert fig.layout.barmode == "stack"
    assert list(dict.fromkeys(t.name for t in fig.data)) == list(PARTS)
    assert len(fig.data) == 4 * 4  # four parts in four panels
    assert {a.text for a in fig.layout.annotations} == {"addition", "reversal"}
    # each row of panels names its model on its y axis, the first seen on top
    titled = sorted((a.domain[0], a.title.text) for a in fig.select_yaxes() if a.title.text)
    assert titled == [(0.0, "share<br>random-init"), (pytest.approx(0.515), "share<br>trained")]
    mean = next(t for t in fig.data if t.name == "mean")
    assert list(mean.x) == [0, 1] and list(mean.y) == pytest.approx([0.15, 0.15])
    assert len({t.marker.color for t in fig.data if t.name == "position"}) == 1


def test_missing_columns_and_unknown_parts_are_refused():
    with pytest.raises(ValueError, match=r"rows lack the columns \['share'\]"):
        plot_variance_shares([{"task": "a", "model": "m", "layer": 0, "part": "mean"}])
    with pytest.raises(ValueError, match="part must be one of"):
        plot_variance_shares(
            [{"layer": 0, "part": "noise", "share": 1.0}], facet_col=None, facet_row=None
        )
