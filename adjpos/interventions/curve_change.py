"""The position-curve arms (`curve_arms`) as interventions of the runner, and the columns each
arm's row carries: its size, its manipulation checks (`curve_checks`) and where its wrong
answers point.

`build_curve_change` turns one arm (`curve_arms.CurveArm`) into a `CurveChange` set to one size
of the dose: the size of the full shift by m (`curve_arms.dose_targets`) on the fitting
prompts' states, each prompt length weighing as many prompts as the measured prompts have of
it, the arm's parameter matched to it (`curve_arms.match_arm`). The read-out variant decides
which positions change (`curve_arms.changed_positions`):

- ``kept``: every prompt position before the read-out (the last prompt position); the change
  is the prompt's alone, so decoding runs the prompt once under the change and then reuses a
  KV cache (`adjpos.training.decode.predict_cached`).
- ``changed``: every prompt position, the read-out included. The answer positions (decoded
  after the prompt) keep their states: the curve is fitted on prompts, and positions beyond
  the prompt have none. So this variant too changes the prompt alone and decodes with a KV
  cache, and it differs from ``kept`` by the read-out position's own state.

`curve_columns` gives a unit's arm columns from its built draws and what decoding returned.
The checks are computed on the measured prompts' states at the layer (the states the change
writes: the change acts on the input of the block, so the states after it are the states
before it, changed), pooled over prompt lengths with the prompts as weights, and over the
draws by their mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.interventions.curve_arms import (
    TOLERANCE,
    CurveArm,
    Matched,
    apply_curve,
    changed_positions,
    dose_targets,
    match_arm,
)
from adjpos.interventions.curve_checks import (
    OFFSETS,
    curve_adjacency,
    curve_distance_change,
    curve_offset,
    error_offset_shares,
    passes_check,
    probe_accuracy,
    probe_offset,
    prompt_adjacency,
    readout_similarity_spearman,
    varying_positions,
)
from adjpos.interventions.position_curve import PromptStates, position_curves
from adjpos.tables import Table
from adjpos.validation import UsageError

# The columns of the position curve's arms (`curve_change`); missing on the other rows.
ARM_TABLE = Table(
    arm="string",  # the arm in the rule's names: "shift+1", "rotate", "scatter", "random", ...
    dose="Int64",  # the shift magnitude m whose full shift's size the arm is matched to
    offset="Int64",  # a shift's k: each changed state carries the curve of position t - k
    size_target="float64",  # that size, mean ||h' - h|| / ||h|| on the fitting prompts
    parameter="float64",  # the arm's matched parameter (blend, angle, fraction, alpha, scale)
    # (the change size measured while decoding is `perturbation`)
    distance_change="float64",  # relative change of the pairwise distances of the curve
    curve_offset="float64",  # nearest unchanged curve point's position minus t (-k: shift k)
    curve_adjacency="float64",  # the changed curve's own locality (adjacency of its points)
    curve_adjacency_before="float64",  # the same of the unchanged curve
    prompt_adjacency="float64",  # adjacency score of the changed prompt rows, after
    prompt_adjacency_before="float64",  # the same, before the change
    readout_spearman="float64",  # Spearman of cosine with distance, seen from the read-out
    readout_spearman_before="float64",  # the same, before the change
    probe_accuracy="float64",  # a position probe fitted on unchanged states, on changed ones
    probe_accuracy_before="float64",  # the same probe on the unchanged measured states
    probe_offset="float64",  # the mean change of its reading (about -k after a shift by k)
    check_passed="boolean",  # the manipulation check (`curve_checks.passes_check`, sizes)
    n_wrong="float64",  # wrong answer characters compared (all draws)
    **{
        f"error_offset_share_{j}{end}": "float64"  # share of wrong characters at offset j
        for j in OFFSETS
        for end in ("", "_low", "_high")
    },
)
# The manipulation checks among them.
_NAMES = ARM_TABLE.names
CHECKS = tuple(_NAMES[_NAMES.index("distance_change") : _NAMES.index("check_passed")])


@dataclass(frozen=True, eq=False)
class CurveChange:
    """One arm at one size, applied to the prompt states of every fitted length: each
    changed state takes c'[t] - c[t] (`curve_arms.apply_curve`, its norm kept).

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


def fit_position_probe(prompts: PromptStates, counts: Mapping[int, int]) -> Any:
    """A ridge probe of position (`adjpos.probes.fit.make_probe`) fitted on the unchanged
    fitting states of the measured lengths, its prediction rounded to a position."""
    from adjpos.probes.fit import make_probe

    x = torch.cat([prompts[n][0].reshape(-1, prompts[n][0].shape[-1]) for n in sorted(counts)])
    y = torch.cat([torch.arange(n).repeat(len(prompts[n][0])) for n in sorted(counts)])
    return _Rounded(make_probe("ridge").fit(x.double().numpy(), y.numpy()))


@dataclass(frozen=True)
class _Rounded:
    probe: Any

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.rint(self.probe.predict(x))


def curve_columns(
    built: Sequence[CurveChange],
    decoded: Sequence[Sequence[str]] | None,
    *,
    states: Mapping[int, Tensor],
    tokens: Mapping[int, Tensor],
    probe: Any,
    size: float,
    seed: int,
    prompts: Sequence[str] = (),
    answers: Sequence[str] = (),
    task: str | None = None,
) -> dict[str, Any]:
    """The arm columns of one unit.

    Args:
        built: its draws (one `CurveChange` each).
        decoded: each draw's answers to `prompts` (whose right answers are `answers`); None
            with `task` None where nothing is decoded (text: no error-offset columns).
        states: {prompt length: [n, L, d_model]} the measured prompts' states at the layer.
        tokens: {prompt length: [n, L]} the fitting prompts' tokens (where the format's
            fixed tokens sit).
        probe: the position probe (`fit_position_probe`).
        task: the task's name (`curve_checks.TASK_OFFSETS`); None: no error-offset columns.
        size: the change size measured while decoding (the row's ``perturbation``).

    Returns:
        the arm columns (see `adjpos.interventions.INTERVENTION_TABLE`), ``check_passed``
        True when every draw passes `curve_checks.passes_check` with the size measured while
        decoding and its size on the fitting prompts both within `TOLERANCE` of the target.
    """
    first = built[0].matched
    memo: dict[int, dict[str, float]] = {}
    numbers = [_checks(change, states, tokens, probe, memo) for change in built]
    passed = all(
        change.matched.matched
        and passes_check(
            change.matched.arm.arm,
            checks | {"size": size, "target": first.target, "offset": first.arm.offset},
            tolerance=TOLERANCE,
        )
        for change, checks in zip(built, numbers, strict=True)
    )
    shares = {}
    if task is not None:
        shares = error_offset_shares(
            [a for answers_of in decoded or () for a in answers_of],
            list(answers) * len(decoded or ()),
            list(prompts) * len(decoded or ()),
            task,
            offsets=OFFSETS,
            seed=seed,
        )
    return (
        {"arm": rule_name(first.arm), "size_target": first.target}
        | {"parameter": float(np.mean([c.matched.parameter for c in built]))}
        | {name: _nanmean(np.array([n[name] for n in numbers])) for name in CHECKS}
        | {"check_passed": passed}
        | shares
    )


class ArmMeasurement:
    """What the arm rows of one run on a task share: the measured prompts' lengths, their
    states at each layer, the position probe of each layer and the unchanged model's exact
    match on them, each computed once.

    Args:
        model, task: the model and its task.
        test: the measured prompts (a `adjpos.tasks.TaskBatch`).
        seed: the bootstrap's seed.
    """

    def __init__(self, model: Any, task: Any, test: Any, seed: int) -> None:
        self.model, self.task, self.test, self.seed = model, task, test, seed
        lengths = [len(task.encode(p)) for p in test.prompts]
        self.counts = {n: lengths.count(n) for n in sorted(set(lengths))}
        self.states: dict[int, dict[int, Tensor]] = {}
        self.probes: dict[int, Any] = {}
        self.hits: np.ndarray | None = None

    def columns(
        self,
        built: Sequence[CurveChange],
        decoded: Sequence[Sequence[str]],
        *,
        layer: int,
        fit: PromptStates,
        row: dict[str, Any],
    ) -> dict[str, Any]:
        """`curve_columns` of a unit at `layer` (`fit`: the fitting prompts' states there;
        `row`: its measured columns, with ``perturbation``)."""
        if layer not in self.probes:
            self.probes[layer] = fit_position_probe(fit, self.counts)
        return curve_columns(
            built,
            decoded,
            states=self.states_at(layer),
            tokens={n: fit[n][1] for n in self.counts},
            probe=self.probes[layer],
            prompts=self.test.prompts,
            answers=self.test.answers,
            task=self.task.name,
            size=row["perturbation"],
            seed=self.seed,
        )

    def states_at(self, layer: int) -> dict[int, Tensor]:
        """{prompt length: [n, L, d_model]} the measured prompts' states entering `layer`."""
        from adjpos.capture import capture_residuals

        if layer not in self.states:
            encoded = [self.task.encode(p) for p in self.test.prompts]
            self.states[layer] = {
                n: capture_residuals(
                    self.model,
                    torch.stack([t for t in encoded if len(t) == n]),
                    layers=[layer],
                    progress=False,
                )[0].cpu()
                for n in self.counts
            }
        return self.states[layer]

    def unchanged(self) -> np.ndarray:
        """The unchanged model's exact match on each measured prompt (decoded once)."""
        from transformer_lens import HookedTransformer

        from adjpos.training.decode import predict, predict_cached

        if self.hits is None:
            decode = predict_cached if isinstance(self.model, HookedTransformer) else predict
            got = decode(self.model, self.task, list(self.test.prompts))
            right = zip(got, self.test.answers, strict=True)
            self.hits = np.array([a == b for a, b in right], float)
        return self.hits


def rule_name(arm: CurveArm) -> str:
    """The arm's name in the rule (`curve_rule`): ``shift+1``, ``rotate``, ``random``, ..."""
    return arm.arm + (f"{arm.offset:+d}" if arm.offset is not None else "")


def _checks(
    change: CurveChange,
    states: Mapping[int, Tensor],
    tokens: Mapping[int, Tensor],
    probe: Any,
    memo: dict[int, dict[str, float]],
) -> dict[str, float]:
    """One draw's check numbers, pooled over the lengths (weights: measured prompts) where
    they are defined (a curve's locality needs three varying positions, a read-out's rank
    correlation two earlier positions; NaN where no length has them). `memo` keeps each
    length's numbers of the unchanged states, the same for every draw of a unit."""
    sums: dict[str, float] = defaultdict(float)
    totals: dict[str, int] = defaultdict(int)
    for length, before in states.items():
        curve, new = change.curves[length], change.new_curves[length]
        changed = change.changed(length)
        before = before.double()
        after = apply_curve(before, curve, new, changed)
        varying = changed & varying_positions(tokens[length])
        if length not in memo:
            memo[length] = _unchanged_checks(curve, before, changed, varying, probe)
        found = memo[length] | {
            "distance_change": curve_distance_change(curve, new, changed),
            "curve_offset": curve_offset(curve, new, changed),
            "curve_adjacency": curve_adjacency(new, varying),
            "prompt_adjacency": float(prompt_adjacency(after, changed).nanmean()),
            "readout_spearman": _nanmean(readout_similarity_spearman(after, length - 1)),
            "probe_accuracy": probe_accuracy(probe, after, changed),
            # the change of the probe's reading (its own bias at the unchanged states removed)
            "probe_offset": probe_offset(probe, after, changed) - memo[length]["probe_reading"],
        }
        for name, value in found.items():
            if not np.isnan(value):
                sums[name] += len(before) * value
                totals[name] += len(before)
    return {name: sums[name] / totals[name] if totals[name] else np.nan for name in CHECKS}


def _unchanged_checks(
    curve: Tensor, before: Tensor, changed: Tensor, varying: Tensor, probe: Any
) -> dict[str, float]:
    """The check numbers of the unchanged curve and states of one length."""
    return {
        "curve_adjacency_before": curve_adjacency(curve, varying),
        "prompt_adjacency_before": float(prompt_adjacency(before, changed).nanmean()),
        "readout_spearman_before": _nanmean(
            readout_similarity_spearman(before, before.shape[1] - 1)
        ),
        "probe_accuracy_before": probe_accuracy(probe, before, changed),
        "probe_reading": probe_offset(probe, before, changed),
    }


def _nanmean(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")
