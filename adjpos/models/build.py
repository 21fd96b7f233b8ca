"""`build_model`: the one place that turns a `ModelConfig` into a HookedTransformer.

TransformerLens 3.9 has no "none" positional type, so NoPE is built as a "standard"
model whose `W_pos` is zeroed and frozen here, and zeroed again after every
`load_state_dict` by a hook registered here. Nothing else in adjpos touches `W_pos`.

One seed gives one start whatever the position scheme. TransformerLens draws the weights from
one seeded stream in parameter order, `W_pos` second, and a rotary model has no `W_pos`, so it
takes its weights from the learned-position model of the same config, built here and dropped:
it equals the NoPE and learned models of its seed tensor for tensor, `W_pos` aside.

A rotary model's `nope_layers` (SmolLM3's hybrid) have their attention's `apply_rotary`
replaced by the identity: an attribute of the module, so a loaded state dict cannot undo it.
"""

from __future__ import annotations

import random
import warnings
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from adjpos.models.config import ModelConfig

_TL_POSITIONAL = {"none": "standard", "learned": "standard", "rotary": "rotary", "alibi": "alibi"}
_WITHOUT_W_POS = ("rotary",)  # TransformerLens gives ALiBi a W_pos


@contextmanager
def quiet_transformer_lens():
    """Silence TransformerLens's 'deprecated ... removed in 4.0' warning, and only that one
    (adjpos pins transformer-lens<4 on purpose; it would fire on every model)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r".*deprecated and will be removed in 4\.0",
            category=DeprecationWarning,
        )
        yield


def build_model(cfg: ModelConfig, *, device: str | torch.device | None = None) -> Any:
    """Build a randomly initialised HookedTransformer from `cfg`.

    Weights are drawn from a private generator state seeded by `cfg.seed` (the global RNGs
    are left as they were). With ``cfg.positional == "none"`` the positional embedding is zero
    and frozen for the model's life. The model keeps its config as ``model.adjpos_config``.

    Args:
        cfg: the model description.
        device: where to put the model (default: cuda if available, else cpu).

    Example:
        >>> import adjpos
        >>> model = build_model(ModelConfig(n_layers=1, d_model=16, n_heads=2))
        >>> adjpos.is_position_free(model)
        True
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg must be an adjpos.ModelConfig, got {type(cfg).__name__}")
    with quiet_transformer_lens():
        from transformer_lens import HookedTransformer, HookedTransformerConfig

        kwargs = _tl_kwargs(cfg, device)
        with _global_rngs_restored():  # TL seeds python, numpy and torch globally
            if cfg.positional in _WITHOUT_W_POS:
                learned = {**kwargs, "positional_embedding_type": "standard", "device": "cpu"}
                start = HookedTransformer(HookedTransformerConfig(**learned))
                model = HookedTransformer(HookedTransformerConfig(**kwargs, init_weights=False))
                weights = dict(start.named_parameters())
                with torch.no_grad():
                    for name, param in model.named_parameters():
                        param.copy_(weights[name])
            else:
                model = HookedTransformer(HookedTransformerConfig(**kwargs))
    model.adjpos_config = cfg
    if cfg.positional == "none":
        _remove_position(model)
        model.register_load_state_dict_post_hook(_reapply_after_load)
    for layer in cfg.nope_layers:
        model.blocks[layer].attn.apply_rotary = no_rotation
    return model


def no_rotation(x: torch.Tensor, past_kv_pos_offset: int = 0, attention_mask: Any = None):
    """The `apply_rotary` of a NoPE layer in a rotary model: queries and keys unchanged."""
    return x


@contextmanager
def _global_rngs_restored():
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _reapply_after_load(model: nn.Module, incompatible_keys: Any) -> None:
    _remove_position(model)


def _remove_position(model: nn.Module) -> None:
    with torch.no_grad():
        model.pos_embed.W_pos.zero_()
    model.pos_embed.W_pos.requires_grad_(False)


def _tl_kwargs(cfg: ModelConfig, device: str | torch.device | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = dict(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_head=cfg.d_head,
        d_mlp=None if cfg.attn_only else cfg.d_mlp,
        d_vocab=cfg.d_vocab,
        n_ctx=cfg.n_ctx,
        act_fn=None if cfg.attn_only else cfg.act_fn,
        normalization_type=cfg.normalization_type,
        attn_only=cfg.attn_only,
        positional_embedding_type=_TL_POSITIONAL[cfg.positional],
        seed=cfg.seed,
        dtype=getattr(torch, cfg.dtype),
        default_prepend_bos=False,
    )
    if cfg.init_range is not None:
        kwargs["initializer_range"] = float(cfg.init_range)
    if device is not None:
        kwargs["device"] = str(device)
    return kwargs
