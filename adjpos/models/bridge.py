"""A Hugging Face causal LM as a TransformerLens bridge: load it, tell it apart, save it.

The bridge answers every adjpos function through the same hook names as a HookedTransformer
(``blocks.{l}.hook_resid_post``, ...), with the Hugging Face model's own hidden states. It is
a model like adjpos's own, so it lives beside `build_model` and the checkpoints
(`adjpos.save_model` writes it as a Hugging Face folder, `adjpos.load_model` reads one back);
`adjpos.hf` builds on this module.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from adjpos.models.build import quiet_transformer_lens
from adjpos.models.gguf import find_gguf, gguf_config, load_gguf
from adjpos.models.nope_layers import (
    check_nope_spec,
    check_savable,
    honour_use_rope,
    nope_layer_indices,
    remove_rope,
)
from adjpos.runs import atomic_write, write_json
from adjpos.validation import UsageError

WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


def load_hf(
    source: Any,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    offline: bool | None = None,
    seed: int = 0,
    nope_layers: Any = None,
) -> Any:
    """A TransformerLens `TransformerBridge` around a Hugging Face causal LM, optionally with
    RoPE removed from chosen layers of its weights.

    Args:
        source: a local folder saved with ``save_pretrained`` (its config and weights), a
            GGUF file (llama.cpp's format, or a folder holding one and no config.json;
            dequantised to float, needs the ``gguf`` extra: ``pip install -e ".[gguf]"``), a
            hub name such as ``"HuggingFaceTB/SmolLM3-3B"``, or a `transformers` config
            (random weights; `adjpos.hf_config` builds one per family).
        device: where the model lives (default: the CPU).
        dtype: its floating dtype, e.g. ``torch.float32`` or ``"bfloat16"`` (default: the
            checkpoint's, float32 for a config or a GGUF file).
        offline: never reach the hub (default: the ``HF_HUB_OFFLINE`` environment variable).
        seed: with a config, the seed of the random weights (the global torch RNG is left as
            it was); ignored for a checkpoint.
        nope_layers: the layers whose RoPE to remove (Llama, Qwen2, Qwen3 and SmolLM3): None
            (default: the checkpoint as it is) or a form of `adjpos.models.nope_layers`.

    Example:
        >>> import adjpos, torch
        >>> model = adjpos.load_hf(adjpos.hf_config("smollm3"))
        >>> adjpos.layer_kinds(model)[:4]
        ['rope', 'rope', 'rope', 'nope']
        >>> adjpos.adjacency_score(model, torch.randint(0, 256, (4, 16))).shape
        torch.Size([9])

    Raises:
        ValueError: a source that cannot be loaded or bridged (an unsupported architecture,
            no weights or config, an unreachable hub name, a special token id outside the
            vocabulary, ...) or `nope_layers` not allowed for it; each message says why.
    """
    import transformers
    from safetensors import SafetensorError  # a damaged or truncated weight file

    dtype = _check_dtype(dtype)
    check_nope_spec(nope_layers)
    offline = hub_offline() if offline is None else bool(offline)
    if isinstance(source, transformers.PretrainedConfig):
        config = source
        layers = _checked_source(config, nope_layers)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            hf = transformers.AutoModelForCausalLM.from_config(
                config if layers is None else copy.deepcopy(config),  # not the caller's config
                dtype=dtype or torch.float32,
                **_kernels(dtype),
            )
    elif isinstance(source, str | os.PathLike) and (gguf := find_gguf(source)) is not None:
        config = gguf_config(gguf)
        layers = _checked_source(config, nope_layers)
        hf = load_gguf(gguf, dtype=dtype)
    elif isinstance(source, str | os.PathLike):
        config = _load_config(source, offline)
        layers = _checked_source(config, nope_layers)
        try:
            hf = transformers.AutoModelForCausalLM.from_pretrained(
                source, dtype=dtype or "auto", local_files_only=offline, **_kernels(dtype)
            )
        except (OSError, SafetensorError) as err:
            raise UsageError(f"cannot load the weights of {str(source)!r}: {err}") from None
    else:
        raise TypeError(
            "source must be a folder, a hub name or a transformers config, got "
            f"{type(source).__name__}"
        )
    if layers is not None:
        hf = remove_rope(hf, layers)
    return bridge_of(hf, device=device)


def _checked_source(config: Any, nope_layers: Any) -> list[int] | None:
    """Check `config` before its weights load; the layers `nope_layers` makes NoPE."""
    _check_config(config)
    architecture, supported = _architecture(config), supported_architectures()
    if architecture not in supported:
        raise UsageError(
            f"architecture {architecture!r} is not supported by the TransformerLens bridge; "
            "the interleaved NoPE families are in adjpos.hf.FAMILIES, and all supported causal "
            f"LMs are: {', '.join(supported)}"
        )
    if nope_layers is None:
        return None
    return nope_layer_indices(nope_layers, config, architecture)


def bridge_of(hf: Any, *, device: str | torch.device | None = None) -> Any:
    """Wrap a Hugging Face causal LM (built, not yet bridged) in a `TransformerBridge`."""
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    hf.eval()
    with quiet_transformer_lens():
        bridge = build_bridge_from_module(hf, type(hf).__name__, hf_config=hf.config)
    hf_model = bridge.original_model
    for param in _extra_parameters(hf_model, _own_weights(hf_model)):  # the zero lm_head bias
        param.requires_grad_(False)
    honour_use_rope(bridge)
    if device is not None and torch.device(device) != torch.device("cpu"):
        bridge = bridge.to(torch.device(device))
    return bridge


def is_bridge(model: Any) -> bool:
    """True for a TransformerBridge (such as `load_hf` returns).

    Imports nothing: a bridge can only exist once TransformerLens's ``model_bridge`` has been
    imported, so until then every object is answered False without loading it.

    Example:
        >>> is_bridge(torch.nn.Linear(2, 2))
        False
    """
    bridges = sys.modules.get("transformer_lens.model_bridge")
    kind = getattr(bridges, "TransformerBridge", None)
    return kind is not None and isinstance(model, kind)


def hf_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The Hugging Face model's own weights under their Hugging Face names (the bridge wraps
    each module, so the wrapped model's ``state_dict`` holds every tensor under several
    names), detached copies on the CPU."""
    hf = model.original_model
    own = _own_weights(hf)
    if any(bool(p.detach().any()) for p in _extra_parameters(hf, own)):
        raise ValueError("the bridge holds nonzero weights the Hugging Face model does not have")
    return {name: value.detach().cpu().clone().contiguous() for name, value in own.items()}


def _own_weights(hf: Any) -> dict[str, torch.Tensor]:
    """The wrapped model's tensors under the names the Hugging Face model gives them."""
    wrapped: dict[str, torch.Tensor] = {}
    for key, value in hf.state_dict().items():
        wrapped.setdefault(key.replace("._original_component", ""), value)
    names = sorted(_hf_names(hf.config))
    missing = [name for name in names if name not in wrapped]
    if missing:
        raise ValueError(f"cannot find the bridged model's weights {missing[:5]}")
    return {name: wrapped[name] for name in names}


def _extra_parameters(hf: Any, own: dict[str, torch.Tensor]) -> list[torch.nn.Parameter]:
    """Parameters the bridge added to the wrapped model (none of the model's own tensors)."""
    pointers = {value.data_ptr() for value in own.values()}
    return [p for p in hf.parameters() if p.data_ptr() not in pointers]


def _hf_names(config: Any) -> set[str]:
    """The names of a Hugging Face model's weights (built on the meta device: no memory)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):  # on a copy: building a model may set fields of its config
        return set(AutoModelForCausalLM.from_config(copy.deepcopy(config)).state_dict())


def save_hf(model: Any, path: str | os.PathLike) -> Path:
    """Save a bridged model as a Hugging Face folder (``config.json`` + ``model.safetensors``,
    loadable by ``load_hf(path)`` and by transformers itself); files are replaced atomically."""
    from safetensors.torch import save_file

    check_savable(model.original_model)
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    state = hf_state_dict(model)
    atomic_write(folder / "model.safetensors", lambda tmp: save_file(state, tmp, {"format": "pt"}))
    write_json(folder / "config.json", model.original_model.config.to_dict())
    return folder


def load_hf_state(folder: Path, state: dict[str, torch.Tensor], *, device: Any = None) -> Any:
    """The model of the Hugging Face `folder`'s config with the weights `state` (a training
    snapshot, read by `adjpos.models.checkpoint.read_weights`), bridged."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    hf = transformers.AutoModelForCausalLM.from_config(config)
    hf.load_state_dict(state, strict=True)
    return bridge_of(hf, device=device)


def is_hf_folder(folder: Path) -> bool:
    """A folder whose config.json is a Hugging Face config (it names its model_type)."""
    try:
        data = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" in data


def _kernels(dtype: torch.dtype | None) -> dict[str, str]:
    """The fused mixture-of-experts kernels take no float64: use the plain loop then."""
    return {"experts_implementation": "eager"} if dtype == torch.float64 else {}


def hub_offline() -> bool:
    """Whether the ``HF_HUB_OFFLINE`` environment variable forbids the hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _check_dtype(dtype: Any) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        return getattr(torch, dtype)
    raise UsageError(f"dtype={dtype!r} is not a torch dtype; e.g. 'float32' or 'bfloat16'")


def _load_config(source: str | os.PathLike, offline: bool) -> Any:
    import transformers

    folder = Path(source)
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise UsageError(
                f"{str(folder)!r} has no config.json: pass a folder written by "
                "model.save_pretrained(folder)"
            )
        if not any(next(folder.glob(pattern), None) for pattern in WEIGHT_FILES):
            raise UsageError(
                f"{str(folder)!r} has a config but no weights (no *.safetensors or "
                "pytorch_model*.bin): pass a folder written by model.save_pretrained(folder), "
                "or pass its config for random weights: "
                "load_hf(transformers.AutoConfig.from_pretrained(folder))"
            )
    elif os.sep in str(source) and str(source).startswith((".", os.sep)):
        raise UsageError(f"no such folder: {str(source)!r}")
    try:
        return transformers.AutoConfig.from_pretrained(str(source), local_files_only=offline)
    except (OSError, ValueError) as err:
        hint = "offline: it is not in the local cache" if offline else "not reachable or unknown"
        raise UsageError(
            f"cannot load {str(source)!r} as a folder or a hub model ({hint}): {err}. Pass a "
            "folder written by save_pretrained, or a config (adjpos.hf_config) for random "
            "weights"
        ) from None


def _architecture(config: Any) -> str:
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if config.architectures:
        return config.architectures[0]
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    if name is None or not hasattr(transformers, name):
        raise UsageError(f"{config.model_type!r} configs have no causal-LM class in transformers")
    return name


def supported_architectures() -> list[str]:
    """The causal-LM architectures the bridge wraps (adjpos's families among them)."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    return sorted(name for name in SUPPORTED_ARCHITECTURES if name.endswith("ForCausalLM"))


def _check_config(config: Any) -> None:
    """The config traps that would otherwise fail deep inside torch, or silently."""
    vocab = getattr(config, "vocab_size", None)
    for field in ("pad_token_id", "bos_token_id", "eos_token_id"):
        ids = getattr(config, field, None)
        ids = ids if isinstance(ids, list) else [ids]
        bad = [i for i in ids if i is not None and vocab is not None and not 0 <= i < vocab]
        if bad:
            raise UsageError(
                f"{field}={bad[0]} lies outside the vocabulary of {vocab} tokens (a tiny "
                f"vocabulary with a released config's special ids?): set {field} to an id in "
                f"[0, {vocab - 1}] or None"
            )
    types = getattr(config, "layer_types", None) or []
    if (
        config.model_type == "cohere2"
        and "sliding_attention" in types
        and getattr(config, "sliding_window", None) is None
    ):
        raise UsageError(
            "this Cohere2 config has sliding-attention layers but sliding_window=None, so "
            "they would silently run without RoPE (Cohere2 applies RoPE only in windowed "
            "layers): set sliding_window (the released models use 4096)"
        )
