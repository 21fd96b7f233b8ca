"""save_figure(s): HTML always, PNG when kaleido and Chrome work, else a reason saying how.

Each test fixes one branch (kaleido missing, present and failing, present and working), so it
fails when that branch breaks, whatever is installed on the machine running it.
"""

import sys
import types

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from adjpos.figures import SavedFigure, save_figure, save_figures

ENABLE = (
    'enable PNG with `pip install -e ".[png]"` (kaleido) and a Chrome, '
    "e.g. `apt-get install -y chromium`"
)
PNG = b"\x89PNG\r\n\x1a\n"


def _fig():
    return go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))


@pytest.fixture
def kaleido_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido -> ImportError


@pytest.fixture
def kaleido_present(monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", types.ModuleType("kaleido"))
    monkeypatch.setattr("adjpos.figures.save.time.sleep", lambda seconds: None)


@pytest.fixture
def png_export(kaleido_present, monkeypatch):
    """Static export that fails the first `fails` tries and always for the file names in
    `broken`, else writes a PNG; `calls` counts the tries."""
    state = types.SimpleNamespace(fails=0, broken=(), calls=0)

    def write_image(self, path, **kwargs):
        state.calls += 1
        assert kwargs["format"] == "png"
        if state.calls <= state.fails or path.name in state.broken:
            raise RuntimeError("\n\nKaleido requires Google Chrome to be installed.\n\nEither ...")
        path.write_bytes(PNG)

    monkeypatch.setattr(go.Figure, "write_image", write_image)
    return state


@pytest.mark.usefixtures("kaleido_missing")
def test_no_kaleido_writes_html_only_and_says_how_to_get_png(tmp_path):
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "fig.png").write_bytes(b"stale")
    saved = save_figure(_fig(), tmp_path / "deep" / "fig")
    html = tmp_path / "deep" / "fig.html"
    assert saved.written == (html,) and not (tmp_path / "deep" / "fig.png").exists()
    assert "<html>" in html.read_text() and "plotly" in html.read_text()
    assert saved.png_skipped == f"PNG skipped: kaleido is not installed; {ENABLE}"


def test_png_is_written_when_static_export_works(tmp_path, png_export):
    saved = save_figure(_fig(), tmp_path / "deep" / "fig")
    html, png = tmp_path / "deep" / "fig.html", tmp_path / "deep" / "fig.png"
    assert saved == SavedFigure((html, png), None)
    assert png.read_bytes() == PNG and "plotly" in html.read_text()
    assert png_export.calls == 1


def test_a_page_not_ready_is_retried(tmp_path, png_export):
    png_export.fails = 2
    saved = save_figure(_fig(), tmp_path / "fig")
    assert saved.png_skipped is None and (tmp_path / "fig.png").read_bytes() == PNG
    assert png_export.calls == 3


def test_no_chrome_gives_a_one_line_reason_after_three_tries(tmp_path, png_export):
    png_export.fails = 99
    (tmp_path / "fig.png").write_bytes(b"stale")
    saved = save_figure(_fig(), tmp_path / "fig")
    assert saved.written == (tmp_path / "fig.html",) and not (tmp_path / "fig.png").exists()
    assert saved.png_skipped == (
        f"PNG skipped: Kaleido requires Google Chrome to be installed.; {ENABLE}"
    )
    assert png_export.calls == 3


def test_png_can_be_switched_off(tmp_path, png_export):
    saved = save_figure(_fig(), tmp_path / "fig", png=False)
    assert saved.written == (tmp_path / "fig.html",) and saved.png_skipped == "PNG not requested"
    assert png_export.calls == 0


@pytest.mark.parametrize("stem", ["fig", "fig.v2"])
def test_suffix_is_added_not_replaced(tmp_path, stem):
    saved = save_figure(_fig(), tmp_path / stem, png=False)
    assert saved.written[0].name == f"{stem}.html"


def test_many_figures_share_one_plotly_js_and_export_in_one_batch(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", types.ModuleType("kaleido"))
    batches = []

    def write_images(figures, paths, **kwargs):
        batches.append(len(figures))
        for path in paths:
            path.write_bytes(PNG)

    monkeypatch.setattr(pio, "write_images", write_images)
    saved = save_figures({"a": _fig(), "b": _fig()}, tmp_path / "out")
    names = [p.name for p in saved.written]
    assert names == ["a.html", "b.html", "a.png", "b.png"] and saved.png_skipped is None
    assert batches == [2] and (tmp_path / "out" / "plotly.min.js").is_file()
    assert "plotly.min.js" in (tmp_path / "out" / "a.html").read_text()


def test_many_figures_fall_back_one_by_one_and_leave_all_pngs_or_none(
    tmp_path, png_export, monkeypatch
):
    def batch_fails(figures, paths, **kwargs):
        paths[0].write_bytes(PNG)  # a partial batch must not survive
        raise RuntimeError("page not ready")

    monkeypatch.setattr(pio, "write_images", batch_fails)
    saved = save_figures({"a": _fig(), "b": _fig()}, tmp_path)
    assert saved.png_skipped is None and png_export.calls == 2  # one by one, both fine
    assert [p.name for p in saved.written] == ["a.html", "b.html", "a.png", "b.png"]

    png_export.calls, png_export.broken = 0, ("b.png",)  # a is written, then b fails
    saved = save_figures({"a": _fig(), "b": _fig()}, tmp_path)
    assert png_export.calls == 1 + 3 and [p.name for p in saved.written] == ["a.html", "b.html"]
    assert not list(tmp_path.glob("*.png"))
    assert (
        saved.png_skipped
        == f"PNG skipped: Kaleido requires Google Chrome to be installed.; {ENABLE}"
    )


@pytest.mark.usefixtures("kaleido_missing")
def test_many_figures_without_kaleido_or_with_png_off(tmp_path):
    saved = save_figures({"a": _fig()}, tmp_path)
    assert saved.png_skipped == f"PNG skipped: kaleido is not installed; {ENABLE}"
    assert save_figures({"a": _fig()}, tmp_path, png=False).png_skipped == "PNG not requested"
    assert save_figures({}, tmp_path).written == ()


def test_a_frame_holds_the_figure_and_its_pages_margins():
    from adjpos.figures.save import PAGE_MARGIN, frame_size

    fig = _fig().update_layout(width=640, height=480)
    assert frame_size(fig) == (640 + 2 * PAGE_MARGIN, 480 + 2 * PAGE_MARGIN)
    with pytest.raises(ValueError, match="set both"):
        frame_size(_fig())  # no size: the page would fill whatever frame it is given
