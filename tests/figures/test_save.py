"""save_figure: HTML always, PNG when kaleido and Chrome work, else a reason saying how."""

import sys
import types

import plotly.graph_objects as go
import pytest

from adjpos.figures import save_figure


def _fig():
    return go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))


def test_html_always_and_png_when_static_export_works(tmp_path):
    saved = save_figure(_fig(), tmp_path / "deep" / "fig")
    html, png = tmp_path / "deep" / "fig.html", tmp_path / "deep" / "fig.png"
    assert "<html>" in html.read_text() and "plotly" in html.read_text()
    if saved.png_skipped is None:
        assert saved.written == (html, png) and png.read_bytes()[:4] == b"\x89PNG"
    else:
        assert saved.written == (html,) and "apt-get install -y chromium" in saved.png_skipped


def test_no_chrome_gives_a_one_line_reason(tmp_path, monkeypatch):
    def no_chrome(self, *args, **kwargs):
        raise RuntimeError("\n\nKaleido requires Google Chrome to be installed.\n\nEither ...")

    monkeypatch.setitem(sys.modules, "kaleido", types.ModuleType("kaleido"))  # installed or not
    monkeypatch.setattr(go.Figure, "write_image", no_chrome)
    monkeypatch.setattr("adjpos.figures.save.time.sleep", lambda seconds: None)
    (tmp_path / "fig.png").write_bytes(b"stale")
    saved = save_figure(_fig(), tmp_path / "fig")
    assert saved.written == (tmp_path / "fig.html",) and not (tmp_path / "fig.png").exists()
    assert saved.png_skipped == (
        "PNG skipped: Kaleido requires Google Chrome to be installed.; enable PNG with "
        "`pip install kaleido` and `apt-get install -y chromium`"
    )


def test_no_kaleido_gives_a_reason(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido -> ImportError
    (tmp_path / "fig.png").write_bytes(b"stale")
    saved = save_figure(_fig(), tmp_path / "fig")
    assert not (tmp_path / "fig.png").exists()
    assert "\n" not in saved.png_skipped and "kaleido is not installed" in saved.png_skipped
    assert "pip install kaleido" in saved.png_skipped


def test_png_can_be_switched_off(tmp_path):
    saved = save_figure(_fig(), tmp_path / "fig", png=False)
    assert saved.written == (tmp_path / "fig.html",) and saved.png_skipped == "PNG not requested"


@pytest.mark.parametrize("stem", ["fig", "fig.v2"])
def test_suffix_is_added_not_replaced(tmp_path, stem):
    saved = save_figure(_fig(), tmp_path / stem, png=False)
    assert saved.written[0].name == f"{stem}.html"
