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
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
    Stacked,
    SubspaceErase,
    SubspaceSwap,
    UniformAttention,
    intervene,
    variance_share,
)
from adjpos.interventions.position_mean import MIN_FIT, PositionMeanSwap, PromptStates
from adjpos.metrics import adjacency_probability, cosine_matrix, position_variance
from adjpos.stats import bootstrap_interval, paired_difference, variance_ratio
from adjpos.tables import Table
from adjpos.tasks import Task, TaskBatch
from adjpos.validation import UsageError, is_int

# Each intervention and the control it is compared with: the norm permutations with the
# rescaling by the very same ratios at random places (equal size, matched at the read-out
# positions); the position subspace with random subspaces of its rank holding as much of the
# states' variance; LEACE of position with random subspaces of its rank erased, changing the
# states as much. Uniform attention has no matched control: it is compared with the baseline.
# Also measured: `norm_common_scale(_mirrored)` (one factor of the same mean size for every
# norm), `norm_permute_control` (the norm of the same position in another sequence) and
# `leace_random` (LEACE of shuffled labels: as many directions, a smaller change).
# The position curve's swap (neighbours scattered) is compared with its mirror (every
# distance between positions kept), the states changed as much.
CONTROL_OF = {
    "none": "none",
    "norm_permute": "norm_scale_control",
    "norm_permute_mirrored": "norm_scale_control_mirrored",
    "norm_scale_control": "none",
    "norm_scale_control_mirrored": "none",
    "norm_common_scale": "none",
    "norm_common_scale_mirrored": "none",
    "norm_permute_control": "none",
    "subspace_swap": "subspace_swap_random",
    "subspace_swap_random": "none",
    "leace_position": "erase_random",
    "erase_random": "none",
    "leace_random": "none",
    "uniform_attention": "none",
    "position_mean_swap": "position_mean_mirror",
    "position_mean_mirror": "none",
}
NAMES = tuple(CONTROL_OF)
DEFAULT_INTERVENTIONS = NAMES
# Controls measured as distributions: `control_draws` random draws each (the row holds their
# mean; `percentile` places the tested intervention among them).
DRAWN = (
    "norm_scale_control",
    "norm_scale_control_mirrored",
    "subspace_swap_random",
    "erase_random",
)
# The read-out positions (the last prompt position and every answer position): changed like
# the others, or kept (left untouched, so only the states the answer is computed from change).
READOUTS = ("kept", "changed")
# Defined on the prompt alone, with the read-out kept: measured in the "kept" variant only.
KEPT_ONLY = ("position_mean_swap", "position_mean_mirror")
DEFAULT_READOUTS = ("kept",)  # the variant the study's verdicts use
# What each intervention moves (the carrier it tests), for tables and the report.
CARRIER = {
    "norm_permute": "norm (cosines kept)",
    "norm_permute_mirrored": "norm, mirrored (cosines kept)",
    "subspace_swap": "position subspace (norms kept)",
    "leace_position": "all linear position information",
    "uniform_attention": "attention pattern",
    "position_mean_swap": "adjacency of the position curve (tokens, norms kept)",
}
DEFAULT_RANK = 8
DEFAULT_PROMPTS = 200
DEFAULT_DRAWS = 20

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


def fit_prompt_states(
    model: Any, task: Task, held: HeldOut, layer: int, *, seed: int = 0
) -> PromptStates:
    """The states entering block `layer` at every position of fitting prompts (the prompts
    alone, no answers), with their tokens, by prompt length (for `PositionMeanSwap`): the
    prompts of ``held.fit``, and for each prompt length of ``held.test`` with fewer than
    `MIN_FIT` of them, more prompts of that length that are not test prompts (from the test
    split, then, for a length too rare there, the train split: these prompts only fit the
    curve, nothing is measured on them).

    Raises:
        ValueError: some test prompt length still has fewer than `MIN_FIT` fitting prompts.
    """
    by_length: dict[int, list[str]] = defaultdict(list)
    for prompt in held.fit.prompts:
        by_length[len(task.encode(prompt))].append(prompt)
    need = {len(task.encode(p)) for p in held.test.prompts}
    taken = set(held.test.prompts) | set(held.fit.prompts)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + 11)
    for split in ("test", "train"):  # a rare length may need the train split's prompts
        for _ in range(10):
            short = {n for n in need if len(by_length[n]) < MIN_FIT}
            if not short:
                break
            for prompt in task.draw_prompts(1000, generator=gen, split=split):
                n = len(task.encode(prompt))
                if n in short and prompt not in taken and len(by_length[n]) < MIN_FIT:
                    by_length[n].append(prompt)
                    taken.add(prompt)
    short = sorted(n for n in need if len(by_length[n]) < MIN_FIT)
    if short:
        raise UsageError(
            f"fewer than {MIN_FIT} fitting prompts of length {short} for the position curve"
        )
    out = {}
    for n, prompts in sorted(by_length.items()):
        tokens = torch.stack([task.encode(p) for p in prompts])
        states = capture_residuals(model, tokens, layers=[layer], progress=False)[0]
        out[n] = (states.cpu(), tokens)
    return out


def build_intervention(
    name: str,
    *,
    d_model: int,
    states: Tensor | None = None,
    positions: Tensor | None = None,
    rank: int = DEFAULT_RANK,
    seed: int = 0,
    draw: int = 0,
    matched: Any = None,
    prompts: PromptStates | None = None,
) -> Any:
    """The intervention called `name` (one of `NAMES`), fitted on `states` and their
    `positions` where it needs fitting (subspace_swap, leace_position, leace_random) or
    matching (subspace_swap_random to the variance share of `matched`, a fitted
    `SubspaceSwap`; erase_random to the change size of `matched`, a fitted `LeaceErase`; each
    built fresh when not given). The position-curve interventions are fitted on `prompts`
    (`fit_prompt_states`): position_mean_mirror, and position_mean_swap matched in change
    size to the mirror. `draw` picks one draw of a random control.

    Raises:
        ValueError: an unknown name, or a fitted or matched one without its states.
    """
    simple = {
        "none": NoIntervention,
        "norm_permute": lambda: NormPermute(seed=seed),
        "norm_permute_mirrored": lambda: NormPermute(seed=seed, mirrored=True),
        "norm_permute_control": NormPermuteControl,
        "norm_scale_control": lambda: NormScaleControl(seed=seed, draw=draw),
        "norm_scale_control_mirrored": lambda: NormScaleControl(
            seed=seed, mirrored=True, draw=draw
        ),
        "norm_common_scale": lambda: NormCommonScale(seed=seed),
        "norm_common_scale_mirrored": lambda: NormCommonScale(seed=seed, mirrored=True),
        "uniform_attention": UniformAttention,
    }
    if name in simple:
        return simple[name]()
    if name not in NAMES:
        raise UsageError(f"unknown intervention {name!r}; choose from {list(NAMES)}")
    if name in KEPT_ONLY:
        if prompts is None:
            raise UsageError(f"{name} is fitted: pass the prompt states (fit_prompt_states)")
        if name == "position_mean_swap":
            return PositionMeanSwap.fit(prompts, seed=seed)
        return PositionMeanSwap.mirror(prompts)
    if states is None or positions is None:
        raise UsageError(f"{name} is fitted: pass the states and positions to fit it on")
    if name == "subspace_swap":
        return SubspaceSwap.fit(states, positions, rank=rank, seed=seed)
    if name == "subspace_swap_random":
        swap = matched or SubspaceSwap.fit(states, positions, rank=rank, seed=seed)
        share = variance_share(swap.basis, states)
        return SubspaceSwap.random_subspace(
            d_model, rank=rank, seed=seed, draw=draw, states=states, share=share
        )
    if name == "erase_random":
        eraser = matched or LeaceErase.fit(states, positions, seed=seed)
        return SubspaceErase.matched(states, eraser, draw=draw)
    return LeaceErase.fit(states, positions, shuffled=name == "leace_random", seed=seed)


# The fitted intervention each matched control is matched to.
MATCHED_TO = {"subspace_swap_random": "subspace_swap", "erase_random": "leace_position"}


def check_interventions(names: Sequence[str]) -> list[str]:
    """`names`, checked: known and not repeated."""
    names = list(names)
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names or len(set(names)) < len(names):
        problem = f"unknown {unknown}" if unknown else "none given or repeated"
        raise UsageError(f"interventions: {problem}; choose from {list(NAMES)}")
    return names


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

    Returns a dict of the measurement columns of `INTERVENTION_TABLE`, and ``hits`` (each
    prompt's exact match, in the order of `batch`, for paired comparisons):
    - exact_match: greedy decoding with the hook active at every step, and its 95% interval
      (with the read-out kept, the change is the prompt's alone, so a HookedTransformer
      decodes it once with a KV cache: `adjpos.training.decode.predict_cached`);
    - token_accuracy: answer tokens (and the EOS) right under teacher forcing, pooled;
    - adjacency_at_layer: the adjacency score (ties counted half, chance 0.5) of the states
      the intervention writes (block `layer`'s input; for an attention-pattern intervention,
      block `layer`'s output), whole sequences, teacher-forced; adjacency_last: at the last
      layer;
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
    cached = kv_cache and keep and _is_hooked(model)
    for start in sorted(set(starts)):
        rows = [i for i, s in enumerate(starts) if s == start]
        prompts = [batch.prompts[i] for i in rows] * n_draws

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
            acc["adjacency"] += adjacency_probability(cosine_matrix(after), ties="half").tolist()
            change = (after - before).norm(dim=-1) / before.norm(dim=-1).clamp_min(1e-12)
            acc["perturbation"].append(change.flatten())
            acc["log_norm_change"].append((_log_norm(after) - _log_norm(before)).abs().flatten())
            acc["at_layer"].append((len(rows), position_variance(after).mean(dim=0)))
            acc["last"].append((len(rows), position_variance(final).mean(dim=0)))
            acc["adjacency_last"].append(adjacency_probability(cosine_matrix(final), ties="half"))
    sized = sum(n for _, n in record)
    return [
        _unit_row(draw_hits, acc, sum(t for t, _ in record) / sized if sized else None, seed)
        for draw_hits, acc in zip(hits, per_draw, strict=True)
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
        if name in _ON_STATES and layer not in fitted:
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


# Fitted on the states of held-out prompts (`fit_states`).
_ON_STATES = (
    "subspace_swap",
    "subspace_swap_random",
    "leace_position",
    "erase_random",
    "leace_random",
)


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


def _quiet(progress: bool | None) -> bool | None:
    return None if progress is None else not progress
