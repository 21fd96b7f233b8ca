"""Causal tests on text: next-token loss and accuracy of a language model with one carrier of
position changed at one layer, beside its control, paired over sequences.

A text sequence has no prompt and answer; every position is read for the next token. So each
sequence of n tokens is cut in two at `cut` (default n // 2): the context, positions
skip_first .. cut - 1, is what an intervention changes, and the continuation, positions
cut .. n - 2, is where the next-token loss is read. With the read-out kept (``readout`` =
"kept", the default) the continuation's own states at the layer pass untouched, so only what
the model reads from the changed context can move the loss; with it changed, the continuation's
states change too. The first `skip_first` positions are never changed (an attention sink: the
first position of a language model often carries a massive activation that dominates norms).

The first half of the sequences fits the fitted interventions (the position subspace, LEACE,
the position curve; on positions skip_first .. n - 1), the second half is measured. The units
run through a task's runner (`adjpos.interventions.runner`), the outcome the loss: each tested
intervention's ``loss_difference`` from its control is paired over sequences (above zero, it
raises the loss more), and ``percentile`` is the share (%) of a drawn control's draws whose
loss is above the intervention's (ties count half).

The dosed specs (the position curve's arms, `curve`) run as on a task: all windows have
one length, so the curve is fitted on the fitting half's context (positions skip_first .. cut,
the read-out position cut the last) and changes the context alone (the read-out kept, the only
variant they run in on text), each arm matched in size to the full shift by the dose on the
measured windows' own states (a curve fitted on a few windows changes its fitting states more
than others, so sizes matched there would come out smaller on the measured ones). Their
rows add the arm columns (`TEXT_ARM_TABLE`) but not a task's error-offset shares: nothing is
decoded, and a next token is not a copy of a context token at a fixed offset. The paired loss
differences between the arms of one size (`CURVE_DIFFERENCES`, a - b in nats) are read by
`cell_numbers` with ``harm=-1`` (a loss rise as the harm).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.capture import capture_residuals, check_tokens
from adjpos.interventions.curve.columns import ARM_TABLE, curve_columns, fit_position_probe
from adjpos.interventions.hooks import NoIntervention, Stacked, intervene, start_at_block
from adjpos.interventions.runner import DEFAULT_DRAWS, OutcomeColumns, run_table
from adjpos.interventions.spec import (
    DEFAULT_DOSES,
    DEFAULT_RANK,
    DEFAULT_READOUTS,
    Fitted,
    InterventionSpec,
    Unit,
    check_doses,
)
from adjpos.interventions.specs import DEFAULT_INTERVENTIONS, SPECS, check_interventions, plan_units
from adjpos.scoring import sequence_scores
from adjpos.stats import bootstrap_interval, wilson_interval
from adjpos.tables import Table, with_interval
from adjpos.validation import UsageError, is_int

TEXT_TABLE = Table(
    model="string",
    layer="int64",
    intervention="string",
    readout="string",
    control="string",
    rank="Int64",
    **with_interval("loss", "accuracy"),
    adjacency_at_layer="float64",
    perturbation="float64",
    **with_interval("loss_difference"),
    control_draws="Int64",
    percentile="float64",
    share="float64",
    cut="int64",
    skip_first="int64",
    n_sequences="int64",
)
# The arm columns on text: a task's less the error offsets (nothing is decoded).
_DECODED = ("n_wrong", "answers_shorter", "answers_longer")
TEXT_ARM_TABLE = Table(
    **{k: v for k, v in ARM_TABLE.columns.items() if k not in _DECODED and "error_offset" not in k}
)
TEXT_TABLE = TEXT_TABLE + TEXT_ARM_TABLE
_LOGITS_BUDGET = 50_000_000  # logits entries per forward pass (draws are chunked to fit)
LOSS = OutcomeColumns("loss", "loss_difference", -1, "per_sequence", "draw_loss", "draw_losses")


def text_intervention_table(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    *,
    layers: Sequence[int] | None = None,
    interventions: Sequence[str | InterventionSpec] | None = None,
    cut: int | None = None,
    skip_first: int = 0,
    rank: int = DEFAULT_RANK,
    control_draws: int = DEFAULT_DRAWS,
    readouts: Sequence[str] = DEFAULT_READOUTS,
    doses: Sequence[int | float] = DEFAULT_DOSES,
    seed: int = 0,
    model_name: str = "model",
    folder: Any = None,
    progress: bool | None = None,
    return_differences: bool = False,
) -> Any:
    """Every (layer, read-out variant, intervention) unit on text `tokens` (e.g. from
    `adjpos.hf.text_tokens`), as a DataFrame with the columns of `TEXT_TABLE` (see the module
    doc for the cut, the fitting half and the statistics).

    Args:
        model: a TransformerLens model or bridge (a HookedTransformer for uniform_attention).
        tokens: [n, pos] token ids, n >= 4 (half fit, half measured).
        layers: layers to intervene at (default: all).
        interventions: names from `SPECS` or your own `InterventionSpec`s (default: all, less
            those acting on the attention pattern on a bridge).
        cut: first position of the continuation (default pos // 2).
        skip_first: positions never changed, from the start.
        rank, control_draws, readouts, doses, seed: as in `intervention_table` (the doses
            of the position curve's arms: each below the context's length cut - skip_first;
            the arms run with the read-out kept only).
        folder: an `adjpos.runs.RunFolder`: finished units are read back (resumable).
        return_differences: return ``(table, differences)``, the second the paired loss
            differences between the arms of each size (`CURVE_DIFFERENCES`, a - b in nats;
            empty without a dosed spec).

    Raises:
        ValueError: too few sequences, a cut or skip_first out of range, or a bad layer,
            intervention, read-out variant, draw count or dose.
    """
    tokens = check_tokens(model, tokens)
    n, pos = tokens.shape
    cut = pos // 2 if cut is None else cut
    if n < 4:
        raise UsageError(f"text causal tests need at least 4 sequences (half fit them), got {n}")
    if not is_int(skip_first) or skip_first < 0:
        raise UsageError(f"skip_first must be an int >= 0, got {skip_first!r}")
    if not is_int(cut) or not skip_first + 2 <= cut <= pos - 2:
        raise UsageError(
            f"cut must be an int in [skip_first + 2, pos - 2] = [{skip_first + 2}, {pos - 2}] "
            f"(a context of 2 positions, a continuation of 2), got {cut!r}"
        )
    if interventions is None:  # every default the model can take
        from transformer_lens import HookedTransformer

        hooked = isinstance(model, HookedTransformer)
        interventions = [n for n in DEFAULT_INTERVENTIONS if hooked or SPECS[n].site != "pattern"]
    names = list(interventions)
    context = cut - skip_first
    too_far = [m for m in check_doses(doses) if m >= context]
    dosed = [s.name for s in check_interventions(names) if s.dosed]
    if dosed and too_far:
        raise UsageError(
            f"doses {too_far} shift the curve past the context: each must be below its length "
            f"cut - skip_first = {context}"
        )
    if dosed and "changed" in readouts:
        raise UsageError(
            f"{dosed} run on text with the read-out kept only (readouts=['kept']): they change "
            "the context alone, and the continuation's states would dilute their size"
        )
    units = plan_units(model, layers, names, readouts, control_draws, doses)
    measured = _OnText(model, tokens, cut, skip_first, rank, seed)
    extra = {"cut": cut, "skip_first": skip_first, "n_sequences": n - n // 2}
    kept = {"folder": folder, "progress": progress, "return_differences": return_differences}
    run = {"table": TEXT_TABLE, "control_draws": control_draws, "seed": seed, "extra": extra}
    return run_table(units, measured, columns={"model": model_name}, **run, **kept)


class _OnText:
    """The runner's measurement on text: fitted on the first half of the sequences, measured
    on the second half."""

    outcome = LOSS

    def __init__(self, model: Any, tokens: Tensor, cut: int, skip: int, rank: int, seed: int):
        n = len(tokens)
        self.model, self.fit, self.test = model, tokens[: n // 2], tokens[n // 2 :]
        self.cut, self.skip, self.rank, self.seed = cut, skip, rank, seed
        self.fitted_at: dict[int, Fitted] = {}
        # the curve's one length: the context and the read-out position (cut); its one run:
        # the window after its first token, before the read-out
        self.counts = {cut + 1 - skip: len(self.test)}
        self.runs = ((1, cut - skip - 1),)
        self.probes: dict[int, Any] = {}
        self.states: dict[int, Tensor] = {}

    def fitted(self, layer: int, needs: set[str]) -> Fitted:
        if layer not in self.fitted_at:
            # the fitting half's states from skip_first on, their positions, and their context
            # (positions skip_first .. cut) as the position curve's one prompt length
            acts = capture_residuals(self.model, self.fit, layers=[layer], progress=False)[0].cpu()
            (length,), window = self.counts, slice(self.skip, self.cut + 1)
            self.fitted_at[layer] = Fitted(
                d_model=self.model.cfg.d_model,
                seed=self.seed,
                rank=self.rank,
                states=acts[:, self.skip :].reshape(-1, acts.shape[-1]),
                positions=torch.arange(self.skip, acts.shape[1]).repeat(len(self.fit)),
                prompts={length: (acts[:, window], self.fit[:, window].cpu())},
                counts=self.counts,
                runs_of=lambda tokens: self.runs,
                sizes_on={length: (self.states_at(layer), self.test[:, window])},
            )
        return self.fitted_at[layer]

    def measure(self, built: list[Any], unit: Unit) -> dict[str, Any]:
        keep = unit.readout == "kept"
        parts = [b.at(self.runs) if hasattr(b, "at") else b for b in built]
        measured = _measure(self.model, self.test, parts, unit.layer, self.cut, self.skip, keep)
        row = _summary(measured, self.seed)
        if unit.dose is None:
            return row
        fit = self.fitted_at[unit.layer].prompts
        if unit.layer not in self.probes:
            self.probes[unit.layer] = fit_position_probe(fit, self.counts)
        (length,) = self.counts
        layout = {"lengths": [length] * self.counts[length], "tokens": {length: fit[length][1]}}
        layout |= {"states": {(length, self.runs): self.states_at(unit.layer)}}
        columns = curve_columns(built, None, **layout, probe=self.probes[unit.layer])
        return row | {LOSS.per_draw_item: measured["loss"].tolist()} | columns

    def states_at(self, layer: int) -> Tensor:
        """The measured windows' states at `layer`, positions skip_first .. cut."""
        if layer not in self.states:
            acts = capture_residuals(self.model, self.test, layers=[layer], progress=False)
            self.states[layer] = acts[0][:, self.skip : self.cut + 1].cpu()
        return self.states[layer]

    def unchanged(self) -> Any:
        """The unchanged model's loss on each measured sequence."""
        args = (self.model, self.test, [NoIntervention()], 0, self.cut, self.skip, True)
        return _measure(*args)["loss"][0]


def _measure(
    model: Any, test: Tensor, built: list[Any], layer: int, cut: int, skip_first: int, keep: bool
) -> dict[str, Any]:
    """Per draw and sequence: the continuation's mean next-token loss and accuracy, and the
    adjacency score of the states at the layer; the change size pooled over all draws."""
    # the states the intervention writes: block `layer`'s input, or its output for a pattern
    site = f"blocks.{layer}.hook_resid_{'post' if built[0].site == 'pattern' else 'pre'}"
    n, pos = test.shape
    vocab = model.cfg.d_vocab_out if model.cfg.d_vocab_out > 0 else model.cfg.d_vocab
    chunk = max(1, _LOGITS_BUDGET // (n * (pos - cut) * vocab))
    loss, accuracy, adjacency, record = [], [], [], []
    target = test[:, cut + 1 :]
    hooked = {"layer": layer, "readout_from": cut, "keep_readout": keep, "skip_first": skip_first}
    # the blocks before a changed input run once; each draw's pass starts at the block
    begin = start_at_block(model, layer, site)
    inputs = capture_residuals(model, test, layers=[layer], progress=False)[0] if begin else test
    for start in range(0, len(built), chunk):
        part = built[start : start + chunk]
        change = part[0] if len(part) == 1 else Stacked(tuple(part))
        repeated = inputs.repeat(len(part), *[1] * (inputs.dim() - 1))
        with torch.inference_mode():
            with intervene(model, change, **hooked, record=record):
                logits, cache = model.run_with_cache(repeated, names_filter=[site], **begin)
        logp = logits[:, cut:-1].double().log_softmax(-1).cpu()
        right = target.repeat(len(part), 1).cpu()
        nll = -logp.gather(-1, right[..., None])[..., 0]
        loss += list(nll.mean(dim=1).view(len(part), n))
        accuracy += list((logp.argmax(-1) == right).double().mean(dim=1).view(len(part), n))
        full = torch.full((len(part) * n,), pos)
        scores = sequence_scores(cache[site].double(), full, skip_first=skip_first)
        adjacency += list(scores.view(len(part), n))
        del logits, cache
    sized = sum(k for _, k in record)
    perturbation = sum(t for t, _ in record) / sized if sized else 0.0
    return {
        "loss": torch.stack(loss).numpy(),
        "accuracy": torch.stack(accuracy).numpy(),
        "adjacency": torch.stack(adjacency).numpy(),
        "perturbation": perturbation,
        "tokens": target.numel(),
    }


def _summary(measured: dict[str, Any], seed: int) -> dict[str, Any]:
    """The row's numbers: means over draws per sequence; the loss's interval over sequences,
    the accuracy's Wilson interval over the continuation tokens (a proportion)."""
    per_sequence = measured["loss"].mean(axis=0)
    low, high = bootstrap_interval(per_sequence, seed=seed)
    row = {"loss": float(per_sequence.mean()), "loss_low": low, "loss_high": high}
    accuracy, tokens = float(measured["accuracy"].mean()), measured["tokens"]
    low, high = wilson_interval(accuracy * tokens, tokens)
    row |= {"accuracy": accuracy, "accuracy_low": low, "accuracy_high": high}
    return row | {
        "adjacency_at_layer": float(measured["adjacency"].mean()),
        "perturbation": measured["perturbation"],
        "per_sequence": per_sequence.tolist(),
        "draw_loss": measured["loss"].mean(axis=1).tolist(),
    }
