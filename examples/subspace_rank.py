"""How the position-subspace swap depends on its rank, for each shipped trained model.

Exact match with the LDA position subspace of rank r swapped between positions (norms kept),
beside a random subspace of the same rank holding the same share of the states' variance (the
mean over its draws), the read-out positions kept, at layers 1 to 3, on fresh held-out prompts
(as many again fit the subspace). Public API only; ``--quick`` is the test suite's smoke run.

    python examples/subspace_rank.py [--quick]
"""

import argparse

import adjpos
from adjpos.interventions import intervention_table

TASKS = ["addition", "reversal", "indexing", "ordering"]


def main(quick: bool) -> None:
    tasks, ranks, layers = (["addition"], [4], [1]) if quick else (TASKS, [4, 8, 13], [1, 2, 3])
    print("exact match: position subspace / random subspace" + (" (smoke run)" if quick else ""))
    print(f"{'task':<10}{'layer':>6}" + "".join(f"{'rank ' + str(r):>16}" for r in ranks))
    for name in tasks:
        model, task = adjpos.load_pretrained(name)
        n_prompts = 24 if quick else (100 if name == "reversal" else 200)
        cells = {}
        for rank in ranks:
            table = intervention_table(
                model,
                task,
                layers=layers,
                interventions=["subspace_swap", "subspace_swap_random"],
                n_prompts=n_prompts,
                rank=rank,
                control_draws=2 if quick else 10,
                readouts=["kept"],
                progress=False,
            )
            for layer, rows in table.groupby("layer"):
                score = rows.set_index("intervention")["exact_match"]
                cells[layer, rank] = (
                    f"{score['subspace_swap']:.2f} / {score['subspace_swap_random']:.2f}"
                )
        for layer in layers:
            print(f"{name:<10}{layer:>6}" + "".join(f"{cells[layer, r]:>16}" for r in ranks))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: one task, rank, layer")
    main(parser.parse_args().quick)
