"""The study's text stage alone: the shipped text models' layers on held-out text (adjacency in
four views, decomposition shares, position probes, causal position-curve tests) and the
stage's verdicts, as ``adjpos reproduce`` measures and judges them (`adjpos.study.claims.text`).

    python examples/text_layers.py [--size full|quick] [--out runs/text-layers] [--print-only]

writes the stage's tables (``results/text_*.csv``) and numbers (``text.json``) under ``--out``
and prints the verdicts and the report's section. ``--quick`` measures tiny random models of
each layout on the shipped held-out text instead of the shipped models (the smoke test).
"""

import argparse
import json
from pathlib import Path

import torch

import adjpos
import adjpos.text_layers as layers
from adjpos.runs import RunFolder
from adjpos.study.claim import CRITERIA, Context
from adjpos.study.claims import claim
from adjpos.study.rules import row_passed
from adjpos.study.sizes import SIZES
from adjpos.text.recipe import LAYOUTS, WIDTHS, layout_config, sized

VIEW = "raw, sink out"
TINY = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 2048, "n_ctx": 32}


def quick_numbers(out: Path) -> dict:
    """The stage's numbers for tiny random models (seeds 0 and 1) on 8 held-out windows."""
    from adjpos.text.corpus import HELD_OUT
    from adjpos.text.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(HELD_OUT.read_text()[:20_000], 600)
    tokens = layers.held_out_windows(tokenizer, 8, TINY["n_ctx"])
    models = {
        (layout, seed): adjpos.build_model(layout_config(layout, **TINY, seed=seed))
        for seed in (0, 1)
        for layout in LAYOUTS
    }
    result = layers.measure_text_models(models, tokens, causal_layers=[3], control_draws=2)
    for part, table in layers.PARTS.items():
        table.write(out / f"text_{part}.csv", getattr(result, part))
    return {"missing": [], "nope_blocks": [3]} | layers.summarise(result)


def span(cell: dict) -> str:
    """A cell's mean over seeds and the span of the seeds' intervals."""
    low, high = (f(b[i] for b in cell["per_seed"]) for i, f in ((0, min), (1, max)))
    return f"{cell['value']:.3f} ({low:.3f} to {high:.3f})"


def layer_table(numbers: dict, width: int = WIDTHS[0]) -> str:
    """One row per layer, the layouts of one width side by side: kind and score (raw, sink
    left out), and for each layout the probe's R^2 (the all-NoPE model's position share
    too)."""
    adjacency = {(c["layout"], c["layer"]): c for c in numbers["adjacency"] if c["view"] == VIEW}
    position = {(c["layout"], c["layer"], c["measure"]): c["value"] for c in numbers["position"]}
    named = [sized(x, width) for x in LAYOUTS]
    layouts = [x for x in named if any(key[0] == x for key in adjacency)]
    head = ["layer"] + [f"{x}: kind, score" for x in layouts] + [f"{x}: R^2" for x in layouts]
    lines = [
        "| " + " | ".join(head + [f"{named[0]}: position share"]) + " |",
        "|---" * (len(head) + 1) + "|",
    ]
    for layer in sorted({key[1] for key in adjacency}):
        cells = [f"{adjacency[x, layer]['kind']} {span(adjacency[x, layer])}" for x in layouts]
        cells += [f"{position[x, layer, 'probe R^2']:.2f}" for x in layouts]
        share = position.get((named[0], layer, "position share"), float("nan"))
        cells.append(f"{share:.3f}")
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def causal_table(results: Path) -> str:
    """Per model, block and arm of the position curve: the loss minus the random curve's of
    its size (nats, paired interval over windows and draws), the % of random draws raising
    the loss more, the change size, where the changed curve sits (curve_offset) and the
    manipulation check."""
    table = layers.CAUSAL.read(results / "text_causal.csv")
    arms = table[table["arm"].notna() & (table["arm"] != "random")]
    lines = [
        "| layout | seed | block | dose | arm | loss - random | % draws above | size | offset "
        "| check |"
    ]
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in arms.itertuples():
        interval = (
            f"{r.loss_difference:.3f} [{r.loss_difference_low:.3f}, {r.loss_difference_high:.3f}]"
        )
        cells = [r.layout, r.seed, r.layer, f"{r.dose:g}", r.arm, interval, f"{r.percentile:.0f}"]
        cells += [
            f"{r.perturbation:.3f}",
            f"{r.curve_offset:+.2f}",
            "passed" if row_passed(r) else "failed",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=Path("runs/text-layers"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--print-only", action="store_true", help="print the tables of the results in --out"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results, stage = args.out / "results", claim("text")
    folder = None
    if not (args.print_only or args.quick):  # each model a unit: on both cores, resumable
        folder = RunFolder.open(args.out, kind="text-layers", spec={"size": args.size})
    results.mkdir(parents=True, exist_ok=True)
    if args.print_only:
        numbers = json.loads((results / "text.json").read_text())
    elif args.quick:
        numbers = quick_numbers(results)
    else:
        numbers = stage.measure(Context(folder, None, SIZES[args.size], CRITERIA))
    numbers = json.loads(json.dumps(numbers))
    (results / "text.json").write_text(json.dumps(numbers, indent=1))
    for verdict in stage.verdicts(numbers, CRITERIA):
        print(f"{verdict.claim}: {verdict.status} ({verdict.counts}; seeds {verdict.seeds})")
    print()
    print(stage.section(numbers, CRITERIA, lambda prefix: ""))
    widths = [
        d for d in WIDTHS if any(c["layout"] == sized("nope", d) for c in numbers["adjacency"])
    ]
    for width in widths if numbers["seeds"] else ():
        print(f"\nBy layer, the layouts of width {width} side by side:\n")
        print(layer_table(numbers, width))
    if numbers["seeds"] and (results / "text_causal.csv").is_file():
        print("\nThe causal tests, each arm against the random curve of its size:\n")
        print(causal_table(results))


if __name__ == "__main__":
    main()
