"""Write docs/gallery.md and its PNGs from the results of an ``adjpos reproduce`` run.

    adjpos reproduce --out runs/full          # the study's full sizes
    python docs/make_gallery.py runs/full

The figures are redrawn from the run's result files (no recomputation) and exported at
scale 1 into docs/figures/gallery/, so the checked-in PNGs stay small. Needs kaleido and a
Chrome (``pip install -e ".[png]"``, ``apt-get install -y chromium``).
"""

import argparse
import json
from pathlib import Path

import plotly.io as pio

from adjpos.study.report import build_report

DOCS = Path(__file__).resolve().parent
FOLDER = "figures/gallery"


def main(run: Path) -> None:
    report = build_report(run)
    out = DOCS / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    stems, figures = list(report.figures), list(report.figures.values())
    pio.write_images(
        figures,
        [out / f"{s}.png" for s in stems],
        format="png",
        scale=1,
        width=[f.layout.width for f in figures],  # kaleido's batch ignores the layout's size
        height=[f.layout.height for f in figures],
    )
    settings = json.loads((run / "results" / "run.json").read_text())["settings"]
    intro = (
        "Every figure and table below was drawn by `adjpos reproduce` "
        f"({settings['size']} sizes) and is rebuilt with `python docs/make_gallery.py DIR` from "
        "the run's folder; `report.md` in that folder holds the same text, with links to the "
        "interactive figures. Numbers come from that one run (see the first section for its "
        "settings and versions)."
    )
    text = report.markdown(set(stems), folder=FOLDER, links=False, title="Gallery")
    head, rest = text.split("\n\n", 1)
    (DOCS / "gallery.md").write_text(f"{head}\n\n{intro}\n\n{rest}")
    print(f"wrote {len(stems)} PNGs to {out} and {DOCS / 'gallery.md'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the folder of an adjpos reproduce run")
    main(parser.parse_args().run)
