"""The first-layer theory figure: measured vs predicted adjacency and attention entropy."""

import pytest

from adjpos.figures import plot_first_layer_theory, save_figure


def _rows(sites=(None,)):
    rows = []
    for init in (0.01, 0.1, 1.0):
        for seed in (0, 1):
            for site in sites:
                row = dict(
                    init_range=init,
                    seed=seed,
                    measured_adjacency=0.7 + 0.1 * seed,
                    predicted_adjacency=0.9 - 0.1 * init,
                    entropy_ratio=1.0 - 0.2 * init - 0.1 * seed,
                )
                rows.append(row if site is None else dict(row, site=site))
    return rows


def test_two_log_panels_with_means_over_seeds():
    fig = plot_first_layer_theory(_rows())
    measured, predicted, entropy = fig.data
    assert [t.name for t in fig.data] == ["measured", "predicted", "entropy ratio"]
    assert list(measured.x) == [0.01, 0.1, 1.0]
    assert list(measured.y) == pytest.approx([0.75] * 3)
    assert list(measured.error_y.array) == pytest.approx([0.1 / 2**0.5] * 3)
    assert list(predicted.y) == pytest.approx([0.899, 0.89, 0.8])
    assert predicted.line.dash == "dash" and predicted.xaxis == "x"
    assert list(entropy.y) == pytest.approx([0.948, 0.93, 0.75]) and entropy.xaxis == "x2"
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    chance = [s for s in fig.layout.shapes if s.yref == "y"]
    assert len(chance) == 1 and chance[0].y0 == 0.5 and chance[0].line.dash == "dash"


def test_one_measured_and_one_predicted_line_per_site():
    rows = _rows(sites=("resid_post", "attn_out"))
    for row in rows:  # the residual term lowers the prediction at resid_post
        row["predicted_adjacency"] -= 0.2 if row["site"] == "resid_post" else 0.0
    fig = plot_first_layer_theory(rows)
    names = [t.name for t in fig.data]
    assert names == [
        "measured (residual after the block)",
        "predicted (residual after the block)",
        "measured (attention output)",
        "predicted (attention output)",
        "entropy ratio",
    ]
    assert fig.data[0].line.color == fig.data[1].line.color != fig.data[2].line.color
    assert fig.data[1].line.dash == "dash" and fig.data[3].line.dash == "dash"
    assert list(fig.data[1].y) == pytest.approx([0.699, 0.69, 0.6])
    assert list(fig.data[3].y) == pytest.approx([0.899, 0.89, 0.8])


def test_missing_columns_and_bad_init_range():
    rows = [{k: v for k, v in r.items() if k != "entropy_ratio"} for r in _rows()]
    with pytest.raises(ValueError, match=r"rows lack column\(s\) \['entropy_ratio'\]"):
        plot_first_layer_theory(rows)
    rows = [dict(r, init_range=0.0) for r in _rows()]
    with pytest.raises(ValueError, match=r"init_range must be > 0 for the log axis; got \[0.0\]"):
        plot_first_layer_theory(rows)


def test_can_be_saved(tmp_path):
    saved = save_figure(plot_first_layer_theory(_rows()), tmp_path / "x", png=False)
    assert saved.written == (tmp_path / "x.html",)


def test_a_single_init_scale_still_shows_the_prediction():
    rows = [r for r in _rows() if r["init_range"] == 0.1]
    predicted = next(t for t in plot_first_layer_theory(rows).data if t.name == "predicted")
    assert "markers" in predicted.mode  # a line through one point draws nothing
    several = next(t for t in plot_first_layer_theory(_rows()).data if t.name == "predicted")
    assert several.mode == "lines"
