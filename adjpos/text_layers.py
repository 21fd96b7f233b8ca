"""The study on text: what each layer of each text model holds and reads, on held-out text.

Per model (a layout and seed) and residual layer (0 = embeddings, l = after block l - 1), on
windows of held-out text (`held_out_windows`):

- the adjacency score in four views (`VIEWS`): the states as they are or centred
  (`adjpos.metrics.center_states`), with every position or with the attention sink, position
  0, left out (``skip_first=1``), each with a bootstrap interval over the windows;
- the held-out decomposition shares (`adjpos.metrics.decomposition_shares`: token, position
  and context parts, fitted on the other folds of windows);
- the cross-validated ridge R^2 of position from the states (`adjpos.probe_positions`,
  windows as groups; chance is 0);
- the causal position-curve tests with next-token loss as the measure
  (`adjpos.interventions.text_intervention_table`): at the input of each block of
  `causal_layers`, the position curve's arms at the sizes of its full shifts by 1 and by 2
  (`CURVE_DOSES`; shifted by -m and +m, rotated, scattered, its edges moved), each against
  the random curve of its size, the sink kept; the study's rule of the arms
  (`adjpos.study.rules`) reads them with a loss rise as the harm.

Then the hybrid against the all-RoPE model of the same seed, on the same windows: per layer
and view, the per-window difference in adjacency (hybrid - rope) with a paired bootstrap
interval. `measure_text_models` does it all for a set of models; `measure_text_model` one
model's part and `paired_layouts` the pairing, for work split by model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.capture import capture_residuals
from adjpos.interventions import CURVE_DIFFERENCES, cell_numbers, specs_in
from adjpos.interventions.curve.numbers import CHECK_NUMBERS, arm_kind
from adjpos.interventions.text import TEXT_TABLE, text_intervention_table
from adjpos.metrics import decomposition_shares
from adjpos.models import capture_kinds
from adjpos.scoring import sequence_scores
from adjpos.seeds import derive_seed
from adjpos.stats import bootstrap_interval, paired_difference
from adjpos.tables import Table, plain_records, with_interval
from adjpos.text.corpus import held_out_text
from adjpos.text.evaluate import held_out_chunks
from adjpos.text.recipe import LAYOUTS, WIDTHS, sized
from adjpos.text.tokenizer import encode_text
from adjpos.validation import UsageError

# view -> (centred, positions left out from the start)
VIEWS = {"raw": (False, 0), "raw, sink out": (False, 1)}
VIEWS |= {"centred": (True, 0), "centred, sink out": (True, 1)}
# The causal tests: the position curve's arms the study runs on text (`specs_in("text")`, each
# compared with the random curve of its size) at the sizes of its full shifts by `CURVE_DOSES`:
# by 1 and by 2 (two sizes for the rule; on text a full shift by more is hardly larger, and no
# change of the curve costs 0.1 nats at any block: docs/text-models.md, "How much can a change
# of the curve cost on text?").
CURVE_INTERVENTIONS = specs_in("text")
CURVE_DOSES = (1, 2)
SHARES = ("token", "position", "context")
KEYS = Table(layout="string", seed="int64", layer="int64")
ADJACENCY = KEYS + Table(kind="string", view="string", adjacency="float64")
ADJACENCY += Table(low="float64", high="float64", n_sequences="int64")
POSITION = KEYS + Table(kind="string", measure="string", value="float64")
VERSUS = Table(a="string", b="string", seed="int64", layer="int64", view="string")
VERSUS += Table(difference="float64", low="float64", high="float64")
CAUSAL = Table(layout="string", seed="int64") + TEXT_TABLE
DIFFERENCES = Table(layout="string") + CURVE_DIFFERENCES  # the arms' paired loss differences
# the tables of one model (`measure_text_model`), by name; `VERSUS` pairs two models
PARTS = {"adjacency": ADJACENCY, "position": POSITION, "causal": CAUSAL}
PARTS |= {"differences": DIFFERENCES}


@dataclass(frozen=True)
class TextLayers:
    """The tables of `measure_text_models` (columns: `ADJACENCY`, `POSITION`, `VERSUS`,
    `CAUSAL`, `DIFFERENCES`)."""

    adjacency: pd.DataFrame
    position: pd.DataFrame
    versus: pd.DataFrame
    causal: pd.DataFrame
    differences: pd.DataFrame


def held_out_windows(
    tokenizer: Any, n: int, length: int, text: str | None = None
) -> Int[Tensor, "n length"]:
    """`n` windows of `length` tokens of `text` (default: the shipped held-out excerpt,
    `adjpos.text.corpus.held_out_text`), spread evenly over it (`held_out_chunks`).

    Raises:
        ValueError: the text holds fewer than `n` windows.
    """
    ids = torch.tensor(encode_text(tokenizer, held_out_text() if text is None else text))
    windows = held_out_chunks(ids, length, n)
    if len(windows) < n:
        raise UsageError(f"the text holds {len(windows)} windows of {length} tokens, not {n}")
    return windows


def measure_text_models(
    models: Mapping[tuple[str, int], Any], tokens: Int[Tensor, "batch pos"], **options: Any
) -> TextLayers:
    """Every measure of the module doc for each model of `models` ((layout, seed) -> model),
    all on the same `tokens` (`measure_text_model`, with its keyword `options`), and the
    hybrid of each width paired with the all-RoPE model by seed (the seeds both have;
    `paired_layouts`)."""
    parts: dict[str, list[dict[str, Any]]] = {p: [] for p in PARTS}
    scores = {}
    for (layout, seed), model in models.items():
        rows, scores[layout, seed] = measure_text_model(model, tokens, layout, seed, **options)
        for part in PARTS:
            parts[part] += rows[part]
    draws = {k: options[k] for k in ("n_boot", "level") if k in options}
    versus = paired_layouts(scores, WIDTHS, **draws)
    frames = {p: table.frame(parts[p]) for p, table in PARTS.items()}
    return TextLayers(**frames, versus=VERSUS.frame(versus))


def measure_text_model(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    layout: str,
    seed: int,
    *,
    causal_layers: Sequence[int] = (),
    interventions: Sequence[str] = CURVE_INTERVENTIONS,
    doses: Sequence[int | float] = CURVE_DOSES,
    control_draws: int = 5,
    folds: int = 4,
    n_boot: int = 1000,
    level: float = 0.95,
) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[int, str], np.ndarray]]:
    """One model's part of `measure_text_models` (named `layout` and `seed` in its rows): its
    records of `PARTS` ({"adjacency": [...], ...}) and its per-window adjacency scores by
    (layer, view), which `paired_layouts` pairs with another model's."""
    from adjpos.probes import probe_positions

    found: dict[str, list[dict[str, Any]]] = {p: [] for p in PARTS}
    kinds, n, scores = capture_kinds(model), tokens.shape[1], {}
    lengths = torch.full((len(tokens),), n)
    stack = capture_residuals(model, tokens, progress=False).double().cpu()
    options = {"features": "resid", "probe": "ridge", "cv": folds, "seed": seed, "repeats": 1}
    probe = probe_positions(model, tokens, **options)
    for layer, states in enumerate(stack):
        key = {"layout": layout, "seed": seed, "layer": layer, "kind": kinds[layer]}
        for view, (centred, skip) in VIEWS.items():
            values = sequence_scores(states, lengths, center=centred, skip_first=skip).numpy()
            scores[layer, view] = values
            low, high = bootstrap_interval(values, n_boot=n_boot, level=level, seed=seed)
            found["adjacency"].append(key | {"view": view, "adjacency": float(np.mean(values))})
            found["adjacency"][-1] |= {"low": low, "high": high, "n_sequences": len(values)}
        fold_seed = derive_seed(seed, "text decomposition")
        shares = decomposition_shares(states, tokens, folds=folds, seed=fold_seed).held_out
        found["position"] += [key | {"measure": f"{p} share", "value": shares[p]} for p in SHARES]
        r2 = probe.value(layer, "resid", "ridge", "r2")
        found["position"].append(key | {"measure": "probe R^2", "value": r2})
    if causal_layers:
        options = {"layers": list(causal_layers), "interventions": list(interventions)}
        options |= {"skip_first": 1, "control_draws": control_draws, "progress": False}
        options |= {"doses": doses, "return_differences": True, "model_name": layout}
        table, differences = text_intervention_table(model, tokens, **options, seed=seed)
        key = {"layout": layout, "seed": seed}
        found["causal"] = [key | r for r in table.to_dict("records")]
        found["differences"] = [key | r | {"seed": seed} for r in differences.to_dict("records")]
    return found, scores


def paired_layouts(
    scores: Mapping[tuple[str, int], Mapping[tuple[int, str], Any]],
    widths: Sequence[int],
    *,
    n_boot: int = 1000,
    level: float = 0.95,
) -> list[dict[str, Any]]:
    """`VERSUS` records: for the hybrid (a) and the all-RoPE model (b) of each of `widths` and
    each seed both have in `scores` ((layout, seed) -> {(layer, view): per-window adjacency},
    as `measure_text_model` returns them), per layer and view the per-window difference a - b
    with a paired bootstrap interval."""
    versus, pairs = [], [(sized("hybrid", d), sized("rope", d)) for d in widths]
    for (a, b), seed in ((p, s) for p in pairs for (la, s) in scores if la == p[0]):
        if (b, seed) not in scores:
            continue
        for (layer, view), x in scores[a, seed].items():
            y = scores[b, seed][layer, view]
            d, low, high = paired_difference(x, y, n_boot=n_boot, level=level, seed=seed)
            versus.append({"a": a, "b": b, "seed": seed, "layer": layer, "view": view})
            versus[-1] |= {"difference": d, "low": low, "high": high}
    return versus


def shipped_text_folders(
    seeds: Sequence[int] | None = None, *, widths: Sequence[int] = WIDTHS[:1]
) -> tuple[dict[tuple[str, int], Path], list[str]]:
    """The folders of the shipped text models of every layout at each of `widths`
    (`adjpos.pretrained`; named `sized`: ``nope``, ``nope-d128``) by (layout, seed), of
    `seeds` (None: every shipped seed), and the (layout, seed) asked for but not shipped, as
    ``"text-LAYOUT:SEED"``. Load them with `adjpos.load_model`; `shared_tokenizer` reads
    their one tokenizer."""
    from adjpos.pretrained import pretrained_folder, pretrained_seeds

    folders, missing = {}, []
    names = [sized(x, d) for d in widths for x in LAYOUTS]
    wanted = sorted({s for x in names for s in pretrained_seeds(f"text-{x}")} | set(seeds or ()))
    for layout in names:
        shipped = pretrained_seeds(f"text-{layout}")
        for seed in wanted if seeds is None else seeds:
            if seed not in shipped:
                missing.append(f"text-{layout}:{seed}")
            else:
                folders[layout, seed] = pretrained_folder(f"text-{layout}", seed)
    return folders, missing


def shared_tokenizer(folders: Iterable[Path]) -> Any:
    """The one tokenizer the model `folders` hold (a `tokenizers.Tokenizer`; None for no
    folder).

    Raises:
        ValueError: they hold different tokenizers (the models cannot read the same text).
    """
    from tokenizers import Tokenizer

    files = {(Path(f) / "tokenizer.json").read_text() for f in folders}
    if len(files) > 1:
        raise UsageError("the shipped text models hold different tokenizers; reinstall them")
    return Tokenizer.from_str(files.pop()) if files else None


def summarise(result: TextLayers) -> dict[str, Any]:
    """The JSON-able numbers of a `TextLayers`, one cell per (layout, layer, view) of
    adjacency, (a, b, layer, view) of the paired differences, (layout, layer, intervention)
    of the tested causal rows and (layout, layer, measure) of the position measures; each
    with its seeds' values or intervals (``per_seed``) and their mean (``value``); each causal
    (layout, layer) cell with each seed's rule numbers (``rule``, `CellNumbers.to_plain`) and
    each arm's [loss difference from the random curve, low, high, percentile, and the numbers
    its manipulation check reads (`CHECK_NUMBERS`)] per seed (``arms``)."""

    def cells(frame: pd.DataFrame, keys: list[str], value: str, bounds: list[str]) -> list:
        out = []
        for _, group in frame.groupby(keys, sort=False):
            out.append(plain_records(group[keys].head(1))[0])
            out[-1] |= {"value": float(group[value].mean()), "seeds": group["seed"].tolist()}
            out[-1]["per_seed"] = group[bounds].astype(float).to_numpy().tolist()
        return out

    keys = ("layout", "seed", "layer")
    rules = cell_numbers(result.causal, result.differences, keys=keys, harm=-1)
    causal: dict[tuple, dict[str, Any]] = {}
    tested = [isinstance(a, str) and not arm_kind(a).control for a in result.causal["arm"]]
    arms = result.causal[tested]  # the arms (compared with their random controls)
    columns = [*with_interval("loss_difference"), "percentile", *CHECK_NUMBERS]
    for cell in rules:
        layout, seed, layer = cell.key
        found = causal.setdefault((layout, layer), {"layout": layout, "layer": layer})
        found.setdefault("seeds", []).append(seed)
        found.setdefault("rule", []).append(cell.to_plain())
        mine = arms[(arms[list(keys)] == pd.Series(cell.key, index=list(keys))).all(axis=1)]
        for r in plain_records(mine):
            found.setdefault("arms", {}).setdefault(r["arm"], []).append([r[c] for c in columns])
    by_layer = ["layout", "layer", "kind"]
    return {
        "seeds": sorted({int(s) for s in result.adjacency["seed"]}),
        "adjacency": cells(result.adjacency, [*by_layer, "view"], "adjacency", ["low", "high"]),
        "versus": cells(result.versus, ["a", "b", "layer", "view"], "difference", ["low", "high"]),
        "causal": list(causal.values()),
        "position": cells(result.position, [*by_layer, "measure"], "value", ["value"]),
    }
