"""Configs of the production families that interleave NoPE layers with RoPE layers.

Each family is a `transformers` config class with its released interleaving (every fourth
layer NoPE in all five), built at a tiny size or at a size the user gives. ``nope`` picks the
layout: ``"released"`` (the default), ``"all"`` layers NoPE, or ``"none"`` (every layer RoPE;
sliding-window RoPE for Cohere2 and AFMoE, the window longer than the tiny context). How each
family marks its NoPE layers (what `adjpos.layer_kinds` reads back):

========  ====================================================================
smollm3   ``no_rope_layers`` (1 = RoPE, 0 = NoPE), every fourth layer NoPE
llama4    ``no_rope_layers`` as SmolLM3; RoPE layers use chunked attention
cohere2   ``layer_types``: sliding-window RoPE layers, global NoPE layers
exaone4   ``layer_types`` with a ``sliding_window``: global layers are NoPE
afmoe     ``layer_types``: sliding-window RoPE layers, global NoPE layers
========  ====================================================================
"""

from __future__ import annotations

from typing import Any

from adjpos.validation import UsageError, check_choice

NOPE_LAYOUTS = ("released", "all", "none")
INTERVAL = 4  # every released family puts a NoPE layer every fourth layer

# family: (config class, architecture, config fields of the tiny size)
_COMMON = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {}),
    "llama4": (
        "Llama4TextConfig",
        "Llama4ForCausalLM",
        {"intermediate_size_mlp": 128, "num_local_experts": 2, "num_experts_per_tok": 1},
    ),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", {"sliding_window": 4096}),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", {"sliding_window": 4096}),
    "afmoe": (
        "AfmoeConfig",
        "AfmoeForCausalLM",
        {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "num_dense_layers": 1,
            "sliding_window": 4096,
        },
    ),
}


def hf_config(
    family: str, size: str | dict[str, Any] = "tiny", *, nope: str = "released", **fields: Any
) -> Any:
    """A `transformers` config of `family` with the NoPE layout `nope` (random weights follow
    from ``adjpos.load_hf(config)``).

    Args:
        family: one of `FAMILIES` ("smollm3", "llama4", "cohere2", "exaone4", "afmoe").
        size: "tiny" (8 layers of width 64, a vocabulary of 256, 128 positions), or a dict of
            config fields that replace the tiny ones (e.g. ``{"num_hidden_layers": 12,
            "hidden_size": 256}``).
        nope: "released", "all" or "none" (see the module docstring).
        fields: further config fields, applied last.

    Example:
        >>> cfg = hf_config("smollm3")
        >>> cfg.no_rope_layers
        [1, 1, 1, 0, 1, 1, 1, 0]
        >>> hf_config("cohere2", nope="all").layer_types[:2]
        ['full_attention', 'full_attention']
    """
    import transformers

    if family not in FAMILIES:
        raise UsageError(f"unknown family {family!r}; allowed: {sorted(FAMILIES)}")
    check_choice("nope", nope, NOPE_LAYOUTS)
    if isinstance(size, str) and size != "tiny":
        raise UsageError(f"size={size!r} is not allowed; pass 'tiny' or a dict of config fields")
    if not isinstance(size, str | dict):
        raise TypeError(f"size must be 'tiny' or a dict of config fields, got {size!r}")
    class_name, _, extra = FAMILIES[family]
    values = {**_COMMON, **extra, **({} if isinstance(size, str) else size), **fields}
    values.update(_layout(family, nope, int(values["num_hidden_layers"]), values))
    return getattr(transformers, class_name)(**values)


def _layout(family: str, nope: str, n_layers: int, values: dict[str, Any]) -> dict[str, Any]:
    """The config fields that place the NoPE layers."""
    released = [(i + 1) % INTERVAL == 0 for i in range(n_layers)]
    is_nope = {"released": released, "all": [True] * n_layers, "none": [False] * n_layers}[nope]
    if family in ("smollm3", "llama4"):
        return {"no_rope_layers": [int(not x) for x in is_nope]}
    if family == "exaone4" and nope == "none":  # no sliding window: every layer is RoPE
        return {"sliding_window": None, "layer_types": ["full_attention"] * n_layers}
    types = ["full_attention" if x else "sliding_attention" for x in is_nope]
    return {"layer_types": types, "sliding_window": values.get("sliding_window") or 4096}


def task_config(
    family: str,
    task: str,
    size: str | dict[str, Any] = "tiny",
    *,
    nope: str = "all",
    **fields: Any,
) -> Any:
    """`hf_config` fitted to one of adjpos's tasks, to train on it (`adjpos.train` takes the
    bridged model): the task's vocabulary and longest sequence, no special token ids (the
    tasks have none; a pad id would freeze that token's embedding row), all layers NoPE by
    default.

    Example:
        >>> cfg = task_config("smollm3", "reversal")
        >>> cfg.vocab_size, cfg.no_rope_layers[:2], cfg.pad_token_id
        (25, [0, 0], None)
    """
    from adjpos.tasks import VOCAB_SIZE, get_task

    special = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}
    context = {"vocab_size": VOCAB_SIZE, "max_position_embeddings": get_task(task).max_len}
    return hf_config(family, size, nope=nope, **{**special, **context, **fields})
