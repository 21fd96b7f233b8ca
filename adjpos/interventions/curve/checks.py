"""Manipulation checks of the position-curve arms (`arms`): what a change did to the thing
its name says it changes, one number each. They are numbers only: the study judges them
(`adjpos.study.rules.check_passed`, thresholds in `adjpos.study.claim.Criteria`), and a row
whose change did not do what its name says is reported and not counted.

- `curve_distance_change`: how much the pairwise distances between the curves of the changed
  positions moved (0 for a rotation, by construction);
- `curve_offset`: where the changed curve's points sit on the unchanged curve (-k after a
  shift by k);
- `curve_adjacency`: the adjacency score of the changed curve itself (its locality);
  `varying_positions`: where it is measured (the positions whose token varies);
- `prompt_adjacency`: the adjacency score of each sequence's prompt rows after the change
  (`adjpos.scoring.sequence_scores`);
- `readout_similarity_spearman`: seen from the read-out position, the Spearman correlation of
  each earlier state's cosine with its distance (negative: nearer is more similar);
- `probe_accuracy`: how often a position probe fitted on unchanged states reads the true
  position of a changed state (and `probe_offset`: its mean error, -k after a shift by k).

Every adjacency here uses the library's one tie rule (`adjpos.metrics.adjacency_probability`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.interventions.curve.arms import apply_curve
from adjpos.interventions.curve.change import CurveChange
from adjpos.interventions.curve.offsets import OFFSETS, error_offset_shares
from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.scoring import sequence_scores
from adjpos.stats import spearman
from adjpos.tables import Table
from adjpos.types import PromptStates
from adjpos.validation import UsageError


def curve_distance_change(
    curve: Float[Tensor, "pos d_model"],
    new_curve: Float[Tensor, "pos d_model"],
    changed: Bool[Tensor, " pos"],
) -> float:
    """||D' - D|| / ||D|| (Frobenius) with D[i, j] = ||c[i] - c[j]|| over the pairs of
    changed positions (0 when the curves of the changed positions keep every distance; NaN
    for fewer than two changed positions or a constant curve)."""
    index = changed.nonzero().flatten()
    before = torch.cdist(curve[index].double(), curve[index].double())
    after = torch.cdist(new_curve[index].double(), new_curve[index].double())
    scale = float(before.norm())
    if len(index) < 2 or scale == 0:
        return float("nan")
    return float((after - before).norm()) / scale


def curve_offset(
    curve: Float[Tensor, "pos d_model"],
    new_curve: Float[Tensor, "pos d_model"],
    changed: Bool[Tensor, " pos"],
) -> float:
    """The mean over the changed positions t of s(t) - t, s(t) the position whose point of
    the unchanged curve is nearest c'[t] (-k after a full shift by k away from the clamp; 0
    for a change that leaves each point nearest its own). NaN without a changed position."""
    index = changed.nonzero().flatten()
    if not len(index):
        return float("nan")
    nearest = torch.cdist(new_curve[index].double(), curve.double()).argmin(dim=1)
    return float((nearest - index).double().mean())


def curve_adjacency(curve: Float[Tensor, "pos d_model"], changed: Bool[Tensor, " pos"]) -> float:
    """The locality of the curve itself over the changed positions: the adjacency score
    (`adjpos.metrics.adjacency_probability`) of minus the distances between its points, how
    often a nearer position's point is nearer; 1 for a curve whose distances grow with the
    gap between positions, about 0.5 for scattered points. Distances, not cosines: the curve
    is centred over positions, so its cosines depend on where that centre falls. NaN for
    fewer than 3 changed positions."""
    index = changed.nonzero().flatten()
    if len(index) < 3:
        return float("nan")
    points = curve[index].double()
    return float(adjacency_probability(-torch.cdist(points, points)))


def varying_positions(tokens: Int[Tensor, "n pos"]) -> Bool[Tensor, " pos"]:
    """The positions whose token differs between prompts of one length. At a position that
    always holds the same token (a prompt format's ``rev(``) the token's mean state takes the
    position's too, so the curve there is a point shared by every such position, and
    locality is measured without them."""
    return (tokens != tokens[:1]).any(dim=0).cpu()


def prompt_adjacency(
    states: Float[Tensor, "batch pos d_model"],
    changed: Bool[Tensor, " pos"],
) -> Float[Tensor, " batch"]:
    """Each sequence's adjacency score over the rows of its changed positions (each row
    looking at every earlier position), by `adjpos.scoring.sequence_scores`; NaN for a
    sequence without a defined changed row (fewer than 3 positions)."""
    batch, pos, _ = states.shape
    rows = changed.to(torch.bool).expand(batch, pos).clone()
    lengths = torch.full((batch,), pos, dtype=torch.long)
    return sequence_scores(states.double(), lengths, rows=rows)


def readout_similarity_spearman(
    states: Float[Tensor, "batch pos d_model"], readout: int
) -> np.ndarray:
    """[batch] for each sequence, the Spearman correlation between cos(h[readout], h[j]) and
    the distance readout - j over the earlier positions j < readout (negative when nearer
    states are more similar; NaN with fewer than 2 earlier positions or constant cosines)."""
    if not 0 <= readout < states.shape[1]:
        raise UsageError(f"readout must be a position in [0, {states.shape[1] - 1}]")
    if readout < 2:
        return np.full(states.shape[0], np.nan)
    similarity = cosine_matrix(states.double())[:, readout, :readout].numpy()
    # spearman() correlates with the index j; the distance readout - j runs the other way
    return np.array([-spearman(row) for row in similarity])


def probe_accuracy(
    probe: Any, states: Float[Tensor, "batch pos d_model"], changed: Bool[Tensor, " pos"]
) -> float:
    """The share of the changed states whose position `probe` (anything with
    ``predict(X) -> positions``, fitted on unchanged states) reads right."""
    predicted, true = _probe_read(probe, states, changed)
    return float((predicted == true).mean())


def probe_offset(
    probe: Any, states: Float[Tensor, "batch pos d_model"], changed: Bool[Tensor, " pos"]
) -> float:
    """The mean of predicted minus true position over the changed states (-k for states that
    carry the curve of position t - k and a probe that reads it)."""
    predicted, true = _probe_read(probe, states, changed)
    return float((predicted - true).mean())


def _probe_read(probe: Any, states: Tensor, changed: Tensor) -> tuple[np.ndarray, np.ndarray]:
    index = changed.nonzero().flatten()
    x = states[:, index].reshape(-1, states.shape[-1]).double().cpu().numpy()
    true = index.repeat(states.shape[0]).numpy()
    return np.asarray(probe.predict(x)).reshape(-1).astype(float), true.astype(float)


# --- the columns of an arm's row ---------------------------------------------------------

# The columns of the position curve's arms; missing on the other rows.
ARM_TABLE = Table(
    arm="string",  # the arm in the rule's names: "shift+1", "rotate", "scatter", "random", ...
    dose="Int64",  # the shift magnitude m whose full shift's size the arm is matched to
    offset="Int64",  # a shift's k: each changed state carries the curve of position t - k
    size_target="float64",  # that size, mean ||h' - h|| / ||h|| on the fitting prompts
    parameter="float64",  # the arm's matched parameter (blend, angle, fraction, alpha, scale)
    # (the change size measured while decoding is `perturbation`)
    distance_change="float64",  # relative change of the pairwise distances of the curve
    curve_offset="float64",  # nearest unchanged curve point's position minus t (-k: shift k)
    curve_moved="float64",  # a shift's curve_offset times -sign(k): above 0, moved its way
    curve_adjacency="float64",  # the changed curve's own locality (adjacency of its points)
    curve_adjacency_before="float64",  # the same of the unchanged curve
    locality_drop="float64",  # curve_adjacency_before - curve_adjacency
    prompt_adjacency="float64",  # adjacency score of the changed prompt rows, after
    prompt_adjacency_before="float64",  # the same, before the change
    readout_spearman="float64",  # Spearman of cosine with distance, seen from the read-out
    readout_spearman_before="float64",  # the same, before the change
    probe_accuracy="float64",  # a position probe fitted on unchanged states, on changed ones
    probe_accuracy_before="float64",  # the same probe on the unchanged measured states
    probe_offset="float64",  # the mean change of its reading (about -k after a shift by k)
    size_error="float64",  # the largest |size / target - 1| of its draws (fit and decoding)
    check_value="float64",  # its check number (`arms.Check`), the draw that passes least
    n_wrong="float64",  # wrong answer characters compared (all draws)
    **{
        f"error_offset_share_{j}{end}": "float64"  # share of wrong characters at offset j
        for j in OFFSETS
        for end in ("", "_low", "_high")
    },
)
# The manipulation checks among them (each a mean over the draws).
_NAMES = ARM_TABLE.names
CHECKS = tuple(_NAMES[_NAMES.index("distance_change") : _NAMES.index("size_error")])


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
        task: the task's name (`offsets.TASK_OFFSETS`); None: no error-offset columns.
        size: the change size measured while decoding (the row's ``perturbation``).

    Returns:
        the arm columns (see `adjpos.interventions.INTERVENTION_TABLE`) with the numbers its
        manipulation check is judged on (`adjpos.study.rules.check_passed`): ``size_error``,
        the largest relative distance from the target of the size measured while decoding
        and of each draw's size on the fitting prompts, and ``check_value``, its arm's check
        number (`arms.Check`) at the draw that passes least.
    """
    first = built[0].matched
    memo: dict[int, dict[str, float]] = {}
    numbers = [_checks(change, states, tokens, probe, memo) for change in built]
    errors = [abs(size / first.target - 1)] + [
        abs(c.matched.size / first.target - 1) for c in built
    ]
    check = first.arm.kind.check
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
        {"arm": first.arm.name, "size_target": first.target}
        | {"parameter": float(np.mean([c.matched.parameter for c in built]))}
        | {name: _nanmean(np.array([n[name] for n in numbers])) for name in CHECKS}
        | {"size_error": max(errors)}
        | {"check_value": None if check is None else check.worst(n[check.number] for n in numbers)}
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
    offset, nan = change.matched.arm.offset, float("nan")
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
            "curve_moved": -np.sign(offset) * curve_offset(curve, new, changed) if offset else nan,
            "curve_adjacency": curve_adjacency(new, varying),
            "prompt_adjacency": float(prompt_adjacency(after, changed).nanmean()),
            "readout_spearman": _nanmean(readout_similarity_spearman(after, length - 1)),
            "probe_accuracy": probe_accuracy(probe, after, changed),
            # the change of the probe's reading (its own bias at the unchanged states removed)
            "probe_offset": probe_offset(probe, after, changed) - memo[length]["probe_reading"],
        }
        found["locality_drop"] = found["curve_adjacency_before"] - found["curve_adjacency"]
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
