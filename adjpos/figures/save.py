"""`save_figure`: HTML always; PNG too when kaleido and a Chrome/Chromium are available."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from adjpos.validation import UsageError

ENABLE_PNG = (
    'enable PNG with `pip install -e ".[png]"` (kaleido) and a Chrome, '
    "e.g. `apt-get install -y chromium`"
)
# The browser's default margin around the body of a figure's page (plotly's page keeps it).
PAGE_MARGIN = 8


@dataclass(frozen=True)
class SavedFigure:
    """What `save_figure` wrote, and why the PNG is missing when it is."""

    written: tuple[Path, ...]
    png_skipped: str | None = None


def save_figure(fig: go.Figure, stem: str | os.PathLike, *, png: bool = True) -> SavedFigure:
    """Write `fig` to ``stem.html`` (self-contained) and, when static export works, ``stem.png``.

    Args:
        fig: the figure.
        stem: output path without a suffix; its folder is created if needed.
        png: also try the PNG (False skips it, e.g. for speed).

    Returns:
        `SavedFigure`: the paths written, and when the PNG was skipped a one-line reason that
        says how to enable it.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    html = stem.with_name(stem.name + ".html")
    fig.write_html(html, include_plotlyjs=True, full_html=True)
    if not png:
        return SavedFigure((html,), "PNG not requested")
    image = stem.with_name(stem.name + ".png")
    reason = _write_png(fig, image)
    return SavedFigure((html,) if reason else (html, image), reason)


def frame_size(fig: go.Figure) -> tuple[int, int]:
    """(width, height) in CSS pixels of a frame that shows `fig`'s saved HTML page whole,
    without cutting it or scrolling inside: the figure's layout size and the page's margins.

    Raises:
        ValueError: the layout sets no width or height (the page would then fill any frame).
    """
    width, height = fig.layout.width, fig.layout.height
    if width is None or height is None:
        raise UsageError(
            f"the figure's layout has width {width} and height {height}; set both "
            "(adjpos.figures.style.apply_style does) to frame it"
        )
    return round(width) + 2 * PAGE_MARGIN, round(height) + 2 * PAGE_MARGIN


def _write_png(fig: go.Figure, path: Path) -> str | None:
    """Write the PNG; on failure return a one-line reason instead of raising."""
    path.unlink(missing_ok=True)  # never leave a PNG from an earlier run beside new HTML
    missing = _kaleido_missing()
    if missing:
        return missing
    error = None
    for attempt in range(3):  # kaleido's browser page is now and then not ready: retry
        try:
            fig.write_image(path, format="png", scale=2)
            return None
        except Exception as err:  # kaleido reports a missing browser as a bare RuntimeError
            error = err
            time.sleep(0.5 * (attempt + 1))
    first = next((line for line in str(error).splitlines() if line.strip()), "unknown error")
    return f"PNG skipped: {first.strip()[:200]}; {ENABLE_PNG}"


def _kaleido_missing() -> str | None:
    """The reason to skip PNGs when kaleido cannot be imported, else None."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return f"PNG skipped: kaleido is not installed; {ENABLE_PNG}"
    return None


def save_figures(
    figures: Mapping[str, go.Figure], folder: str | os.PathLike, *, png: bool = True
) -> SavedFigure:
    """Write many figures to `folder`: ``NAME.html`` each, and ``NAME.png`` when static export
    works, all PNGs in one batch (one browser start instead of one per figure).

    The HTML files share one ``plotly.min.js`` written beside them, so a folder of figures
    costs one copy of plotly.js (open them from that folder).

    Returns:
        `SavedFigure`: every path written, and when the PNGs were skipped a one-line reason
        that says how to enable them.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures.items():
        html = folder / f"{name}.html"
        fig.write_html(html, include_plotlyjs="directory", full_html=True)
        written.append(html)
    pngs = [folder / f"{name}.png" for name in figures]
    for path in pngs:
        path.unlink(missing_ok=True)  # never leave a PNG from an earlier run beside new HTML
    if not png or not figures:
        return SavedFigure(tuple(written), None if figures and png else "PNG not requested")
    reason = _write_pngs(list(figures.values()), pngs)
    return SavedFigure(tuple(written if reason else written + pngs), reason)


def _write_pngs(figures: list[go.Figure], paths: list[Path]) -> str | None:
    """Write the PNGs in one kaleido batch; on failure (kaleido missing too), one figure at a
    time (which retries, or says why not)."""
    missing = _kaleido_missing()  # plotly may hold kaleido from an earlier import
    if missing:
        return missing
    try:
        pio.write_images(
            figures,
            paths,
            format="png",
            scale=2,
            width=[fig.layout.width for fig in figures],  # not always read from the layout
            height=[fig.layout.height for fig in figures],
        )
        return None
    except Exception:  # a missing browser or a page not ready: the single path says which
        for path in paths:
            path.unlink(missing_ok=True)
    for fig, path in zip(figures, paths, strict=True):
        reason = _write_png(fig, path)
        if reason is not None:
            for stale in paths:
                stale.unlink(missing_ok=True)  # all PNGs or none: never a partial set
            return reason
    return None
