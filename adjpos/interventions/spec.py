"""What an intervention is to the runner: `InterventionSpec` (one row of the intervention
table, `specs.SPECS`), what its factory builds from (`Fitted`), a dosed spec's size (`Dose`),
and one unit of a run (`Unit`).

A *dosed* spec (the position-curve arms, `curve.change`) is measured at each of the run's
``doses`` m (the size of the full shift of the position curve by m, every arm matched to it;
a fraction m < 1 of the shift by 1's), one unit per size and offset (`Dose`,
`InterventionSpec.doses`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from adjpos.interventions.hooks import SITES
from adjpos.types import PromptStates
from adjpos.validation import UsageError, is_int

# The read-out positions (the last prompt position and every answer position): changed like
# the others, or kept (left untouched, so only the states the answer is computed from change).
READOUTS = ("kept", "changed")
DEFAULT_READOUTS = ("kept",)  # the variant the study's verdicts use
ROLES = ("baseline", "tested", "control")
FITTED_ON = (None, "states", "prompts")
# The study's stages a spec can run in: the carriers' causal tests, the position curve's arms on
# the tasks, and the arms on text.
STAGES = ("causal", "arms", "text")
DEFAULT_RANK = 8
DEFAULT_DOSES = (1, 2, 3)  # a dosed spec's sizes: those of the full shifts by 1, 2, 3
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
        runs_of: a prompt's runs from its tokens (for the dosed specs; `adjpos.tasks.Task.runs`
            on a task, the window after its first token on text).
    """

    d_model: int
    seed: int = 0
    rank: int = DEFAULT_RANK
    states: Tensor | None = None
    positions: Tensor | None = None
    prompts: PromptStates | None = None
    counts: Mapping[int, int] | None = None
    sizes_on: PromptStates | None = None
    runs_of: Callable[[Tensor], Any] | None = None


@dataclass(frozen=True)
class Dose:
    """One unit of a dosed spec: its size (the magnitude m whose full shift's size it takes;
    m < 1: that fraction of the shift by 1's) and, for a shift, its offset."""

    size: int | float
    offset: int | None = None

    @property
    def key(self) -> str:
        """Its part of a unit's name in a run folder."""
        return f"size{self.size:g}" + ("" if self.offset is None else f"-offset{self.offset:+d}")


def check_doses(doses: Sequence[int | float]) -> tuple[int | float, ...]:
    """`doses` as a tuple, checked (ValueError if not): at least one, distinct, each an int
    >= 1 (a shift magnitude) or a fraction in (0, 1) of the shift by 1's size.

    >>> check_doses([0.5, 1, 2])
    (0.5, 1, 2)
    """
    doses = tuple(doses) if isinstance(doses, (list, tuple)) else (doses,)
    fine = [is_int(m) and m >= 1 or isinstance(m, float) and 0 < m < 1 for m in doses]
    if not doses or len(set(doses)) < len(doses) or not all(fine):
        raise UsageError(
            "doses must be distinct shift magnitudes, ints >= 1, or fractions in (0, 1) of the "
            f"shift by 1's size, got {doses!r}"
        )
    return doses


def added_dose(
    levels: dict[float, float], floor: float, need: int, *, last: bool = False
) -> float | None:
    """The next dose of a layer's arms where fewer than `need` of the doses so far leave their
    random control at least `floor` exact match (`levels`: dose -> exact match): the midpoint
    of the largest such dose and the next dose above it (a fraction below 1); where there is
    none, or on the `last` try, half the smallest dose (a smaller change harms less). None when
    enough doses are measurable.

    >>> added_dose({0.5: 0.53, 1.0: 0.05, 2.0: 0.01}, 0.25, 2)
    0.75
    >>> added_dose({0.5: 0.53, 0.75: 0.2, 1.0: 0.05}, 0.25, 2, last=True)
    0.25
    >>> added_dose({0.5: 0.99, 1.0: 0.9, 2.0: 0.3}, 0.25, 2) is None
    True
    """
    measurable = [d for d, level in levels.items() if level >= floor]
    if len(measurable) >= need or not levels:
        return None
    above = [d for d in levels if d > max(measurable, default=0.0)]
    middle = (max(measurable) + min(above)) / 2 if measurable and above else 1.0
    if not (last or middle >= 1 or middle in levels):
        return middle
    half = min(levels) / 2 if min(levels) / 2 < 1 else int(min(levels) / 2)
    return None if half in levels else half


def shift_magnitude(size: int | float) -> int:
    """The |k| of the shifts measured at the size of dose `size`: m, or 1 for a fraction."""
    return math.ceil(size)


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
        claim: what a tested spec tests, the study's name for it ("norms", "subspace",
            "linear", "curve"; None: no claim of the study).
        stages: the study's stages that run it (from `STAGES`; none: `adjpos intervene` only).

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
    matched_to: InterventionSpec | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    site: str = "resid_pre"
    dosed: bool = False
    claim: str | None = None
    stages: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for what, value, allowed in (
            ("role", self.role, ROLES),
            ("fitted_on", self.fitted_on, FITTED_ON),
            ("site", self.site, SITES),
        ):
            if value not in allowed:
                raise UsageError(f"{self.name}: {what}={value!r}; choose from {list(allowed)}")
        if set(self.stages) - set(STAGES):
            raise UsageError(f"{self.name}: stages {self.stages}; choose from {STAGES}")
        if not self.readouts or set(self.readouts) - set(READOUTS):
            raise UsageError(f"{self.name}: readouts {self.readouts}; choose from {READOUTS}")
        offsets = self.params.get("offsets", [1])
        listed = offsets if isinstance(offsets, (list, tuple)) and offsets else [offsets]
        if not all(is_int(k) and k != 0 for k in listed):
            raise UsageError(f"{self.name}: offsets must be nonzero ints, got {listed!r}")

    def doses(self, sizes: Sequence[int | float]) -> list[Dose | None]:
        """The units of a dosed spec at the doses `sizes` (a shift: its offsets of each
        magnitude, by 1 at a fraction; ``once`` in its params: the smallest dose alone); [None]
        for a spec that is not dosed."""
        if not self.dosed:
            return [None]
        if self.params.get("once"):
            return [Dose(min(sizes))]
        if "offsets" not in self.params:
            return [Dose(m) for m in sizes]
        offsets = self.params["offsets"]
        return [Dose(m, k) for m in sizes for k in offsets if abs(k) == shift_magnitude(m)]

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
            matched = self.matched_to.build(fitted)
        if self.dosed and (dose is None or fitted.counts is None):
            raise UsageError(f"{self.name} is dosed: pass its dose and the measured lengths")
        dosed = {"dose": dose, "readout": readout} if self.dosed else {}
        return self.factory(fitted, draw=draw, matched=matched, **dosed, **self.params)


@dataclass(frozen=True)
class Unit:
    """One measurement: `spec` at `layer` in the read-out variant `readout` (a dosed spec: at
    `dose`)."""

    layer: int
    readout: str
    spec: InterventionSpec
    dose: Dose | None = None

    @property
    def key(self) -> str:
        """The unit's name in a run folder."""
        name = f"layer{self.layer}-{self.readout}-{self.spec.name}"
        return name if self.dose is None else f"{name}-{self.dose.key}"
