"""Shared fixtures: tiny model configs, built fresh on the CPU; one thread per library."""

import os

import pytest
import torch
from hypothesis import settings
from threadpoolctl import threadpool_limits

from adjpos.models import build_model
from factories import tiny_config

# The models and probes here are tiny, so threads buy nothing, and on a busy machine OpenMP
# and BLAS threads waiting for a free core made a small logistic fit 40x slower. The
# variables reach the libraries loaded later (SciPy's BLAS, with scikit-learn) and the
# subprocesses; the calls reach those already loaded. The adjacency kernel follows torch's
# count; tests/metrics/test_adjacency.py runs it on more threads too.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
torch.set_num_threads(1)
threadpool_limits(1)

# A busy machine must not turn a slow example into a failure; each test sets its own count.
settings.register_profile("adjpos", deadline=None)
settings.load_profile("adjpos")


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


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray of 2 CPUs for every test that runs units on Ray: `adjpos.engines` joins a
    Ray that is already running (and leaves it running), so its start and its workers' imports
    are paid once per test session, not once per test."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
