"""The probing figures: position read from variance, cosine similarity and the raw residual,
layer by layer, with order reconstruction, for each trained model and the random-init copies
of its architecture on the same sequences.

The study's own stage (`adjpos.study.claims.probing.measure_probes` on `probe_subjects`):
ridge, logistic and spline probes with folds grouped by sequence, each score beside its chance
level and its gains over layer 0 and over token_identity; shuffled controls must sit at chance.
``--only`` picks models by a word of their label (e.g. ``reversal``); ``--quick`` runs the
study's tiny sizes on one task (the test suite's smoke run).

    python examples/fig_probing.py [--quick] [--only reversal] [--out figures]
"""

import argparse
from pathlib import Path

import pandas as pd

import adjpos.figures
import adjpos.study
from adjpos.study.claims import probing


def main(quick: bool, only: str | None, out: Path) -> None:
    sizes = adjpos.study.TINY if quick else adjpos.study.FULL
    subjects = probing.probe_subjects(adjpos.study.Models(device="cpu"), sizes)
    results, kept = [], []
    for subject in subjects:
        if (only or ("addition" if quick else "")) not in subject.label:
            continue
        result = probing.measure_probes(subject, sizes)
        results.append(result)
        kept.append({"task": subject.task, "kind": subject.kind})
        fig = adjpos.figures.plot_probe_scores(result)
        saved = adjpos.figures.save_figure(
            fig, out / f"probes_{probing.slug(subject.label)}", png=not quick
        )
        print("wrote", ", ".join(str(p) for p in saved.written))
    numbers = probing.probe_numbers(results, kept)
    rows = pd.DataFrame(numbers["tasks"])
    columns = ["variance_spline", "cosine_first_spline", "resid_accuracy"]
    for name in columns:
        rows[name] = [f"{s['value']:.2f} (layer {s['layer']})" if s else "" for s in rows[name]]
    print(rows[["task", *columns, "cosine_vs_variance"]].to_string(index=False))
    print(pd.DataFrame(numbers["trained_vs_control"]).to_string(index=False))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one model, no PNG")
    parser.add_argument("--only", default=None, help="probe only models whose label has this")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.only, args.out)
