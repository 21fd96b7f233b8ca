"""Changes of the position curve that each keep or break one property, matched in size.

The position curve c[t] of one prompt length (`position_curves`: the position part of the
states after removing each token's mean state, fitted on other prompts of that length) is
changed into c'[t], and every changed state takes the difference:

    h'[b, t] = h[b, t] + c'[t] - c[t]    at the positions `changed` selects,

rescaled to ||h[b, t]|| with ``keep_norm`` (the norm is a carrier of its own). `changed` is a
boolean mask over positions: the prompt without its read-out position (`change.changed_positions`
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

Each arm is one row of the arm table `ARMS` (an `ArmKind`: how it is built, its largest
parameter, its manipulation check and what the rule compares it with); nothing else names an
arm, so adding one is one row.

The size of a change is the mean relative change ||h' - h|| / ||h|| of the changed states
(`change_size`); `match_parameter` finds the parameter that gives a target size, pooled over
the prompt lengths, within `TOLERANCE`. `dose_targets` proposes the sizes: those of the full
shifts (the smaller of +k and -k for each magnitude k), so at each size a shift is exactly a
shift (the other sign blended down to it) and every other arm is matched to it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from adjpos.seeds import derived_generator
from adjpos.validation import UsageError, is_int

SHARE = 0.99  # the rotation's subspace covers this share of the curve's sum of squares
TOLERANCE = 0.05  # the matching aims every size within this relative difference of its target
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
        if ARMS[self.arm].offsets != (self.offset is not None):
            raise UsageError("a shift needs an offset k (and only a shift takes one)")
        if self.offset is not None and (not is_int(self.offset) or self.offset == 0):
            raise UsageError(f"the shift's offset must be a nonzero int, got {self.offset!r}")
        for name in ("draw", "seed"):
            if not is_int(getattr(self, name)) or getattr(self, name) < 0:
                raise UsageError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")

    @property
    def name(self) -> str:
        """The arm's name in the rule and the tables: ``shift+1``, ``rotate``, ``random``."""
        return self.arm + ("" if self.offset is None else f"{self.offset:+d}")

    @property
    def kind(self) -> ArmKind:
        """Its row of the arm table."""
        return ARMS[self.arm]

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
        changed = check_changed(changed, curve.shape[0])
        moved = self.kind.build(self, curve, parameter, changed, states)
        return torch.where(changed[:, None], moved, curve)


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


def _blended(target: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A linear arm's builder: c + parameter (target - c), `target` the curve at parameter 1."""

    def build(arm: CurveArm, curve: Tensor, parameter: float, changed: Tensor, states: Any):
        return curve + parameter * (target(arm, curve, changed, states) - curve)

    return build


def _shifted(arm: CurveArm, curve: Tensor, changed: Tensor, states: Any) -> Tensor:
    pos = curve.shape[0]
    return curve[(torch.arange(pos) - arm.offset).clamp(0, pos - 1)]


def _scattered(arm: CurveArm, curve: Tensor, changed: Tensor, states: Any) -> Tensor:
    index = changed.nonzero().flatten()
    order = scattering_order(len(index), seed=arm.seed, draw=arm.draw)
    source = torch.arange(curve.shape[0])
    source[index] = index[order]
    return curve[source]


def _removed(arm: CurveArm, curve: Tensor, changed: Tensor, states: Any) -> Tensor:
    return curve[changed].mean(dim=0).expand_as(curve)


def _randomised(arm: CurveArm, curve: Tensor, changed: Tensor, states: Any) -> Tensor:
    return curve + _random_curve(curve, states, arm.seed, arm.draw)


def _rotated(arm: CurveArm, curve: Tensor, parameter: float, changed: Tensor, states: Any):
    return curve @ _plane_rotation(curve, parameter, arm.seed, arm.draw).T


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


def check_changed(changed: Any, pos: int) -> Tensor:
    if not isinstance(changed, Tensor) or changed.dtype != torch.bool or changed.shape != (pos,):
        raise UsageError(f"changed must be a boolean mask of shape ({pos},) over positions")
    return changed.cpu()


def _check_parameter(arm: str, parameter: Any) -> None:
    upper = ARMS[arm].upper
    if not isinstance(parameter, (int, float)) or isinstance(parameter, bool):
        raise UsageError(f"the {arm} parameter must be a number, got {parameter!r}")
    if not 0 <= parameter <= (math.inf if upper is None else upper + 1e-12):
        raise UsageError(
            f"the {arm} parameter must be in [0, {upper if upper is not None else 'inf'}], "
            f"got {parameter!r}"
        )


@dataclass(frozen=True)
class Check:
    """An arm's manipulation check: the number (a column of its rows, the worst of its draws)
    that says it did what its name says, judged by the study as ``number RELATION threshold``
    with the threshold the `adjpos.study.claim.Criteria` field `criterion` (None: 0)."""

    number: str
    relation: str  # "<=", ">=" or ">"
    criterion: str | None = None

    def worst(self, values: Iterable[float]) -> float:
        """The draw that passes least: the largest value under "<=", else the smallest (NaN
        when any draw is NaN)."""
        values = [float(v) for v in values]
        if any(math.isnan(v) for v in values):
            return math.nan
        return max(values) if self.relation == "<=" else min(values)


@dataclass(frozen=True)
class ArmKind:
    """One row of the arm table.

    Args:
        name: the arm (``CurveArm.arm``).
        label: a few words for the report.
        build: ``build(arm, curve, parameter, changed, states) -> c'`` before the unchanged
            positions are put back.
        upper: the largest parameter (None: unbounded, doubled until the size is reached).
        check: its manipulation check beyond the size (None: the size alone).
        compared_with: what the rule compares it with besides the random curve of its size
            (``"unchanged"``, another arm's name, or ``"shift"``: every shift of the size).
        offsets: it takes an offset k (the shift).
        control: it is the size-matched random control itself.
        drawn: measured over the run's draws (a seeded random part).
        on_text: the study runs it on text too.
    """

    name: str
    label: str
    build: Callable[..., Tensor] = field(repr=False)
    upper: float | None = None
    check: Check | None = None
    compared_with: tuple[str, ...] = ()
    offsets: bool = False
    control: bool = False
    drawn: bool = False
    on_text: bool = True


# The arms (see the module doc). Adding one is one row here: its builder, bound, check and
# pairs; the intervention table takes it as ``position_NAME``.
ARMS: dict[str, ArmKind] = {
    kind.name: kind
    for kind in (
        ArmKind(
            "shift",
            "position curve shifted by k (neighbours kept)",
            _blended(_shifted),
            1.0,
            Check("curve_moved", ">"),
            offsets=True,
        ),
        ArmKind(
            "rotate",
            "position curve rotated (every distance kept)",
            _rotated,
            math.pi,
            Check("distance_change", "<=", "curve_distance_kept"),
            compared_with=("unchanged", "shift"),
        ),
        ArmKind(
            "scatter",
            "position curve partly scattered (locality broken)",
            _blended(_scattered),
            1.0,
            Check("locality_drop", ">=", "curve_locality_drop"),
            compared_with=("rotate", "shift"),
            drawn=True,
        ),
        ArmKind(
            "remove",
            "position curve pulled toward its mean",
            _blended(_removed),
            1.0,
            on_text=False,
        ),
        ArmKind(
            "random",
            "a random curve of the same norm profile and size",
            _blended(_randomised),
            None,
            control=True,
            drawn=True,
        ),
    )
}


def arm_kind(name: str) -> ArmKind:
    """The row of the arm table of an arm named as in the rule (``shift+1``, ``rotate``).

    >>> arm_kind("shift-2").name
    'shift'
    """
    kind = ARMS.get(re.sub(r"[+-]\d+$", "", str(name)))
    if kind is None:
        raise UsageError(f"unknown curve arm {name!r}; choose from {list(ARMS)}")
    return kind
