"""The head heatmaps: one panel per measure and task, repeated rows averaged, fixed scales."""

import math

import pandas as pd
import pytest

from adjpos.figures import plot_head_similarity, save_figure


def _rows():
    rows = []
    for task in ("addition", "reversal"):
        for draw in (0, 1):  # one model measured on two prompt sets
            for layer in (0, 1):
                for head in (0, 1, 2):
                    r = math.nan if (task, layer, head) == ("reversal", 1, 2) else 0.1 * head + draw
                    rows.append(
                        dict(
                            task=task,
                            draw=draw,
                            layer=layer,
                            head=head,
                            logit_cosine_pearson=r,
                            logit_cosine_spearman=r,
                            previous_mass=0.2 * layer + 0.1 * draw,
                            self_mass=0.1,
                        )
                    )
    return rows


def test_one_panel_per_measure_and_task_on_shared_scales():
    fig = plot_head_similarity(_rows())
    assert [a.text for a in fig.layout.annotations][:2] == ["addition", "reversal"]
    axes = [t.coloraxis for t in fig.data]
    assert axes == ["coloraxis", "coloraxis", "coloraxis2", "coloraxis2"]
    correlation, _, mass, _ = fig.data
    assert list(correlation.x) == [0, 1, 2] and list(correlation.y) == [0, 1]
    assert correlation.z[1] == pytest.approx([0.5, 0.6, 0.7])  # the mean of the two draws
    assert mass.z[1] == pytest.approx([0.25, 0.25, 0.25])
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-1.0, 1.0)
    assert (fig.layout.coloraxis2.cmin, fig.layout.coloraxis2.cmax) == (0.0, 1.0)
    assert fig.layout.yaxis.autorange == "reversed"  # layer 0 on top


def test_an_undefined_correlation_is_a_blank_cell():
    fig = plot_head_similarity(_rows(), values=["logit_cosine_spearman"])
    assert len(fig.data) == 2
    assert fig.data[1].z[1][2] is None and fig.data[1].z[1][1] == pytest.approx(0.6)


def test_the_partial_correlations_are_drawn_on_the_correlation_scale():
    partial = ["logit_cosine_given_distance", "logit_cosine_given_token"]
    rows = [r | {partial[0]: 0.5 * r["logit_cosine_pearson"], partial[1]: 0.3} for r in _rows()]
    fig = plot_head_similarity(rows, values=partial)
    assert len(fig.data) == 4 and fig.data[0].z[1] == pytest.approx([0.25, 0.3, 0.35])
    assert (fig.layout.coloraxis2.cmin, fig.layout.coloraxis2.cmax) == (-1.0, 1.0)
    assert "distance partialled" in fig.layout.coloraxis.colorbar.title.text


def test_one_model_without_a_panel_column(tmp_path):
    rows = pd.DataFrame(_rows())
    one = rows[(rows["task"] == "addition") & (rows["draw"] == 0)].drop(columns="task")
    fig = plot_head_similarity(one, panel=None, values=["self_mass"], title="one model")
    assert len(fig.data) == 1 and fig.layout.title.text == "one model"
    assert save_figure(fig, tmp_path / "heads", png=False).written[0].is_file()


def test_refuses_unknown_measures_and_missing_columns():
    with pytest.raises(ValueError, match=r"values \['entropy'\] are not allowed"):
        plot_head_similarity(_rows(), values=["entropy"])
    with pytest.raises(ValueError, match=r"lack column\(s\) \['model'\]"):
        plot_head_similarity(_rows(), panel="model")
    with pytest.raises(ValueError, match="no head rows"):
        plot_head_similarity([])
