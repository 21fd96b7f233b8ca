"""Small config factories for tests."""

from adjpos.models import ModelConfig


def tiny_config(**overrides) -> ModelConfig:
    """A small, fast config; override any field."""
    fields = dict(n_layers=2, d_model=16, n_heads=2, d_vocab=20, n_ctx=24, seed=0)
    fields.update(overrides)
    return ModelConfig(**fields)


def tiny_bridge():
    """A small TransformerBridge with random weights (rotary positions), built offline."""
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge.boot_native(
        dict(
            n_layers=2,
            d_model=16,
            n_heads=2,
            d_head=8,
            d_mlp=32,
            d_vocab=20,
            n_ctx=24,
            act_fn="gelu",
            seed=0,
            positional_embedding_type="rotary",
        )
    )
