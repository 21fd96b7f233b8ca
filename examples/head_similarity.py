"""Which attention heads of the shipped trained models read similarity, and which look back.

For every head of each shipped model (`adjpos.head_similarity`): the correlation, within each
query row, between the head's attention scores and the cosine similarity of the states it
reads (Pearson r and Spearman rho, mean over rows), and its attention on the previous
`--window` positions and on the query itself; beside them, the same head at the random
initial weights the seed was trained from (``init r``, ``init prev``). The sequences are
held-out prompts with their answers (one length per task). Writes the table
(``head_similarity.csv``) and, per seed, layer x head heatmaps of the trained models
(``head_similarity_seedS.html``) into ``--out``.
Public API only; ``--quick`` measures one task on 16 sequences.

    python examples/head_similarity.py [--quick] [--seeds 0 1 2] [--n 256] [--window 3]
        [--out figures]
"""

import argparse
from pathlib import Path

import pandas as pd

import adjpos
import adjpos.figures
from adjpos.pretrained import available_pretrained
from adjpos.seeds import derived_generator
from adjpos.tables import Table

COLUMNS = Table(task="string", seed="int64", model="string", length="int64") + adjpos.heads.HEADS
HEADER = (
    f"{'task':<10}{'seed':>5}{'layer':>6}{'head':>5}{'r':>8}{'rho':>8}{'prev':>7}{'self':>7}"
    f"{'init r':>9}{'init prev':>10}"
)


def measure(name: str, seed: int, n: int, window: int) -> pd.DataFrame:
    """The head table of the trained model and of its initial weights, on the same sequences."""
    model, task = adjpos.load_pretrained(name, seed, device="cpu")
    tokens = adjpos.sequences_of_length(
        task, n, generator=derived_generator(seed, "head sequences")
    )
    initial = adjpos.build_model(model.adjpos_config.with_changes(seed=seed), device="cpu")
    parts = []
    for kind, measured in (("trained", model), ("init", initial)):
        table = adjpos.head_similarity(measured, tokens, window=window)
        parts.append(table.assign(task=name, seed=seed, model=kind, length=tokens.shape[1]))
    return COLUMNS.frame(pd.concat(parts))


def print_table(rows: pd.DataFrame) -> None:
    trained = rows[rows["model"] == "trained"].set_index(["task", "seed", "layer", "head"])
    init = rows[rows["model"] == "init"].set_index(["task", "seed", "layer", "head"])
    print(HEADER)
    for (name, seed, layer, head), row in trained.iterrows():
        before = init.loc[(name, seed, layer, head)]
        print(
            f"{name:<10}{seed:>5}{layer:>6}{head:>5}{row.logit_cosine_pearson:>8.3f}"
            f"{row.logit_cosine_spearman:>8.3f}{row.previous_mass:>7.3f}{row.self_mass:>7.3f}"
            f"{before.logit_cosine_pearson:>9.3f}{before.previous_mass:>10.3f}"
        )


def main(quick: bool, seeds: list[int], n: int, window: int, out: Path) -> None:
    tasks = available_pretrained()[:1] if quick else available_pretrained()
    rows = COLUMNS.frame(
        pd.concat([measure(name, seed, n, window) for name in tasks for seed in seeds])
    )
    lengths = rows.groupby("task", sort=False)["length"].first()
    print(f"{n} sequences per model; window = {window}")
    print("r, rho: score-cosine correlations; prev, self: attention mass; uniform attention:")
    for name, length in lengths.items():
        prev, own = adjpos.heads.uniform_mass(int(length), window)
        print(f"  {name}: {length} tokens, uniform prev {prev:.3f}, self {own:.3f}")
    print_table(rows)
    COLUMNS.write(out / "head_similarity.csv", rows)
    written = [out / "head_similarity.csv"]
    for seed in seeds:  # head h of one seed has nothing to do with head h of another
        fig = adjpos.figures.plot_head_similarity(
            rows[(rows["model"] == "trained") & (rows["seed"] == seed)],
            title=f"Trained NoPE models, seed {seed}: score-cosine r and attention on the "
            f"previous {window} positions",
        )
        saved = adjpos.figures.save_figure(fig, out / f"head_similarity_seed{seed}", png=not quick)
        written += saved.written
    print("wrote", ", ".join(str(path) for path in written))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one task, 16 sequences, no PNG")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="shipped seeds")
    parser.add_argument("--n", type=int, default=256, help="sequences per model")
    parser.add_argument("--window", type=int, default=3, help="previous positions summed")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.seeds, 16 if args.quick else args.n, args.window, args.out)
