"""How much a position-curve change can cost on text: the shipped text models' next-token loss
with the curve changed at the input of one block, by the random curve, the curve removed and
the shifts, at the sizes of full shifts by each dose (`text_intervention_table`), against the
unchanged model. On text the curve is a small part of the states, so its largest change stays
small.

    python examples/text_curve_doses.py [--models text-nope:0 text-hybrid:0] [--layer 3]
        [--doses 1 2 16 32] [--windows 16] [--draws 2] [--quick]

prints, per model and dose, the unchanged model's loss, the change size and each arm's loss
rise over the unchanged model (nats). ``--quick`` measures a tiny random model on a few
windows (the smoke test).
"""

import argparse

import pandas as pd

import adjpos
import adjpos.text_layers as layers
from adjpos.interventions.text import text_intervention_table
from adjpos.pretrained import load_pretrained
from adjpos.text.recipe import layout_config

ARMS = ["none", "position_random", "position_remove", "position_shift"]
TINY = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 2048, "n_ctx": 32}


def rises(model, tokens, layer: int, doses: list[int], draws: int, name: str) -> pd.DataFrame:
    """Each arm's loss minus the unchanged model's, and the size of the change, per dose."""
    options = {"layers": [layer], "interventions": ARMS, "doses": doses, "skip_first": 1}
    table = text_intervention_table(
        model, tokens, **options, control_draws=draws, progress=False, model_name=name
    )
    unchanged = float(table.loc[table["intervention"] == "none", "loss"].iloc[0])
    arms = table[table["arm"].notna()]
    frame = arms.pivot_table(index="dose", columns="arm", values="loss") - unchanged
    frame.insert(0, "size", arms.groupby("dose")["size_target"].mean())
    frame.insert(0, "unchanged", unchanged)
    return frame.rename_axis(columns=None).reset_index().assign(model=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["text-nope:0", "text-hybrid:0"])
    parser.add_argument("--layer", type=int, default=3)
    parser.add_argument("--doses", nargs="+", type=int, default=[1, 2, 16, 32])
    parser.add_argument("--windows", type=int, default=16)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    frames = []
    if args.quick:
        from adjpos.text.corpus import HELD_OUT
        from adjpos.text.tokenizer import train_tokenizer

        tokenizer = train_tokenizer(HELD_OUT.read_text()[:20_000], 600)
        model = adjpos.build_model(layout_config("nope", **TINY, seed=0))
        tokens = layers.held_out_windows(tokenizer, 8, TINY["n_ctx"])
        frames.append(rises(model, tokens, 1, [1], 2, "tiny"))
    for name in [] if args.quick else args.models:
        model_name, seed = name.split(":")
        model, tokenizer = load_pretrained(model_name, int(seed))
        tokens = layers.held_out_windows(tokenizer, args.windows, model.cfg.n_ctx)
        frames.append(rises(model, tokens, args.layer, args.doses, args.draws, name))
    print(pd.concat(frames).to_string(index=False, float_format="{:.4f}".format))


if __name__ == "__main__":
    main()
