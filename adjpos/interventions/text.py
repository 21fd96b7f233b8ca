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
the position curve; on positions skip_first .. n - 1), the second half is measured. Each
tested intervention is compared with its control (`CONTROL_OF`) by the per-sequence difference
in loss (intervention minus control: above zero, it raises the loss more) with a paired
bootstrap interval over sequences; the random controls (`DRAWN`) are measured over
`control_draws` draws, and ``percentile`` is the share (%) of draws whose loss is above the
intervention's (ties count half): near 0, the intervention harms more than nearly every draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm

from adjpos.capture import capture_residuals, check_tokens
from adjpos.interventions.build import (
    CONTROL_OF,
    DEFAULT_DRAWS,
    DEFAULT_RANK,
    DEFAULT_READOUTS,
    DRAWN,
    MATCHED_TO,
    NAMES,
    build_intervention,
)
from adjpos.interventions.hooks import Stacked, intervene
from adjpos.interventions.subspaces import variance_share
from adjpos.interventions.table import _quiet, check_units
from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.stats import bootstrap_interval, paired_difference
from adjpos.tables import Table
from adjpos.validation import UsageError, is_int

TEXT_TABLE = Table(
    model="string",
    layer="int64",
    intervention="string",
    readout="string",
    control="string",
    rank="Int64",
    loss="float64",
    loss_low="float64",
    loss_high="float64",
    accuracy="float64",
    accuracy_low="float64",
    accuracy_high="float64",
    adjacency_at_layer="float64",
    perturbation="float64",
    loss_difference="float64",
    loss_difference_low="float64",
    loss_difference_high="float64",
    control_draws="Int64",
    percentile="float64",
    share="float64",
    cut="int64",
    skip_first="int64",
    n_sequences="int64",
)
_LOGITS_BUDGET = 50_000_000  # logits entries per forward pass (draws are chunked to fit)


def text_intervention_table(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    *,
    layers: Sequence[int] | None = None,
    interventions: Sequence[str] | None = None,
    cut: int | None = None,
    skip_first: int = 0,
    rank: int = DEFAULT_RANK,
    control_draws: int = DEFAULT_DRAWS,
    readouts: Sequence[str] = DEFAULT_READOUTS,
    seed: int = 0,
    model_name: str = "model",
    folder: Any = None,
    progress: bool | None = None,
) -> Any:
    """Every (layer, read-out variant, intervention) unit on text `tokens` (e.g. from
    `adjpos.hf.text_tokens`), as a DataFrame with the columns of `TEXT_TABLE` (see the module
    doc for the cut, the fitting half and the statistics).

    Args:
        model: a TransformerLens model or bridge (a HookedTransformer for uniform_attention).
        tokens: [n, pos] token ids, n >= 4 (half fit, half measured).
        layers: layers to intervene at (default: all).
        interventions: names from `NAMES` (default: all, less uniform_attention on a bridge).
        cut: first position of the continuation (default pos // 2).
        skip_first: positions never changed, from the start.
        rank, control_draws, readouts, seed: as in `intervention_table`.
        folder: an `adjpos.runs.RunFolder`: finished units are read back (resumable).

    Raises:
        ValueError: too few sequences, a cut or skip_first out of range, or a bad layer,
            intervention, read-out variant or draw count.
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
    units = check_units(model, layers, _names(model, interventions), readouts, control_draws)
    fit, test = tokens[: n // 2], tokens[n // 2 :]
    rows, fitted = [], {}
    for layer, readout, name in tqdm(units, desc="interventions", disable=_quiet(progress)):
        unit = f"layer{layer}-{readout}-{name}"
        if folder is not None and folder.is_done(unit):
            rows.append(folder.result(unit))
            continue
        if layer not in fitted:
            fitted[layer] = _fit(model, fit, layer, skip_first, cut)
        states, positions, prompts = fitted[layer]
        draws = control_draws if name in DRAWN else 1
        kwargs = {"d_model": model.cfg.d_model, "states": states, "positions": positions}
        kwargs |= {"rank": rank, "seed": seed, "prompts": prompts}
        matched = build_intervention(MATCHED_TO[name], **kwargs) if name in MATCHED_TO else None
        built = [build_intervention(name, draw=d, matched=matched, **kwargs) for d in range(draws)]
        keep = readout == "kept"
        measured = _measure(model, test, built, layer, cut, skip_first, keep)
        row = {"model": model_name, "layer": layer, "intervention": name, "readout": readout}
        row |= {"control": CONTROL_OF[name], "rank": getattr(built[0], "rank", None)}
        row |= _summary(measured, seed) | {"control_draws": draws if name in DRAWN else None}
        row["share"] = (
            float(np.mean([variance_share(iv.basis, states) for iv in built]))
            if hasattr(built[0], "basis")
            else None
        )
        row |= {"cut": cut, "skip_first": skip_first, "n_sequences": len(test)}
        if folder is not None:
            folder.mark_done(unit, row)
        rows.append(row)
    return TEXT_TABLE.frame(_paired(rows, seed))


def _names(model: Any, interventions: Sequence[str] | None) -> list[str]:
    from transformer_lens import HookedTransformer

    if interventions is not None:
        return list(interventions)
    hooked = isinstance(model, HookedTransformer)
    return [n for n in NAMES if hooked or n != "uniform_attention"]


def _fit(model: Any, fit: Tensor, layer: int, skip_first: int, cut: int) -> tuple:
    """The fitting half's states at `layer` from position skip_first on, their positions, and
    their context (positions skip_first .. cut) as the position curve's one prompt length."""
    acts = capture_residuals(model, fit, layers=[layer], progress=False)[0].cpu()
    later = acts[:, skip_first:]
    positions = torch.arange(skip_first, acts.shape[1]).repeat(len(fit))
    context = (acts[:, skip_first : cut + 1], fit[:, skip_first : cut + 1].cpu())
    return later.reshape(-1, acts.shape[-1]), positions, {cut + 1 - skip_first: context}


def _measure(
    model: Any, test: Tensor, built: list[Any], layer: int, cut: int, skip_first: int, keep: bool
) -> dict[str, Any]:
    """Per draw and sequence: the continuation's mean next-token loss and accuracy, and the
    adjacency score of the states at the layer; the change size pooled over all draws."""
    site = f"blocks.{layer}.hook_resid_pre"
    if built[0].site == "pattern":
        site = f"blocks.{layer}.hook_resid_post"
    n, pos = test.shape
    vocab = model.cfg.d_vocab_out if model.cfg.d_vocab_out > 0 else model.cfg.d_vocab
    chunk = max(1, _LOGITS_BUDGET // (n * (pos - cut) * vocab))
    loss, accuracy, adjacency, record = [], [], [], []
    target = test[:, cut + 1 :]
    for start in range(0, len(built), chunk):
        part = built[start : start + chunk]
        change = part[0] if len(part) == 1 else Stacked(tuple(part))
        with torch.inference_mode():
            with intervene(
                model,
                change,
                layer=layer,
                readout_from=cut,
                keep_readout=keep,
                skip_first=skip_first,
                record=record,
            ):
                logits, cache = model.run_with_cache(test.repeat(len(part), 1), names_filter=[site])
        logp = logits[:, cut:-1].double().log_softmax(-1).cpu()
        right = target.repeat(len(part), 1).cpu()
        nll = -logp.gather(-1, right[..., None])[..., 0]
        loss += list(nll.mean(dim=1).view(len(part), n))
        accuracy += list((logp.argmax(-1) == right).double().mean(dim=1).view(len(part), n))
        states = cache[site][:, skip_first:].double().cpu()
        scores = adjacency_probability(cosine_matrix(states), ties="half")
        adjacency += list(scores.view(len(part), n))
        del logits, cache
    sized = sum(k for _, k in record)
    perturbation = sum(t for t, _ in record) / sized if sized else 0.0
    return {
        "loss": torch.stack(loss).numpy(),
        "accuracy": torch.stack(accuracy).numpy(),
        "adjacency": torch.stack(adjacency).numpy(),
        "perturbation": perturbation,
    }


def _summary(measured: dict[str, Any], seed: int) -> dict[str, Any]:
    """The row's numbers: means over draws per sequence, intervals over sequences."""
    loss, accuracy = measured["loss"].mean(axis=0), measured["accuracy"].mean(axis=0)
    loss_low, loss_high = bootstrap_interval(loss, seed=seed)
    acc_low, acc_high = bootstrap_interval(accuracy, seed=seed)
    return {
        "loss": float(loss.mean()),
        "loss_low": loss_low,
        "loss_high": loss_high,
        "accuracy": float(accuracy.mean()),
        "accuracy_low": acc_low,
        "accuracy_high": acc_high,
        "adjacency_at_layer": float(measured["adjacency"].mean()),
        "perturbation": measured["perturbation"],
        "per_sequence": loss.tolist(),
        "draw_loss": measured["loss"].mean(axis=1).tolist(),
    }


def _paired(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Each row beside its control's row (same layer and read-out variant): the paired loss
    difference over sequences and the percentile among the control's draws."""
    index = {(r["layer"], r["readout"], r["intervention"]): r for r in rows}
    out = []
    for r in rows:
        control = index.get((r["layer"], r["readout"], r["control"]))
        extra: dict[str, Any] = dict.fromkeys(
            ("loss_difference", "loss_difference_low", "loss_difference_high", "percentile")
        )
        if control is not None and control is not r:
            d, low, high = paired_difference(r["per_sequence"], control["per_sequence"], seed=seed)
            extra |= {"loss_difference": d, "loss_difference_low": low}
            extra["loss_difference_high"] = high
            draws = np.array(control["draw_loss"])
            if len(draws) > 1:
                above, ties = np.mean(draws > r["loss"]), np.mean(draws == r["loss"])
                extra["percentile"] = float(100 * (above + ties / 2))
        out.append({k: v for k, v in r.items() if k not in ("per_sequence", "draw_loss")} | extra)
    return out
