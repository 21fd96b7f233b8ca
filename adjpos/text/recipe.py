"""The three layouts of the text models and the one recipe they are trained with.

Layouts, identical in everything but where position enters attention:

- ``"nope"``: no positional encoding in any layer (`adjpos.is_position_free` holds);
- ``"rope"``: rotary position embedding in every layer;
- ``"hybrid"``: RoPE except every 4th layer, which is NoPE (SmolLM3's rule: layer i, counted
  from 0, is NoPE when ``(i + 1) % 4 == 0``; in 8 layers, layers 3 and 7).

The recipe (`RECIPE_MODEL`, `RECIPE_TRAIN`, `RECIPE_DATA`): 8 layers of width 64 with 4 heads,
a byte-level BPE vocabulary of 2,048, windows of 128 tokens, batches of 16, AdamW at 2e-3 (warm
up 200 steps, cosine decay to 0.1x, weight decay 0.1), 3,000 steps, the loss on every next
token; evaluation every 250 steps on 64 fixed validation windows. Seeds differ only in the seed
(of the weights and of the batches).
"""

from __future__ import annotations

from typing import Any

from adjpos.models import ModelConfig
from adjpos.validation import UsageError, check_choice

LAYOUTS = ("nope", "rope", "hybrid")
HYBRID_INTERVAL = 4
RECIPE_DATA = {"vocab_size": 2048, "context": 128}
RECIPE_MODEL = {"n_layers": 8, "d_model": 64, "n_heads": 4}
# The widths shipped: the recipe's and a second size (``text-LAYOUT-d128``), all else kept.
WIDTHS = (RECIPE_MODEL["d_model"], 128)
RECIPE_TRAIN = dict(steps=3000, batch_size=16, lr=2e-3, warmup_steps=200, weight_decay=0.1)
RECIPE_TRAIN |= dict(eval_every=250, eval_size=64, target_accuracy=None, loss="sequence")


def sized(layout: str, d_model: int = WIDTHS[0]) -> str:
    """A layout's name at width `d_model`: the layout at the recipe's width, else
    ``LAYOUT-dD``.

    >>> sized("nope"), sized("rope", 128)
    ('nope', 'rope-d128')
    """
    return layout if d_model == WIDTHS[0] else f"{layout}-d{d_model}"


def hybrid_nope_layers(n_layers: int, interval: int = HYBRID_INTERVAL) -> tuple[int, ...]:
    """The NoPE layers of a hybrid of `n_layers` (SmolLM3's rule).

    >>> hybrid_nope_layers(8)
    (3, 7)
    """
    return tuple(i for i in range(n_layers) if (i + 1) % interval == 0)


def layout_config(layout: str, **model: Any) -> ModelConfig:
    """The `ModelConfig` of `layout` with the other fields from `model` (which must not set
    ``positional`` or ``nope_layers``: the layout decides them).

    Example:
        >>> layout_config("hybrid", n_layers=4).nope_layers
        (3,)

    Raises:
        ValueError: an unknown layout, a hybrid too shallow to have a NoPE layer, or
            `model` setting what the layout decides.
    """
    check_choice("layout", layout, LAYOUTS)
    if {"positional", "nope_layers"} & set(model):
        raise UsageError("the layout decides positional and nope_layers; do not pass them")
    if layout == "nope":
        return ModelConfig(**model, positional="none")
    cfg = ModelConfig(**model, positional="rotary")
    if layout == "hybrid":
        nope = hybrid_nope_layers(cfg.n_layers)
        if not nope:
            raise UsageError(
                f"a hybrid needs at least {HYBRID_INTERVAL} layers (every {HYBRID_INTERVAL}th is "
                f"NoPE), got n_layers={cfg.n_layers}"
            )
        cfg = cfg.with_changes(nope_layers=nope)
    return cfg


def layout_of(cfg: ModelConfig) -> str | None:
    """The layout a config has (None when it is none of the three).

    >>> layout_of(layout_config("rope", n_layers=4))
    'rope'
    """
    for layout in LAYOUTS:
        try:
            expected = layout_config(layout, n_layers=cfg.n_layers)
        except UsageError:
            continue
        if (cfg.positional, cfg.nope_layers) == (expected.positional, expected.nope_layers):
            return layout
    return None
