"""Small config factories for tests."""

from adjpos.models import ModelConfig


def tiny_config(**overrides) -> ModelConfig:
    """A small, fast config; override any field."""
    fields = dict(n_layers=2, d_model=16, n_heads=2, d_vocab=20, n_ctx=24, seed=0)
    fields.update(overrides)
    return ModelConfig(**fields)
