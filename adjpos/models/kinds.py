"""Which position signal each layer's attention gets, read from the modules themselves, and
whether a model has none at all (`is_position_free`).

Kinds: ``"nope"`` (no positional signal), ``"rope"``, ``"sliding_rope"`` (RoPE inside a
sliding window), ``"chunked_rope"`` (RoPE inside fixed chunks, Llama 4), ``"learned"``
(learned absolute positions added to the embeddings), ``"alibi"`` and ``"shortformer"``.

The bridge's own config is not read: it says "rotary" for a SmolLM3 whose layers are all NoPE.
"""

from __future__ import annotations

import sys
from typing import Any

from torch import nn

from adjpos.models.bridge import is_bridge

_TL_KINDS = {
    "standard": "learned",
    "rotary": "rope",
    "alibi": "alibi",
    "shortformer": "shortformer",
}


def layer_kinds(model: Any) -> list[str]:
    """The kind of each block of `model` (one per block, in order), for any HookedTransformer
    or TransformerBridge; the interleaved families are read from their attention modules.

    Example:
        >>> import adjpos
        >>> adjpos.layer_kinds(adjpos.build_model(adjpos.ModelConfig(n_layers=2)))
        ['nope', 'nope']
    """
    if _is_hooked_transformer(model):
        kind = "nope" if is_position_free(model) else _TL_KINDS[model.cfg.positional_embedding_type]
        if kind != "rope":
            return [kind] * model.cfg.n_layers
        # A hybrid (ModelConfig.nope_layers): read from each attention module itself.
        from adjpos.models.build import no_rotation

        return [
            "nope" if vars(block.attn).get("apply_rotary") is no_rotation else "rope"
            for block in model.blocks
        ]
    if is_bridge(model):
        return _bridge_kinds(model)
    raise TypeError(
        f"layer_kinds needs a HookedTransformer or a TransformerBridge, got {type(model).__name__}"
    )


def is_position_free(model: nn.Module) -> bool:
    """True when no positional signal can enter `model`: no rotary or ALiBi, and any
    additive positional embedding is exactly zero and frozen (a trainable zero `W_pos` is not
    position-free); a bridged model, when every layer is NoPE (`adjpos.layer_kinds`).

    Example:
        >>> import adjpos
        >>> adjpos.is_position_free(adjpos.build_model(adjpos.ModelConfig(n_layers=1)))
        True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            "is_position_free needs a model (a torch module, e.g. from adjpos.build_model or "
            f"adjpos.load_hf), got {type(model).__name__}"
        )
    if is_bridge(model):  # read from the modules: every layer NoPE
        return set(layer_kinds(model)) == {"nope"}
    kind = getattr(getattr(model, "cfg", None), "positional_embedding_type", None)
    return kind in ("standard", "shortformer") and _zero_and_frozen(model)


def capture_kinds(model: Any, site: str = "resid_post") -> list[str]:
    """One kind per captured layer of `site`: ``"embed"`` then the blocks for resid_post, the
    blocks for the other sites (see `adjpos.capture_residuals` for the numbering)."""
    kinds = layer_kinds(model)
    return ["embed", *kinds] if site == "resid_post" else kinds


def _bridge_kinds(model: Any) -> list[str]:
    hf = model.original_model
    layers = _decoder_layers(hf)
    if layers is None:  # not a Hugging Face model (a native bridge): one kind throughout
        return [_attention_kind(None, None, model)] * model.cfg.n_layers
    types = list(getattr(hf.config, "layer_types", None) or [None] * len(layers))
    kinds = []
    for layer, layer_type in zip(layers, types, strict=True):
        attn = _unwrapped(getattr(_unwrapped(layer), "self_attn", None))
        kinds.append(_attention_kind(attn, layer_type, model))
    return kinds


def _attention_kind(attn: Any, layer_type: str | None, model: Any) -> str:
    if hasattr(attn, "use_rope"):  # SmolLM3, Llama 4
        if not attn.use_rope:
            return "nope"
        if getattr(attn, "sliding_window", None) is not None:
            return "sliding_rope"
        return "chunked_rope" if layer_type == "chunked_attention" else "rope"
    if hasattr(attn, "is_local_attention"):  # AFMoE: RoPE only in the local layers
        return "sliding_rope" if attn.is_local_attention else "nope"
    if hasattr(attn, "is_sliding"):  # EXAONE 4: global layers are NoPE when there is a window
        if attn.sliding_window is None:
            return "rope"
        return "sliding_rope" if attn.is_sliding else "nope"
    if type(attn).__name__ == "Cohere2Attention":  # RoPE only in the sliding layers
        return "nope" if attn.sliding_window is None else "sliding_rope"
    kind = _TL_KINDS.get(model.cfg.positional_embedding_type, model.cfg.positional_embedding_type)
    if kind == "learned" and _zero_and_frozen(model):
        return "nope"  # a learned embedding zeroed and frozen (as adjpos builds NoPE)
    if kind == "rope" and layer_type == "sliding_attention":
        return "sliding_rope"
    return kind


def _zero_and_frozen(model: Any) -> bool:
    """The model's additive positional embedding exists, is exactly zero and is frozen."""
    w_pos = getattr(getattr(model, "pos_embed", None), "W_pos", None)
    return w_pos is not None and not w_pos.requires_grad and not bool(w_pos.detach().any())


def _is_hooked_transformer(model: Any) -> bool:
    """isinstance(model, HookedTransformer), without importing TransformerLens: a model of
    that class can only exist once TransformerLens is imported."""
    lens = sys.modules.get("transformer_lens")
    kind = getattr(lens, "HookedTransformer", None)
    return kind is not None and isinstance(model, kind)


def _unwrapped(module: Any) -> Any:
    """The Hugging Face module a bridge component wraps (the module itself if none)."""
    while hasattr(module, "_original_component"):
        module = module._original_component
    return module


def _decoder_layers(hf: Any) -> list[Any] | None:
    """The decoder layers of a causal LM (``model.layers`` in most families), or None."""
    for path in ("model.layers", "transformer.h", "model.decoder.layers", "gpt_neox.layers"):
        obj = hf
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return list(obj)
    return None
