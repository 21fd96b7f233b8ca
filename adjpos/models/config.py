"""`ModelConfig`: the one frozen description of a model adjpos can build.

Field docstrings (the ``help`` metadata) double as the command line's ``--help``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from adjpos.validation import UsageError, check_choice, check_positive_int, is_int, known_fields
from adjpos.validation import help_field as _help

POSITIONAL = ("none", "learned", "rotary", "alibi")
NORMALIZATION = ("LN", "LNPre", "RMS", "RMSPre", None)
ACT_FNS = ("relu", "gelu", "gelu_new", "gelu_fast", "silu", "solu_ln")
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of a causal decoder-only transformer, TransformerLens semantics.

    Invalid values raise `ValueError` naming what is allowed.

    Example:
        >>> cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4)
        >>> cfg.d_head, cfg.d_mlp
        (8, 128)
    """

    n_layers: int = _help("number of transformer blocks", 4)
    d_model: int = _help("width of the residual stream", 64)
    n_heads: int = _help("attention heads per block", 4)
    d_head: int | None = _help("width of each head (default: d_model // n_heads)", None)
    d_mlp: int | None = _help("hidden width of each MLP (default: 4 * d_model)", None)
    d_vocab: int = _help("vocabulary size", 64)
    n_ctx: int = _help("longest sequence the model accepts", 128)
    act_fn: str = _help(f"MLP activation, one of {ACT_FNS}", "gelu")
    normalization_type: str | None = _help(
        f"normalization, one of {NORMALIZATION} (TL names; None is no normalization)", "LN"
    )
    attn_only: bool = _help("attention-only blocks (no MLPs)", False)
    init_range: float | None = _help(
        "std of the normal weight init (TL initializer_range; default 0.8/sqrt(d_model))", None
    )
    positional: str = _help(f"position scheme, one of {POSITIONAL}; 'none' is NoPE", "none")
    # No command-line option of its own: `adjpos train --layout` sets it.
    nope_layers: tuple[int, ...] = dataclasses.field(
        default=(),
        metadata={
            "help": "blocks (0-based) of a rotary model whose attention gets no rotation: NoPE "
            "layers in a RoPE model (SmolLM3's hybrid: layer i is NoPE when (i + 1) % 4 == 0)",
            "cli": False,
        },
    )
    seed: int = _help("seed of the weight initialisation", 0)
    dtype: str = _help(f"parameter dtype, one of {DTYPES}", "float32")

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "d_vocab", "n_ctx"):
            check_positive_int(name, getattr(self, name))
        for name in ("d_head", "d_mlp"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        if self.d_head is None and self.d_model % self.n_heads:
            raise UsageError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                "choose n_heads dividing d_model or set d_head explicitly"
            )
        # Derived widths are stored resolved, so config.json says what was built.
        if self.d_head is None:
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        if self.d_mlp is None:
            object.__setattr__(self, "d_mlp", 4 * self.d_model)
        check_choice("positional", self.positional, POSITIONAL)
        check_choice("normalization_type", self.normalization_type, NORMALIZATION)
        check_choice("act_fn", self.act_fn, ACT_FNS)
        check_choice("dtype", self.dtype, DTYPES)
        if not isinstance(self.attn_only, bool):
            raise UsageError(f"attn_only must be True or False, got {self.attn_only!r}")
        if self.init_range is not None and not (
            isinstance(self.init_range, (int, float)) and self.init_range > 0
        ):
            raise UsageError(
                f"init_range must be a positive number or None, got {self.init_range!r}"
            )
        self._check_nope_layers()
        if not is_int(self.seed):
            raise UsageError(f"seed must be an int, got {self.seed!r}")

    def _check_nope_layers(self) -> None:
        layers = self.nope_layers
        if not isinstance(layers, list | tuple) or not all(is_int(i) for i in layers):
            raise UsageError(f"nope_layers must be a list of block indices, got {layers!r}")
        # Stored sorted, as a tuple: a config read back from JSON (a list) equals the original.
        object.__setattr__(self, "nope_layers", tuple(sorted(int(i) for i in layers)))
        if not layers:
            return
        if self.positional != "rotary":
            raise UsageError(
                f"nope_layers applies to positional='rotary' only (the layers left without "
                f"rotation), got positional={self.positional!r}; positional='none' makes every "
                "layer NoPE"
            )
        if len(set(layers)) != len(layers) or not all(0 <= i < self.n_layers for i in layers):
            raise UsageError(
                f"nope_layers must name distinct blocks from 0 to {self.n_layers - 1}, "
                f"got {list(layers)}"
            )

    def with_changes(self, **changes: Any) -> ModelConfig:
        """A copy with `changes` applied. A width that equals its derived default (d_head =
        d_model // n_heads, d_mlp = 4 * d_model) is derived again from the new values.

        Example:
            >>> ModelConfig(d_model=64, n_heads=4).with_changes(d_model=128).d_head
            32
        """
        data = self.to_dict()
        if "d_head" not in changes and self.d_head == self.d_model // self.n_heads:
            data["d_head"] = None
        if "d_mlp" not in changes and self.d_mlp == 4 * self.d_model:
            data["d_mlp"] = None
        return ModelConfig(**{**data, **changes})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a dict; unknown keys are warned about (`adjpos.validation.known_fields`)."""
        kept = known_fields(cls, data)
        if isinstance(kept.get("nope_layers"), list):  # JSON has no tuples
            kept["nope_layers"] = tuple(kept["nope_layers"])
        return cls(**kept)
