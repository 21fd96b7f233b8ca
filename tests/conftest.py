"""Shared fixtures: tiny model configs, built fresh on the CPU."""

import pytest
import torch

from adjpos.models import build_model
from factories import tiny_config


@pytest.fixture
def tiny_model():
    return build_model(tiny_config(), device="cpu")


@pytest.fixture
def tokens():
    return torch.randint(0, 20, (6, 12), generator=torch.Generator().manual_seed(0))


@pytest.fixture
def user_errors():
    """Switch off the test-time shape checker, so a test sees adjpos's own error for bad
    input exactly as a user does (the checker would otherwise reject bad shapes first)."""
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", False)
