"""Remove RoPE from chosen layers of a Hugging Face checkpoint, keeping every weight
(``adjpos.load_hf(source, nope_layers=...)``).

Which layers (`nope_layer_indices`): ``"all"``, ``"none"`` (the matched control, built the
same way), ``"released"`` (SmolLM3's own layout), an int k (layer i is NoPE when
``(i + 1) % k == 0``, SmolLM3's convention) or a list of layer indices. Every other layer keeps
the checkpoint's own rotary parameters, even where it had none before.

How, per architecture (`remove_rope`):

- SmolLM3: its own switch, ``no_rope_layers`` in the config and ``use_rope`` in each
  attention module.
- Llama (SmolLM2 is one) and Qwen2: rebuilt as SmolLM3, Llama's decoder with that switch,
  holding the same tensors (``nope_layers="none"`` gives the original logits exactly; Qwen2's
  output projection gets a bias of zeros, as SmolLM3 has all four biases or none).
- Qwen3: its query and key norms have no place in SmolLM3, so it stays a Qwen3 whose
  attention modules get ``use_rope``, which the bridge honours (`honour_use_rope`); its
  config cannot record that, so it cannot be saved (`check_savable`).

Other families are refused: in Llama 4, Cohere2, EXAONE 4 and AFMoE a layer's RoPE comes
with other differences (chunked or sliding-window attention, query-key norms only in RoPE
layers), so taking RoPE away would change more than the rotation.
"""

from __future__ import annotations

from typing import Any

import torch

from adjpos.validation import UsageError, is_int

NAMED_LAYOUTS = ("all", "none", "released")
NATIVE = "SmolLM3ForCausalLM"
REBUILT_AS_SMOLLM3 = ("LlamaForCausalLM", "Qwen2ForCausalLM")
SWITCHED_IN_BRIDGE = ("Qwen3ForCausalLM",)
ARCHITECTURES = (*REBUILT_AS_SMOLLM3, *SWITCHED_IN_BRIDGE, NATIVE)
RELEASED = {NATIVE: "SmolLM3: every 4th layer, its config's no_rope_layer_interval"}

# The config fields a Llama or Qwen2 checkpoint hands to its SmolLM3 twin; the rest of the
# SmolLM3 config (the NoPE switch, biases, windows) is set by `_smollm3_config`.
_SHARED_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "hidden_act",
    "max_position_embeddings",
    "initializer_range",
    "rms_norm_eps",
    "use_cache",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "attention_dropout",
    "tie_word_embeddings",
)
_SPEC_HELP = (
    "None (the checkpoint as it is), 'all', 'none', 'released', an int k >= 1 (every k-th "
    "layer: layer i is NoPE when (i + 1) % k == 0) or a list of layer indices"
)


def check_nope_spec(nope_layers: Any) -> None:
    """Raise `UsageError` unless `nope_layers` has one of the allowed forms (checked before
    anything is loaded; the layer range is checked by `nope_layer_indices`)."""
    if nope_layers is None or isinstance(nope_layers, str) and nope_layers in NAMED_LAYOUTS:
        return
    if is_int(nope_layers):
        if nope_layers < 1:
            raise UsageError(f"nope_layers={nope_layers} is not allowed; pass {_SPEC_HELP}")
        return
    if isinstance(nope_layers, list | tuple | range):
        if not all(is_int(i) for i in nope_layers):
            raise UsageError(f"nope_layers must list layer indices (ints), got {nope_layers!r}")
        return
    raise UsageError(f"nope_layers={nope_layers!r} is not allowed; pass {_SPEC_HELP}")


def nope_layer_indices(nope_layers: Any, config: Any, architecture: str) -> list[int]:
    """The sorted indices of the layers `nope_layers` makes NoPE in a model of `config`
    (a `transformers` config) whose causal-LM class is `architecture`.

    Raises:
        UsageError: a form that is not allowed, an architecture without the option (the
            message lists those with it), ``"released"`` for one without a released layout,
            an interval longer than the model, or an index out of range or repeated.

    Example:
        >>> from transformers import LlamaConfig
        >>> nope_layer_indices(4, LlamaConfig(num_hidden_layers=8), "LlamaForCausalLM")
        [3, 7]
    """
    check_nope_spec(nope_layers)
    n_layers = config.num_hidden_layers
    if architecture not in ARCHITECTURES:
        raise UsageError(
            f"nope_layers works on {', '.join(ARCHITECTURES)} checkpoints (Llama, SmolLM2, "
            f"Qwen2, Qwen3, SmolLM3), not on {architecture}; load it with nope_layers=None"
        )
    if nope_layers == "released":
        if architecture not in RELEASED:
            raise UsageError(
                f"nope_layers='released' needs a family with a released NoPE layout "
                f"({'; '.join(RELEASED.values())}); {architecture} has none: pass 'all', an "
                "interval k or a list of layers"
            )
        interval = config.no_rope_layer_interval
        return [i for i in range(n_layers) if (i + 1) % interval == 0]
    if nope_layers == "all":
        return list(range(n_layers))
    if nope_layers == "none":
        return []
    if is_int(nope_layers):
        if nope_layers > n_layers:
            raise UsageError(
                f"nope_layers={nope_layers} (every k-th layer, k = {nope_layers}) makes no layer "
                f"NoPE in a model of {n_layers} layers: pass an interval from 1 to {n_layers}, "
                "or 'none'"
            )
        return [i for i in range(n_layers) if (i + 1) % nope_layers == 0]
    layers = list(nope_layers)
    for i in layers:
        if not 0 <= i < n_layers:
            raise UsageError(
                f"nope_layers: layer {i} is out of range; this model has layers 0 to {n_layers - 1}"
            )
        if layers.count(i) > 1:
            raise UsageError(f"nope_layers lists layer {i} more than once")
    return sorted(layers)


def remove_rope(hf: Any, layers: list[int]) -> Any:
    """The Hugging Face causal LM `hf` (not yet bridged) with RoPE in no layer of `layers`
    and the checkpoint's own RoPE in every other layer; a Llama or Qwen2 comes back as a
    SmolLM3 holding the same tensors, and `hf` must not be used afterwards."""
    if type(hf).__name__ in REBUILT_AS_SMOLLM3:
        hf = _as_smollm3(hf)
    keep = [int(i not in layers) for i in range(hf.config.num_hidden_layers)]
    if hasattr(hf.config, "no_rope_layers"):  # SmolLM3 (a Qwen3 has no such field)
        hf.config.no_rope_layers = keep  # what a saved folder says
    for layer, use_rope in zip(hf.model.layers, keep, strict=True):
        layer.self_attn.use_rope = use_rope
    return hf


def _as_smollm3(hf: Any) -> Any:
    """A SmolLM3 with the weights of a Llama or a Qwen2 (the tensors themselves: built on the
    meta device, then handed the source's parameters and buffers)."""
    import transformers

    config = _smollm3_config(hf.config)
    with torch.device("meta"):
        twin = transformers.AutoModelForCausalLM.from_config(config)
    state = hf.state_dict(keep_vars=True)  # the Parameters themselves: tied weights stay tied
    for name in twin.state_dict().keys() - state.keys():
        if name.endswith("self_attn.o_proj.bias"):  # Qwen2 has none: zeros add nothing
            weight = state[name.removesuffix("bias") + "weight"]
            state[name] = torch.nn.Parameter(torch.zeros_like(weight[:, 0]))
    twin.load_state_dict(state, strict=True, assign=True)
    buffers = dict(hf.named_buffers())  # the rotary frequencies are not in the state dict
    for name, buffer in list(twin.named_buffers()):
        if buffer.is_meta:
            module, _, attr = name.rpartition(".")
            setattr(twin.get_submodule(module), attr, buffers[name])
    if twin.config.rope_parameters != hf.config.rope_parameters:
        raise RuntimeError("the SmolLM3 twin lost the checkpoint's rope parameters")
    return twin.eval()


def _smollm3_config(source: Any) -> Any:
    """The SmolLM3 config of a Llama or Qwen2 config: its fields, its rope parameters (SmolLM3
    would otherwise default to theta 2e6), and its biases and sliding windows."""
    import copy

    import transformers

    fields = {name: copy.deepcopy(getattr(source, name)) for name in _SHARED_FIELDS}
    fields["head_dim"] = getattr(source, "head_dim", None) or (
        source.hidden_size // source.num_attention_heads
    )
    if source.model_type == "qwen2":
        bias, mlp_bias = True, False
        window = {
            "use_sliding_window": source.use_sliding_window,
            "sliding_window": source.sliding_window,
            "layer_types": list(source.layer_types),
        }
    else:
        bias, mlp_bias, window = source.attention_bias, source.mlp_bias, {}
    return transformers.SmolLM3Config(
        **fields,
        **window,
        attention_bias=bias,
        mlp_bias=mlp_bias,
        rope_parameters=copy.deepcopy(source.rope_parameters),
        no_rope_layers=[1] * source.num_hidden_layers,
        architectures=[NATIVE],
        dtype=source.dtype,
    )


def honour_use_rope(bridge: Any) -> None:
    """Make each of `bridge`'s attention blocks skip RoPE where the Hugging Face attention
    module it wraps says ``use_rope = 0`` and the bridge would not see it (a Qwen3 from
    `remove_rope`): the position embeddings are dropped before the block's forward, as
    TransformerLens's own SmolLM3 adapter does. Blocks of the families that already honour
    such a switch are left alone."""
    from transformer_lens.model_bridge.generalized_components import (
        PositionEmbeddingsAttentionBridge,
    )

    for block in getattr(bridge, "blocks", []):
        attn = getattr(block, "attn", None)
        switch = getattr(getattr(attn, "original_component", None), "use_rope", None)
        if (
            isinstance(attn, PositionEmbeddingsAttentionBridge)
            and switch is not None
            and not attn.rope_optional
        ):
            attn.rope_optional = True  # no warning that RoPE was skipped: it is meant
            attn.register_forward_pre_hook(_skip_rope, with_kwargs=True)


def _skip_rope(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if not module.original_component.use_rope:
        kwargs["position_embeddings"] = None
        if len(args) >= 2 and not isinstance(args[1], torch.Tensor):  # passed by position
            args = (args[0], None, *args[2:])
    return args, kwargs


def check_savable(hf: Any) -> None:
    """Raise `UsageError` when `hf` has NoPE layers its config cannot record (a Qwen3 from
    `remove_rope`), so a saved folder would silently load with RoPE everywhere."""
    if hasattr(hf.config, "no_rope_layers"):
        return
    layers = getattr(getattr(hf, "model", None), "layers", None) or []
    nope = [i for i, layer in enumerate(layers) if not getattr(layer.self_attn, "use_rope", 1)]
    if nope:
        raise UsageError(
            f"this {type(hf).__name__} has NoPE layers {nope} (from load_hf(..., "
            "nope_layers=...)), which its config cannot record: a saved folder would load "
            "with RoPE in every layer. Keep the source and the nope_layers instead, and load "
            "them again"
        )
