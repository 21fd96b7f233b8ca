"""Self-cosine heatmaps of one prompt per task, at every layer, trained and random-init.

For each shipped trained NoPE model: the cosine similarity of each position's hidden state with
the earlier positions, at every layer, beside a random-init model of the same architecture.
The axes carry the prompt's characters. Uses only the public API; ``--quick`` (the test suite's
smoke run) draws one task without PNG.

    python examples/fig_cosine_heatmaps.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

import adjpos
import adjpos.figures

PROMPTS = {
    "addition": "123+456=",
    "reversal": "rev(1234)=",
    "indexing": "wherex(134504392,4)=",
    "ordering": "ord(5831,3851)=",
}


def main(quick: bool, out: Path) -> None:
    for name in list(PROMPTS)[:1] if quick else PROMPTS:
        trained, task = adjpos.load_pretrained(name, device="cpu")
        untrained = adjpos.build_model(trained.adjpos_config.with_changes(seed=1), device="cpu")
        text = PROMPTS[name] + task.solve(PROMPTS[name]) + "."  # "." ends the answer
        tokens = task.encode(text)[None]
        matrices, titles = [], []
        for label, model in (("trained", trained), ("random-init", untrained)):
            sims = adjpos.cosine_matrix(adjpos.capture_residuals(model, tokens))[:, 0]
            matrices += [sim.tolist() for sim in sims]
            titles += [f"{label}, layer {layer}" for layer in range(len(sims))]
        fig = adjpos.figures.plot_cosine_heatmaps(
            matrices,
            titles=titles,
            labels=[text] * len(matrices),
            title=f"Self-cosine similarity, {name}: {text}",
            columns=len(matrices) // 2,
        )
        saved = adjpos.figures.save_figure(fig, out / f"cosine_{name}", png=not quick)
        print(f"{name}: {text}  ->  {', '.join(str(p) for p in saved.written)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one task, no PNG")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args()
    main(args.quick, args.out)
