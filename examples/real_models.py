"""Position in the NoPE layers of production families, at random init: adjacency by layer kind.

Each family of `adjpos.hf.FAMILIES` (SmolLM3, Llama 4, Cohere2, EXAONE 4, AFMoE) is built at
its tiny size (8 layers, width 64) with the released interleaving (every fourth layer NoPE),
all layers NoPE and all layers RoPE, from init seeds 0, 1, 2 (the same seed gives the same
weights in every layout: only where RoPE is applied differs), at the families' own init scale
(``initializer_range`` 0.02, where attention at random init is nearly uniform) and at 0.1,
and measured on the same 64 sequences of 32 distinct random tokens (`adjpos.measure_layers`:
adjacency with ties as half, change from the layer before, variance ratio, the variance
probe). Then:

- what each released NoPE layer does to the score, against the all-RoPE model of the same
  family at the same layer (`adjpos.hf.nope_layer_effects`);
- block 0 of each all-NoPE model against the first-layer theory
  (`adjpos.theory.compare_first_layer`, attention output and residual stream), with the
  predicted adjacency at the full width and at the width the value vectors can span
  (grouped-query attention: key-value heads x head width), beside the first NoPE layer of the
  released interleaving.

Writes ``layers.csv``, ``nope_effects.csv``, ``theory.csv`` and the figure ``real_models``
into ``--out`` (each (family, layout, seed) is kept in ``parts/`` so an interrupted run
resumes), and prints the tables. It took 40 minutes on 2 CPU cores that were also training
models; ``--quick`` runs one family at 4 layers on 8 sequences (the smoke test).

    python examples/real_models.py [--quick] [--out runs/real_models]
"""

import argparse
from pathlib import Path

import pandas as pd
import torch

import adjpos
from adjpos.figures import plot_layer_kinds, save_figure
from adjpos.hf import FAMILIES, NOPE_LAYOUTS, hf_config, load_hf, measure_layers, nope_layer_effects
from adjpos.runs import write_text
from adjpos.seeds import derived_generator
from adjpos.theory import compare_first_layer, predicted_adjacency

SEEDS = (0, 1, 2)
INITS = (0.02, 0.1)
N_SEQUENCES, SEQ_LEN = 64, 32
QUICK = {
    "families": ["smollm3"],
    "size": {"num_hidden_layers": 4},
    "n": 8,
    "seeds": (0, 1),
    "inits": (0.02,),
}


def distinct_tokens(n: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """`n` sequences of `length` distinct ids from 3..vocab-1 (0-2 are special tokens)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(vocab - 3, generator=gen)[:length] + 3 for _ in range(n)])


def measure(family, init, layout, seed, size, tokens, parts: Path) -> pd.DataFrame:
    """One model's table, read back from `parts` when an earlier run wrote it."""
    path = parts / f"{family}_{init}_{layout}_{seed}.csv"
    if path.is_file():
        return pd.read_csv(path)
    config = hf_config(family, size, nope=layout, initializer_range=init)
    model = load_hf(config, seed=seed)
    table = measure_layers(model, tokens, ties="half", probe_features=("variance",), progress=False)
    for column, value in (("seed", seed), ("layout", layout), ("init", init), ("family", family)):
        table.insert(0, column, value)
    write_text(path, table.to_csv(index=False))
    return table


def first_layer(family, init, seed, size, tokens, layers: pd.DataFrame) -> list[dict]:
    """Block 0 of the all-NoPE model against the theory, and the released first NoPE layer."""
    model = load_hf(hf_config(family, size, nope="all", initializer_range=init), seed=seed)
    config = model.original_model.config
    # grouped-query attention: the value vectors span at most kv_heads x head_dim dimensions
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    value_width = min(config.hidden_size, config.num_key_value_heads * head_dim)

    def predict(width: int) -> float:
        gen = derived_generator(seed, "theory prediction")
        return float(predicted_adjacency(tokens.shape[1], d_model=width, generator=gen)[0])

    mine = (layers["family"] == family) & (layers["init"] == init) & (layers["seed"] == seed)
    released = layers[mine & (layers["layout"] == "released")]
    first_nope = released[released["kind"] == "nope"].iloc[0]
    rows = []
    for site in ("attn_out", "resid_post"):
        cmp = compare_first_layer(model, tokens, site=site)
        rows.append(
            {
                "family": family,
                "init": init,
                "seed": seed,
                "site": site,
                "residual_ratio": cmp.residual_ratio,
                "mean_abs_error": cmp.mean_abs_error,
                "entropy_ratio": cmp.entropy_ratio,
                "measured_adjacency": cmp.measured_adjacency,
                "predicted_full_width": predict(config.hidden_size),
                "value_width": value_width,
                "predicted_value_width": predict(value_width),
                "released_first_nope_layer": int(first_nope["layer"]),
                "released_first_nope_adjacency": float(first_nope["adjacency"]),
            }
        )
    return rows


def main(quick: bool, out: Path) -> None:
    families = QUICK["families"] if quick else sorted(FAMILIES)
    size = QUICK["size"] if quick else "tiny"
    seeds = QUICK["seeds"] if quick else SEEDS
    n = QUICK["n"] if quick else N_SEQUENCES
    inits = QUICK["inits"] if quick else INITS
    tokens = distinct_tokens(n, SEQ_LEN, hf_config("smollm3").vocab_size)
    tables = [
        measure(family, init, layout, seed, size, tokens, out / "parts")
        for family in families
        for init in inits
        for layout in NOPE_LAYOUTS
        for seed in seeds
    ]
    layers = pd.concat(tables, ignore_index=True)
    effects = nope_layer_effects(layers, by=["family", "init"])
    theory = pd.DataFrame(
        [
            row
            for f in families
            for init in inits
            for s in seeds
            for row in first_layer(f, init, s, size, tokens, layers)
        ]
    )
    for name, frame in (("layers", layers), ("nope_effects", effects), ("theory", theory)):
        write_text(out / f"{name}.csv", frame.to_csv(index=False))
    keys = ["family", "init", "layout", "layer"]
    means = layers.groupby(keys, sort=False)["adjacency"].mean()
    print(means.unstack("layer").round(3).to_string())
    print(effects.round(3).to_string(index=False))
    theory_means = theory.drop(columns="seed").groupby(["family", "init", "site"]).mean()
    print(theory_means.round(3).to_string())
    shown = layers[layers["init"] == inits[0]]
    summary = shown.groupby(["family", "layout", "layer", "kind"], sort=False, as_index=False)
    figure_rows = summary.agg(
        adjacency=("adjacency", "mean"),
        low=("adjacency_low", "min"),
        high=("adjacency_high", "max"),
    )
    fig = plot_layer_kinds(
        figure_rows,
        color="layout",
        facet_col="family",
        low="low",
        high="high",
        ring="released",
        title=f"Adjacency at random init {inits[0]} ({len(seeds)} seeds; rings: released NoPE "
        "layers)",
    )
    saved = save_figure(fig, out / "real_models", png=not quick)
    print("wrote", ", ".join(str(p) for p in saved.written), "and", out / "layers.csv")
    print("adjpos", adjpos.__version__)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one family, 4 layers, no PNG")
    parser.add_argument("--out", type=Path, default=Path("runs/real_models"))
    args = parser.parse_args()
    main(args.quick, args.out)
