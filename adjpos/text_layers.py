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
  `causal_layers`, the position curve's neighbours scattered against the curve mirrored (a
  change of the same size that keeps neighbours together), the sink kept.

Then the hybrid against the all-RoPE model of the same seed, on the same windows: per layer
and view, the per-window difference in adjacency (hybrid - rope) with a paired bootstrap
interval. `measure_text_models` does it all for a set of models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.capture import capture_residuals
from adjpos.interventions.text import TEXT_TABLE, text_intervention_table
from adjpos.metrics import decomposition_shares
from adjpos.models import capture_kinds
from adjpos.scoring import sequence_scores
from adjpos.seeds import derive_seed
from adjpos.stats import Outcome, bootstrap_interval, every_seed, judge, paired_difference
from adjpos.tables import Table
from adjpos.text.corpus import held_out_text
from adjpos.text.evaluate import held_out_chunks
from adjpos.text.tokenizer import encode_text
from adjpos.validation import UsageError

# view -> (centred, positions left out from the start)
VIEWS = {"raw": (False, 0), "raw, sink out": (False, 1)}
VIEWS |= {"centred": (True, 0), "centred, sink out": (True, 1)}
# The interventions of the causal tests: the tested one, its control, and the unchanged model.
# A position-curve arm added to `adjpos.interventions.SPECS` (with its control) joins the tests
# by its name here: the runner, the tables and the verdicts' cells take any tested spec.
CURVE_INTERVENTIONS = ("none", "position_mean_swap", "position_mean_mirror")
SHARES = ("token", "position", "context")
KEYS = Table(layout="string", seed="int64", layer="int64")
ADJACENCY = KEYS + Table(kind="string", view="string", adjacency="float64")
ADJACENCY += Table(low="float64", high="float64", n_sequences="int64")
POSITION = KEYS + Table(kind="string", measure="string", value="float64")
VERSUS = Table(a="string", b="string", seed="int64", layer="int64", view="string")
VERSUS += Table(difference="float64", low="float64", high="float64")
CAUSAL = Table(layout="string", seed="int64") + TEXT_TABLE


@dataclass(frozen=True)
class TextLayers:
    """The tables of `measure_text_models` (columns: `ADJACENCY`, `POSITION`, `VERSUS`,
    `CAUSAL`)."""

    adjacency: pd.DataFrame
    position: pd.DataFrame
    versus: pd.DataFrame
    causal: pd.DataFrame


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
    models: Mapping[tuple[str, int], Any],
    tokens: Int[Tensor, "batch pos"],
    *,
    causal_layers: Sequence[int] = (),
    interventions: Sequence[str] = CURVE_INTERVENTIONS,
    control_draws: int = 5,
    folds: int = 4,
    n_boot: int = 1000,
    level: float = 0.95,
    pairs: Sequence[tuple[str, str]] = (("hybrid", "rope"),),
) -> TextLayers:
    """Every measure of the module doc for each model of `models` ((layout, seed) -> model),
    all on the same `tokens`, and each layout pair (a, b) of `pairs` paired by seed (the
    seeds both have)."""
    draws = {"n_boot": n_boot, "level": level}
    adjacency, position, causal, scores = [], [], [], {}
    for (layout, seed), model in models.items():
        key = {"layout": layout, "seed": seed}
        rows, scores[layout, seed] = _layers(model, tokens, seed, folds, draws)
        adjacency += [key | r for r in rows[0]]
        position += [key | r for r in rows[1]]
        if causal_layers:
            options = {"layers": list(causal_layers), "interventions": list(interventions)}
            options |= {"skip_first": 1, "control_draws": control_draws, "progress": False}
            table = text_intervention_table(model, tokens, **options, seed=seed, model_name=layout)
            causal += [key | r for r in table.to_dict("records")]
    versus = []
    for (a, b), seed in ((p, s) for p in pairs for (la, s) in scores if la == p[0]):
        if (b, seed) not in scores:
            continue
        for (layer, view), x in scores[a, seed].items():
            d, low, high = paired_difference(x, scores[b, seed][layer, view], **draws, seed=seed)
            versus.append({"a": a, "b": b, "seed": seed, "layer": layer, "view": view})
            versus[-1] |= {"difference": d, "low": low, "high": high}
    frames = ADJACENCY.frame(adjacency), POSITION.frame(position), VERSUS.frame(versus)
    return TextLayers(*frames, CAUSAL.frame(causal))


def _layers(model: Any, tokens: Tensor, seed: int, folds: int, draws: dict) -> tuple:
    """One model's adjacency rows, position rows, and its per-window scores by (layer,
    view)."""
    from adjpos.probes import probe_positions

    kinds, n = capture_kinds(model), tokens.shape[1]
    lengths = torch.full((len(tokens),), n)
    stack = capture_residuals(model, tokens, progress=False).double().cpu()
    probe = probe_positions(
        model, tokens, features="resid", probe="ridge", cv=folds, seed=seed, repeats=1
    )
    adjacency, position, scores = [], [], {}
    for layer, states in enumerate(stack):
        key = {"layer": layer, "kind": kinds[layer]}
        for view, (centred, skip) in VIEWS.items():
            values = sequence_scores(states, lengths, center=centred, skip_first=skip).numpy()
            scores[layer, view] = values
            low, high = bootstrap_interval(values, **draws, seed=seed)
            adjacency.append(key | {"view": view, "adjacency": float(np.mean(values))})
            adjacency[-1] |= {"low": low, "high": high, "n_sequences": len(values)}
        fold_seed = derive_seed(seed, "text decomposition")
        shares = decomposition_shares(states, tokens, folds=folds, seed=fold_seed).held_out
        position += [key | {"measure": f"{p} share", "value": shares[p]} for p in SHARES]
        r2 = probe.value(layer, "resid", "ridge", "r2")
        position.append(key | {"measure": "probe R^2", "value": r2})
    return (adjacency, position), scores


def shipped_text_models(
    seeds: Sequence[int] | None = None, *, n_ctx: int | None = None
) -> tuple[dict[tuple[str, int], Any], Any, list[str]]:
    """The shipped text models of every layout (`adjpos.pretrained`), of `seeds` (None: every
    shipped seed), their one tokenizer (a `tokenizers.Tokenizer`, None when no model is
    shipped), and the (layout, seed) asked for but not shipped, as ``"text-LAYOUT:SEED"``.

    Raises:
        ValueError: the models do not share one tokenizer (they cannot read the same text).
    """
    from tokenizers import Tokenizer

    from adjpos.models import load_model
    from adjpos.pretrained import pretrained_folder, pretrained_seeds
    from adjpos.text.recipe import LAYOUTS

    models, missing, files = {}, [], set()
    wanted = sorted({s for x in LAYOUTS for s in pretrained_seeds(f"text-{x}")} | set(seeds or ()))
    for layout in LAYOUTS:
        shipped = pretrained_seeds(f"text-{layout}")
        for seed in wanted if seeds is None else seeds:
            if seed not in shipped:
                missing.append(f"text-{layout}:{seed}")
                continue
            folder = pretrained_folder(f"text-{layout}", seed)
            models[layout, seed] = load_model(folder, device="cpu", n_ctx=n_ctx)
            files.add((folder / "tokenizer.json").read_text())
    if len(files) > 1:
        raise UsageError("the shipped text models hold different tokenizers; reinstall them")
    return models, Tokenizer.from_str(files.pop()) if files else None, missing


def summarise(result: TextLayers) -> dict[str, Any]:
    """The JSON-able numbers of a `TextLayers`, one cell per (layout, layer, view) of
    adjacency, (a, b, layer, view) of the paired differences, (layout, layer, intervention)
    of the tested causal rows and (layout, layer, measure) of the position measures; each
    with its seeds' values or intervals (``per_seed``) and their mean (``value``)."""
    from adjpos.interventions import SPECS

    def cells(frame: pd.DataFrame, keys: list[str], value: str, bounds: list[str]) -> list:
        out = []
        for key, group in frame.groupby(keys, sort=False):
            out.append(dict(zip(keys, [_plain(k) for k in key], strict=True)))
            out[-1] |= {"value": float(group[value].mean()), "seeds": group["seed"].tolist()}
            out[-1]["per_seed"] = group[bounds].astype(float).to_numpy().tolist()
        return out

    causal = result.causal.set_index(["layout", "seed", "layer", "intervention"])
    tested = result.causal[result.causal["intervention"].map(lambda n: SPECS[n].role == "tested")]
    keys = list(zip(tested["layout"], tested["seed"], tested["layer"], strict=True))
    control = [
        causal.loc[(*k, c), "perturbation"] for k, c in zip(keys, tested["control"], strict=True)
    ]
    unchanged = [causal.loc[(*k, "none"), "adjacency_at_layer"] for k in keys]
    tested = tested.assign(
        control_perturbation=control, adjacency_drop=unchanged - tested["adjacency_at_layer"]
    )
    by_layer = ["layout", "layer", "kind"]
    bounds = ["loss_difference_low", "loss_difference_high", "perturbation"]
    return {
        "seeds": sorted({int(s) for s in result.adjacency["seed"]}),
        "adjacency": cells(result.adjacency, [*by_layer, "view"], "adjacency", ["low", "high"]),
        "versus": cells(result.versus, ["a", "b", "layer", "view"], "difference", ["low", "high"]),
        "causal": cells(
            tested,
            ["layout", "layer", "intervention"],
            "loss_difference",
            [*bounds, "control_perturbation", "adjacency_drop"],
        ),
        "position": cells(result.position, [*by_layer, "measure"], "value", ["value"]),
    }


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def seeds_above(per_seed: Sequence[Sequence[float]], null: float) -> Outcome:
    """For when every seed's interval (its first two numbers) lies above `null`, against
    when every one lies below, within otherwise (`adjpos.stats.every_seed`)."""
    return every_seed(judge(s[0], s[1], null, null) for s in per_seed)


def curve_read(
    per_seed: Sequence[Sequence[float]], gap: float, slack: float, min_drop: float
) -> Outcome | None:
    """A causal cell's outcome from each seed's (low, high, size, control's size, drop) of the
    loss minus the control's, where drop is how much the change lowered the adjacency score at
    the layer (its manipulation check): None (not counted) when some seed's drop is below
    `min_drop`; else per seed for when low > `gap` and size <= `slack` x the control's,
    against when high < `gap` (the loss cannot be `gap` above the control's), within
    otherwise; then over seeds (`adjpos.stats.every_seed`)."""
    if any(drop < min_drop for *_, drop in per_seed):
        return None
    found = []
    for low, high, size, control, _ in per_seed:
        reads, unread = low > gap and size <= slack * control, high < gap
        found.append(Outcome.FOR if reads else Outcome.AGAINST if unread else Outcome.WITHIN)
    return every_seed(found)
