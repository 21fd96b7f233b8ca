"""Write docs/gallery.md and its PNGs from the results of an ``adjpos reproduce`` run.

    adjpos reproduce --out runs/full          # the study's full sizes
    python docs/make_gallery.py runs/full

The figures are redrawn from the run's result files (no recomputation) and exported at
scale 1 into docs/figures/gallery/, so the checked-in PNGs stay small. Needs kaleido and a
Chrome (``pip install -e ".[png]"``, ``apt-get install -y chromium``).
"""

import argparse
from pathlib import Path

import plotly.io as pio

from adjpos.study.pipeline import run_figures
from adjpos.study.report import render

DOCS = Path(__file__).resolve().parent
FOLDER = "figures/gallery"


def main(run: Path) -> None:
    drawn = run_figures(run)
    out = DOCS / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    stems, figures = list(drawn), [fig for fig, _ in drawn.values()]
    pio.write_images(
        figures,
        [out / f"{s}.png" for s in stems],
        format="png",
        scale=1,
        width=[f.layout.width for f in figures],  # kaleido's batch ignores the layout's size
        height=[f.layout.height for f in figures],
    )
    captions = {stem: caption for stem, (_, caption) in drawn.items()}
    text = render(run, captions, set(stems), folder=FOLDER, links=False, title="Gallery")
    head, rest = text.split("\n\n", 1)
    intro = (
        "Every figure and table below was drawn by `adjpos reproduce` and is rebuilt with "
        "`python docs/make_gallery.py DIR` from the run's folder; `report.md` in that folder "
        "holds the same text, with links to the interactive figures. Numbers come from that one "
        "run (its sizes, device and versions are stated below)."
    )
    (DOCS / "gallery.md").write_text(f"{head}\n\n{intro}\n\n{rest}")
    print(f"wrote {len(stems)} PNGs to {out} and {DOCS / 'gallery.md'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the folder of an adjpos reproduce run")
    main(parser.parse_args().run)
