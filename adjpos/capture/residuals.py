"""Capture hidden states at every layer through TransformerLens hook points.

Layer numbering for ``site="resid_post"`` (the residual stream): layer 0 is the input to
block 0 (token embeddings; `blocks.0.hook_resid_pre`) and layer l >= 1 is the output of block
l-1 (`blocks.{l-1}.hook_resid_post`), so a model with L blocks has L+1 layers. For the other
sites (``resid_mid``, ``attn_out``, ``mlp_out``) layer l is block l, L layers in all.

Hooks are attached only inside `run_with_cache(names_filter=...)` or ``model.hooks(...)``,
which remove them on exit (also on error). Three ways to read the layers of any
TransformerLens model, from the most memory to the least: `capture_residuals` stacks them,
`iter_residuals` yields them one at a time, `reduce_residuals` keeps only what a function
makes of each inside its hook (where a per-layer measure belongs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, no_type_check

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from adjpos.types import TokenInput
from adjpos.validation import UsageError, check_choice, check_positive_int, is_int

SITES = ("resid_post", "resid_mid", "attn_out", "mlp_out")
R = TypeVar("R")


def hook_name(site: str, layer: int) -> str:
    """TransformerLens hook name of `layer` at `site` (see the module docstring)."""
    if site == "resid_post":
        return "blocks.0.hook_resid_pre" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
    return f"blocks.{layer}.hook_{site}"


def n_capture_layers(model: Any, site: str) -> int:
    """How many layers `site` has in `model`: n_layers + 1 for resid_post, else n_layers."""
    check_site(model, site)
    return model.cfg.n_layers + (site == "resid_post")


def check_site(model: Any, site: str) -> None:
    """Raise unless `site` is known and fires in `model`."""
    check_choice("site", site, SITES)
    # TransformerLens keeps an idle mlp_out hook in attention-only blocks
    mlp_free = bool(getattr(model.cfg, "attn_only", False))
    available = [
        s
        for s in SITES
        if hook_name(s, 0) in model.hook_dict and not (mlp_free and s in ("resid_mid", "mlp_out"))
    ]
    if site not in available:
        raise UsageError(
            f"site={site!r} does not exist in this model (attention-only models have no "
            f"resid_mid or mlp_out); sites it has: {available}"
        )


def check_tokens(model: Any, tokens: Any) -> Int[Tensor, "batch pos"]:
    """Token ids checked for `model`, as int64 [batch, pos] on the model's device (a 1-D
    tensor is one sequence)."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be an integer tensor (e.g. torch.long), got {tokens.dtype}")
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise UsageError(
            f"tokens must have shape [batch, pos] (non-empty), got {tuple(tokens.shape)}"
        )
    n_ctx, d_vocab = model.cfg.n_ctx, model.cfg.d_vocab
    if tokens.shape[1] > n_ctx:
        raise UsageError(
            f"sequences have {tokens.shape[1]} tokens but the model's n_ctx is {n_ctx}"
        )
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= d_vocab:
        raise UsageError(
            f"token ids must lie in [0, {d_vocab - 1}] (d_vocab={d_vocab}), "
            f"got ids from {lo} to {hi}"
        )
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    return tokens.to(device=device, dtype=torch.long)


def capture_residuals(
    model: Any,
    tokens: TokenInput,
    *,
    site: str = "resid_post",
    layers: Sequence[int] | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
) -> Float[Tensor, "layer batch pos d_model"]:
    """Hidden states of every requested layer, stacked: one forward pass per batch chunk.

    Args:
        model: a TransformerLens model.
        tokens: token ids [batch, pos] (or one sequence [pos]).
        site: "resid_post" (default), "resid_mid", "attn_out" or "mlp_out".
        layers: which layers (default: all, see the module docstring for numbering).
        batch_size: sequences per forward pass (default: all at once).
        progress: show a progress bar (default: only on a terminal).

    Returns:
        Activations [layer, batch, pos, d_model], in the order of `layers`, detached.
    """
    tokens = check_tokens(model, tokens)
    layers = check_layers(model, site, layers)
    names = [hook_name(site, layer) for layer in layers]
    stop = _stop_block(site, layers)
    chunks = split_batches(tokens, batch_size)
    parts = []
    for chunk in tqdm(chunks, desc="capture", disable=_disable(progress, len(chunks))):
        cache = _run(model, chunk, names, stop_at_layer=stop)
        parts.append(torch.stack([cache[name] for name in names]))
    return torch.cat(parts, dim=1)


def iter_residuals(
    model: Any,
    tokens: TokenInput,
    *,
    site: str = "resid_post",
    layers: Sequence[int] | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
) -> Iterator[tuple[int, Float[Tensor, "batch pos d_model"]]]:
    """Stream ``(layer, activations[batch, pos, d_model])`` one layer at a time, in layer order.

    Memory holds one or two layers, whatever the depth. A HookedTransformer is run block by
    block, one forward pass in all; other models (a TransformerBridge cannot start
    mid-model) are run once per layer, about (L+1)/2 passes: `reduce_residuals` takes one.
    Arguments as `capture_residuals`.
    """
    tokens = check_tokens(model, tokens)
    layers = sorted(set(check_layers(model, site, layers)))
    chunks = split_batches(tokens, batch_size)
    bar = tqdm(total=len(layers), desc="layers", disable=_disable(progress, len(layers)))
    stream = _by_block if _runs_from_any_block(model) else _by_rerun
    with bar:
        for layer, acts in stream(model, chunks, site, layers):
            bar.update(1)
            yield layer, acts


def reduce_residuals(
    model: Any,
    tokens: TokenInput,
    reduce: Callable[[int, Tensor, slice], R],
    *,
    site: str = "resid_post",
    layers: Sequence[int] | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
) -> dict[int, list[R]]:
    """``reduce(layer, activations, sequences)`` at every requested layer, inside that layer's
    hook: one forward pass per batch chunk on any TransformerLens model (HookedTransformer or
    TransformerBridge), keeping only what `reduce` returns.

    `activations` is the layer's [chunk, pos, d_model] tensor and `sequences` the slice of
    `tokens`' rows the chunk holds. Once `reduce` returns the states can go, so memory holds
    one layer, whatever the depth; the pass stops right after the deepest requested layer.
    `reduce` runs under ``torch.inference_mode`` and must not change `activations` in place
    (they are the model's own).

    Args:
        model, tokens, site, layers, batch_size, progress: as `capture_residuals`.
        reduce: called once per (layer, chunk), layers in order within each chunk.

    Returns:
        ``{layer: [reduce's result on each chunk, in chunk order]}``, layers ascending.

    Example:
        >>> import adjpos, torch
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, d_model=16, n_heads=2))
        >>> tokens = torch.randint(0, 64, (6, 10))
        >>> norms = reduce_residuals(model, tokens, lambda layer, acts, rows: acts.norm(dim=-1),
        ...                          batch_size=4)
        >>> [torch.cat(parts).shape for parts in norms.values()]
        [torch.Size([6, 10]), torch.Size([6, 10]), torch.Size([6, 10])]
    """
    tokens = check_tokens(model, tokens)
    layers = sorted(set(check_layers(model, site, layers)))
    chunks = split_batches(tokens, batch_size)
    results: dict[int, list[R]] = {layer: [] for layer in layers}
    steps = len(layers) * len(chunks)
    bar = tqdm(total=steps, desc="layers", disable=_disable(progress, steps))
    start = 0
    with bar:
        for chunk in chunks:
            rows = slice(start, start + len(chunk))
            hooks = [
                (hook_name(site, layer), _reducing_hook(reduce, layer, rows, results, bar))
                for layer in layers
            ]
            with torch.inference_mode(), model.hooks(fwd_hooks=hooks):
                try:
                    model(chunk, return_type=None)
                except _Reduced:  # the deepest requested layer's hook ends the pass
                    pass
            start += len(chunk)
    _check_fired(results, len(chunks), site)
    return results


class _Reduced(Exception):
    """Raised by the deepest requested layer's hook: nothing past it is needed."""


def _reducing_hook(reduce, layer, rows, results, bar):
    last = max(results)

    @no_type_check  # made at every call: kept out of the tests' type checker
    def hook(acts: Tensor, hook: Any) -> None:
        results[layer].append(reduce(layer, acts.detach(), rows))
        bar.update(1)
        if layer == last:  # the blocks after it, and the unembedding, would be wasted work
            raise _Reduced

    return hook


def _check_fired(results: dict[int, list], n_chunks: int, site: str) -> None:
    """Every requested hook fired once per chunk (a model with missing hook points would
    otherwise give silently short results)."""
    wrong = {layer: len(parts) for layer, parts in results.items() if len(parts) != n_chunks}
    if wrong:
        raise RuntimeError(
            f"the hooks of site={site!r} fired {wrong} times (layer: count) over {n_chunks} "
            "forward pass(es), not once per pass: this model does not run its hook points in "
            "the TransformerLens order"
        )


def check_layers(model: Any, site: str, layers: Sequence[int] | None) -> list[int]:
    """Validate requested layers for `site`; None means all of them."""
    n = n_capture_layers(model, site)
    if layers is None:
        return list(range(n))
    layers = [layers] if isinstance(layers, int) else list(layers)
    bad = [x for x in layers if not is_int(x) or not 0 <= x < n]
    if bad or not layers:
        raise UsageError(
            f"layers must be a non-empty list of ints in [0, {n - 1}] for "
            f"site={site!r} (this model has {n}); got {layers}"
        )
    return layers


def _by_block(model, chunks, site, layers):
    """One pass: carry each chunk's residual from block to block."""
    state = [model(chunk, stop_at_layer=0) for chunk in chunks]  # the embeddings
    for block in range(_stop_block(site, layers)):
        wanted = [x for x in layers if _block_of(site, x) == block]
        names = [hook_name(site, x) for x in wanted]
        caches = []
        for i, chunk_state in enumerate(state):
            cache = _run(model, chunk_state, names, start_at_layer=block, stop_at_layer=block + 1)
            state[i] = cache.pop("_out")
            caches.append(cache)
        for layer, name in zip(wanted, names, strict=True):
            yield layer, torch.cat([cache.pop(name) for cache in caches])


def _by_rerun(model, chunks, site, layers):
    """Generic: one forward per layer, stopped right after the block that holds the layer."""
    for layer in layers:
        name = hook_name(site, layer)
        stop = _block_of(site, layer) + 1
        yield layer, torch.cat([_run(model, c, [name], stop_at_layer=stop)[name] for c in chunks])


def _run(model, inputs, names, **kwargs) -> dict[str, Tensor]:
    with torch.inference_mode():
        out, cache = model.run_with_cache(inputs, names_filter=list(names), **kwargs)
    result = {name: cache[name].detach() for name in names}
    result["_out"] = out
    return result


def _block_of(site: str, layer: int) -> int:
    return 0 if site == "resid_post" and layer == 0 else layer - (site == "resid_post")


def _stop_block(site: str, layers: Sequence[int]) -> int:
    return max(_block_of(site, x) for x in layers) + 1


def _runs_from_any_block(model: Any) -> bool:
    # TransformerBridge accepts start_at_layer in its signature but refuses it at run time.
    from transformer_lens import HookedTransformer

    return isinstance(model, HookedTransformer)


def split_batches(tokens: Tensor, batch_size: int | None) -> list[Tensor]:
    """`tokens` in chunks of `batch_size` sequences (one chunk for None)."""
    if batch_size is None:
        return [tokens]
    check_positive_int("batch_size", batch_size)
    return list(tokens.split(batch_size))


def _disable(progress: bool | None, steps: int) -> bool | None:
    if progress is None:
        return None if steps > 1 else True  # tqdm: None = show only on a terminal
    return not progress
