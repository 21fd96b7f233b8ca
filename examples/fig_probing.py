"""The probing figures: position read from variance, cosine similarity and the raw residual,
layer by layer, with order reconstruction, for each trained seed and the random-init model of
its own initial weights on the same sequences, and the paired comparisons behind the verdicts.

The study's own stage (`adjpos.study.probe_units.probe_unit`, one per trained seed): ridge,
logistic and spline probes with folds grouped by sequence, each score beside its chance level;
then the paired comparisons (the best backward cosine number against the variance on the same
positions and folds, the trained seed against its initial weights), each with a 95% bootstrap
interval over sequences. ``--only`` picks units by a word of "TASK seed SEED" (e.g.
``reversal``); ``--quick`` runs the study's tiny sizes on one seed of one task (the test
suite's smoke run).

    python examples/fig_probing.py [--quick] [--only reversal] [--out figures]
"""

import argparse
import json
from pathlib import Path

import pandas as pd

import adjpos.figures
import adjpos.study
from adjpos.probes import ProbeResult
from adjpos.study import probe_units
from adjpos.study.claim import CRITERIA
from adjpos.study.claims import probing
from adjpos.tasks import TASKS


def main(quick: bool, only: str | None, out: Path) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    models = adjpos.study.Models(device="cpu")
    units = [(t, s) for t in TASKS for s in models.seeds(t, sizes)]
    units = [(t, s) for t, s in units if (only or ("addition" if quick else "")) in f"{t} seed {s}"]
    found = []
    for task, seed in units[:1] if quick else units:
        unit = probe_units.probe_unit(models, sizes, CRITERIA, task, seed)["result"]
        for kind in ("trained", "control"):
            unit[kind] = ProbeResult.from_json(json.dumps(unit[kind]))
            fig = adjpos.figures.plot_probe_scores(unit[kind])
            name = f"probes_{probe_units.slug(unit[kind].model)}"
            saved = adjpos.figures.save_figure(fig, out / name, png=not quick)
            print("wrote", ", ".join(str(p) for p in saved.written))
        found.append(unit)
    numbers = probing.probe_numbers(found, CRITERIA)
    columns = ["value_a", "value_b", "difference", "low", "high"]
    within = pd.DataFrame([r for unit in found for r in unit["comparisons"]])
    print(within[["task", "seed", "comparison", "positions", *columns]].to_string(index=False))
    copies = pd.DataFrame(numbers["versus"]).rename(
        columns={"value_a": "trained", "value_b": "control"}
    )
    columns = ["trained", "control", "difference", "low", "high"]
    print(copies[["task", "seed", "comparison", *columns]].to_string(index=False))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one model, no PNG")
    parser.add_argument("--only", default=None, help="probe only units whose name has this")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.only, args.out)
