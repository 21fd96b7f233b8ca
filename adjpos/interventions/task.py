"""Causal tests on a task: what an intervention does to a model's exact match, teacher-forced
accuracy, and what it changed and left intact, with bootstrap intervals over prompts.

`measure_intervention` is one (layer, intervention) unit on held-out prompts of the model's
task (`measure_draws`: several draws of a random control in one pass); `intervention_table`
runs every unit through the runner (`adjpos.interventions.runner`). Prompts are grouped by
length (prompt length and sequence length), so padding never enters the model and a
permutation of positions only moves real tokens; a prompt whose (prompt length, answer length)
occurs once is left out (`held_out_prompts`), so `norm_permute_control` always has another
sequence of the same length to take norms from.

The dosed specs (the position curve's arms, `curve`) add their columns (`ARM_TABLE`)
and a second table, the paired differences between the arms of one size that the rule reads
(`curve.numbers.CURVE_DIFFERENCES`, with ``return_differences=True``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, no_type_check

import numpy as np
import torch
from torch import Tensor

from adjpos.capture import check_tokens
from adjpos.interventions.curve.checks import ARM_TABLE, ArmMeasurement
from adjpos.interventions.hooks import Stacked, intervene
from adjpos.interventions.prompts import fit_prompt_states, fit_states, held_out_prompts
from adjpos.interventions.runner import DEFAULT_DRAWS, OutcomeColumns, run_table
from adjpos.interventions.spec import (
    DEFAULT_DOSES,
    DEFAULT_RANK,
    DEFAULT_READOUTS,
    READOUTS,
    Fitted,
    InterventionSpec,
    Unit,
)
from adjpos.interventions.specs import DEFAULT_INTERVENTIONS, plan_units
from adjpos.metrics import position_variance
from adjpos.scoring import sequence_scores
from adjpos.stats import bootstrap_interval, variance_ratio
from adjpos.tables import Table
from adjpos.tasks import Task, TaskBatch
from adjpos.validation import UsageError

DEFAULT_PROMPTS = 200
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
INTERVENTION_TABLE = INTERVENTION_TABLE + ARM_TABLE
EXACT_MATCH = OutcomeColumns(
    "exact_match", "difference", +1, "hits", "draw_exact_match", "draw_hits"
)


def intervention_table(
    model: Any,
    task: Task,
    *,
    layers: Sequence[int] | None = None,
    interventions: Sequence[str | InterventionSpec] = DEFAULT_INTERVENTIONS,
    n_prompts: int = DEFAULT_PROMPTS,
    rank: int = DEFAULT_RANK,
    control_draws: int = DEFAULT_DRAWS,
    readouts: Sequence[str] = DEFAULT_READOUTS,
    doses: Sequence[int] = DEFAULT_DOSES,
    seed: int = 0,
    model_name: str = "model",
    model_seed: int | None = None,
    folder: Any = None,
    progress: bool | None = None,
    return_differences: bool = False,
) -> Any:
    """Every (layer, read-out variant, intervention) unit on fresh held-out prompts of
    `task`, as a DataFrame with the columns of `INTERVENTION_TABLE` (a dosed spec: one unit
    and row per size and offset).

    Each tested intervention is compared with its control (its spec's ``control``) on the
    same prompts: ``difference`` is the mean per-prompt difference in exact match
    (intervention minus control), with a paired bootstrap interval over prompts
    (``difference_low``, ``difference_high``). A drawn control is measured `control_draws`
    times (its row holds the mean over draws, per prompt), and the tested row's
    ``percentile`` is the share (%) of the draws whose exact match is below its own (ties
    count half).

    Args:
        model: a TransformerLens model trained on `task`.
        layers: layers to intervene at (default: all, 0 .. n_layers - 1; layer l is the input
            of block l, 0 = the token embeddings).
        interventions: names from `SPECS` (default: all), or your own `InterventionSpec`s.
        n_prompts: test prompts (and as many fitting prompts), see `held_out_prompts`.
        rank: rank of the position subspace (and its random control).
        control_draws: draws of each random control.
        readouts: the read-out variants to run, from `READOUTS` ("kept", the default: the
            read-out positions untouched; "changed": changed like the others, decoded
            without a cache). A spec runs in its own ``readouts`` only.
        doses: the sizes of the dosed specs (the position curve's arms): at m, the size of
            the full shift of the curve by m (see `adjpos.interventions.curve.change`).
        seed: seed of the prompts, the permutations, the random draws and the bootstrap.
        model_name, model_seed: the model and seed columns.
        folder: an `adjpos.runs.RunFolder`: finished units are read back from it instead of
            recomputed, and each unit is marked done as it finishes (resumable).
        progress: show a progress bar over units (default: only on a terminal).
        return_differences: return ``(table, differences)``, the second the paired
            differences between the arms of each size (`CURVE_DIFFERENCES`; empty without a
            dosed spec), which `adjpos.interventions.cell_numbers` reads with the table.

    Raises:
        ValueError: a layer out of range, unknown interventions or read-out variants, too few
            prompts or draws, bad doses, or a rank the position subspace cannot have.
    """
    units = plan_units(model, layers, interventions, readouts, control_draws, doses)
    held = held_out_prompts(task, n_prompts, seed=seed)
    return run_table(
        units,
        _OnTask(model, task, held, rank, seed),
        table=INTERVENTION_TABLE,
        control_draws=control_draws,
        columns={"model": model_name, "task": task.name, "seed": model_seed},
        seed=seed,
        folder=folder,
        progress=progress,
        return_differences=return_differences,
    )


class _OnTask:
    """The runner's measurement on a task: fitted on ``held.fit``, measured on ``held.test``."""

    outcome = EXACT_MATCH

    def __init__(self, model: Any, task: Task, held: Any, rank: int, seed: int) -> None:
        self.model, self.task, self.held, self.rank, self.seed = model, task, held, rank, seed
        self.states: dict[int, tuple[Tensor, Tensor]] = {}
        self.prompts: dict[int, Any] = {}
        self.arms = ArmMeasurement(model, task, held.test, seed)
        self.counts = self.arms.counts

    def fitted(self, layer: int, needs: set[str]) -> Fitted:
        if "states" in needs and layer not in self.states:
            self.states[layer] = fit_states(self.model, self.held.fit, layer)
        if "prompts" in needs and layer not in self.prompts:
            self.prompts[layer] = fit_prompt_states(
                self.model, self.task, self.held, layer, seed=self.seed
            )
        states, positions = self.states.get(layer, (None, None))
        return Fitted(
            d_model=self.model.cfg.d_model,
            seed=self.seed,
            rank=self.rank,
            states=states,
            positions=positions,
            prompts=self.prompts.get(layer),
            counts=self.counts,
        )

    def measure(self, built: list[Any], unit: Unit) -> dict[str, Any]:
        measured = measure_draws(
            self.model,
            self.task,
            built,
            layer=unit.layer,
            batch=self.held.test,
            seed=self.seed,
            readout=unit.readout,
        )
        answers = [m.pop("answers") for m in measured]
        draw_hits = [m["hits"] for m in measured]
        row = _mean_of_draws(measured, self.seed)
        if unit.dose is None:
            return row
        columns = self.arms.columns(
            built, answers, layer=unit.layer, fit=self.prompts[unit.layer], row=row
        )
        return row | {"draw_hits": draw_hits} | columns

    def unchanged(self) -> np.ndarray:
        """The unchanged model's exact match on each test prompt (decoded once)."""
        return self.arms.unchanged()


def _mean_of_draws(measured: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """One draw's measurements as they are; several draws' as their mean, each prompt's exact
    match the mean over the draws (its interval bootstrapped over prompts), and each draw's
    exact match under ``draw_exact_match``."""
    if len(measured) == 1:
        return dict(measured[0])
    out = {k: float(np.mean([m[k] for m in measured])) for k in measured[0] if k != "hits"}
    hits = np.mean([m["hits"] for m in measured], axis=0)
    out["exact_match_low"], out["exact_match_high"] = bootstrap_interval(hits, seed=seed)
    out["n_prompts"] = measured[0]["n_prompts"]
    out["hits"] = hits.tolist()
    out["draw_exact_match"] = [m["exact_match"] for m in measured]
    return out


def measure_intervention(
    model: Any,
    task: Task,
    intervention: Any,
    *,
    layer: int,
    batch: TaskBatch,
    seed: int = 0,
    readout: str = "changed",
    kv_cache: bool = True,
) -> dict[str, Any]:
    """One unit: the model on `batch` with `intervention` at `layer`.

    The read-out positions are the last prompt position and every answer position (where the
    answer is read); with ``readout="kept"`` they are left untouched, with ``"changed"`` they
    change like the others (see `intervene`).

    Returns a dict of the measurement columns of `INTERVENTION_TABLE`, ``hits`` (each
    prompt's exact match, in the order of `batch`, for paired comparisons) and ``answers``
    (each prompt's decoded answer):
    - exact_match: greedy decoding with the hook active at every step, and its 95% interval
      (with the read-out kept, the change is the prompt's alone, so a HookedTransformer
      decodes it once with a KV cache: `adjpos.training.decode.predict_cached`);
    - token_accuracy: answer tokens (and the EOS) right under teacher forcing, pooled;
    - adjacency_at_layer: the adjacency score (`adjpos.scoring.sequence_scores`, the
      library's default ties) of the states the intervention writes (block `layer`'s input;
      for an attention-pattern intervention, block `layer`'s output), whole sequences,
      teacher-forced, with its interval over prompts; adjacency_last: at the last layer;
    - variance_ratio_at_layer / _last: variance over the last third of the positions over
      the first third (mean variance profile of each length, averaged over lengths);
    - perturbation: mean ||x' - x|| / ||x|| over the states the hook changed while decoding
      (every call of every step; read-out positions left out when kept; 0 for an attention
      intervention, the teacher-forced change of the block's output); log_norm_change: mean
      |log ||x'|| - log ||x|| | teacher-forced.

    Raises:
        ValueError: `readout` is not one of `READOUTS`.
    """
    (row,) = measure_draws(
        model,
        task,
        [intervention],
        layer=layer,
        batch=batch,
        seed=seed,
        readout=readout,
        kv_cache=kv_cache,
    )
    return row


def measure_draws(
    model: Any,
    task: Task,
    interventions: Sequence[Any],
    *,
    layer: int,
    batch: TaskBatch,
    seed: int = 0,
    readout: str = "changed",
    kv_cache: bool = True,
) -> list[dict[str, Any]]:
    """`measure_intervention` of each of `interventions` (e.g. the draws of a random control),
    in one batched pass: the prompts are copied once per intervention and each copy goes
    through its own (`Stacked`), so each row equals that intervention measured alone (up to
    float rounding of the larger batch), with far fewer forward passes. The ``perturbation``
    of a row is pooled over all of them (the same for every row), over the stack's decoding
    steps: the stack decodes until every copy is answered, so a copy can be measured a few
    steps longer than alone (checked within 2% in the tests).

    ``kv_cache=False`` re-runs the whole sequence under the hook for every decoded token
    instead of decoding the kept read-out's change with a KV cache (the same answers, slower;
    for checks and benchmarks).

    Raises:
        ValueError: `readout` is not one of `READOUTS`, or no interventions.
    """
    from adjpos.training.decode import predict, predict_cached

    if readout not in READOUTS:
        raise UsageError(f"readout must be one of {list(READOUTS)}, got {readout!r}")
    if not interventions:
        raise UsageError("measure_draws needs at least one intervention")
    n_draws = len(interventions)
    stacked = interventions[0] if n_draws == 1 else Stacked(tuple(interventions))
    keep = readout == "kept"
    starts = [len(task.encode(p)) - 1 for p in batch.prompts]
    hits, record = np.zeros((n_draws, len(starts))), []
    said = [[""] * len(starts) for _ in range(n_draws)]
    # a change of the prompt alone (the read-out kept, or an intervention that says it
    # changes the prompt positions only) is the same at every decoding step: a KV cache
    prompt_only = keep or all(getattr(iv, "prompt_only", False) for iv in interventions)
    cached = kv_cache and prompt_only and _is_hooked(model)
    for start in sorted(set(starts)):
        rows = [i for i, s in enumerate(starts) if s == start]
        prompts = [batch.prompts[i] for i in rows] * n_draws

        @no_type_check  # made at every call: kept out of the tests' type checker
        def change(start: int = start) -> Any:
            return intervene(
                model, stacked, layer=layer, readout_from=start, keep_readout=keep, record=record
            )

        if cached:  # the change is the prompt's alone: run it once, then a KV cache
            answers = predict_cached(model, task, prompts, prompt_pass=change)
        else:
            with change():
                answers = predict(model, task, prompts)
        right = [batch.answers[i] for i in rows] * n_draws
        hits[:, rows] = np.reshape(
            [a == r for a, r in zip(answers, right, strict=True)], (n_draws, -1)
        )
        for d in range(n_draws):
            for i, answer in zip(rows, answers[d * len(rows) : (d + 1) * len(rows)], strict=True):
                said[d][i] = answer
    n_layers = model.cfg.n_layers
    site = f"blocks.{layer}.hook_resid_pre"
    if stacked.site == "pattern":
        site = f"blocks.{layer}.hook_resid_post"
    last = f"blocks.{n_layers - 1}.hook_resid_post"
    per_draw: list[dict[str, Any]] = [defaultdict(list) for _ in range(n_draws)]
    lengths = batch.lengths.tolist()
    for start, length in sorted(set(zip(starts, lengths, strict=True))):
        rows = [
            i for i, key in enumerate(zip(starts, lengths, strict=True)) if key == (start, length)
        ]
        tokens = check_tokens(model, batch.tokens[rows, :length])
        mask = batch.loss_mask[rows, : length - 1]
        with torch.inference_mode():
            _, clean = model.run_with_cache(tokens, names_filter=[site])
            with intervene(model, stacked, layer=layer, readout_from=start, keep_readout=keep):
                logits, cache = model.run_with_cache(
                    tokens.repeat(n_draws, 1), names_filter=[site, last]
                )
        before = clean[site].double().cpu()
        chunks = zip(
            logits.split(len(rows)),
            cache[site].double().cpu().split(len(rows)),
            cache[last].double().cpu().split(len(rows)),
            per_draw,
            strict=True,
        )
        for draw_logits, after, final, acc in chunks:
            hit = (draw_logits[:, :-1].argmax(-1).cpu() == tokens[:, 1:].cpu()) & mask
            acc["right"] += hit.sum(dim=1).tolist()
            acc["total"] += mask.sum(dim=1).tolist()
            full = torch.full((len(rows),), length)
            acc["adjacency"] += sequence_scores(after, full).tolist()
            change = (after - before).norm(dim=-1) / before.norm(dim=-1).clamp_min(1e-12)
            acc["perturbation"].append(change.flatten())
            acc["log_norm_change"].append((_log_norm(after) - _log_norm(before)).abs().flatten())
            acc["at_layer"].append((len(rows), position_variance(after).mean(dim=0)))
            acc["last"].append((len(rows), position_variance(final).mean(dim=0)))
            acc["adjacency_last"].append(sequence_scores(final, full))
    sized = sum(n for _, n in record)
    return [
        _unit_row(draw_hits, acc, sum(t for t, _ in record) / sized if sized else None, seed)
        | {"answers": answers}
        for draw_hits, acc, answers in zip(hits, per_draw, said, strict=True)
    ]


def _unit_row(
    hits: np.ndarray, acc: dict[str, Any], perturbation: float | None, seed: int
) -> dict[str, Any]:
    """One unit's columns from its prompts' hits and its teacher-forced accumulators."""
    em_low, em_high = bootstrap_interval(hits, seed=seed)
    right, total = np.array(acc["right"]), np.array(acc["total"])
    tok_low, tok_high = bootstrap_interval(right / total, total, seed=seed)
    adj_low, adj_high = bootstrap_interval(acc["adjacency"], seed=seed)
    if perturbation is None:
        perturbation = float(torch.cat(acc["perturbation"]).mean())
    return {
        "exact_match": float(hits.mean()),
        "exact_match_low": em_low,
        "exact_match_high": em_high,
        "token_accuracy": float(right.sum() / total.sum()),
        "token_accuracy_low": tok_low,
        "token_accuracy_high": tok_high,
        "adjacency_at_layer": float(np.mean(acc["adjacency"])),
        "adjacency_at_layer_low": adj_low,
        "adjacency_at_layer_high": adj_high,
        "adjacency_last": float(torch.cat(acc["adjacency_last"]).mean()),
        "variance_ratio_at_layer": _mean_ratio(acc["at_layer"]),
        "variance_ratio_last": _mean_ratio(acc["last"]),
        "perturbation": perturbation,
        "log_norm_change": float(torch.cat(acc["log_norm_change"]).mean()),
        "n_prompts": len(hits),
        "hits": hits.tolist(),
    }


def _mean_ratio(profiles: list[tuple[int, Tensor]]) -> float:
    """Variance ratio of each length's mean profile, averaged with the sequences as weights."""
    weights = np.array([w for w, _ in profiles], dtype=float)
    ratios = np.array([variance_ratio(p.numpy()) for _, p in profiles])
    return float((weights * ratios).sum() / weights.sum())


def _log_norm(acts: Tensor) -> Tensor:
    return acts.norm(dim=-1).clamp_min(1e-12).log()


def _is_hooked(model: Any) -> bool:
    from transformer_lens import HookedTransformer

    return isinstance(model, HookedTransformer)
