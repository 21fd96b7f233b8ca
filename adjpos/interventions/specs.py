"""The intervention table: one frozen `InterventionSpec` per intervention, the one place that
names it and says what it is compared with, how its draws are made, which read-out variants
it runs in, what it is fitted on and how it is built.

The kinds (`norms`, `subspaces`, `position_curve`, `attention`) stand side by side below this
table and know nothing of it; the runner (`runner`, with its task and text measurements) stands
above it. Adding an intervention is one entry of `SPECS` and its factory; a spec's ``params``
carry its settings (``mirrored=True``, an offset, a size), so one factory serves a family.

A *dosed* spec (the position-curve arms, `curve_change`) is measured at several sizes, the
run's ``doses``: at dose m, the size of the full shift of the position curve by m, every arm
matched to it. Each (size, offset) of it is a unit of its own (`Dose`): a spec with
``offsets`` in its params runs its offsets of magnitude m at dose m, the others run once per
dose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from adjpos.interventions.attention import UniformAttention
from adjpos.interventions.curve_arms import DEFAULT_OFFSETS, CurveArm
from adjpos.interventions.curve_change import CurveChange, build_curve_change
from adjpos.interventions.hooks import SITES, NoIntervention
from adjpos.interventions.norms import (
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
)
from adjpos.interventions.position_curve import PositionMeanSwap, PromptStates
from adjpos.interventions.subspaces import (
    LeaceErase,
    SubspaceErase,
    SubspaceSwap,
    variance_share,
)
from adjpos.validation import UsageError, is_int

# The read-out positions (the last prompt position and every answer position): changed like
# the others, or kept (left untouched, so only the states the answer is computed from change).
READOUTS = ("kept", "changed")
DEFAULT_READOUTS = ("kept",)  # the variant the study's verdicts use
ROLES = ("baseline", "tested", "control")
FITTED_ON = (None, "states", "prompts")
DEFAULT_RANK = 8
DEFAULT_DOSES = DEFAULT_OFFSETS  # a dosed spec's sizes: those of the full shifts by 1, 2, 3
DEFAULT_SHIFTS = (-2, -1, 1, 2)  # the offsets of the position curve's shift


@dataclass(frozen=True)
class Fitted:
    """What the factories build from at one layer.

    Args:
        d_model: width of the states.
        seed: the run's seed (permutations, random draws).
        rank: rank of the position subspace and of its random control.
        states, positions: [n, d_model] held-out states at the layer and [n] their positions
            (for the specs fitted on ``"states"``).
        prompts: prompt states by prompt length (for the specs fitted on ``"prompts"``, see
            `adjpos.interventions.fit_prompt_states`).
        counts: {prompt length: measured prompts} (for the dosed specs: the lengths they
            change, and the weights their sizes are matched with).
        sizes_on: prompt states by length whose change sizes the dosed specs match (None:
            `prompts`; on text the measured windows').
    """

    d_model: int
    seed: int = 0
    rank: int = DEFAULT_RANK
    states: Tensor | None = None
    positions: Tensor | None = None
    prompts: PromptStates | None = None
    counts: Mapping[int, int] | None = None
    sizes_on: PromptStates | None = None


@dataclass(frozen=True)
class Dose:
    """One unit of a dosed spec: its size (the magnitude m whose full shift's size it takes)
    and, for a shift, its offset."""

    size: int
    offset: int | None = None

    @property
    def key(self) -> str:
        """Its part of a unit's name in a run folder."""
        return f"size{self.size}" + ("" if self.offset is None else f"-offset{self.offset:+d}")


def check_doses(doses: Sequence[int]) -> tuple[int, ...]:
    """`doses` as a tuple, checked: distinct ints >= 1.

    Raises:
        ValueError: none, repeated, or not ints >= 1.
    """
    doses = tuple(doses) if isinstance(doses, (list, tuple)) else (doses,)
    if not doses or len(set(doses)) < len(doses) or not all(is_int(m) and m >= 1 for m in doses):
        raise UsageError(f"doses must be distinct ints >= 1 (shift magnitudes), got {doses!r}")
    return doses


@dataclass(frozen=True)
class InterventionSpec:
    """One intervention: its name and everything the runner, the figures and the report need.

    Args:
        name: the name in tables and on the command line.
        label: a few words for the report.
        factory: ``factory(fitted, draw=d, matched=m, **params)`` -> the intervention (any
            object with ``.site`` and a call, see `intervene`) for draw d, from a `Fitted`.
        role: "tested" (judged against its control), "control" or "baseline".
        control: the spec it is compared with, paired prompt by prompt ("none": the baseline).
        drawn: a random control, measured as a distribution over several draws.
        readouts: the read-out variants it runs in (from `READOUTS`).
        fitted_on: what it is fitted on: None, "states" (held-out states and positions) or
            "prompts" (prompt states by length).
        matched_to: the spec whose built intervention it is matched to (passed as
            ``matched``; built fresh by `build` when not given).
        params: keyword settings passed to the factory (one factory serves a family).
        site: where it acts ("resid_pre" or "pattern"; a pattern needs a HookedTransformer).
        dosed: measured at each of the run's doses (see the module doc); its factory is also
            passed ``dose`` (a `Dose`) and ``readout``.

    Raises:
        ValueError: a role, read-out variant, fitting or site that is not allowed, or a
            dosed spec's offsets that are not nonzero ints.
    """

    name: str
    label: str
    factory: Callable[..., Any] = field(repr=False)
    role: str = "control"
    control: str = "none"
    drawn: bool = False
    readouts: tuple[str, ...] = READOUTS
    fitted_on: str | None = None
    matched_to: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    site: str = "resid_pre"
    dosed: bool = False

    def __post_init__(self) -> None:
        for what, value, allowed in (
            ("role", self.role, ROLES),
            ("fitted_on", self.fitted_on, FITTED_ON),
            ("site", self.site, SITES),
        ):
            if value not in allowed:
                raise UsageError(f"{self.name}: {what}={value!r}; choose from {list(allowed)}")
        if not self.readouts or set(self.readouts) - set(READOUTS):
            raise UsageError(f"{self.name}: readouts {self.readouts}; choose from {READOUTS}")
        offsets = self.params.get("offsets", [1])
        if not isinstance(offsets, (list, tuple)) or not offsets:
            offsets = [offsets]
        if not all(is_int(k) and k != 0 for k in offsets):
            raise UsageError(f"{self.name}: offsets must be nonzero ints, got {offsets!r}")

    def doses(self, sizes: Sequence[int]) -> list[Dose | None]:
        """The units of a dosed spec at the doses `sizes` (a shift: its offsets of each
        magnitude); [None] for a spec that is not dosed."""
        if not self.dosed:
            return [None]
        if "offsets" not in self.params:
            return [Dose(m) for m in sizes]
        return [Dose(m, k) for m in sizes for k in self.params["offsets"] if abs(k) == m]

    def build(
        self,
        fitted: Fitted,
        *,
        draw: int = 0,
        matched: Any = None,
        dose: Dose | None = None,
        readout: str = "kept",
    ) -> Any:
        """The intervention for draw `draw`, fitted or matched as the spec says (a dosed
        spec: at `dose`, for the read-out variant `readout`).

        Raises:
            ValueError: a fitted spec without what it is fitted on, or a dosed one without
                its dose.
        """
        if self.fitted_on == "states" and (fitted.states is None or fitted.positions is None):
            raise UsageError(f"{self.name} is fitted: pass the states and positions to fit it on")
        if self.fitted_on == "prompts" and fitted.prompts is None:
            raise UsageError(f"{self.name} is fitted: pass the prompt states (fit_prompt_states)")
        if self.matched_to is not None and matched is None:
            matched = SPECS[self.matched_to].build(fitted)
        if self.dosed:
            if dose is None or fitted.counts is None:
                raise UsageError(f"{self.name} is dosed: pass its dose and the measured lengths")
            return self.factory(
                fitted, draw=draw, matched=matched, dose=dose, readout=readout, **self.params
            )
        return self.factory(fitted, draw=draw, matched=matched, **self.params)


def _none(fit: Fitted, **_: Any) -> NoIntervention:
    return NoIntervention()


def _norm_permute(fit: Fitted, *, mirrored: bool = False, **_: Any) -> NormPermute:
    return NormPermute(seed=fit.seed, mirrored=mirrored)


def _norm_scale_control(fit: Fitted, *, draw: int, mirrored: bool = False, **_: Any) -> Any:
    return NormScaleControl(seed=fit.seed, mirrored=mirrored, draw=draw)


def _norm_common_scale(fit: Fitted, *, mirrored: bool = False, **_: Any) -> NormCommonScale:
    return NormCommonScale(seed=fit.seed, mirrored=mirrored)


def _norm_permute_control(fit: Fitted, **_: Any) -> NormPermuteControl:
    return NormPermuteControl()


def _subspace_swap(fit: Fitted, **_: Any) -> SubspaceSwap:
    return SubspaceSwap.fit(fit.states, fit.positions, rank=fit.rank, seed=fit.seed)


def _subspace_swap_random(fit: Fitted, *, draw: int, matched: SubspaceSwap, **_: Any) -> Any:
    share = variance_share(matched.basis, fit.states)
    return SubspaceSwap.random_subspace(
        fit.d_model, rank=fit.rank, seed=fit.seed, draw=draw, states=fit.states, share=share
    )


def _leace(fit: Fitted, *, shuffled: bool = False, **_: Any) -> LeaceErase:
    return LeaceErase.fit(fit.states, fit.positions, shuffled=shuffled, seed=fit.seed)


def _erase_random(fit: Fitted, *, draw: int, matched: LeaceErase, **_: Any) -> SubspaceErase:
    return SubspaceErase.matched(fit.states, matched, seed=fit.seed, draw=draw)


def _uniform_attention(fit: Fitted, *, heads: tuple[int, ...] | None = None, **_: Any) -> Any:
    return UniformAttention(heads=heads)


def _position_mean_swap(fit: Fitted, **_: Any) -> PositionMeanSwap:
    return PositionMeanSwap.fit(fit.prompts, seed=fit.seed)


def _position_mean_mirror(fit: Fitted, **_: Any) -> PositionMeanSwap:
    return PositionMeanSwap.mirror(fit.prompts)


def _curve_arm(
    fit: Fitted, *, draw: int, dose: Dose, readout: str, arm: str, **_: Any
) -> CurveChange:
    change = CurveArm(arm, dose.offset, draw=draw, seed=fit.seed)
    return build_curve_change(
        fit.prompts, fit.counts, change, size=dose.size, readout=readout, sizes_on=fit.sizes_on
    )


_MIRRORED = {"mirrored": True}
_DOSED: dict[str, Any] = {"fitted_on": "prompts", "dosed": True}
_TESTED_ARM = _DOSED | {"role": "tested", "control": "position_random"}
# Each tested intervention is followed by its controls. The norm permutations are matched by
# the rescaling by the very same ratios at random places (equal size, matched at the read-out
# positions); the position subspace by random subspaces of its rank holding as much of the
# states' variance; LEACE of position by random subspaces of its rank erased, changing the
# states as much; the position curve's swap (neighbours scattered) by its mirror (every
# distance between positions kept), the states changed as much. Uniform attention has no
# matched control: it is compared with the baseline. The other controls (one common factor of
# the same mean size, the norm of another sequence, LEACE of shuffled labels) are measured
# beside, against the baseline. The position curve's arms are dosed: each is measured at
# several sizes, matched in change size at each (`curve_change`), against the random curve of
# that size.
SPECS: dict[str, InterventionSpec] = {
    spec.name: spec
    for spec in (
        InterventionSpec("none", "no change", _none, role="baseline"),
        InterventionSpec(
            "norm_permute",
            "norms moved (random permutation)",
            _norm_permute,
            role="tested",
            control="norm_scale_control",
        ),
        InterventionSpec(
            "norm_scale_control",
            "the permutation's norm ratios at random places",
            _norm_scale_control,
            drawn=True,
        ),
        InterventionSpec(
            "norm_common_scale", "one common norm factor of the same size", _norm_common_scale
        ),
        InterventionSpec(
            "norm_permute_mirrored",
            "norms moved (mirrored)",
            _norm_permute,
            role="tested",
            control="norm_scale_control_mirrored",
            params=_MIRRORED,
        ),
        InterventionSpec(
            "norm_scale_control_mirrored",
            "the mirror's norm ratios at random places",
            _norm_scale_control,
            drawn=True,
            params=_MIRRORED,
        ),
        InterventionSpec(
            "norm_common_scale_mirrored",
            "one common norm factor of the mirror's size",
            _norm_common_scale,
            params=_MIRRORED,
        ),
        InterventionSpec(
            "norm_permute_control",
            "norms of the same position in another sequence",
            _norm_permute_control,
        ),
        InterventionSpec(
            "subspace_swap",
            "position subspace swapped",
            _subspace_swap,
            role="tested",
            control="subspace_swap_random",
            fitted_on="states",
        ),
        InterventionSpec(
            "subspace_swap_random",
            "random subspace of the same variance share swapped",
            _subspace_swap_random,
            drawn=True,
            fitted_on="states",
            matched_to="subspace_swap",
        ),
        InterventionSpec(
            "leace_position",
            "position erased (LEACE)",
            _leace,
            role="tested",
            control="erase_random",
            fitted_on="states",
        ),
        InterventionSpec(
            "erase_random",
            "as many random directions erased, as large a change",
            _erase_random,
            drawn=True,
            fitted_on="states",
            matched_to="leace_position",
        ),
        InterventionSpec(
            "leace_random",
            "LEACE of shuffled positions",
            _leace,
            fitted_on="states",
            params={"shuffled": True},
        ),
        InterventionSpec(
            "uniform_attention",
            "uniform attention",
            _uniform_attention,
            role="tested",
            site="pattern",
        ),
        InterventionSpec(
            "position_mean_swap",
            "position curve, neighbours scattered",
            _position_mean_swap,
            role="tested",
            control="position_mean_mirror",
            readouts=("kept",),
            fitted_on="prompts",
        ),
        InterventionSpec(
            "position_mean_mirror",
            "position curve mirrored",
            _position_mean_mirror,
            readouts=("kept",),
            fitted_on="prompts",
        ),
        InterventionSpec(
            "position_shift",
            "position curve shifted by k (neighbours kept)",
            _curve_arm,
            params={"arm": "shift", "offsets": DEFAULT_SHIFTS},
            **_TESTED_ARM,
        ),
        InterventionSpec(
            "position_rotate",
            "position curve rotated (every distance kept)",
            _curve_arm,
            params={"arm": "rotate"},
            **_TESTED_ARM,
        ),
        InterventionSpec(
            "position_scatter",
            "position curve partly scattered (locality broken)",
            _curve_arm,
            drawn=True,
            params={"arm": "scatter"},
            **_TESTED_ARM,
        ),
        InterventionSpec(
            "position_remove",
            "position curve pulled toward its mean",
            _curve_arm,
            params={"arm": "remove"},
            **_TESTED_ARM,
        ),
        InterventionSpec(
            "position_random",
            "a random curve of the same norm profile and size",
            _curve_arm,
            drawn=True,
            params={"arm": "random"},
            **_DOSED,
        ),
    )
}
NAMES = tuple(SPECS)
# What runs when none is named: every spec but the dosed ones (the position curve's arms, each
# measured at several sizes and over many draws: named to run).
DEFAULT_INTERVENTIONS = tuple(name for name, spec in SPECS.items() if not spec.dosed)


def check_interventions(interventions: Sequence[str | InterventionSpec]) -> list[InterventionSpec]:
    """The specs of `interventions` (names from `SPECS`, or your own `InterventionSpec`s),
    checked: known and not repeated.

    Raises:
        ValueError: an unknown name, none given, or one given twice.
    """
    specs = [SPECS.get(i) if isinstance(i, str) else i for i in interventions]
    unknown = [
        i for i, s in zip(interventions, specs, strict=True) if not isinstance(s, InterventionSpec)
    ]
    names = [s.name for s in specs if isinstance(s, InterventionSpec)]
    if unknown or not specs or len(set(names)) < len(names):
        problem = f"unknown {unknown}" if unknown else "none given or repeated"
        raise UsageError(f"interventions: {problem}; choose from {list(NAMES)}")
    return specs
