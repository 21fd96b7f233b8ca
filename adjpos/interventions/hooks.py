"""The floor every kind of intervention stands on: `intervene` (the one context manager that
applies an intervention), the baseline, `Stacked`, and the helpers the kinds share.

An intervention is any object with a ``site`` ("resid_pre": the states entering a block;
"pattern": a block's attention pattern) that is called on the activations there,
``intervention(acts, readout=None) -> acts`` (as TransformerLens hooks take any function).
``readout`` is a [pos] boolean mask of the positions handed to it whose state is read out
(the last prompt position and every answer position), or None when the caller did not say:
a control can match the read-out positions with it. With the read-out kept
(``keep_readout=True``), the intervention is handed the positions before the read-out alone,
with a mask that holds no read-out position. An optional ``check(model)`` refuses a model it
cannot act on before any forward pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, no_type_check, runtime_checkable

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.metrics.norms import EPS
from adjpos.seeds import derived_generator
from adjpos.validation import UsageError, is_int

SITES = ("resid_pre", "pattern")


@runtime_checkable
class Intervention(Protocol):
    """What `intervene` applies: a site and a call on the activations there."""

    site: str

    def __call__(self, acts: Tensor, readout: Tensor | None = None) -> Tensor: ...


@dataclass(frozen=True)
class NoIntervention:
    """The baseline: the states pass unchanged, through the same hook."""

    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        return resid


@dataclass(frozen=True, eq=False)
class Stacked:
    """Several interventions in one pass: the batch is cut into ``len(parts)`` equal chunks
    and chunk d goes through ``parts[d]`` alone (the draws of a random control, measured on
    copies of the same prompts). Each part sees only its own chunk, so it acts exactly as it
    would on that chunk by itself; only the batching is shared.

    Raises:
        ValueError: no parts, a part that is not an intervention, parts at different sites,
            or (when called) a batch that does not split into equal chunks.
    """

    parts: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise UsageError("Stacked needs at least one intervention")
        for part in self.parts:
            check_intervention(part)
        if len({p.site for p in self.parts}) > 1:
            raise UsageError("Stacked parts must act at one site")

    @property
    def site(self) -> str:
        return self.parts[0].site

    def check(self, model: Any) -> None:
        for part in self.parts:
            if hasattr(part, "check"):
                part.check(model)

    def __call__(self, acts: Tensor, readout: Any = None) -> Tensor:
        n = len(self.parts)
        if acts.shape[0] % n:
            raise UsageError(f"a batch of {acts.shape[0]} does not split into {n} equal chunks")
        chunks = acts.split(acts.shape[0] // n)
        return torch.cat([p(c, readout=readout) for p, c in zip(self.parts, chunks, strict=True)])


def check_intervention(intervention: Any) -> None:
    """`intervention` has a known ``site`` and can be called (ValueError if not)."""
    if getattr(intervention, "site", None) not in SITES or not callable(intervention):
        raise UsageError(
            f"{intervention!r} is not an intervention: pass an object with .site, one of "
            f"{list(SITES)}, called as intervention(acts, readout=None) -> acts"
        )


@contextmanager
def intervene(
    model: Any,
    intervention: Any,
    *,
    layer: int,
    readout_from: int | None = None,
    keep_readout: bool = False,
    record: list | None = None,
    skip_first: int = 0,
) -> Iterator[Any]:
    """Apply `intervention` at `layer` of `model` for the duration of the block.

    Args:
        intervention: any object with ``.site`` and a call (see the module doc).
        readout_from: the first read-out position (positions readout_from.. are read: the
            last prompt position and every answer position), handed to the intervention as
            ``readout`` (see the module doc).
        keep_readout: leave the read-out positions untouched (their states, or for an
            attention-pattern intervention their attention rows), and hand the intervention
            the positions before the read-out alone, so their change is the same at every
            decoding step and decoding can reuse a KV cache. Needs `readout_from`.
        record: a list; every call appends ``(sum of ||x' - x|| / ||x||, states)`` over the
            states the hook changed (read-out positions left out when kept), so the change
            size can be read from the calls a decoding actually made.
        skip_first: leave positions 0 .. skip_first - 1 untouched (e.g. an attention sink
            with a massive activation): the intervention sees the states from position
            skip_first on, as if the sequence began there (`readout_from` still counts from
            position 0); for an attention-pattern intervention, the query rows before
            skip_first keep their pattern.

    Example:
        >>> import adjpos
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, d_model=16, n_heads=2))
        >>> tokens = torch.randint(0, 64, (3, 8), generator=torch.Generator().manual_seed(0))
        >>> with intervene(model, NoIntervention(), layer=1):
        ...     same = model(tokens)
        >>> torch.equal(same, model(tokens))
        True

    Raises:
        ValueError: a layer outside 0 .. n_layers - 1, an object that is not an intervention,
            one its own ``check`` refuses (e.g. heads out of range), `keep_readout` without
            `readout_from`, `skip_first` not an int >= 0 or after `readout_from`, or an
            attention-pattern intervention on a model other than a HookedTransformer (a
            TransformerBridge's pattern hook is read-only).
    """
    n_layers = model.cfg.n_layers
    if not is_int(layer) or not 0 <= layer < n_layers:
        raise UsageError(f"layer must be an int in [0, {n_layers - 1}], got {layer!r}")
    check_intervention(intervention)
    if readout_from is not None and (not is_int(readout_from) or readout_from < 0):
        raise UsageError(f"readout_from must be an int >= 0, got {readout_from!r}")
    if keep_readout and readout_from is None:
        raise UsageError("keep_readout needs readout_from (the first read-out position)")
    if not is_int(skip_first) or skip_first < 0:
        raise UsageError(f"skip_first must be an int >= 0, got {skip_first!r}")
    if readout_from is not None and readout_from < skip_first:
        raise UsageError(f"readout_from={readout_from} is before skip_first={skip_first}")
    name = f"blocks.{layer}.hook_resid_pre"
    if intervention.site == "pattern":
        from transformer_lens import HookedTransformer

        if not isinstance(model, HookedTransformer):
            raise UsageError(
                f"{type(intervention).__name__} acts on the attention pattern and needs a "
                f"HookedTransformer: in {type(model).__name__} the attention pattern hook does "
                "not feed back into the attention output, so changing it would change nothing"
            )
        name = f"blocks.{layer}.attn.hook_pattern"
    if hasattr(intervention, "check"):
        intervention.check(model)

    @no_type_check  # made at every call: kept out of the tests' type checker
    def change(acts: Tensor, start: int | None) -> Tensor:
        if keep_readout:
            return _before_readout(acts, intervention, start, record)
        positions = torch.arange(acts.shape[-2], device=acts.device)
        out = intervention(acts, readout=None if start is None else positions >= start)
        if record is not None and acts.ndim == 3:
            record.append(_change_sizes(acts, out))
        return out

    @no_type_check
    def hook(acts: Tensor, hook: Any) -> Tensor:
        if not skip_first:
            return change(acts, readout_from)
        if acts.ndim == 4:  # the pattern: earlier query rows restored
            out = change(acts, readout_from)
            out[:, :, :skip_first] = acts[:, :, :skip_first]
            return out
        if acts.shape[1] <= skip_first:
            return acts
        start = None if readout_from is None else readout_from - skip_first
        later = change(acts[:, skip_first:], start)
        return torch.cat([acts[:, :skip_first], later], dim=1)

    with model.hooks(fwd_hooks=[(name, hook)]):
        yield model


def start_at_block(model: Any, layer: int, site: str) -> dict[str, int]:
    """``{"start_at_layer": layer}`` where a change at `site`, block `layer`'s input, leaves the
    blocks before it as they are and `model` can start a pass there (a HookedTransformer, past
    its embeddings); else {} (the pass runs the whole model)."""
    from transformer_lens import HookedTransformer

    starts = layer > 0 and site.endswith("resid_pre") and isinstance(model, HookedTransformer)
    return {"start_at_layer": layer} if starts else {}


def _before_readout(acts: Tensor, intervention: Any, readout_from: int, record: Any) -> Tensor:
    """`intervention` applied to positions 0 .. readout_from - 1 alone (the prompt before the
    read-out; for a pattern, its query-by-key block), every later position kept."""
    cut = min(readout_from, acts.shape[-2])
    if cut == 0:
        return acts
    none_read = torch.zeros(cut, dtype=torch.bool, device=acts.device)
    if acts.ndim == 3:
        head = acts[:, :cut]
        changed = intervention(head, readout=none_read)
        if record is not None:
            record.append(_change_sizes(head, changed))
        return torch.cat([changed, acts[:, cut:]], dim=1)
    out = acts.clone()
    out[:, :, :cut, :cut] = intervention(acts[:, :, :cut, :cut], readout=none_read)
    return out


def _change_sizes(before: Tensor, after: Tensor) -> tuple[float, int]:
    sizes = (after - before).norm(dim=-1) / before.norm(dim=-1).clamp_min(EPS)
    return float(sizes.detach().sum()), int(sizes.numel())


def partner_positions(resid: Tensor, seed: int, *, mirrored: bool = False) -> Tensor:
    """[batch, pos] the partner position of each state: a seeded random permutation of each
    sequence's positions (one draw per (seed, pos), so a fixed rule per length), or the
    mirror k -> pos - 1 - k. The norm and subspace permutations share it."""
    batch, pos, _ = resid.shape
    if mirrored:
        order = torch.arange(pos - 1, -1, -1).expand(batch, pos)
    else:
        gen = derived_generator(seed, "partner positions", pos)
        order = torch.rand(batch, pos, generator=gen).argsort(dim=1)
    return order.to(resid.device)
