"""What an intervention does to a model on its task: exact match, teacher-forced accuracy,
and what it changed and left intact, with bootstrap intervals over prompts.

`intervention_table` runs every (layer, intervention) unit on fresh held-out prompts of the
model's task; `measure_intervention` is one unit. Prompts are grouped by length (prompt length
and sequence length), so padding never enters the model and a permutation of positions only
moves real tokens; a prompt whose (prompt length, answer length) occurs once is left out, so
`norm_permute_control` always has another sequence of the same length to take norms from.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from adjpos.capture import capture_residuals, check_tokens
from adjpos.interventions.hooks import (
    LeaceErase,
    NoIntervention,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
    SubspaceSwap,
    UniformAttention,
    intervene,
)
from adjpos.metrics import adjacency_probability, cosine_matrix, position_variance
from adjpos.stats import bootstrap_interval, variance_ratio
from adjpos.tables import Table
from adjpos.tasks import Task, TaskBatch
from adjpos.validation import UsageError, is_int

# Each intervention and the control it is compared with: the norm permutations with the
# rescaling by the very same ratios at random places (equal size); the position subspace with a
# random subspace of its rank; LEACE of position with LEACE of shuffled labels (equal rank).
# Uniform attention has no matched control: it is compared with the baseline. The
# `norm_permute_control` (the norm of the same position in another sequence) is measured too.
CONTROL_OF = {
    "none": "none",
    "norm_permute": "norm_scale_control",
    "norm_permute_mirrored": "norm_scale_control_mirrored",
    "norm_scale_control": "none",
    "norm_scale_control_mirrored": "none",
    "norm_permute_control": "none",
    "subspace_swap": "subspace_swap_random",
    "subspace_swap_random": "none",
    "leace_position": "leace_random",
    "leace_random": "none",
    "uniform_attention": "none",
}
NAMES = tuple(CONTROL_OF)
DEFAULT_INTERVENTIONS = NAMES
# What each intervention moves (the carrier it tests), for tables and the report.
CARRIER = {
    "norm_permute": "norm (cosines kept)",
    "norm_permute_mirrored": "norm, mirrored (cosines kept)",
    "subspace_swap": "position subspace (norms kept)",
    "leace_position": "all linear position information",
    "uniform_attention": "attention pattern",
}
DEFAULT_RANK = 8
DEFAULT_PROMPTS = 500

INTERVENTION_TABLE = Table(
    model="string",
    task="string",
    seed="Int64",
    layer="int64",
    intervention="string",
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
    n_prompts="int64",
)


@dataclass(frozen=True)
class HeldOut:
    """Fresh test-split prompts: `fit` for the interventions that are fitted (the position
    subspace, LEACE), `test` for the measurements (no prompt in both)."""

    fit: TaskBatch
    test: TaskBatch


def held_out_prompts(
    task: Task, n_prompts: int, *, n_fit: int | None = None, seed: int = 0
) -> HeldOut:
    """`n_fit` (default `n_prompts`) fitting prompts and about `n_prompts` test prompts of the
    task's test split, distinct; test prompts whose (prompt, answer) lengths occur only once
    are dropped (see the module docstring), so slightly fewer may remain.

    Raises:
        ValueError: `n_prompts` is not an int >= 2, or no two test prompts share their lengths.
    """
    if not is_int(n_prompts) or n_prompts < 2:
        raise UsageError(f"n_prompts must be an int >= 2, got {n_prompts!r}")
    n_fit = n_prompts if n_fit is None else n_fit
    gen = torch.Generator().manual_seed(seed)
    drawn = task.draw_prompts(3 * (n_fit + n_prompts), generator=gen, split="test")
    drawn = list(dict.fromkeys(drawn))  # distinct, in order
    fit, rest = drawn[:n_fit], drawn[n_fit : n_fit + n_prompts]
    if len(fit) < 2 or len(rest) < 2:
        raise UsageError(f"the {task.name} test split holds too few distinct prompts")
    shapes = [(len(p), len(task.solve(p))) for p in rest]
    count = defaultdict(int)
    for shape in shapes:
        count[shape] += 1
    test = [p for p, shape in zip(rest, shapes, strict=True) if count[shape] >= 2]
    if not test:
        raise UsageError(f"no two of the {len(rest)} test prompts share their lengths; draw more")
    return HeldOut(fit=task.encode_batch(fit), test=task.encode_batch(test))


def fit_states(model: Any, batch: TaskBatch, layer: int) -> tuple[Tensor, Tensor]:
    """Hidden states entering block `layer` at every real position of `batch`, and their
    positions (for fitting the position subspace and LEACE)."""
    acts = capture_residuals(model, batch.tokens, layers=[layer], progress=False)[0]
    real = torch.arange(acts.shape[1]) < batch.lengths[:, None]
    positions = torch.arange(acts.shape[1]).expand_as(real)
    return acts.cpu()[real], positions[real]


def build_intervention(
    name: str,
    *,
    d_model: int,
    states: Tensor | None = None,
    positions: Tensor | None = None,
    rank: int = DEFAULT_RANK,
    seed: int = 0,
) -> Any:
    """The intervention called `name` (one of `NAMES`), fitted on `states` and their
    `positions` where it needs fitting (subspace_swap, leace_position, leace_random).

    Raises:
        ValueError: an unknown name, or a fitted one without states.
    """
    simple = {
        "none": NoIntervention,
        "norm_permute": lambda: NormPermute(seed=seed),
        "norm_permute_mirrored": lambda: NormPermute(seed=seed, mirrored=True),
        "norm_permute_control": NormPermuteControl,
        "norm_scale_control": lambda: NormScaleControl(seed=seed),
        "norm_scale_control_mirrored": lambda: NormScaleControl(seed=seed, mirrored=True),
        "subspace_swap_random": lambda: SubspaceSwap.random_subspace(d_model, rank=rank, seed=seed),
        "uniform_attention": UniformAttention,
    }
    if name in simple:
        return simple[name]()
    if name not in NAMES:
        raise UsageError(f"unknown intervention {name!r}; choose from {list(NAMES)}")
    if states is None or positions is None:
        raise UsageError(f"{name} is fitted: pass the states and positions to fit it on")
    if name == "subspace_swap":
        return SubspaceSwap.fit(states, positions, rank=rank, seed=seed)
    return LeaceErase.fit(states, positions, shuffled=name == "leace_random", seed=seed)


def check_interventions(names: Sequence[str]) -> list[str]:
    """`names`, checked: known and not repeated."""
    names = list(names)
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names or len(set(names)) < len(names):
        problem = f"unknown {unknown}" if unknown else "none given or repeated"
        raise UsageError(f"interventions: {problem}; choose from {list(NAMES)}")
    return names


def measure_intervention(
    model: Any, task: Task, intervention: Any, *, layer: int, batch: TaskBatch, seed: int = 0
) -> dict[str, Any]:
    """One unit: the model on `batch` with `intervention` at `layer`.

    Returns a dict of the measurement columns of `INTERVENTION_TABLE`:
    - exact_match: greedy decoding with the hook active at every step, and its 95% interval;
    - token_accuracy: answer tokens (and the EOS) right under teacher forcing, pooled;
    - adjacency_at_layer: the adjacency score (ties counted half, chance 0.5) of the states
      the intervention writes (block `layer`'s input; for an attention-pattern intervention,
      block `layer`'s output), whole sequences; adjacency_last: at the last layer;
    - variance_ratio_at_layer / _last: variance over the last third of the positions over
      the first third (mean variance profile of each length, averaged over lengths);
    - perturbation: mean ||x' - x|| / ||x|| over those states; log_norm_change: mean
      |log ||x'|| - log ||x|| |.
    """
    from adjpos.training.decode import predict

    with intervene(model, intervention, layer=layer):
        answers = predict(model, task, list(batch.prompts))
    hits = np.array([a == b for a, b in zip(answers, batch.answers, strict=True)], dtype=float)
    n_layers = model.cfg.n_layers
    site = f"blocks.{layer}.hook_resid_pre"
    if intervention.site == "pattern":
        site = f"blocks.{layer}.hook_resid_post"
    last = f"blocks.{n_layers - 1}.hook_resid_post"
    right, total, adjacency, changes = [], [], [], defaultdict(list)
    profiles: dict[str, list[tuple[int, Tensor]]] = defaultdict(list)
    for length in batch.lengths.unique().tolist():
        rows = (batch.lengths == length).nonzero().flatten()
        tokens = check_tokens(model, batch.tokens[rows, :length])
        mask = batch.loss_mask[rows, : length - 1]
        with torch.inference_mode():
            _, clean = model.run_with_cache(tokens, names_filter=[site])
            with intervene(model, intervention, layer=layer):
                logits, cache = model.run_with_cache(tokens, names_filter=[site, last])
        hit = (logits[:, :-1].argmax(-1).cpu() == tokens[:, 1:].cpu()) & mask
        right += hit.sum(dim=1).tolist()
        total += mask.sum(dim=1).tolist()
        before, after = clean[site].double().cpu(), cache[site].double().cpu()
        adjacency += adjacency_probability(cosine_matrix(after), ties="half").tolist()
        changes["perturbation"].append(
            ((after - before).norm(dim=-1) / before.norm(dim=-1).clamp_min(1e-12)).flatten()
        )
        logs = _log_norm(after) - _log_norm(before)
        changes["log_norm_change"].append(logs.abs().flatten())
        final = cache[last].double().cpu()
        for key, acts in (("at_layer", after), ("last", final)):
            profiles[key].append((len(rows), position_variance(acts).mean(dim=0)))
        changes["adjacency_last"].append(adjacency_probability(cosine_matrix(final), ties="half"))
    em_low, em_high = bootstrap_interval(hits, seed=seed)
    tok_low, tok_high = bootstrap_interval(np.array(right) / np.array(total), total, seed=seed)
    adj_low, adj_high = bootstrap_interval(adjacency, seed=seed)
    return {
        "exact_match": float(hits.mean()),
        "exact_match_low": em_low,
        "exact_match_high": em_high,
        "token_accuracy": float(sum(right) / sum(total)),
        "token_accuracy_low": tok_low,
        "token_accuracy_high": tok_high,
        "adjacency_at_layer": float(np.mean(adjacency)),
        "adjacency_at_layer_low": adj_low,
        "adjacency_at_layer_high": adj_high,
        "adjacency_last": float(torch.cat(changes["adjacency_last"]).mean()),
        "variance_ratio_at_layer": _mean_ratio(profiles["at_layer"]),
        "variance_ratio_last": _mean_ratio(profiles["last"]),
        "perturbation": float(torch.cat(changes["perturbation"]).mean()),
        "log_norm_change": float(torch.cat(changes["log_norm_change"]).mean()),
        "n_prompts": len(hits),
    }


def intervention_table(
    model: Any,
    task: Task,
    *,
    layers: Sequence[int] | None = None,
    interventions: Sequence[str] = DEFAULT_INTERVENTIONS,
    n_prompts: int = DEFAULT_PROMPTS,
    rank: int = DEFAULT_RANK,
    seed: int = 0,
    model_name: str = "model",
    model_seed: int | None = None,
    folder: Any = None,
    progress: bool | None = None,
) -> Any:
    """Every (layer, intervention) unit on fresh held-out prompts of `task`, as a DataFrame
    with the columns of `INTERVENTION_TABLE`.

    Args:
        model: a TransformerLens model trained on `task`.
        layers: layers to intervene at (default: all, 0 .. n_layers - 1; layer l is the input
            of block l, 0 = the token embeddings).
        interventions: names from `NAMES` (default: all).
        n_prompts: test prompts (and as many fitting prompts), see `held_out_prompts`.
        rank: rank of the position subspace (and its random control).
        seed: seed of the prompts, the permutations, the random subspace and the bootstrap.
        model_name, model_seed: the model and seed columns.
        folder: an `adjpos.runs.RunFolder`: finished units are read back from it instead of
            recomputed, and each unit is marked done as it finishes (resumable).
        progress: show a progress bar over units (default: only on a terminal).

    Raises:
        ValueError: a layer out of range, unknown interventions, too few prompts, or a rank
            the position subspace cannot have.
    """
    names = check_interventions(interventions)
    n_layers = model.cfg.n_layers
    layers = list(range(n_layers)) if layers is None else list(layers)
    bad = [x for x in layers if not is_int(x) or not 0 <= x < n_layers]
    if bad or not layers:
        raise UsageError(f"layers {bad or layers} are not in [0, {n_layers - 1}]")
    held = held_out_prompts(task, n_prompts, seed=seed)
    units = [(layer, name) for layer in layers for name in names]
    rows = []
    fitted: dict[int, tuple[Tensor, Tensor]] = {}
    for layer, name in tqdm(units, desc="interventions", disable=_quiet(progress)):
        unit = f"layer{layer}-{name}"
        if folder is not None and folder.is_done(unit):
            rows.append(folder.result(unit))
            continue
        if name in ("subspace_swap", "leace_position", "leace_random") and layer not in fitted:
            fitted[layer] = fit_states(model, held.fit, layer)
        states, positions = fitted.get(layer, (None, None))
        iv = build_intervention(
            name,
            d_model=model.cfg.d_model,
            states=states,
            positions=positions,
            rank=rank,
            seed=seed,
        )
        row = {
            "model": model_name,
            "task": task.name,
            "seed": model_seed,
            "layer": layer,
            "intervention": name,
            "control": CONTROL_OF[name],
            "rank": getattr(iv, "rank", None),
            **measure_intervention(model, task, iv, layer=layer, batch=held.test, seed=seed),
        }
        if folder is not None:
            folder.mark_done(unit, row)
        rows.append(row)
    return INTERVENTION_TABLE.frame(rows)


def _mean_ratio(profiles: list[tuple[int, Tensor]]) -> float:
    """Variance ratio of each length's mean profile, averaged with the sequences as weights."""
    weights = np.array([w for w, _ in profiles], dtype=float)
    ratios = np.array([variance_ratio(p.numpy()) for _, p in profiles])
    return float((weights * ratios).sum() / weights.sum())


def _log_norm(acts: Tensor) -> Tensor:
    return acts.norm(dim=-1).clamp_min(1e-12).log()


def _quiet(progress: bool | None) -> bool | None:
    return None if progress is None else not progress
