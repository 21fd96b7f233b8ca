import pytest

from adjpos.figures import sweep_heatmap, sweep_histogram, sweep_layer_lines


def _rows():
    rows = []
    for init in (0.05, 0.2):
        for width in (16, 32):
            for seed in (0, 1):
                for layer in (0, 1):
                    score = 0.5 if layer == 0 else init + width / 100 + seed / 10
                    rows.append(
                        {
                            "init_range": init,
                            "d_model": width,
                            "seed": seed,
                            "layer": layer,
                            "adjacency": score,
                            "variance_slope": 0.0,
                            "seconds": 1.0,
                        }
                    )
    return rows


def test_heatmap_shows_the_mean_over_seeds_at_the_layer():
    fig = sweep_heatmap(_rows(), "init_range", "d_model")
    heat = fig.data[0]
    assert list(heat.x) == ["0.05", "0.2"] and list(heat.y) == ["16", "32"]
    assert heat.z[1][0] == pytest.approx(0.05 + 0.32 + 0.05)  # y=32, x=0.05, mean of seeds
    assert heat.zmid == 0.5 and "layer 1" in fig.layout.title.text
    assert sweep_heatmap(_rows(), "init_range", "d_model", layer=0).data[0].z[0][0] == 0.5


def test_lines_and_histogram():
    lines = sweep_layer_lines(_rows(), "d_model")
    names = ["width (residual dimensions): 16", "width (residual dimensions): 32"]
    assert [t.name for t in lines.data] == names
    assert list(lines.data[0].x) == [0, 1] and lines.data[0].y[0] == 0.5
    hist = sweep_histogram(_rows())
    assert len(hist.data[0].x) == 8 and "8 models" in hist.layout.title.text
    assert "at layer 1" in hist.layout.title.text and 0.5 not in hist.data[0].x  # layer 1 only


def _depth_rows():
    """Models of depth 1 and 2, with and without normalization (None: a blank in sweep.csv)."""
    return [
        {"n_layers": depth, "normalization_type": norm, "seed": 0, "layer": layer,
         "adjacency": 0.5 + depth / 10 + layer / 100, "variance_slope": 0.0, "seconds": 1.0}
        for depth in (1, 2)
        for norm in ("LN", None)
        for layer in range(depth + 1)
    ]  # fmt: skip


def test_a_heatmap_over_depth_shows_each_model_at_its_own_last_layer():
    fig = sweep_heatmap(_depth_rows(), "n_layers", "normalization_type")
    heat = fig.data[0]
    assert list(heat.x) == ["1", "2"] and list(heat.y) == ["LN", "none"]  # None kept, named
    assert heat.z[0] == pytest.approx([0.61, 0.72]) and heat.z[1] == heat.z[0]
    assert "each model's last layer" in fig.layout.title.text
    hist = sweep_histogram(_depth_rows())
    assert len(hist.data[0].x) == 4 and "each model's last layer" in hist.layout.title.text


def test_unknown_parameter_or_layer():
    with pytest.raises(ValueError, match=r"\['n_layers'\] are not grid parameters"):
        sweep_heatmap(_rows(), "init_range", "n_layers")
    with pytest.raises(ValueError, match="no rows at layer 5"):
        sweep_histogram(_rows(), layer=5)
