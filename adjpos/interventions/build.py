"""The interventions by name, what each is compared with, and building them: the held-out
prompts they are measured on and the states the fitted ones are fitted on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from adjpos.capture import capture_residuals
from adjpos.interventions.hooks import NoIntervention, UniformAttention
from adjpos.interventions.norms import (
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
)
from adjpos.interventions.position_mean import MIN_FIT, PositionMeanSwap, PromptStates
from adjpos.interventions.subspaces import (
    LeaceErase,
    SubspaceErase,
    SubspaceSwap,
    variance_share,
)
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


# Fitted on the states of held-out prompts (`fit_states`).
FITTED_ON_STATES = (
    "subspace_swap",
    "subspace_swap_random",
    "leace_position",
    "erase_random",
    "leace_random",
)


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
