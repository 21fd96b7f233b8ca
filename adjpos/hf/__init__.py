"""Hugging Face language models with NoPE layers, through TransformerLens's bridge.

`hf_config` builds a config of each family that interleaves NoPE with RoPE layers
(`FAMILIES`); `load_tokenizer` and `text_tokens` turn text into token ids for a model;
`convert_gguf` writes a GGUF file (llama.cpp's format) as a Hugging Face folder;
`summarise_kinds` and `nope_layer_effects` read the tables of `measure_layers` by layer kind.
The bridge itself (`load_hf`, optionally with RoPE removed from chosen layers), `layer_kinds`
and `measure_layers` live in the core (`adjpos.models`, `adjpos.layerwise`) and are
re-exported here.
"""

from adjpos.hf.families import FAMILIES, NOPE_LAYOUTS, hf_config, task_config
from adjpos.hf.gguf import convert_gguf
from adjpos.hf.load import load_tokenizer, text_tokens
from adjpos.hf.measure import LAYERS, measure_layers, nope_layer_effects, summarise_kinds
from adjpos.models import capture_kinds, layer_kinds
from adjpos.models.bridge import hf_state_dict, load_hf, save_hf, supported_architectures

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
