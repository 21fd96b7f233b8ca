"""`intervention_table`: every (layer, read-out variant, intervention) unit of a model on its
task, each tested intervention beside its control (a paired difference over prompts, the
percentile among the control's draws)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import Tensor
from tqdm.auto import tqdm

from adjpos.interventions.build import (
    CONTROL_OF,
    DEFAULT_DRAWS,
    DEFAULT_INTERVENTIONS,
    DEFAULT_PROMPTS,
    DEFAULT_RANK,
    DEFAULT_READOUTS,
    DRAWN,
    FITTED_ON_STATES,
    KEPT_ONLY,
    MATCHED_TO,
    READOUTS,
    build_intervention,
    check_interventions,
    fit_prompt_states,
    fit_states,
    held_out_prompts,
)
from adjpos.interventions.measure import measure_draws
from adjpos.interventions.position_mean import PromptStates
from adjpos.interventions.subspaces import (
    variance_share,
)
from adjpos.stats import bootstrap_interval, paired_difference
from adjpos.tables import Table
from adjpos.tasks import Task
from adjpos.validation import UsageError, is_int

INTERVENTION_TABLE = Table(
    model="string",
    task="string",
    seed="Int64",
    layer="int64",
    intervention="string",
    readout="string",
    control="string",
    rank="Int64",
    exact_match="float64",
    exact_match_low="float64",
    exact_match_high="float64",
    token_accuracy="float64",
    token_accuracy_low="float64",
    token_accuracy_high="float64",
    adjacency_at_layer="float64",
    adjacency_at_layer_low="float64",
    adjacency_at_layer_high="float64",
    adjacency_last="float64",
    variance_ratio_at_layer="float64",
    variance_ratio_last="float64",
    perturbation="float64",
    log_norm_change="float64",
    difference="float64",
    difference_low="float64",
    difference_high="float64",
    control_draws="Int64",
    percentile="float64",
    share="float64",
    n_prompts="int64",
)


def check_units(
    model: Any,
    layers: Sequence[int] | None,
    interventions: Sequence[str],
    readouts: Sequence[str],
    control_draws: int,
) -> list[tuple[int, str, str]]:
    """The (layer, read-out variant, intervention) units of a table, checked (layers default
    to all; the `KEPT_ONLY` interventions in the "kept" variant only).

    Raises:
        ValueError: a layer out of range, unknown or repeated interventions or read-out
            variants, a `KEPT_ONLY` intervention without "kept", or control_draws < 1.
    """
    names = check_interventions(interventions)
    n_layers = model.cfg.n_layers
    layers = list(range(n_layers)) if layers is None else list(layers)
    bad = [x for x in layers if not is_int(x) or not 0 <= x < n_layers]
    if bad or not layers:
        raise UsageError(f"layers {bad or layers} are not in [0, {n_layers - 1}]")
    readouts = list(readouts)
    if not readouts or set(readouts) - set(READOUTS) or len(set(readouts)) < len(readouts):
        raise UsageError(f"readouts must be distinct names from {list(READOUTS)}, got {readouts}")
    if "kept" not in readouts and set(names) & set(KEPT_ONLY):
        raise UsageError(f"{sorted(set(names) & set(KEPT_ONLY))} need the 'kept' read-out")
    if not is_int(control_draws) or control_draws < 1:
        raise UsageError(f"control_draws must be an int >= 1, got {control_draws!r}")
    return [
        (layer, readout, name)
        for layer in layers
        for readout in readouts
        for name in names
        if readout == "kept" or name not in KEPT_ONLY
    ]


def intervention_table(
    model: Any,
    task: Task,
    *,
    layers: Sequence[int] | None = None,
    interventions: Sequence[str] = DEFAULT_INTERVENTIONS,
    n_prompts: int = DEFAULT_PROMPTS,
    rank: int = DEFAULT_RANK,
    control_draws: int = DEFAULT_DRAWS,
    readouts: Sequence[str] = DEFAULT_READOUTS,
    seed: int = 0,
    model_name: str = "model",
    model_seed: int | None = None,
    folder: Any = None,
    progress: bool | None = None,
) -> Any:
    """Every (layer, read-out variant, intervention) unit on fresh held-out prompts of
    `task`, as a DataFrame with the columns of `INTERVENTION_TABLE`.

    Each tested intervention is compared with its control (`CONTROL_OF`) on the same prompts:
    ``difference`` is the mean per-prompt difference in exact match (intervention minus
    control), with a paired bootstrap interval over prompts (``difference_low``,
    ``difference_high``). The controls in `DRAWN` are measured `control_draws` times (their row
    holds the mean over draws, per prompt), and the tested row's ``percentile`` is its exact
    match's place among the draws' (0: below every draw; ties count half).

    Args:
        model: a TransformerLens model trained on `task`.
        layers: layers to intervene at (default: all, 0 .. n_layers - 1; layer l is the input
            of block l, 0 = the token embeddings).
        interventions: names from `NAMES` (default: all).
        n_prompts: test prompts (and as many fitting prompts), see `held_out_prompts`.
        rank: rank of the position subspace (and its random control).
        control_draws: draws of each random control.
        readouts: the read-out variants to run, from `READOUTS` ("kept", the default: the
            read-out positions untouched; "changed": changed like the others, decoded
            without a cache). The interventions in `KEPT_ONLY` run in "kept" only.
        seed: seed of the prompts, the permutations, the random subspace and the bootstrap.
        model_name, model_seed: the model and seed columns.
        folder: an `adjpos.runs.RunFolder`: finished units are read back from it instead of
            recomputed, and each unit is marked done as it finishes (resumable).
        progress: show a progress bar over units (default: only on a terminal).

    Raises:
        ValueError: a layer out of range, unknown interventions or read-out variants, too few
            prompts or draws, or a rank the position subspace cannot have.
    """
    units = check_units(model, layers, interventions, readouts, control_draws)
    held = held_out_prompts(task, n_prompts, seed=seed)
    rows = []
    fitted: dict[int, tuple[Tensor, Tensor]] = {}
    prompt_states: dict[int, PromptStates] = {}
    tested: dict[tuple[int, str], Any] = {}
    for layer, readout, name in tqdm(units, desc="interventions", disable=_quiet(progress)):
        unit = f"layer{layer}-{readout}-{name}"
        if folder is not None and folder.is_done(unit):
            rows.append(folder.result(unit))
            continue
        if name in FITTED_ON_STATES and layer not in fitted:
            fitted[layer] = fit_states(model, held.fit, layer)
        if name in KEPT_ONLY and layer not in prompt_states:
            prompt_states[layer] = fit_prompt_states(model, task, held, layer, seed=seed)
        states, positions = fitted.get(layer, (None, None))
        draws = control_draws if name in DRAWN else 1
        built = []
        for draw in range(draws):
            matched = None
            if name in MATCHED_TO:
                key = (layer, MATCHED_TO[name])
                if key not in tested:
                    tested[key] = build_intervention(
                        MATCHED_TO[name],
                        d_model=model.cfg.d_model,
                        states=states,
                        positions=positions,
                        rank=rank,
                        seed=seed,
                        prompts=prompt_states.get(layer),
                    )
                matched = tested[key]
            built.append(
                build_intervention(
                    name,
                    d_model=model.cfg.d_model,
                    states=states,
                    positions=positions,
                    rank=rank,
                    seed=seed,
                    draw=draw,
                    matched=matched,
                    prompts=prompt_states.get(layer),
                )
            )
        measured = measure_draws(
            model, task, built, layer=layer, batch=held.test, seed=seed, readout=readout
        )
        row = {
            "model": model_name,
            "task": task.name,
            "seed": model_seed,
            "layer": layer,
            "intervention": name,
            "readout": readout,
            "control": CONTROL_OF[name],
            "rank": getattr(built[0], "rank", None),
            **_mean_of_draws(measured, seed),
            "control_draws": draws if name in DRAWN else None,
            "share": None
            if states is None or not hasattr(built[0], "basis")
            else float(np.mean([variance_share(iv.basis, states) for iv in built])),
        }
        if folder is not None:
            folder.mark_done(unit, row)
        rows.append(row)
    return INTERVENTION_TABLE.frame(_paired_with_controls(rows, seed))


def _mean_of_draws(measured: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """One draw's measurements as they are; several draws' as their mean, each prompt's exact
    match the mean over the draws (its interval bootstrapped over prompts), and each draw's
    exact match under ``draw_exact_match``."""
    if len(measured) == 1:
        return measured[0]
    out = {k: float(np.mean([m[k] for m in measured])) for k in measured[0] if k != "hits"}
    hits = np.mean([m["hits"] for m in measured], axis=0)
    out["exact_match_low"], out["exact_match_high"] = bootstrap_interval(hits, seed=seed)
    out["n_prompts"] = measured[0]["n_prompts"]
    out["hits"] = hits.tolist()
    out["draw_exact_match"] = [m["exact_match"] for m in measured]
    return out


def _paired_with_controls(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Each row beside its control's row of the same layer and read-out variant: the paired
    difference in exact match over prompts and the percentile among the control's draws."""
    index = {(r["layer"], r["readout"], r["intervention"]): r for r in rows}
    out = []
    for r in rows:
        control = index.get((r["layer"], r["readout"], r["control"]))
        extra = {"difference": None, "difference_low": None, "difference_high": None}
        extra["percentile"] = None
        if control is not None and control is not r:
            d, low, high = paired_difference(r["hits"], control["hits"], seed=seed)
            extra |= {"difference": d, "difference_low": low, "difference_high": high}
            draws = control.get("draw_exact_match")
            if draws:
                below = np.mean(np.array(draws) < r["exact_match"])
                ties = np.mean(np.array(draws) == r["exact_match"])
                extra["percentile"] = float(100 * (below + ties / 2))
        out.append({k: v for k, v in r.items() if k not in ("hits", "draw_exact_match")} | extra)
    return out


def _quiet(progress: bool | None) -> bool | None:
    return None if progress is None else not progress
