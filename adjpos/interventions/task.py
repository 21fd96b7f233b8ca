"""Causal tests on a task: what an intervention does to a model's exact match, teacher-forced
accuracy, and what it changed and left intact, with 95% intervals (Wilson for the proportions).

`intervention_table` runs every unit through the runner (`adjpos.interventions.runner`), each
measured on held-out prompts of the model's task by `adjpos.interventions.decoding`. Prompts are
grouped by length (prompt length and sequence length), so padding never enters the model and a
permutation of positions only moves real tokens; a prompt whose (prompt length, answer length)
occurs once is left out (`held_out_prompts`), so `norm_permute_control` always has another
sequence of the same length to take norms from.

The dosed specs (the position curve's arms, `curve`) add their columns (`ARM_TABLE`) and
the paired differences between the arms of one size (``return_differences``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from adjpos.capture import capture_residuals
from adjpos.interventions.curve.arms import Runs
from adjpos.interventions.curve.columns import ARM_TABLE, curve_columns, fit_position_probe
from adjpos.interventions.decoding import measure_draws
from adjpos.interventions.prompts import fit_prompt_states, fit_states, held_out_prompts
from adjpos.interventions.runner import DEFAULT_DRAWS, OutcomeColumns, run_table
from adjpos.interventions.spec import (
    DEFAULT_DOSES,
    DEFAULT_RANK,
    DEFAULT_READOUTS,
    Fitted,
    InterventionSpec,
    Unit,
)
from adjpos.interventions.specs import DEFAULT_INTERVENTIONS, plan_units
from adjpos.stats import wilson_interval
from adjpos.tables import Table, with_interval
from adjpos.tasks import Task

DEFAULT_PROMPTS = 200
INTERVENTION_TABLE = Table(
    model="string",
    task="string",
    seed="Int64",
    layer="int64",
    intervention="string",
    readout="string",
    control="string",
    rank="Int64",
    **with_interval("exact_match", "token_accuracy", "adjacency_at_layer"),
    adjacency_last="float64",
    variance_ratio_at_layer="float64",
    variance_ratio_last="float64",
    perturbation="float64",
    log_norm_change="float64",
    **with_interval("difference"),
    control_draws="Int64",
    percentile="float64",
    share="float64",
    n_prompts="int64",
)
INTERVENTION_TABLE = INTERVENTION_TABLE + ARM_TABLE
EXACT_MATCH = OutcomeColumns(
    "exact_match", "difference", +1, "hits", "draw_exact_match", "draw_hits", "offset_counts"
)


def intervention_table(
    model: Any,
    task: Task,
    *,
    layers: Sequence[int] | None = None,
    interventions: Sequence[str | InterventionSpec] = DEFAULT_INTERVENTIONS,
    n_prompts: int = DEFAULT_PROMPTS,
    rank: int = DEFAULT_RANK,
    control_draws: int = DEFAULT_DRAWS,
    readouts: Sequence[str] = DEFAULT_READOUTS,
    doses: Sequence[int | float] = DEFAULT_DOSES,
    seed: int = 0,
    model_name: str = "model",
    model_seed: int | None = None,
    folder: Any = None,
    progress: bool | None = None,
    return_differences: bool = False,
) -> Any:
    """Every (layer, read-out variant, intervention) unit on fresh held-out prompts of
    `task`, as a DataFrame with the columns of `INTERVENTION_TABLE` (a dosed spec: one unit
    and row per size and offset).

    Each tested intervention is compared with its control (its spec's ``control``) on the
    same prompts: ``difference`` is the mean per-prompt difference in exact match
    (intervention minus control), with a paired bootstrap interval over prompts
    (``difference_low``, ``difference_high``). A drawn control is measured `control_draws`
    times (its row holds the mean over draws, per prompt), and the tested row's
    ``percentile`` is the share (%) of the draws whose exact match is below its own (ties
    count half).

    Args:
        model: a TransformerLens model trained on `task`.
        layers: layers to intervene at (default: all, 0 .. n_layers - 1; layer l is the input
            of block l, 0 = the token embeddings).
        interventions: names from `SPECS` (default: all), or your own `InterventionSpec`s.
        n_prompts: test prompts (and as many fitting prompts), see `held_out_prompts`.
        rank: rank of the position subspace (and its random control).
        control_draws: draws of each random control.
        readouts: the read-out variants to run, from `READOUTS` ("kept", the default: the
            read-out positions untouched; "changed": changed like the others, decoded
            without a cache). A spec runs in its own ``readouts`` only.
        doses: the sizes of the dosed specs (the position curve's arms): at m, the size of
            the full shift of the curve by m (see `adjpos.interventions.curve.change`).
        seed: seed of the prompts, the permutations, the random draws and the bootstrap.
        model_name, model_seed: the model and seed columns.
        folder: an `adjpos.runs.RunFolder`: finished units are read back from it instead of
            recomputed, and each unit is marked done as it finishes (resumable).
        progress: show a progress bar over units (default: only on a terminal).
        return_differences: return ``(table, differences)``, the second the paired
            differences between the arms of each size (`CURVE_DIFFERENCES`; empty without a
            dosed spec), which `adjpos.interventions.cell_numbers` reads with the table.

    Raises:
        ValueError: a layer out of range, unknown interventions or read-out variants, too few
            prompts or draws, bad doses, or a rank the position subspace cannot have.
    """
    units = plan_units(model, layers, interventions, readouts, control_draws, doses)
    measured = _OnTask(model, task, held_out_prompts(task, n_prompts, seed=seed), rank, seed)
    columns = {"model": model_name, "task": task.name, "seed": model_seed}
    kept = {"folder": folder, "progress": progress, "return_differences": return_differences}
    run = {"table": INTERVENTION_TABLE, "control_draws": control_draws, "seed": seed}
    return run_table(units, measured, columns=columns, **run, **kept)


class _OnTask:
    """The runner's measurement on a task: fitted on ``held.fit``, measured on ``held.test``;
    what the units share (fitted states, the measured prompts' states and position probe at
    each layer, the unchanged model's exact match) computed once."""

    outcome = EXACT_MATCH

    def __init__(self, model: Any, task: Task, held: Any, rank: int, seed: int) -> None:
        self.model, self.task, self.held, self.rank, self.seed = model, task, held, rank, seed
        self.lengths = [len(task.encode(p)) for p in held.test.prompts]
        self.counts = {n: self.lengths.count(n) for n in sorted(set(self.lengths))}
        self.states: dict[int, tuple[Tensor, Tensor]] = {}
        self.prompts: dict[int, Any] = {}
        self.measured: dict[int, dict[tuple[int, Runs], Tensor]] = {}
        self.probes: dict[int, Any] = {}
        self.hits: np.ndarray | None = None

    def fitted(self, layer: int, needs: set[str]) -> Fitted:
        if "states" in needs and layer not in self.states:
            self.states[layer] = fit_states(self.model, self.held.fit, layer)
        if "prompts" in needs and layer not in self.prompts:
            self.prompts[layer] = fit_prompt_states(
                self.model, self.task, self.held, layer, seed=self.seed
            )
        states, positions = self.states.get(layer, (None, None))
        return Fitted(
            d_model=self.model.cfg.d_model,
            seed=self.seed,
            rank=self.rank,
            states=states,
            positions=positions,
            prompts=self.prompts.get(layer),
            counts=self.counts,
            runs_of=lambda tokens: self.task.runs(self.task.decode(tokens)),
        )

    def measure(self, built: list[Any], unit: Unit) -> dict[str, Any]:
        where = {"layer": unit.layer, "batch": self.held.test, "readout": unit.readout}
        measured = measure_draws(self.model, self.task, built, **where, seed=self.seed)
        answers = [m.pop("answers") for m in measured]
        draw_hits = [m["hits"] for m in measured]
        row = _mean_of_draws(measured)
        if unit.dose is None:
            return row
        fit, test = self.prompts[unit.layer], self.held.test
        if unit.layer not in self.probes:
            self.probes[unit.layer] = fit_position_probe(fit, self.counts)
        layout = {"lengths": self.lengths, "states": self.states_at(unit.layer)}
        fitted = {"tokens": {n: fit[n][1] for n in self.counts}, "probe": self.probes[unit.layer]}
        decoded = {"prompts": test.prompts, "answers": test.answers, "task": self.task.name}
        columns = curve_columns(built, answers, **layout, **fitted, **decoded)
        return row | {"draw_hits": draw_hits} | columns

    def states_at(self, layer: int) -> dict[tuple[int, Runs], Tensor]:
        """{(prompt length, runs): [n, L, d_model]} the measured prompts' states entering
        `layer`, grouped by length and runs."""
        if layer not in self.measured:
            groups: dict[tuple[int, Runs], list[Tensor]] = defaultdict(list)
            for prompt in self.held.test.prompts:
                encoded = self.task.encode(prompt)
                groups[len(encoded), self.task.runs(prompt)].append(encoded)
            self.measured[layer] = {
                key: capture_residuals(
                    self.model, torch.stack(rows), layers=[layer], progress=False
                )[0].cpu()
                for key, rows in sorted(groups.items(), key=str)
            }
        return self.measured[layer]

    def unchanged(self) -> np.ndarray:
        """The unchanged model's exact match on each test prompt (decoded once)."""
        from transformer_lens import HookedTransformer

        from adjpos.training.decode import predict, predict_cached

        if self.hits is None:
            decode = predict_cached if isinstance(self.model, HookedTransformer) else predict
            got = decode(self.model, self.task, list(self.held.test.prompts))
            right = zip(got, self.held.test.answers, strict=True)
            self.hits = np.array([a == b for a, b in right], float)
        return self.hits


def _mean_of_draws(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """One draw's measurements as they are; several draws' as their mean, each prompt's exact
    match the mean over the draws (its Wilson interval over the prompts), and each draw's
    exact match under ``draw_exact_match``."""
    if len(measured) == 1:
        return dict(measured[0])
    out = {k: float(np.mean([m[k] for m in measured])) for k in measured[0] if k != "hits"}
    hits = np.mean([m["hits"] for m in measured], axis=0)
    out["exact_match_low"], out["exact_match_high"] = wilson_interval(float(hits.sum()), len(hits))
    out["n_prompts"] = measured[0]["n_prompts"]
    out["hits"] = hits.tolist()
    out["draw_exact_match"] = [m["exact_match"] for m in measured]
    return out
