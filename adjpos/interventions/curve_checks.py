"""Manipulation checks of the position-curve arms (`curve_arms`): what a change did to the
thing its name says it changes, one number each, so that a row whose change did not do what
its name says is reported and not counted.

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
  position of a changed state (and `probe_offset`: its mean error, -k after a shift by k);
- `error_offset_counts` / `error_offset_shares`: of the wrong answer characters, the share
  equal to the character "at offset j of the one asked for", j = -2..2 (`TASK_OFFSETS` says
  what that is for each task).

`passes_check` turns the numbers of one arm into a pass or fail by the criteria written in
its docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.scoring import sequence_scores
from adjpos.stats import bootstrap_interval, spearman
from adjpos.validation import UsageError

OFFSETS = (-2, -1, 0, 1, 2)


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


def curve_adjacency(
    curve: Float[Tensor, "pos d_model"], changed: Bool[Tensor, " pos"], *, ties: str = "half"
) -> float:
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
    return float(adjacency_probability(-torch.cdist(points, points), ties=ties))


def varying_positions(tokens: Int[Tensor, "n pos"]) -> Bool[Tensor, " pos"]:
    """The positions whose token differs between prompts of one length. At a position that
    always holds the same token (a prompt format's ``rev(``) the token's mean state takes the
    position's too, so the curve there is a point shared by every such position, and
    locality is measured without them."""
    return (tokens != tokens[:1]).any(dim=0).cpu()


def prompt_adjacency(
    states: Float[Tensor, "batch pos d_model"],
    changed: Bool[Tensor, " pos"],
    *,
    ties: str = "half",
) -> Float[Tensor, " batch"]:
    """Each sequence's adjacency score over the rows of its changed positions (each row
    looking at every earlier position), by `adjpos.scoring.sequence_scores`; NaN for a
    sequence without a defined changed row (fewer than 3 positions)."""
    batch, pos, _ = states.shape
    rows = changed.to(torch.bool).expand(batch, pos).clone()
    lengths = torch.full((batch,), pos, dtype=torch.long)
    return sequence_scores(states.double(), lengths, ties=ties, rows=rows)


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


# --- error offsets ------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetMap:
    """What "the character at offset j of the one asked for" is on one task.

    Attributes:
        candidate: ``(prompt, answer, i, j) -> str | None``, the character answer position i
            would hold if the model read the prompt j places off (None: no such character);
            at j = 0 it is the right answer.
        direction: +1 when a shift of the curve by k (every state carrying the curve of
            t - k) makes an address reader answer with offset +k, -1 when with offset -k.
        meaning: the definition, in words.
    """

    candidate: Callable[[str, str, int, int], str | None]
    direction: int
    meaning: str


def reversal_source(prompt: str, i: int) -> int:
    """The prompt position answer digit i of a reversal copies: ``rev(d0..dn-1)=`` answers
    d[n-1-i], which sits at 4 + n - 1 - i (after ``rev(``)."""
    n = len(prompt) - len("rev()=")
    if not 0 <= i < n:
        raise UsageError(f"answer position {i} is outside the {n} digits of {prompt!r}")
    return len("rev(") + n - 1 - i


def _reversal(prompt: str, answer: str, i: int, j: int) -> str | None:
    at = reversal_source(prompt, i) + j
    return prompt[at] if 0 <= at < len(prompt) else None


def _addition(prompt: str, answer: str, i: int, j: int) -> str | None:
    at = i + j
    return answer[at] if 0 <= at < len(answer) else None


def _index_value(prompt: str, answer: str, i: int, j: int, count: int) -> str | None:
    value = int(answer) + j
    text = str(value)
    return text[i] if 0 <= value < count and len(text) == len(answer) else None


def _indexing(prompt: str, answer: str, i: int, j: int) -> str | None:
    digits = prompt[len("wherex(") : prompt.index(",")]
    return _index_value(prompt, answer, i, j, len(digits))


def _ordering(prompt: str, answer: str, i: int, j: int) -> str | None:
    original = prompt[len("ord(") : prompt.index(",")]
    return _index_value(prompt, answer[i], 0, j, len(original))


TASK_OFFSETS = {
    "reversal": OffsetMap(
        _reversal,
        +1,
        "answer digit i copies prompt digit n-1-i; offset j: the prompt character j places "
        "after it (prompt digit n-1-i+j, or a bracket at the ends)",
    ),
    "addition": OffsetMap(
        _addition,
        +1,
        "answer digit i sums the operand digits of one place value; offset j: the right "
        "answer's digit j places to its right (the sum of the place value j lower)",
    ),
    "indexing": OffsetMap(
        _indexing,
        -1,
        "the answer is the position a of the first q; offset j: the answer a + j (reading "
        "the position of the digit j places after it)",
    ),
    "ordering": OffsetMap(
        _ordering,
        -1,
        "answer i is the index x in o of r's digit i; offset j: the index x + j (reading the "
        "position of o's digit j places after it)",
    ),
}


def error_offset_counts(
    predicted: Sequence[str],
    answers: Sequence[str],
    prompts: Sequence[str],
    task: str,
    *,
    offsets: Sequence[int] = OFFSETS,
) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt and offset j in `offsets` (default `OFFSETS`, -2..2): how many wrong answer
    characters equal the character at offset j (`TASK_OFFSETS`), and how many wrong
    characters have one there.

    A wrong character is a position i < min(len(predicted), len(answer)) where they differ
    (a missing or extra character is not compared). One character can match several
    offsets (a digit repeated in the prompt), so the shares need not sum to 1.

    Returns:
        (matches, counted): two int arrays [prompt, len(offsets)].
    """
    if task not in TASK_OFFSETS:
        raise UsageError(f"no error offsets for task {task!r}; known: {list(TASK_OFFSETS)}")
    if not len(predicted) == len(answers) == len(prompts):
        raise UsageError("predicted, answers and prompts must have one entry per prompt")
    candidate = TASK_OFFSETS[task].candidate
    matches = np.zeros((len(prompts), len(offsets)), dtype=int)
    counted = np.zeros_like(matches)
    for row, (got, right, prompt) in enumerate(zip(predicted, answers, prompts, strict=True)):
        for i in range(min(len(got), len(right))):
            if got[i] == right[i]:
                continue
            for col, j in enumerate(offsets):
                expected = candidate(prompt, right, i, j)
                if expected is not None:
                    counted[row, col] += 1
                    matches[row, col] += got[i] == expected
    return matches, counted


def error_offset_shares(
    predicted: Sequence[str],
    answers: Sequence[str],
    prompts: Sequence[str],
    task: str,
    *,
    offsets: Sequence[int] = OFFSETS,
    seed: int = 0,
) -> dict[str, float]:
    """``error_offset_share_{j}`` (j in `offsets`, default -2..2, e.g.
    ``error_offset_share_-1``; a shift by k needs j = +-k among them): the pooled
    share of wrong answer characters equal to the character at offset j, with its 95%
    bootstrap interval over prompts (``_low``, ``_high``), and ``n_wrong`` (NaN shares
    without a wrong character)."""
    offsets = sorted(set(offsets) | {0})
    matches, counted = error_offset_counts(predicted, answers, prompts, task, offsets=offsets)
    out: dict[str, float] = {"n_wrong": float(counted[:, offsets.index(0)].sum())}
    for col, j in enumerate(offsets):
        name = f"error_offset_share_{j}"
        weights = counted[:, col]
        if not weights.sum():
            out |= {name: np.nan, f"{name}_low": np.nan, f"{name}_high": np.nan}
            continue
        share = matches[:, col] / np.maximum(weights, 1)
        low, high = bootstrap_interval(share, weights, seed=seed)
        out |= {name: float(matches[:, col].sum() / weights.sum())}
        out |= {f"{name}_low": low, f"{name}_high": high}
    return out


# --- pass or fail -------------------------------------------------------------------------

DISTANCE_KEPT = 1e-6  # a rotation keeps the curve's distances to rounding
LOCALITY_DROP = 0.05  # a scatter lowers the curve's adjacency at least this much


def passes_check(arm: str, checks: dict[str, Any], *, tolerance: float = 0.05) -> bool:
    """Whether one arm's change did what its name says, from its check numbers:

    - every arm: ``size`` within `tolerance` (relative) of ``target``;
    - ``rotate``: ``distance_change`` at most `DISTANCE_KEPT` (every curve distance kept);
    - ``shift``: ``curve_offset`` on the side of the shift (below 0 for k > 0, above 0 for
      k < 0: the changed curve sits nearest the curve of t - k); a probe fitted on whole
      states (``probe_offset``) is reported beside, not judged: it reads position mostly from
      other carriers, and any change of the size moves its reading;
    - ``scatter``: ``curve_adjacency`` at least `LOCALITY_DROP` below
      ``curve_adjacency_before`` (the curve's locality broken; the states' own adjacency
      moves less, the curve being a part of them);
    - ``remove``, ``random``: the size alone.

    `checks` holds ``size`` and ``target`` and the numbers its arm needs (``offset`` and
    ``curve_offset`` for a shift); a missing one fails.
    """
    try:
        if not abs(checks["size"] / checks["target"] - 1) <= tolerance:
            return False
        if arm == "rotate":
            return bool(checks["distance_change"] <= DISTANCE_KEPT)
        if arm == "shift":
            return bool(np.sign(checks["curve_offset"]) == -np.sign(checks["offset"]))
        if arm == "scatter":
            drop = checks["curve_adjacency_before"] - checks["curve_adjacency"]
            return bool(drop >= LOCALITY_DROP)
        return arm in ("remove", "random")
    except (KeyError, ZeroDivisionError, TypeError):
        return False
