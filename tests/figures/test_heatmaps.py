"""Cosine heatmaps: lower triangle only, one colour scale, prompt characters on the axes."""

import numpy as np
import pytest

from adjpos.figures import plot_cosine_heatmaps, save_figure
from adjpos.figures.heatmaps import MIN_TICK_PX


def _cosines(n, scale=1.0):
    # Similarity falls with distance, as in the adjacency pattern.
    i, j = np.indices((n, n))
    return scale * (1.0 - np.abs(i - j) / n)


def test_lower_triangle_is_the_input_and_the_rest_is_blank():
    matrix = np.random.default_rng(0).uniform(-1, 1, (5, 5))
    fig = plot_cosine_heatmaps([matrix], titles=["demo"])
    z = fig.data[0].z
    for i in range(5):
        for j in range(5):
            if j < i:
                assert z[i][j] == pytest.approx(matrix[i, j])
            else:
                assert z[i][j] is None
    assert list(fig.data[0].y) == [0, 1, 2, 3, 4]
    bottom, top = fig.layout.yaxis.range
    assert bottom >= 4 and top <= 0  # position 0 on top, like a matrix


def test_nested_lists_are_accepted_and_not_changed():
    matrix = [[1.0, 0.2], [0.2, 1.0]]
    fig = plot_cosine_heatmaps([matrix], titles=["lists"])
    assert [list(row) for row in fig.data[0].z] == [[None, None], [0.2, None]]
    assert matrix == [[1.0, 0.2], [0.2, 1.0]]


def test_one_colour_scale_from_the_off_diagonal_values_of_all_panels():
    small, large = _cosines(4, scale=0.5), _cosines(6)
    large[5, 0] = -0.3  # the lowest value anywhere below a diagonal
    small[0, 3] = -0.9  # upper triangle: must not set the range
    fig = plot_cosine_heatmaps([small, large, large], titles=["a", "b", "c"], columns=2)
    assert fig.data[0].zmin == -0.3 and fig.data[0].zmax == pytest.approx(1.0 - 1 / 6)
    assert all(t.zmin == fig.data[0].zmin and t.zmax == fig.data[0].zmax for t in fig.data)
    assert [t.showscale for t in fig.data] == [True, False, False]
    assert [a.text for a in fig.layout.annotations] == ["a", "b", "c"]
    assert fig.layout.yaxis3.scaleanchor == "x3"  # square panels, second row


def test_tick_text_is_the_prompt_even_with_repeated_characters():
    prompt = "123+456=579."
    fig = plot_cosine_heatmaps(
        [_cosines(12), _cosines(3)], titles=["prompt", "numbers"], labels=[prompt, None]
    )
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert list(axis.ticktext) == list(prompt)  # "5" and "9" repeat, each keeps its tick
        assert list(axis.tickvals) == list(range(12))
    assert fig.layout.xaxis2.ticktext is None  # plain position numbers


def test_characters_too_small_to_read_give_way_to_positions():
    """Ten panels of a 39-character prompt at 1,280 px: characters would be 4 px tall."""
    prompt = "rev(12345678901234567)=76543210987654321."
    fig = plot_cosine_heatmaps(
        [_cosines(len(prompt))] * 10, titles=list("abcdefghij"), labels=[prompt] * 10, columns=5
    )
    assert fig.layout.xaxis.ticktext is None and fig.layout.xaxis.tickformat == "d"
    short = plot_cosine_heatmaps([_cosines(12)] * 10, titles=list("abcdefghij"),
                                 labels=["123+456=579."] * 10, columns=5)  # fmt: skip
    assert list(short.layout.xaxis.ticktext) == list("123+456=579.")
    assert short.layout.xaxis.tickfont.size >= MIN_TICK_PX


def test_bad_shapes_and_counts_name_the_panel():
    good = _cosines(3)
    with pytest.raises(ValueError, match=r"matrix 1 has shape \(3, 4\); expected a square"):
        plot_cosine_heatmaps([good, np.zeros((3, 4))], titles=["a", "b"])
    with pytest.raises(ValueError, match=r"matrix 0 has shape \(9,\)"):
        plot_cosine_heatmaps([np.zeros(9)], titles=["a"])
    with pytest.raises(ValueError, match="got 1 titles for 2 matrices"):
        plot_cosine_heatmaps([good, good], titles=["a"])
    with pytest.raises(ValueError, match="got 3 label lists for 2 matrices"):
        plot_cosine_heatmaps([good, good], titles=["a", "b"], labels=["abc"] * 3)
    with pytest.raises(
        ValueError, match=r"labels 1 has 2 characters but matrix 1 has shape \(3, 3\)"
    ):
        plot_cosine_heatmaps([good, good], titles=["a", "b"], labels=["abc", "ab"])
    with pytest.raises(ValueError, match="no matrices"):
        plot_cosine_heatmaps([], titles=[])


def test_can_be_saved(tmp_path):
    fig = plot_cosine_heatmaps([_cosines(4)], titles=["a"], labels=[["x", "y", "x", "y"]])
    saved = save_figure(fig, tmp_path / "x", png=False)
    assert saved.written == (tmp_path / "x.html",) and "heatmap" in saved.written[0].read_text()
