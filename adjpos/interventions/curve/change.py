"""The position-curve arms (`arms`) as interventions of the runner, each set to one size.

`build_curve_change` turns one arm (`arms.CurveArm`) into a `CurveChange` set to one size of
the dose at every prompt length: at length L, the size of the full interior shift by m
(`dose_targets`, the smaller of +m and -m: a shift is whole, or the other sign blended down to
it; at a fraction m < 1, m times that of the shifts by 1, both blended) on the fitting prompts'
states of that length, every other arm's parameter matched to it
there (`match_arm`: bisection on `length_size`, within `arms.TOLERANCE`). A whole arm
(``edges``) is built at its largest parameter and its control matched to its size at each
length instead. A size is the mean relative change ||h' - h|| / ||h|| of the states at the
positions the arm changes, each fitting prompt with its own runs (`runs_of`): addition's
operands, for one, split a prompt length differently from prompt to prompt.

The arms act on the prompt before its read-out position (the read-out kept, which no run
reaches), so decoding runs the prompt once under the change and then reuses a KV cache
(`adjpos.training.decode.predict_cached`). A `CurveChange` is told the runs of the prompts it
changes (`CurveChange.at`): prompts are measured in groups that share their runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from adjpos.interventions.curve.arms import TOLERANCE, CurveArm, Runs, changed_positions
from adjpos.interventions.curve.position import position_curves
from adjpos.interventions.spec import check_doses, shift_magnitude
from adjpos.metrics.norms import relative_change, with_norms
from adjpos.types import PromptStates
from adjpos.validation import UsageError

# Which runs a prompt has, from its tokens (a [L] row): `adjpos.tasks.Task.runs` on a task.
RunsOf = Callable[[Tensor], Runs]


@dataclass(frozen=True, eq=False)
class CurveChange:
    """One arm at one size, for prompts of every fitted length: each changed state takes
    c'[t] - c[t] (`apply_curve`, its norm kept), c' built for the runs of the prompts at hand
    (`at`).

    Args:
        arm: the arm.
        curves: {prompt length L: [L, d_model]} the curve.
        matched: {L: `Matched`} the arm's parameter and size at each length.
        states: {L: [n, L, d_model]} the fitting states (the random controls draw from their
            covariance).
        counts: {L: measured prompts}, the weights of the pooled numbers.
    """

    arm: CurveArm
    curves: dict[int, Tensor]
    matched: dict[int, Matched]
    states: dict[int, Tensor] = field(repr=False)
    counts: Mapping[int, int] = field(default_factory=dict, repr=False)
    site = "resid_pre"
    prompt_only = True  # the answer positions are never changed: decoding may use a KV cache
    _built: dict[tuple[int, Runs], Tensor] = field(default_factory=dict, repr=False)

    def new_curve(self, length: int, runs: Runs) -> Tensor:
        """[length, d_model] the arm's c' for prompts of `length` with `runs`."""
        if length not in self.curves:
            raise UsageError(
                f"no position curve for prompts of {length} tokens; fitted: {sorted(self.curves)}"
            )
        key = (length, tuple(runs))
        if key not in self._built:
            parameter = self.matched[length].parameter
            curve, states = self.curves[length], self.states[length]
            self._built[key] = self.arm.new_curve(curve, parameter, key[1], states)
        return self._built[key]

    def changed(self, length: int, runs: Runs) -> Tensor:
        """[length] the prompt positions it changes."""
        return changed_positions(self.arm.kind, runs, length)

    def at(self, runs: Runs) -> AtRuns:
        """This change for prompts with `runs`, as an intervention."""
        return AtRuns(self, tuple(runs))

    @property
    def target(self) -> float:
        """The target size, pooled over the lengths (each weighing as its measured prompts)."""
        return self._pooled("target")

    @property
    def parameter(self) -> float:
        """The parameter, pooled as `target`."""
        return self._pooled("parameter")

    @property
    def size_errors(self) -> list[float]:
        """|size / target - 1| at each length it reaches (`reaches`)."""
        return [abs(m.size / m.target - 1) for _, m in self._changing()]

    def reaches(self, length: int) -> bool:
        """Whether it reaches its size at `length` (within `arms.TOLERANCE`; True where its
        dose changes nothing): not a scatter of runs too short to have an interior
        (`Matched.absent`, left unchanged) nor one whose fullest change falls short. It is
        compared on the prompts of the lengths it reaches alone (`reached_prompts`)."""
        return length not in self.matched or self.matched[length].reached

    def _changing(self) -> list[tuple[int, Matched]]:
        """The lengths it reaches where its dose changes something, and their `Matched`."""
        return [(n, m) for n, m in self.matched.items() if m.target > 0 and m.reached]

    def _pooled(self, name: str) -> float:
        """The mean of the `Matched` field `name` over `_changing`, each length weighing as
        its measured prompts (`counts`; 1 each where none are given)."""
        pooled = [(getattr(m, name), self.counts.get(n, 1)) for n, m in self._changing()]
        total = sum(w for _, w in pooled)
        return sum(v * w for v, w in pooled) / total if total else 0.0

    def __call__(self, acts: Tensor, readout: Any = None) -> Tensor:
        raise UsageError(
            "a position-curve arm changes prompts of known runs: apply change.at(runs)"
        )


@dataclass(frozen=True)
class AtRuns:
    """A `CurveChange` on prompts that share their runs: called on the states of the positions
    before the read-out (``intervene(..., keep_readout=True)``)."""

    change: CurveChange
    runs: Runs
    site = "resid_pre"
    prompt_only = True

    def __call__(
        self, acts: Float[Tensor, "batch pos d_model"], readout: Any = None
    ) -> Float[Tensor, "batch pos d_model"]:
        if readout is None or bool(readout.any()):
            raise UsageError(
                "a position-curve arm changes the prompt before its read-out, the read-out kept "
                "(intervene(..., keep_readout=True))"
            )
        length = acts.shape[1] + 1
        new = self.change.new_curve(length, self.runs)
        changed = self.change.changed(length, self.runs)
        return apply_curve(acts, self.change.curves[length][:-1], new[:-1], changed[:-1])


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
    size: int | float,
    runs_of: RunsOf,
    sizes_on: PromptStates | None = None,
) -> CurveChange:
    """`arm` matched at each length to the size of the full interior shift by `size` (a
    whole arm at its largest parameter; its control to its size; see the module doc).

    Args:
        prompts: the fitting prompts' states and tokens at the layer (`fit_prompt_states`).
        counts: {prompt length: measured prompts}: the lengths changed and their weights.
        runs_of: the runs of a prompt from its tokens.
        sizes_on: the states whose change sizes are matched (default: `prompts`; on text the
            measured windows' own, where a curve fitted on a few windows would change its
            own fitting states more than others).
    """
    curves = measured_curves(prompts, counts)
    sized = prompts if sizes_on is None else sizes_on
    states = {n: prompts[n][0].double() for n in curves}
    kind, matched = arm.kind, {}
    for length, curve in curves.items():
        layouts = _layouts(sized[length], runs_of)
        if kind.whole or kind.sized_to is not None:
            whole = arm if kind.whole else CurveArm(kind.sized_to, seed=arm.seed)
            target = length_size(whole, 1.0, curve, layouts, states[length])
        else:
            target = dose_targets(curve, layouts, offsets=[size])[size]
        if not target > 0:
            matched[length] = Matched(arm, 0.0, 0.0, 0.0, True)
            continue
        if kind.whole:
            matched[length] = Matched(arm, float(kind.upper), target, target, True)
            continue
        if kind.upper is not None and not length_size(arm, kind.upper, curve, layouts) > 0:
            # nothing it can change here (a scatter of runs too short to have an interior)
            matched[length] = Matched(arm, 0.0, 0.0, target, False, absent=True)
            continue
        matched[length] = match_arm(arm, target, curve, layouts, states[length])
    if not any(m.target > 0 for m in matched.values()):
        raise UsageError(
            "the position curve is zero here (each fitting state is its token's mean state: too "
            "few prompts or windows, or tokens that never repeat), or no run has room for the "
            "shift, so no arm can be sized"
        )
    return CurveChange(arm, curves, matched, states, counts)


def _layouts(sized: tuple[Tensor, Tensor], runs_of: RunsOf) -> dict[Runs, Tensor]:
    """{runs: [n, L, d_model]} the states of one length grouped by their prompts' runs."""
    states, tokens = sized
    rows: dict[Runs, list[int]] = {}
    for i, row in enumerate(tokens):
        rows.setdefault(tuple(runs_of(row)), []).append(i)
    return {runs: states[index].double() for runs, index in rows.items()}


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
    if changed.dtype != torch.bool or changed.shape != (curve.shape[0],):
        raise UsageError(f"changed must be a boolean mask of shape ({curve.shape[0]},)")
    moved = states + (new_curve - curve).to(device=states.device, dtype=states.dtype)
    if keep_norm:
        moved = with_norms(moved, states.norm(dim=-1, keepdim=True))
    return torch.where(changed.to(states.device)[:, None], moved, states)


def length_size(
    arm: CurveArm,
    parameter: float,
    curve: Tensor,
    layouts: Mapping[Runs, Tensor],
    states: Tensor | None = None,
) -> float:
    """Mean ||h' - h|| / ||h|| over the changed states of `arm` at `parameter`, over the
    states of one prompt length grouped by their runs (`layouts`: {runs: [n, L, d_model]}),
    each changed state weighing the same (`states`: the fitting states a random control draws
    from). 0 where nothing changes."""
    total, count = 0.0, 0
    for runs, group in layouts.items():
        changed = changed_positions(arm.kind, runs, curve.shape[0])
        n = group.shape[0] * int(changed.sum())
        if not n:
            continue
        new = arm.new_curve(curve.double(), parameter, runs, states)
        after = apply_curve(group, curve.double(), new, changed)
        total += float(relative_change(group[:, changed], after[:, changed])) * n
        count += n
    return total / count if count else 0.0


@dataclass(frozen=True)
class Matched:
    """An arm set to a target size at one length: its parameter, the size it reaches, and
    whether that is within `TOLERANCE` of the target (False: the arm cannot reach it, e.g. a
    shift asked for more than its full size; `absent`: it can change nothing at this length,
    left as it is)."""

    arm: CurveArm
    parameter: float
    size: float
    target: float
    matched: bool
    absent: bool = False

    @property
    def reached(self) -> bool:
        """It changes something at this length, by the target size."""
        return self.matched and not self.absent


def reached_prompts(built: Iterable[CurveChange], lengths: Iterable[int]) -> list[bool]:
    """For each measured prompt (of length `lengths`), whether every draw in `built` reaches
    its size at its length (`CurveChange.reaches`): the prompts its comparisons read."""
    built = list(built)
    return [all(change.reaches(n) for change in built) for n in lengths]


def match_parameter(
    size_of: Callable[[float], float], target: float, upper: float | None
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
        if abs(best[1] / target - 1) <= TOLERANCE / 10:
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
    curve: Tensor,
    layouts: Mapping[Runs, Tensor],
    states: Tensor | None = None,
) -> Matched:
    """`arm` with its parameter set so that its size at one length (`length_size`) is
    `target`."""
    parameter, size = match_parameter(
        lambda p: length_size(arm, p, curve, layouts, states), target, arm.kind.upper
    )
    return Matched(arm, parameter, size, target, abs(size / target - 1) <= TOLERANCE)


def dose_targets(
    curve: Tensor, layouts: Mapping[Runs, Tensor], *, offsets: Iterable[int | float]
) -> dict[int | float, float]:
    """{m: size} at one prompt length for each dose m: the smaller size of the full interior
    shifts by +m and -m (the sizes of a dose, see the module doc); for a fraction m < 1, m
    times that of the shifts by 1."""
    targets = {}
    for m in check_doses(list(offsets)):
        k = shift_magnitude(m)
        full = min(length_size(CurveArm("shift", s * k), 1.0, curve, layouts) for s in (1, -1))
        targets[m] = m / k * full
    return targets
