"""What each layout of the text models learns: held-out loss per layout and seed, at the training
context and at 2x, 4x and 8x it (length extrapolation), and the layouts paired by seed
(`adjpos.text.evaluate`; docs/text-models.md gives the tables and how they are computed).

    python examples/text_losses.py [--seeds 0 1 2] [--widths 64 128] [--factors 1 2 4 8]
        [--max-chunks 64] [--out runs/text-losses]

reads the shipped models of each width (``pretrained:text-LAYOUT:SEED`` at d_model 64,
``pretrained:text-LAYOUT-d128:SEED`` at 128; every shipped seed by default; the seeds asked for
but not shipped are named), the corpus's validation and test splits (fetched once, see
`adjpos.text.corpus`), writes ``losses.csv`` and ``differences.csv`` to ``--out`` and prints the
tables as markdown: the layouts paired within a width, and each layout's widths paired. ``--quick``
runs tiny random models of each layout on a generated text (no corpus, no shipped model): the
smoke test.
"""

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

import adjpos
from adjpos.text.evaluate import DIFFERENCES, FACTORS, LOSSES, evaluate_layouts
from adjpos.text.recipe import LAYOUTS, RECIPE_DATA, WIDTHS, layout_config, sized
from adjpos.text_layers import shared_tokenizer, shipped_text_folders

QUICK = {"context": 8, "max_chunks": 6, "seeds": (0, 1), "n_boot": 200, "factors": FACTORS}


def quick_inputs() -> tuple[dict, dict]:
    """Tiny random models of each layout and seed, and a generated text's token splits."""
    from train_text import generated_text

    from adjpos.text import encode_text, train_tokenizer

    tokenizer = train_tokenizer(generated_text(), 300)
    ids = torch.tensor(encode_text(tokenizer, generated_text(1200)))
    n_ctx = QUICK["context"] * max(QUICK["factors"])
    tiny = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 300, "n_ctx": n_ctx}
    models = {
        (layout, seed): adjpos.build_model(layout_config(layout, **tiny, seed=seed)).eval()
        for seed in QUICK["seeds"]
        for layout in LAYOUTS
    }
    return models, {"validation": ids[: len(ids) // 2], "test": ids[len(ids) // 2 :]}


def shipped_inputs(seeds: list[int] | None, widths: list[int], factors: list[int]) -> tuple:
    """The shipped models of `widths` (read at the largest of `factors` times their context)
    and the corpus's held-out splits."""
    from adjpos.text import encode_text, read_split

    n_ctx = max(factors) * RECIPE_DATA["context"]
    folders, missing = shipped_text_folders(seeds, widths=widths)
    if not folders:
        sys.exit("no text model is shipped: examples/train_text.py trains and installs them")
    if missing:
        print(f"not shipped (left out): {', '.join(missing)}\n")
    tokenizer = shared_tokenizer(folders.values())
    models = {key: adjpos.load_model(f, device="cpu", n_ctx=n_ctx) for key, f in folders.items()}
    splits = ("validation", "test")
    return models, {s: torch.tensor(encode_text(tokenizer, read_split(s))) for s in splits}


def interval(value: float, low: float, high: float) -> str:
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def loss_table(losses: pd.DataFrame) -> str:
    """One row per layout and seed: the loss at each (split, context) on every scored token."""
    mine = losses[losses["scored"] == "all"]
    columns = list(dict.fromkeys(zip(mine["split"], mine["factor"], mine["context"], strict=True)))
    lines = ["| layout | seed | " + " | ".join(f"{s}, {c}" for s, _, c in columns) + " |"]
    lines.append("|---|---|" + "---|" * len(columns))
    for (layout, seed), group in mine.groupby(["layout", "seed"], sort=False):
        by = group.set_index(["split", "factor"])
        cells = [interval(*by.loc[c[:2], ["loss", "loss_low", "loss_high"]]) for c in columns]
        lines.append(f"| {layout} | {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def difference_table(differences: pd.DataFrame, context: int) -> str:
    """One row per difference (a and b named with their context in tokens): each seed's
    (paired over chunks) and the mean over seeds (only where two or more seeds are paired)."""
    lines = ["| split | tokens | a | b | per seed | mean over seeds [t interval] |"]
    lines.append("|---|---|---|---|---|---|")
    keys = ["split", "scored", "a_layout", "a_factor", "b_layout", "b_factor"]
    for key, group in differences.groupby(keys, sort=False):
        split, scored, a, fa, b, fb = key
        seeds = group[group["seed"].notna()]
        each = "; ".join(
            f"{s}: {interval(*r)}"
            for s, *r in seeds[["seed", "difference", "low", "high"]].itertuples(index=False)
        )
        over = group[group["seed"].isna()].iloc[0]
        mean = interval(over.difference, over.low, over.high) + f" (n={over.n})"
        mean = mean if over.n > 1 else "(one seed)"
        a, b = f"{a} {fa * context}", f"{b} {fb * context}"
        lines.append(f"| {split} | {scored} | {a} | {b} | {each} | {mean} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument("--widths", nargs="+", type=int, default=list(WIDTHS), choices=WIDTHS)
    parser.add_argument("--factors", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--max-chunks", type=int, default=64, help="chunks per split")
    parser.add_argument("--out", type=Path, default=Path("runs/text-losses"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        models, splits = quick_inputs()
        options = {"train_context": QUICK["context"], "max_chunks": QUICK["max_chunks"]}
        options |= {"n_boot": QUICK["n_boot"], "factors": QUICK["factors"]}
    else:
        models, splits = shipped_inputs(args.seeds, args.widths, args.factors)
        options = {"train_context": RECIPE_DATA["context"], "max_chunks": args.max_chunks}
        options["factors"] = args.factors
    progress = {
        "on_model": lambda layout, seed: print(f"measured {layout} seed {seed}", file=sys.stderr)
    }
    losses, differences = evaluate_layouts(models, splits, **options, **progress)
    LOSSES.write(args.out / "losses.csv", losses)
    DIFFERENCES.write(args.out / "differences.csv", differences)
    n, chunk = losses["n_chunks"].iloc[0], max(options["factors"]) * options["train_context"]
    print(f"Held-out loss (nats per token; {n} chunks of {chunk} tokens per split):\n")
    print(loss_table(losses))
    width = {sized(x, d): d for x in LAYOUTS for d in WIDTHS}
    layout = {sized(x, d): x for x in LAYOUTS for d in WIDTHS}
    a, b = differences["a_layout"], differences["b_layout"]
    same_width = (a != b) & (a.map(width) == b.map(width))
    print("\nLayouts paired by seed within a width (a - b):\n")
    print(difference_table(differences[same_width], options["train_context"]))
    widths = (a.map(width) != b.map(width)) & (a.map(layout) == b.map(layout))
    if widths.any():
        print("\nWidths paired by seed, each layout (a - b):\n")
        print(difference_table(differences[widths], options["train_context"]))
    times = ", ".join(f"{f}x" for f in options["factors"][1:])
    print(f"\nLength extrapolation (each layout at {times} the training context - at 1x):\n")
    same = differences[differences["a_layout"] == differences["b_layout"]]
    print(difference_table(same, options["train_context"]))


if __name__ == "__main__":
    main()
