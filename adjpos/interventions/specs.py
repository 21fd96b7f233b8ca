"""The intervention table: one frozen `InterventionSpec` per intervention, the one place that
names it and says what it is compared with, how its draws are made, which read-out variants
it runs in, what it is fitted on and how it is built.

The kinds (`norms`, `subspaces`, `curve`, `attention`) stand side by side below this table and
know nothing of it; the runner (`runner`) and the task and text measurements stand above it.
`plan_units` turns names into the units of a run. Adding an intervention is one entry of `SPECS`
and its factory; a spec's ``params`` carry its settings (``mirrored=True``, an offset, a size),
so one factory serves a family.
A *dosed* spec (the position-curve arms) is measured at several sizes (`spec.Dose`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adjpos.interventions.attention import UniformAttention
from adjpos.interventions.curve.arms import ARMS, ArmKind, CurveArm
from adjpos.interventions.curve.change import CurveChange, build_curve_change
from adjpos.interventions.hooks import NoIntervention
from adjpos.interventions.norms import (
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
)
from adjpos.interventions.spec import (
    DEFAULT_DOSES,
    DEFAULT_SHIFTS,
    READOUTS,
    STAGES,
    Dose,
    Fitted,
    InterventionSpec,
    Unit,
    check_doses,
)
from adjpos.interventions.subspaces import LeaceErase, SubspaceErase, SubspaceSwap, variance_share
from adjpos.validation import UsageError, is_int


def _subspace_swap_random(fit: Fitted, *, draw: int, matched: SubspaceSwap, **_: Any) -> Any:
    share = variance_share(matched.basis, fit.states)
    return SubspaceSwap.random_subspace(
        fit.d_model, rank=fit.rank, seed=fit.seed, draw=draw, states=fit.states, share=share
    )


def _leace(fit: Fitted, *, shuffled: bool = False, **_: Any) -> LeaceErase:
    return LeaceErase.fit(fit.states, fit.positions, shuffled=shuffled, seed=fit.seed)


def _erase_random(fit: Fitted, *, draw: int, matched: LeaceErase, **_: Any) -> SubspaceErase:
    return SubspaceErase.matched(fit.states, matched, seed=fit.seed, draw=draw)


def _curve_arm(fit: Fitted, *, draw: int, dose: Dose, arm: str, **_: Any) -> CurveChange:
    if fit.runs_of is None:
        raise UsageError("a position-curve arm needs the prompts' runs (Fitted.runs_of)")
    change = CurveArm(arm, dose.offset, draw=draw, seed=fit.seed)
    options = {"size": dose.size, "runs_of": fit.runs_of, "sizes_on": fit.sizes_on}
    return build_curve_change(fit.prompts, fit.counts, change, **options)


def _arm_spec(kind: ArmKind) -> InterventionSpec:
    """A row of the arm table as the entry ``position_NAME``: dosed (a whole arm and its
    control once, at the first dose), fitted on prompt states, with the read-out kept (no run
    reaches it), tested against its size-matched random control."""
    tested = {"role": "tested", "control": f"position_{kind.versus}", "claim": "curve"}
    params = {"arm": kind.name} | ({"offsets": DEFAULT_SHIFTS} if kind.offsets else {})
    if kind.whole or kind.sized_to:
        params |= {"once": True}
    return InterventionSpec(
        f"position_{kind.name}",
        kind.label,
        _curve_arm,
        drawn=kind.drawn,
        params=params,
        readouts=("kept",),
        fitted_on="prompts",
        dosed=True,
        stages=("arms", "text") if kind.on_text else ("arms",),
        **({} if kind.control else tested),
    )


_CAUSAL: dict[str, Any] = {"stages": ("causal",)}
_SUBSPACE_SWAP = InterventionSpec(
    "subspace_swap",
    "position subspace swapped",
    lambda fit, **_: SubspaceSwap.fit(fit.states, fit.positions, rank=fit.rank, seed=fit.seed),
    role="tested",
    control="subspace_swap_random",
    fitted_on="states",
    claim="subspace",
    **_CAUSAL,
)
_LEACE = InterventionSpec(
    "leace_position",
    "position erased (LEACE)",
    _leace,
    role="tested",
    control="erase_random",
    fitted_on="states",
    claim="linear",
    **_CAUSAL,
)


def _norm_specs(*, mirrored: bool) -> tuple[InterventionSpec, ...]:
    """The norm permutation (a seeded random one, or the mirror) and its two controls."""
    tag, of, size = (
        ("_mirrored", "the mirror's", "the mirror's size")
        if mirrored
        else ("", "the permutation's", "the same size")
    )
    common: dict[str, Any] = {"params": {"mirrored": mirrored}, **_CAUSAL}
    return (
        InterventionSpec(
            f"norm_permute{tag}",
            f"norms moved ({'mirrored' if mirrored else 'random permutation'})",
            lambda fit, *, mirrored, **_: NormPermute(seed=fit.seed, mirrored=mirrored),
            role="tested",
            control=f"norm_scale_control{tag}",
            claim="norms",
            **common,
        ),
        InterventionSpec(
            f"norm_scale_control{tag}",
            f"{of} norm ratios at random places",
            lambda fit, *, draw, mirrored, **_: NormScaleControl(fit.seed, mirrored, draw),
            drawn=True,
            **common,
        ),
        InterventionSpec(
            f"norm_common_scale{tag}",
            f"one common norm factor of {size}",
            lambda fit, *, mirrored, **_: NormCommonScale(seed=fit.seed, mirrored=mirrored),
            **common,
        ),
    )


# Each tested intervention is followed by its controls, matched as their labels say (uniform
# attention has none: it is compared with the baseline; the other controls are measured beside,
# against the baseline). The position curve's arms are dosed: each is measured at several
# sizes, matched in change size at each (`curve.change`), against the random curve of its size.
SPECS: dict[str, InterventionSpec] = {
    spec.name: spec
    for spec in (
        InterventionSpec(
            "none", "no change", lambda fit, **_: NoIntervention(), role="baseline", stages=STAGES
        ),
        *_norm_specs(mirrored=False),
        *_norm_specs(mirrored=True),
        InterventionSpec(
            "norm_permute_control",
            "norms of the same position in another sequence",
            lambda fit, **_: NormPermuteControl(),
            **_CAUSAL,
        ),
        _SUBSPACE_SWAP,
        InterventionSpec(
            "subspace_swap_random",
            "random subspace of the same variance share swapped",
            _subspace_swap_random,
            drawn=True,
            fitted_on="states",
            matched_to=_SUBSPACE_SWAP,
            **_CAUSAL,
        ),
        _LEACE,
        InterventionSpec(
            "erase_random",
            "as many random directions erased, as large a change",
            _erase_random,
            drawn=True,
            fitted_on="states",
            matched_to=_LEACE,
            **_CAUSAL,
        ),
        InterventionSpec(
            "leace_random",
            "LEACE of shuffled positions",
            _leace,
            fitted_on="states",
            params={"shuffled": True},
            **_CAUSAL,
        ),
        InterventionSpec(
            "uniform_attention",
            "uniform attention",
            lambda fit, *, heads=None, **_: UniformAttention(heads=heads),
            role="tested",
            site="pattern",
            **_CAUSAL,
        ),
        *(_arm_spec(kind) for kind in ARMS.values()),
    )
}
NAMES = tuple(SPECS)
# The carrier of position each spec changes, in words: the interventions figure draws one panel
# per family. A control joins the family of the change it controls, else of the change whose
# name starts like its own ("leace_random": linear position); the baseline has none.
_CARRIERS = {"norms": "norms", "subspace": "position subspace", "linear": "linear position"}
_CARRIERS |= {"curve": "position curve", None: "attention"}
_TESTED = {name: _CARRIERS[spec.claim] for name, spec in SPECS.items() if spec.role == "tested"}
FAMILIES = _TESTED | {SPECS[n].control: f for n, f in _TESTED.items() if SPECS[n].control != "none"}
FAMILIES |= {
    name: next((f for t, f in _TESTED.items() if t.split("_")[0] == name.split("_")[0]), "other")
    for name in SPECS
    if name not in FAMILIES and SPECS[name].role != "baseline"
}
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


def specs_in(stage: str) -> tuple[str, ...]:
    """The names of the specs the study runs in `stage` (one of `STAGES`), in table order.

    >>> specs_in("text")[:4]
    ('none', 'position_shift', 'position_rotate', 'position_scatter')
    >>> specs_in("text")[4:]
    ('position_random', 'position_edges', 'position_edges_random')
    """
    if stage not in STAGES:
        raise UsageError(f"unknown stage {stage!r}; choose from {list(STAGES)}")
    return tuple(name for name, spec in SPECS.items() if stage in spec.stages)


def plan_units(
    model: Any,
    layers: Sequence[int] | None,
    interventions: Sequence[str | InterventionSpec],
    readouts: Sequence[str],
    control_draws: int,
    doses: Sequence[int | float] = DEFAULT_DOSES,
) -> list[Unit]:
    """The units of a run, checked (layers default to all; each spec in its own read-out
    variants only; a dosed spec at each of `doses`, its dosed control added when not asked
    for).

    Raises:
        ValueError: a layer out of range, unknown or repeated interventions or read-out
            variants, an intervention none of whose read-out variants is asked for,
            control_draws < 1, or doses that are not distinct ints >= 1.
    """
    specs = check_interventions(interventions)
    doses = check_doses(doses)
    names = {s.name for s in specs}
    controls = [s.control for s in specs if s.dosed and s.control not in names]
    specs += [SPECS[c] for c in dict.fromkeys(controls) if SPECS[c].dosed]
    n_layers = model.cfg.n_layers
    layers = list(range(n_layers)) if layers is None else list(layers)
    bad = [x for x in layers if not is_int(x) or not 0 <= x < n_layers]
    if bad or not layers:
        raise UsageError(f"layers {bad or layers} are not in [0, {n_layers - 1}]")
    readouts = list(readouts)
    if not readouts or set(readouts) - set(READOUTS) or len(set(readouts)) < len(readouts):
        raise UsageError(f"readouts must be distinct names from {list(READOUTS)}, got {readouts}")
    for variants in dict.fromkeys(s.readouts for s in specs):
        left_out = [s.name for s in specs if s.readouts == variants]
        if not set(variants) & set(readouts):
            needed = " or ".join(repr(r) for r in variants)
            raise UsageError(f"{left_out} need the {needed} read-out")
    if not is_int(control_draws) or control_draws < 1:
        raise UsageError(f"control_draws must be an int >= 1, got {control_draws!r}")
    return [
        Unit(layer, readout, spec, dose)
        for layer in layers
        for readout in readouts
        for spec in specs
        if readout in spec.readouts
        for dose in spec.doses(doses)
    ]
