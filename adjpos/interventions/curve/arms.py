"""Changes of the position curve that each move one property, matched in size.

The position curve c[t] of one prompt length (`position.position_curves`, fitted on other
prompts of that length) is changed into c'[t], and every changed state takes the difference,
h'[b, t] = h[b, t] + c'[t] - c[t], rescaled to ||h[b, t]|| with ``keep_norm`` (the norm is a
carrier of its own). An arm acts on a prompt's *runs* (`Runs`): never on a fixed token of the
format, and never across a run's edge unless it says so. The arms, each with one free
parameter that sets its size (0 leaves the curve as it is):

- ``shift`` (offset k, parameter: the blend, at most 1): inside each run, c'[t] = c[t] +
  blend (c[s] - c[t]) with s = t - k clamped to the run: every neighbour relation inside the
  run kept, moved by k; the edge the shift leaves keeps its own point, and no position takes
  a fixed token's point.
- ``rotate`` (parameter: the angle, at most pi): c'[t] = Q c[t] on the runs, Q turning a
  seeded pairing of planes of the curve's top-r principal subspace (r covering `SHARE` of its
  sum of squares, at least 2) by the angle: every distance between the runs' points and
  every norm kept (drawn: each draw another pairing).
- ``scatter`` (parameter: the fraction, at most 1): c'[t] = c[t] + fraction (c[pi(t)] - c[t]),
  pi a seeded derangement of each run's interior (its first and last kept) under which no two
  neighbours stay neighbours (where the run allows): locality broken, fully at 1.
- ``remove`` (parameter: alpha, at most 1): c'[t] = (1 - alpha) c[t] + alpha m on the runs, m
  the mean of the curve over them.
- ``random`` (the control of the four above; parameter: the scale): c'[t] = c[t] + scale r[t]
  on the runs, r a random curve of the curve's norm profile (||r[t]|| = ||c[t]||) whose
  directions are drawn independently per position from a Gaussian with the states'
  covariance: a change of the same size that has nothing to do with the curve.
- ``edges`` (parameter: the blend, built whole): each run's first position takes the point
  just before the run and its last the point just after it (a run at the prompt's start keeps
  its first point; a one-position run takes the point before it); nothing else changes.
- ``edges_random`` (its control): the random curve on the edges' positions, of their size.

Each arm is one row of the arm table `ARMS`, so adding one is one row; `change` sets an arm to
one size, within `TOLERANCE` at each prompt length.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from adjpos.seeds import derived_generator
from adjpos.validation import UsageError, is_int

SHARE = 0.99  # the rotation's subspace covers this share of the curve's sum of squares
TOLERANCE = 0.05  # the matching aims every size within this relative difference of its target
# A prompt's runs: (first, last) of each stretch that varies (`adjpos.tasks.Task.runs`).
Runs = tuple[tuple[int, int], ...]
_TRIES = 500  # permutations drawn for a scatter, the first that keeps no neighbour taken


@dataclass(frozen=True)
class CurveArm:
    """One arm (see the module doc): which, its offset (shift only), and which seeded draw.

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
        runs: Runs,
        states: Float[Tensor, "n pos d_model"] | None = None,
    ) -> Float[Tensor, "pos d_model"]:
        """c' of this arm at `parameter` on a prompt with `runs` (the positions it does not
        change keep c; `states`: the fitting states whose covariance the random controls draw
        from, needed by them alone)."""
        upper = math.inf if self.kind.upper is None else self.kind.upper
        number = isinstance(parameter, (int, float)) and not isinstance(parameter, bool)
        if not number or not 0 <= parameter <= upper + 1e-12:
            raise UsageError(f"the {self.arm} parameter must be in [0, {upper}], got {parameter!r}")
        changed = changed_positions(self.kind, runs, curve.shape[0])
        moved = self.kind.build(self, curve, parameter, check_runs(runs, curve.shape[0]), states)
        return torch.where(changed[:, None], moved, curve)


def check_runs(runs: Any, pos: int) -> Runs:
    """`runs` as a tuple of (first, last) int pairs, checked (ValueError if not): in order,
    apart, inside 0 .. pos - 1."""
    try:
        runs = tuple((int(first), int(last)) for first, last in runs)
    except (TypeError, ValueError):
        raise UsageError(f"runs must be (first, last) position pairs, got {runs!r}") from None
    ends = [x for run in runs for x in run]
    if ends != sorted(ends) or any(f > l_ for f, l_ in runs) or (ends and not 0 <= ends[0]):
        raise UsageError(f"runs must be (first, last) pairs in order and apart, got {runs!r}")
    if ends and ends[-1] >= pos or len(set(ends)) < len(ends) - sum(f == l_ for f, l_ in runs):
        raise UsageError(f"runs {runs!r} do not fit a prompt of {pos} positions apart")
    return runs


def changed_positions(kind: ArmKind, runs: Runs, pos: int) -> Bool[Tensor, " pos"]:
    """[pos] the positions an arm of `kind` changes on a prompt with `runs`: every position of
    a run, or (``kind.on == "edges"``) each run's first and last (the first of a run at
    position 0 left out: there is no point before it)."""
    changed = torch.zeros(pos, dtype=torch.bool)
    for first, last in check_runs(runs, pos):
        on = _edge_source(first, last, pos, None) if kind.on == "edges" else range(first, last + 1)
        changed[list(on)] = True
    return changed


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


def subspace_rank(curve: Float[Tensor, "pos d_model"]) -> int:
    """The fewest top principal directions of `curve` (uncentred: it is centred over
    positions already) whose squares cover `SHARE` of its sum of squares; at least 2 (a plane
    to turn), at most min(pos, d_model) and d_model."""
    squares = torch.linalg.svdvals(curve.double()).square()
    cover = squares.cumsum(0) / squares.sum().clamp_min(1e-300)
    rank = int((cover < SHARE - 1e-12).sum()) + 1
    return min(max(rank, 2), curve.shape[1])


def _blended(target: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A linear arm's builder: c + parameter (target - c), `target` the curve at parameter 1,
    remembered from its last call (the size matching asks for it at every bisection step;
    tensors hash by identity, and the cache holds them: no id is reused meanwhile)."""
    target = functools.lru_cache(maxsize=1)(target)

    def build(arm: CurveArm, curve: Tensor, parameter: float, runs: Runs, states: Any):
        return curve + parameter * (target(arm, curve, runs, states) - curve)

    return build


def _sourced(source: Callable[[int, int, int], dict[int, int]]) -> Callable[..., Tensor]:
    """An arm that moves points along the curve: each run (first, last) of a prompt of `pos`
    positions maps some of its positions t to the position whose point they take."""

    def target(arm: CurveArm, curve: Tensor, runs: Runs, states: Any) -> Tensor:
        index = torch.arange(curve.shape[0])
        for first, last in runs:
            for t, s in source(first, last, curve.shape[0], arm).items():
                index[t] = s
        return curve[index]

    return target


def _shift_source(first: int, last: int, pos: int, arm: CurveArm) -> dict[int, int]:
    return {t: min(max(t - arm.offset, first), last) for t in range(first, last + 1)}


def _scatter_source(first: int, last: int, pos: int, arm: CurveArm) -> dict[int, int]:
    if last - first < 3:  # an interior of fewer than 2 positions
        return {}
    order = scattering_order(last - first - 1, seed=arm.seed, draw=arm.draw)
    return {first + 1 + i: first + 1 + int(j) for i, j in enumerate(order)}


def _edge_source(first: int, last: int, pos: int, arm: Any) -> dict[int, int]:
    return ({last: last + 1} if last + 1 < pos else {}) | ({first: first - 1} if first > 0 else {})


def _removed(arm: CurveArm, curve: Tensor, runs: Runs, states: Any) -> Tensor:
    return curve[changed_positions(arm.kind, runs, curve.shape[0])].mean(dim=0).expand_as(curve)


def _randomised(arm: CurveArm, curve: Tensor, runs: Runs, states: Tensor | None) -> Tensor:
    """`curve` plus a random curve of its norm profile, each position's direction drawn from a
    Gaussian with the covariance of `states` (a random combination of the centred states)."""
    if states is None:
        raise UsageError("the random control draws from the states' covariance: pass states")
    flat = states.reshape(-1, states.shape[-1]).to(curve.dtype)
    centred = flat - flat.mean(dim=0)
    gen = derived_generator(arm.seed, "curve_random", arm.draw)
    directions = torch.randn(curve.shape[0], len(flat), generator=gen, dtype=curve.dtype) @ centred
    unit = directions / directions.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return curve + unit * curve.norm(dim=-1, keepdim=True)


def _rotated(arm: CurveArm, curve: Tensor, angle: float, runs: Runs, states: Any) -> Tensor:
    """`curve` @ Q.T, Q orthogonal: a seeded orthonormal basis of the curve's top-r subspace,
    paired into planes, each turned by `angle`; the identity on the rest."""
    basis, q = _rotation_basis(arm, curve), torch.eye(curve.shape[1], dtype=curve.dtype)
    cos, sin = math.cos(angle), math.sin(angle)
    for i in range(0, len(basis) - 1, 2):
        u, v = basis[i], basis[i + 1]
        q = q + (cos - 1) * (torch.outer(u, u) + torch.outer(v, v))
        q = q + sin * (torch.outer(v, u) - torch.outer(u, v))
    return curve @ q.T


@functools.lru_cache(maxsize=1)  # as `_blended`'s targets
def _rotation_basis(arm: CurveArm, curve: Tensor) -> Tensor:
    """[rank, d_model] the rotation's seeded orthonormal basis of the curve's top subspace."""
    rank = subspace_rank(curve)
    _, _, vh = torch.linalg.svd(curve.double(), full_matrices=True)
    gen = derived_generator(arm.seed, "curve_rotate", arm.draw)
    mix, _ = torch.linalg.qr(torch.randn(rank, rank, generator=gen, dtype=torch.float64))
    return (mix.T @ vh[:rank]).to(curve.dtype)


@dataclass(frozen=True)
class Check:
    """An arm's manipulation check: the number (a column of its rows, the worst of its draws)
    that says it did what its name says, judged by the study as ``number RELATION threshold``
    with the threshold the `adjpos.study.claim.Criteria` field `criterion` (None: 0)."""

    number: str
    relation: str  # "<=", ">=" or ">"
    criterion: str | None = None


@dataclass(frozen=True)
class ArmKind:
    """One row of the arm table.

    Args:
        name, label: the arm (``CurveArm.arm``) and a few words for the report.
        build: ``build(arm, curve, parameter, runs, states) -> c'``, before the positions it
            does not change are put back.
        upper: the largest parameter (None: unbounded, doubled until the size is reached).
        check: its manipulation check beyond the size (None: the size alone).
        compared_with: what the rule compares it with besides its control (``"unchanged"``,
            another arm's name, or ``"shift"``: every shift of the size).
        offsets: it takes an offset k (the shift).
        control: it is a size-matched random control itself.
        drawn: measured over the run's draws (a seeded random part).
        on_text: the study runs it on text too.
        on: the positions it changes: ``"runs"`` (every position of a run) or ``"edges"``
            (each run's first and last, `changed_positions`).
        versus: its size-matched random control (an arm of the table).
        whole: built at its largest parameter, not matched to the dose.
        sized_to: the whole arm this control is matched in size to (None: the dose).
    """

    name: str
    label: str
    build: Callable[..., Tensor] = field(repr=False)
    upper: float | None = 1.0
    check: Check | None = None
    compared_with: tuple[str, ...] = ()
    offsets: bool = False
    control: bool = False
    drawn: bool = False
    on_text: bool = True
    on: str = "runs"
    versus: str = "random"
    whole: bool = False
    sized_to: str | None = None


# The arms (see the module doc); the intervention table takes each as ``position_NAME``.
_KINDS = (
    ArmKind(
        "shift",
        "position curve shifted by k inside each run (neighbours kept)",
        _blended(_sourced(_shift_source)),
        check=Check("curve_moved", ">"),
        offsets=True,
    ),
    ArmKind(
        "rotate",
        "position curve rotated (every distance kept)",
        _rotated,
        math.pi,
        Check("distance_change", "<=", "curve_distance_kept"),
        compared_with=("unchanged", "shift"),
        drawn=True,
    ),
    ArmKind(
        "scatter",
        "each run's interior scattered (locality broken)",
        _blended(_sourced(_scatter_source)),
        check=Check("locality_drop", ">=", "curve_locality_drop"),
        compared_with=("rotate", "shift"),
        drawn=True,
    ),
    ArmKind("remove", "position curve pulled toward its mean", _blended(_removed), on_text=False),
    ArmKind(
        "random",
        "a random curve of the same norm profile and size",
        _blended(_randomised),
        None,
        control=True,
        drawn=True,
    ),
    ArmKind(
        "edges",
        "each run's first and last take the points just outside it",
        _blended(_sourced(_edge_source)),
        check=Check("curve_moved", ">"),
        on="edges",
        versus="edges_random",
        whole=True,
    ),
    ArmKind(
        "edges_random",
        "a random curve on the edges' positions, of their size",
        _blended(_randomised),
        None,
        control=True,
        drawn=True,
        on="edges",
        sized_to="edges",
    ),
)
ARMS: dict[str, ArmKind] = {kind.name: kind for kind in _KINDS}
