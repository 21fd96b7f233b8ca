"""Changes of the position curve that each keep or break one property, matched in size.

The position curve c[t] of one prompt length (`position_curves`: the position part of the
states after removing each token's mean state, fitted on other prompts of that length) is
changed into c'[t], and every changed state takes the difference:

    h'[b, t] = h[b, t] + c'[t] - c[t]    at the positions `changed` selects,

rescaled to ||h[b, t]|| with ``keep_norm`` (the norm is a carrier of its own). `changed` is a
boolean mask over positions: the prompt without its read-out position (`changed_positions`
with ``keep_readout=True``) or every position. The arms, each with one free parameter that
sets its size (0 leaves the curve as it is):

- ``shift`` (offset k, parameter: the blend, at most 1): c'[t] = c[t] + blend (c[t - k] - c[t]),
  t - k clamped to 0 .. pos - 1. At blend 1 every changed state carries the curve of position
  t - k: the distance between the curves of neighbours t, t + 1 is that of t - k, t - k + 1
  (every neighbour relation kept, moved by k), except where t - k is clamped.
- ``rotate`` (parameter: the angle, at most pi): c'[t] = Q c[t], Q turning a seeded pairing of
  planes of the curve's top-r principal subspace (r covering `SHARE` of its sum of squares,
  at least 2) by the angle and leaving the rest of d_model alone: every pairwise distance
  and every norm of the curve is kept.
- ``scatter`` (parameter: the fraction, at most 1): c'[t] = c[t] + fraction (c[pi(t)] - c[t]),
  pi a seeded permutation of the changed positions under which no two neighbours stay
  neighbours and none stays put (where the count allows): locality broken, fully at 1.
- ``remove`` (parameter: alpha, at most 1): c'[t] = (1 - alpha) c[t] + alpha m, m the mean
  of the curve over the changed positions.
- ``random`` (the control; parameter: the scale): c'[t] = c[t] + scale r[t], r a random curve
  of the curve's norm profile (||r[t]|| = ||c[t]||) whose directions are drawn independently
  per position from a Gaussian with the states' covariance (variance-matched): a change of
  the same size that has nothing to do with the curve.

The size of a change is the mean relative change ||h' - h|| / ||h|| of the changed states
(`change_size`); `match_parameter` finds the parameter that gives a target size, pooled over
the prompt lengths, within `TOLERANCE`. `dose_targets` proposes the sizes: those of the full
shifts (the smaller of +k and -k for each magnitude k), so at each size a shift is exactly a
shift (the other sign blended down to it) and every other arm is matched to it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, no_type_check

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from adjpos.interventions.hooks import with_norms
from adjpos.interventions.position_curve import PromptStates
from adjpos.seeds import derived_generator
from adjpos.validation import UsageError, is_int

ARMS = ("shift", "rotate", "scatter", "remove", "random")
# The largest parameter of each arm (None: unbounded, the random control's scale).
UPPER = {"shift": 1.0, "rotate": math.pi, "scatter": 1.0, "remove": 1.0, "random": None}
SHARE = 0.99  # the rotation's subspace covers this share of the curve's sum of squares
TOLERANCE = 0.05  # matched sizes agree within this relative difference
DEFAULT_OFFSETS = (1, 2, 3)  # shift magnitudes whose full sizes set the dose
_TRIES = 500  # permutations drawn for a scatter, the first that keeps no neighbour taken


@dataclass(frozen=True)
class CurveArm:
    """One arm of the family (see the module doc): which, its offset (shift only), and which
    seeded draw (rotate, scatter, random).

    Raises:
        ValueError: an unknown arm, a shift without a nonzero int offset, an offset on
            another arm, or a negative draw or seed.
    """

    arm: str
    offset: int | None = None
    draw: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise UsageError(f"unknown curve arm {self.arm!r}; choose from {list(ARMS)}")
        if (self.arm == "shift") != (self.offset is not None):
            raise UsageError("a shift needs an offset k (and only a shift takes one)")
        if self.offset is not None and (not is_int(self.offset) or self.offset == 0):
            raise UsageError(f"the shift's offset must be a nonzero int, got {self.offset!r}")
        for name in ("draw", "seed"):
            if not is_int(getattr(self, name)) or getattr(self, name) < 0:
                raise UsageError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")

    @property
    def label(self) -> str:
        """e.g. ``position_shift+1``, ``position_rotate``, ``position_random``."""
        return f"position_{self.arm}" + (f"{self.offset:+d}" if self.arm == "shift" else "")

    def new_curve(
        self,
        curve: Float[Tensor, "pos d_model"],
        parameter: float,
        changed: Bool[Tensor, " pos"],
        states: Float[Tensor, "n pos d_model"] | None = None,
    ) -> Float[Tensor, "pos d_model"]:
        """c' of this arm at `parameter` (kept positions keep c; `states`: the fitting states
        whose covariance the random control draws from, needed by it alone)."""
        _check_parameter(self.arm, parameter)
        changed = _check_changed(changed, curve.shape[0])
        target = _target(self, curve, changed, states)
        moved = curve + parameter * (target - curve)
        if self.arm == "rotate":
            moved = curve @ _plane_rotation(curve, parameter, self.seed, self.draw).T
        return torch.where(changed[:, None], moved, curve)


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
    changed = _check_changed(changed, curve.shape[0]).to(states.device)
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

    parameter, size = match_parameter(size_of, target, UPPER[arm.arm], tolerance=tolerance)
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


@functools.lru_cache(maxsize=1024)  # the matching asks for the same order many times
def scattering_order(n: int, *, seed: int, draw: int) -> torch.Tensor:
    """A seeded permutation of range(n) under which no two neighbours stay neighbours and no
    position stays in place: the first of up to `_TRIES` draws that keeps none, else the one
    that keeps fewest (not to be changed in place: it is cached)."""
    gen = derived_generator(seed, "curve_scatter", n, draw)
    best, fewest = torch.arange(n), None
    for _ in range(_TRIES):
        perm = torch.randperm(n, generator=gen)
        kept = int(((perm[1:] - perm[:-1]).abs() == 1).sum() + (perm == torch.arange(n)).sum())
        if fewest is None or kept < fewest:
            best, fewest = perm, kept
        if kept == 0:
            break
    return best


def subspace_rank(curve: Float[Tensor, "pos d_model"], share: float = SHARE) -> int:
    """The fewest top principal directions of `curve` (uncentred: it is centred over
    positions already) whose squares cover `share` of its sum of squares; at least 2 (a plane
    to turn), at most min(pos, d_model) and d_model."""
    values = torch.linalg.svdvals(curve.double())
    squares = values.square()
    cover = squares.cumsum(0) / squares.sum().clamp_min(1e-300)
    rank = int((cover < share - 1e-12).sum()) + 1
    return min(max(rank, 2), curve.shape[1])


def _target(arm: CurveArm, curve: Tensor, changed: Tensor, states: Tensor | None) -> Tensor:
    """The curve at parameter 1 (for the linear arms; the rotation is built apart)."""
    pos = curve.shape[0]
    if arm.arm == "shift":
        return curve[(torch.arange(pos) - arm.offset).clamp(0, pos - 1)]
    if arm.arm == "scatter":
        index = changed.nonzero().flatten()
        order = scattering_order(len(index), seed=arm.seed, draw=arm.draw)
        source = torch.arange(pos)
        source[index] = index[order]
        return curve[source]
    if arm.arm == "remove":
        return curve[changed].mean(dim=0).expand_as(curve)
    if arm.arm == "random":
        return curve + _random_curve(curve, states, arm.seed, arm.draw)
    return curve


def _random_curve(curve: Tensor, states: Tensor | None, seed: int, draw: int) -> Tensor:
    """A random curve of `curve`'s norm profile, each position's direction drawn from a
    Gaussian with the covariance of `states` (a random combination of the centred states)."""
    if states is None:
        raise UsageError("the random control draws from the states' covariance: pass states")
    flat = states.reshape(-1, states.shape[-1]).to(curve.dtype)
    centred = flat - flat.mean(dim=0)
    gen = derived_generator(seed, "curve_random", draw)
    weights = torch.randn(curve.shape[0], len(flat), generator=gen, dtype=curve.dtype)
    directions = weights @ centred
    unit = directions / directions.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return unit * curve.norm(dim=-1, keepdim=True)


def _plane_rotation(curve: Tensor, angle: float, seed: int, draw: int) -> Tensor:
    """[d, d] orthogonal Q: a seeded orthonormal basis of the curve's top-r subspace, paired
    into planes, each turned by `angle`; the identity on the rest."""
    d = curve.shape[1]
    rank = subspace_rank(curve)
    _, _, vh = torch.linalg.svd(curve.double(), full_matrices=True)
    gen = derived_generator(seed, "curve_rotate", draw)
    mix, _ = torch.linalg.qr(torch.randn(rank, rank, generator=gen, dtype=torch.float64))
    basis = (mix.T @ vh[:rank]).to(curve.dtype)  # [rank, d] orthonormal rows
    q = torch.eye(d, dtype=curve.dtype)
    cos, sin = math.cos(angle), math.sin(angle)
    for i in range(0, rank - 1, 2):
        u, v = basis[i], basis[i + 1]
        q = q + (cos - 1) * (torch.outer(u, u) + torch.outer(v, v))
        q = q + sin * (torch.outer(v, u) - torch.outer(u, v))
    return q


def _check_changed(changed: Any, pos: int) -> Tensor:
    if not isinstance(changed, Tensor) or changed.dtype != torch.bool or changed.shape != (pos,):
        raise UsageError(f"changed must be a boolean mask of shape ({pos},) over positions")
    return changed.cpu()


def _check_parameter(arm: str, parameter: Any) -> None:
    upper = UPPER[arm]
    if not isinstance(parameter, (int, float)) or isinstance(parameter, bool):
        raise UsageError(f"the {arm} parameter must be a number, got {parameter!r}")
    if not 0 <= parameter <= (math.inf if upper is None else upper + 1e-12):
        raise UsageError(
            f"the {arm} parameter must be in [0, {upper if upper is not None else 'inf'}], "
            f"got {parameter!r}"
        )
