"""The one context manager that applies an intervention (see the package doc), the baseline, the
attention-pattern intervention and `Stacked`; the others are in `norms` and `subspaces`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.interventions.norms import (
    _EPS,
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
)
from adjpos.interventions.subspaces import LeaceErase, SubspaceErase, SubspaceSwap
from adjpos.validation import UsageError, is_int


@dataclass(frozen=True)
class NoIntervention:
    """The baseline: the states pass unchanged, through the same hook."""

    name = "none"
    site = "resid_pre"
    label = name

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        return resid


@dataclass(frozen=True)
class UniformAttention:
    """Block l's attention pattern replaced by uniform causal attention: position k attends
    1 / (k + 1) to each of positions 0..k. `heads`: which heads (default: all)."""

    heads: tuple[int, ...] | None = None
    name = "uniform_attention"
    site = "pattern"
    label = name

    def __call__(
        self, pattern: Float[Tensor, "batch head query key"], readout: Any = None
    ) -> Tensor:
        q, k = pattern.shape[-2:]
        causal = torch.ones(q, k, device=pattern.device, dtype=pattern.dtype).tril()
        uniform = causal / causal.sum(dim=-1, keepdim=True)
        if self.heads is None:
            return uniform.expand_as(pattern).clone()
        out = pattern.clone()
        out[:, list(self.heads)] = uniform
        return out


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
        kinds = tuple(INTERVENTIONS.values())
        if not self.parts or not all(type(p) in kinds for p in self.parts):
            raise UsageError(f"Stacked needs interventions from {list(INTERVENTIONS)}")
        if len({p.site for p in self.parts}) > 1:
            raise UsageError("Stacked parts must act at one site")

    @property
    def name(self) -> str:
        return self.parts[0].name

    @property
    def site(self) -> str:
        return self.parts[0].site

    @property
    def label(self) -> str:
        return self.parts[0].label

    def __call__(self, acts: Tensor, readout: Any = None) -> Tensor:
        n = len(self.parts)
        if acts.shape[0] % n:
            raise UsageError(f"a batch of {acts.shape[0]} does not split into {n} equal chunks")
        chunks = acts.split(acts.shape[0] // n)
        return torch.cat([p(c, readout=readout) for p, c in zip(self.parts, chunks, strict=True)])


INTERVENTIONS = {
    cls.name: cls
    for cls in (
        NoIntervention,
        NormPermute,
        NormPermuteControl,
        NormScaleControl,
        SubspaceSwap,
        LeaceErase,
        SubspaceErase,
        NormCommonScale,
        UniformAttention,
    )
}


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
        readout_from: the first read-out position: positions readout_from.. are where the
            model's output is read (the last prompt position and every answer position). The
            controls matched at the read-out positions use it (`NormScaleControl`).
        keep_readout: leave the read-out positions untouched (their states, or for an
            attention-pattern intervention their attention rows, pass unchanged), and apply the
            intervention to the prompt alone (positions 0 .. readout_from), so the change of
            the earlier positions does not depend on what is decoded after them: it is the
            same at every decoding step, and decoding can reuse a KV cache. Needs
            `readout_from`.
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
        ValueError: a layer outside 0 .. n_layers - 1, an unknown intervention, heads out of
            range, `keep_readout` without `readout_from`, `skip_first` not an int >= 0 or
            after `readout_from`, or an attention-pattern intervention
            on a model other than a HookedTransformer (a TransformerBridge's pattern hook is
            read-only).
    """
    n_layers = model.cfg.n_layers
    if not is_int(layer) or not 0 <= layer < n_layers:
        raise UsageError(f"layer must be an int in [0, {n_layers - 1}], got {layer!r}")
    if type(intervention) not in (*INTERVENTIONS.values(), Stacked):
        raise UsageError(
            f"unknown intervention {intervention!r}; choose from {list(INTERVENTIONS)}"
        )
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
                f"{intervention.name} needs a HookedTransformer: in {type(model).__name__} the "
                "attention pattern hook does not feed back into the attention output, so "
                "changing it would change nothing"
            )
        name = f"blocks.{layer}.attn.hook_pattern"
        for part in getattr(intervention, "parts", (intervention,)):
            _check_heads(part.heads or (), model.cfg.n_heads)

    def change(acts: Tensor, start: int | None) -> Tensor:
        pos = acts.shape[-2]  # [batch, pos, d] or, for the pattern, [batch, head, query, key]
        if keep_readout:
            return _prompt_only(acts, intervention, start, record)
        readout = None
        if start is not None:
            readout = torch.arange(pos, device=acts.device) >= start
        out = intervention(acts, readout=readout)
        if record is not None and acts.ndim == 3:
            sizes = (out - acts).norm(dim=-1) / acts.norm(dim=-1).clamp_min(_EPS)
            record.append((float(sizes.detach().sum()), int(sizes.numel())))
        return out

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


def _prompt_only(acts: Tensor, intervention: Any, readout_from: int, record: list | None) -> Tensor:
    """`intervention` applied to positions 0 .. readout_from only (the prompt; for a pattern,
    its query-by-key block), the read-out position readout_from and every later one kept."""
    cut = min(readout_from + 1, acts.shape[-2])
    readout = torch.arange(cut, device=acts.device) >= readout_from
    head = acts[:, :cut] if acts.ndim == 3 else acts[:, :, :cut, :cut]
    shape = (1, cut, 1) if acts.ndim == 3 else (1, 1, cut, 1)
    changed = torch.where(readout.view(shape), head, intervention(head, readout=readout))
    if record is not None and acts.ndim == 3:
        before, after = head[:, ~readout], changed[:, ~readout]
        sizes = (after - before).norm(dim=-1) / before.norm(dim=-1).clamp_min(_EPS)
        record.append((float(sizes.detach().sum()), int(sizes.numel())))
    if acts.ndim == 3:
        return torch.cat([changed, acts[:, cut:]], dim=1)
    out = acts.clone()
    out[:, :, :cut, :cut] = changed
    return out


def _check_heads(heads: Sequence[int], n_heads: int) -> None:
    """Every head index in range (for `UniformAttention`)."""
    bad = [h for h in heads if not is_int(h) or not 0 <= h < n_heads]
    if bad:
        raise UsageError(f"heads {bad} are out of range; the model has {n_heads} heads")
