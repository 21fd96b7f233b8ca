"""The position-curve arms (`arms`) as interventions of the runner, each set to one size.

`build_curve_change` turns one arm (`arms.CurveArm`) into a `CurveChange` set to one size of
the dose: the size of the full shift by m (`dose_targets`) on the fitting prompts' states, each
prompt length weighing as many prompts as the measured prompts have of it, the arm's parameter
matched to it (`match_arm`: bisection on `pooled_size`, within `arms.TOLERANCE`). The read-out
variant decides which positions change (`arms.changed_positions`):

- ``kept``: every prompt position before the read-out (the last prompt position); the change
  is the prompt's alone, so decoding runs the prompt once under the change and then reuses a
  KV cache (`adjpos.training.decode.predict_cached`).
- ``changed``: every prompt position, the read-out included. The answer positions (decoded
  after the prompt) keep their states: the curve is fitted on prompts, and positions beyond
  the prompt have none. So this variant too changes the prompt alone and decodes with a KV
  cache, and it differs from ``kept`` by the read-out position's own state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, no_type_check

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from adjpos.interventions.curve.arms import DEFAULT_OFFSETS, TOLERANCE, CurveArm, check_changed
from adjpos.interventions.curve.position import position_curves
from adjpos.metrics.norms import with_norms
from adjpos.types import PromptStates
from adjpos.validation import UsageError, is_int


@dataclass(frozen=True, eq=False)
class CurveChange:
    """One arm at one size, applied to the prompt states of every fitted length: each
    changed state takes c'[t] - c[t] (`arms.apply_curve`, its norm kept).

    Args:
        curves, new_curves: {prompt length L: [L, d_model]} the curve and the arm's c'.
        keep_readout: the variant it was built for (True: the read-out position is kept).
        matched: the arm, its parameter and its size on the fitting prompts.
    """

    curves: dict[int, Tensor]
    new_curves: dict[int, Tensor]
    keep_readout: bool
    matched: Matched
    site = "resid_pre"
    prompt_only = True  # the answer positions are never changed: decoding may use a KV cache

    def __call__(
        self, acts: Float[Tensor, "batch pos d_model"], readout: Any = None
    ) -> Float[Tensor, "batch pos d_model"]:
        """`acts` of a prompt (and, with the read-out changed, the answer after it, kept)."""
        if readout is None:
            raise UsageError("a position-curve arm needs the read-out position (readout_from)")
        kept = not bool(readout.any())
        if kept != self.keep_readout:
            variant = "kept" if self.keep_readout else "changed"
            raise UsageError(f"this position-curve arm was built for the read-out {variant}")
        # kept: the positions before the read-out; changed: the read-out is the last prompt
        # position, the first of `readout`
        length = acts.shape[1] + 1 if kept else int(readout.nonzero()[0]) + 1
        if length not in self.curves:
            raise UsageError(
                f"no position curve for prompts of {length} tokens; fitted: {sorted(self.curves)}"
            )
        n = min(acts.shape[1], length)
        head = apply_curve(
            acts[:, :n],
            self.curves[length][:n],
            self.new_curves[length][:n],
            self.changed(length)[:n],
        )
        return torch.cat([head, acts[:, n:]], dim=1)

    def changed(self, length: int) -> Tensor:
        """[length] the prompt positions it changes."""
        return changed_positions(length, keep_readout=self.keep_readout)


def measured_curves(prompts: PromptStates, counts: Mapping[int, int]) -> dict[int, Tensor]:
    """The position curves (`position_curves`) of the measured prompt lengths (`counts`)."""
    curves = position_curves(prompts)
    missing = sorted(set(counts) - set(curves))
    if missing:
        raise UsageError(f"no position curve fitted for prompt lengths {missing}")
    return {length: curves[length] for length in sorted(counts)}


def build_curve_change(
    prompts: PromptStates,
    counts: Mapping[int, int],
    arm: CurveArm,
    *,
    size: int,
    readout: str,
    sizes_on: PromptStates | None = None,
) -> CurveChange:
    """`arm` matched to the size of the full shift by `size` (see the module doc).

    Args:
        prompts: the fitting prompts' states at the layer (`fit_prompt_states`).
        counts: {prompt length: measured prompts}: the lengths changed and their weights.
        readout: "kept" or "changed" (which positions change).
        sizes_on: the states whose change sizes are matched (default: `prompts`; on text the
            measured windows' own, where a curve fitted on a few windows would change its
            own fitting states more than others).
    """
    keep = readout == "kept"
    curves = measured_curves(prompts, counts)
    options = {"keep_readout": keep, "counts": counts}
    sized = prompts if sizes_on is None else sizes_on
    target = dose_targets(curves, sized, offsets=[size], **options)[size]
    if not target > 0:
        raise UsageError(
            "the position curve is zero here (each fitting state is its token's mean state: too "
            "few prompts or windows, or tokens that never repeat), so no arm can be sized"
        )
    matched = match_arm(arm, target, curves, sized, **options)
    new = {
        length: arm.new_curve(
            curve,
            matched.parameter,
            changed_positions(length, keep_readout=keep),
            prompts[length][0].double(),
        )
        for length, curve in curves.items()
    }
    return CurveChange(curves, new, keep, matched)


def changed_positions(length: int, *, keep_readout: bool = True) -> Bool[Tensor, " pos"]:
    """The positions a change touches on a prompt of `length` tokens: all but the last (the
    read-out position) with `keep_readout`, else all."""
    if not is_int(length) or length < 1:
        raise UsageError(f"length must be an int >= 1, got {length!r}")
    return torch.arange(length) < length - 1 if keep_readout else torch.ones(length, dtype=bool)


def apply_curve(
    states: Float[Tensor, "*batch pos d_model"],
    curve: Float[Tensor, "pos d_model"],
    new_curve: Float[Tensor, "pos d_model"],
    changed: Bool[Tensor, " pos"],
    *,
    keep_norm: bool = True,
) -> Float[Tensor, "*batch pos d_model"]:
    """The states with c'[t] - c[t] added at the changed positions (each rescaled to its own
    norm with `keep_norm`); the other positions pass unchanged."""
    changed = check_changed(changed, curve.shape[0]).to(states.device)
    delta = (new_curve - curve).to(device=states.device, dtype=states.dtype)
    moved = states + delta
    if keep_norm:
        moved = with_norms(moved, states.norm(dim=-1, keepdim=True))
    return torch.where(changed[:, None], moved, states)


def change_size(
    states: Float[Tensor, "*batch pos d_model"],
    after: Float[Tensor, "*batch pos d_model"],
    changed: Bool[Tensor, " pos"],
) -> Float[Tensor, ""]:
    """Mean ||h' - h|| / ||h|| over the changed states (a zero state counts 0)."""
    sizes = (after - states).norm(dim=-1) / states.norm(dim=-1).clamp_min(1e-12)
    return sizes[..., changed.to(sizes.device)].mean()


def pooled_size(
    arm: CurveArm,
    parameter: float,
    curves: dict[int, Tensor],
    prompts: PromptStates,
    *,
    keep_readout: bool = True,
    keep_norm: bool = True,
    counts: Mapping[int, int] | None = None,
) -> float:
    """`change_size` of `arm` at `parameter` over the prompt states of every length in
    `curves`, each changed state weighing the same; with `counts` ({length: prompts}, e.g.
    the measured prompts'), each length weighing as that many prompts instead of its own."""
    total, count = 0.0, 0
    for length, curve in curves.items():
        states = prompts[length][0].double()
        changed = changed_positions(length, keep_readout=keep_readout)
        new = arm.new_curve(curve.double(), parameter, changed, states)
        after = apply_curve(states, curve.double(), new, changed, keep_norm=keep_norm)
        n = (states.shape[0] if counts is None else counts[length]) * int(changed.sum())
        total += float(change_size(states, after, changed)) * n
        count += n
    if not count:
        raise UsageError("no changed states: every length has no position to change")
    return total / count


@dataclass(frozen=True)
class Matched:
    """An arm set to a target size: its parameter, the size it reaches, and whether that is
    within `TOLERANCE` of the target (False: the arm cannot reach it, e.g. a shift asked for
    more than its full size)."""

    arm: CurveArm
    parameter: float
    size: float
    target: float
    matched: bool


def match_parameter(
    size_of: Callable[[float], float],
    target: float,
    upper: float | None,
    *,
    tolerance: float = TOLERANCE,
) -> tuple[float, float]:
    """The parameter in [0, upper] whose size (`size_of`, increasing) is `target`, by
    bisection, and the size it gives; `upper` None: doubled until the size passes the target.
    Returns `upper` and its size when even that falls short."""
    if not target > 0:
        raise UsageError(f"a target size must be > 0, got {target!r}")
    if upper is None:
        upper = 1.0
        while size_of(upper) < target and upper < 1e6:
            upper *= 2
    low, high = 0.0, float(upper)
    size = size_of(high)
    if size < target:
        return high, size
    best = (high, size)
    for _ in range(60):
        if abs(best[1] / target - 1) <= tolerance / 10:
            break
        middle = (low + high) / 2
        size = size_of(middle)
        if abs(size / target - 1) < abs(best[1] / target - 1):
            best = (middle, size)
        low, high = (middle, high) if size < target else (low, middle)
    return best


def match_arm(
    arm: CurveArm,
    target: float,
    curves: dict[int, Tensor],
    prompts: PromptStates,
    *,
    keep_readout: bool = True,
    keep_norm: bool = True,
    counts: Mapping[int, int] | None = None,
    tolerance: float = TOLERANCE,
) -> Matched:
    """`arm` with its parameter set so that its pooled size (`pooled_size`) is `target`."""
    options = {"keep_readout": keep_readout, "keep_norm": keep_norm, "counts": counts}

    @no_type_check  # made at every call: kept out of the tests' type checker
    def size_of(parameter: float) -> float:
        return pooled_size(arm, parameter, curves, prompts, **options)

    parameter, size = match_parameter(size_of, target, arm.kind.upper, tolerance=tolerance)
    return Matched(arm, parameter, size, target, abs(size / target - 1) <= tolerance)


def dose_targets(
    curves: dict[int, Tensor],
    prompts: PromptStates,
    *,
    offsets: Iterable[int] = DEFAULT_OFFSETS,
    keep_readout: bool = True,
    keep_norm: bool = True,
    counts: Mapping[int, int] | None = None,
) -> dict[int, float]:
    """{k: size} for each shift magnitude k: the smaller pooled size of the full shifts by +k
    and -k (the sizes of a dose, see the module doc)."""
    targets = {}
    for k in offsets:
        if not is_int(k) or k < 1:
            raise UsageError(f"shift magnitudes must be ints >= 1, got {k!r}")
        targets[k] = min(
            pooled_size(
                CurveArm("shift", sign * k),
                1.0,
                curves,
                prompts,
                keep_readout=keep_readout,
                keep_norm=keep_norm,
                counts=counts,
            )
            for sign in (1, -1)
        )
    return targets
