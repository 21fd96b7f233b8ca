"""Hugging Face language models with NoPE layers, through TransformerLens's bridge.

`hf_config` builds a config of each family that interleaves NoPE with RoPE layers
(`FAMILIES`); `load_tokenizer` and `text_tokens` turn text into token ids for a model;
`convert_gguf` writes a GGUF file (llama.cpp's format) as a Hugging Face folder;
`summarise_kinds` and `nope_layer_effects` read the tables of `measure_layers` by layer kind.
This package builds on `adjpos.models`, where the bridge itself lives: `load_hf` wraps a
causal LM (a local folder, a hub name, or a config with random weights) in a
`TransformerBridge` on which every adjpos function works, optionally with RoPE removed from
chosen layers of the weights (``nope_layers``: Llama, SmolLM2, Qwen2, Qwen3 and SmolLM3
checkpoints), and `layer_kinds` says which layers are NoPE, read from the modules
themselves. Those, and the core's `measure_layers`, are re-exported here.
"""

from adjpos.hf.families import FAMILIES, NOPE_LAYOUTS, hf_config, task_config
from adjpos.hf.gguf import convert_gguf
from adjpos.hf.load import (
    hf_state_dict,
    load_hf,
    load_tokenizer,
    save_hf,
    supported_architectures,
    text_tokens,
)
from adjpos.hf.measure import LAYERS, measure_layers, nope_layer_effects, summarise_kinds
from adjpos.models import capture_kinds, layer_kinds

__all__ = [
    "FAMILIES",
    "LAYERS",
    "NOPE_LAYOUTS",
    "capture_kinds",
    "convert_gguf",
    "hf_config",
    "hf_state_dict",
    "layer_kinds",
    "load_hf",
    "load_tokenizer",
    "measure_layers",
    "nope_layer_effects",
    "save_hf",
    "summarise_kinds",
    "supported_architectures",
    "task_config",
    "text_tokens",
]
