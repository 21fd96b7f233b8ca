"""What a change does on a task's prompts (`measure_draws`): exact match under greedy decoding
with the change active and, teacher-forced, what it changed and left intact, with 95% intervals
(Wilson for proportions, else a bootstrap over prompts). `adjpos.interventions.task` runs it for
every unit of a table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import Tensor

from adjpos.capture import check_tokens
from adjpos.interventions.hooks import Stacked, intervene, start_at_block
from adjpos.interventions.spec import READOUTS
from adjpos.metrics import position_variance
from adjpos.scoring import sequence_scores
from adjpos.stats import bootstrap_interval, variance_ratio, wilson_interval
from adjpos.tasks import Task, TaskBatch
from adjpos.validation import UsageError


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
    """Each of `interventions` (one, or e.g. the draws of a random control) measured on
    `batch` at `layer`, in one batched pass: the prompts are copied once per intervention and
    each copy goes through its own (`Stacked`), so each row equals that intervention measured
    alone (up to float rounding of the larger batch), with far fewer forward passes. The
    read-out positions (the last prompt position and every answer position) are left
    untouched with ``readout="kept"`` and change like the others with ``"changed"``
    (see `intervene`).

    Returns one dict per intervention: ``hits`` (each prompt's exact match, in the order of
    `batch`), ``answers`` (each prompt's decoded answer) and the measurement columns of
    `INTERVENTION_TABLE`:
    - exact_match: greedy decoding with the hook active at every step, and its 95% Wilson
      interval (a change of the prompt alone, as with the read-out kept, is decoded by a
      HookedTransformer once with a KV cache, `adjpos.training.decode.predict_cached`;
      ``kv_cache=False`` re-runs the whole sequence under the hook for every token: the same
      answers, slower);
    - token_accuracy: answer tokens (and the EOS) right under teacher forcing, pooled (Wilson);
    - adjacency_at_layer: the adjacency score (`adjpos.scoring.sequence_scores`) of the states
      the intervention writes (block `layer`'s input; for an attention-pattern intervention,
      its output), whole sequences, teacher-forced, with its interval; adjacency_last: at
      the last layer;
    - variance_ratio_at_layer / _last: variance over the last third of the positions over
      the first third (mean variance profile of each length, averaged over lengths);
    - perturbation: mean ||x' - x|| / ||x|| over the states the hook changed while decoding
      (read-out positions left out when kept; for an attention intervention, the
      teacher-forced change of the block's output), pooled over the interventions and the
      stack's decoding steps (a copy may be measured a few steps longer than alone: within
      2% in the tests); log_norm_change: mean |log ||x'|| - log ||x|| | teacher-forced.

    Raises:
        ValueError: `readout` is not one of `READOUTS`, or no interventions.
    """
    from transformer_lens import HookedTransformer

    from adjpos.training.decode import predict, predict_cached

    if readout not in READOUTS:
        raise UsageError(f"readout must be one of {list(READOUTS)}, got {readout!r}")
    if not interventions:
        raise UsageError("measure_draws needs at least one intervention")
    n_draws = len(interventions)
    keep = readout == "kept"
    starts = [len(task.encode(p)) - 1 for p in batch.prompts]
    # a change told the runs of its prompts (a position-curve arm): prompts grouped by them
    by_runs = all(hasattr(iv, "at") for iv in interventions)
    layouts = [task.runs(p) if by_runs else None for p in batch.prompts]
    hits, record = np.zeros((n_draws, len(starts))), []
    said = np.empty((n_draws, len(starts)), dtype=object)
    # a change of the prompt alone (the read-out kept, or an intervention that says it
    # changes the prompt positions only) is the same at every decoding step: a KV cache
    prompt_only = keep or all(getattr(iv, "prompt_only", False) for iv in interventions)
    cached = kv_cache and prompt_only and isinstance(model, HookedTransformer)
    hooked = partial(intervene, model, layer=layer, keep_readout=keep)
    groups = list(zip(starts, layouts, strict=True))
    for start, runs in sorted(set(groups), key=lambda k: (k[0], str(k[1]))):
        rows = [i for i, key in enumerate(groups) if key == (start, runs)]
        prompts = [batch.prompts[i] for i in rows] * n_draws
        change = partial(hooked, _stack(interventions, runs), readout_from=start, record=record)
        if cached:  # the change is the prompt's alone: run it once, then a KV cache
            answers = predict_cached(model, task, prompts, prompt_pass=change)
        else:
            with change():
                answers = predict(model, task, prompts)
        said[:, rows] = np.array(answers, dtype=object).reshape(n_draws, -1)
        hits[:, rows] = said[:, rows] == np.array([batch.answers[i] for i in rows], dtype=object)
    n_layers = model.cfg.n_layers
    # the states the intervention writes: block `layer`'s input, or its output for a pattern
    site = f"blocks.{layer}.hook_resid_{'post' if interventions[0].site == 'pattern' else 'pre'}"
    last = f"blocks.{n_layers - 1}.hook_resid_post"
    per_draw: list[dict[str, Any]] = [defaultdict(list) for _ in range(n_draws)]
    keys = list(zip(starts, batch.lengths.tolist(), layouts, strict=True))
    for start, length, runs in sorted(set(keys), key=lambda k: (k[0], k[1], str(k[2]))):
        rows = [i for i, key in enumerate(keys) if key == (start, length, runs)]
        tokens = check_tokens(model, batch.tokens[rows, :length])
        mask = batch.loss_mask[rows, : length - 1]
        with torch.inference_mode():
            _, clean = model.run_with_cache(tokens, names_filter=[site])
            begin = start_at_block(model, layer, site)  # each copy's pass starts there
            inputs = clean[site] if begin else tokens
            repeated = inputs.repeat(n_draws, *[1] * (inputs.dim() - 1))
            with hooked(_stack(interventions, runs), readout_from=start):
                logits, cache = model.run_with_cache(repeated, names_filter=[site, last], **begin)
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
            norm, new_norm = (x.norm(dim=-1).clamp_min(1e-12) for x in (before, after))
            acc["perturbation"].append(((after - before).norm(dim=-1) / norm).flatten())
            acc["log_norm_change"].append((new_norm.log() - norm.log()).abs().flatten())
            acc["at_layer"].append((len(rows), position_variance(after).mean(dim=0)))
            acc["last"].append((len(rows), position_variance(final).mean(dim=0)))
            acc["adjacency_last"].append(sequence_scores(final, full))
    sized = sum(n for _, n in record)
    return [
        _unit_row(draw_hits, acc, sum(t for t, _ in record) / sized if sized else None, seed)
        | {"answers": answers.tolist()}
        for draw_hits, acc, answers in zip(hits, per_draw, said, strict=True)
    ]


def _stack(interventions: Sequence[Any], runs: Any) -> Any:
    """The interventions as one (`Stacked` for several), each told `runs` where it takes them."""
    parts = [iv if runs is None else iv.at(runs) for iv in interventions]
    return parts[0] if len(parts) == 1 else Stacked(tuple(parts))


def _unit_row(
    hits: np.ndarray, acc: dict[str, Any], perturbation: float | None, seed: int
) -> dict[str, Any]:
    """One unit's columns from its prompts' hits and its teacher-forced accumulators."""
    right, total, scores = np.sum(acc["right"]), np.sum(acc["total"]), acc["adjacency"]
    if perturbation is None:
        perturbation = float(torch.cat(acc["perturbation"]).mean())
    found = {  # proportions: Wilson; the score: a bootstrap
        "exact_match": (hits.mean(), wilson_interval(float(hits.sum()), len(hits))),
        "token_accuracy": (right / total, wilson_interval(float(right), int(total))),
        "adjacency_at_layer": (np.mean(scores), bootstrap_interval(scores, seed=seed)),
    }
    row = {}
    for name, (value, (low, high)) in found.items():
        row |= {name: float(value), f"{name}_low": low, f"{name}_high": high}
    return row | {
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
