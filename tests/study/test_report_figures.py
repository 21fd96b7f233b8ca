"""The report as a browser shows it: each figure in a frame of the figure's own size (nothing
cut off, no scrolling inside a frame), every frame within the page's width, and the run's
figures readable (named axes in words, numbered log ticks, one colour per model kind)."""

import re

import pytest

from adjpos.figures.save import PAGE_MARGIN, frame_size
from adjpos.figures.style import MAX_WIDTH
from adjpos.study.pipeline import run_figures
from figure_checks import (
    assert_axes_named,
    assert_log_ticks_are_numbers,
    assert_no_field_names,
    assert_one_colour_per_kind,
    assert_y_titles_fit,
    kind_colours,
)

FRAME = re.compile(r'<iframe src="figures/([^"]+)\.html" width="(\d+)" height="(\d+)"')


@pytest.fixture(scope="module")
def drawn(tiny_run):
    out, _ = tiny_run
    return {stem: fig for stem, (fig, _) in run_figures(out).items()}


def test_each_frame_is_its_figures_size_and_fits_the_page(tiny_run, drawn):
    html = (tiny_run[0] / "report.html").read_text()
    frames = {stem: (int(w), int(h)) for stem, w, h in FRAME.findall(html)}
    assert len(FRAME.findall(html)) == len(frames) == len(drawn)  # each figure framed once
    body = int(re.search(r"body\{[^}]*max-width:(\d+)px", html).group(1))
    for stem, fig in drawn.items():
        width, height = fig.layout.width, fig.layout.height
        assert (
            frames[stem] == frame_size(fig) == (width + 2 * PAGE_MARGIN, height + 2 * PAGE_MARGIN)
        )
        assert frames[stem][0] <= MAX_WIDTH + 2 * PAGE_MARGIN <= body


def test_the_runs_figures_name_their_axes_and_number_their_log_ticks(drawn):
    for stem, fig in drawn.items():
        assert_axes_named(fig, stem)
        assert_log_ticks_are_numbers(fig)
        assert_y_titles_fit(fig, stem)
    assert sum(assert_log_ticks_are_numbers(fig) for fig in drawn.values()) >= 2  # theory


def test_no_figure_of_the_run_shows_a_field_name(drawn):
    for stem, fig in drawn.items():
        assert_no_field_names(fig, stem)


def test_each_model_kind_and_layout_has_one_colour_across_the_runs_figures(drawn):
    assert_one_colour_per_kind(list(drawn.values()))
    # the tiny run draws three kinds (the sweep's NoPE and learned among them) and every layout
    assert len(kind_colours(list(drawn.values()))) == 6
