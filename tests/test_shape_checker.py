"""The test-time shape checker (tests/conftest.py): on in every adjpos module that declares
array shapes, and only there."""

import sys

import jaxtyping
import pytest
import torch

from adjpos.metrics import cosine_matrix
from conftest import SHAPED, shape_checks_off


def test_a_shaped_function_rejects_a_wrong_shape():
    assert cosine_matrix(torch.randn(2, 5, 3)).shape == (2, 5, 5)
    with pytest.raises(jaxtyping.TypeCheckError):
        cosine_matrix(torch.randn(5))  # no position axis
    with shape_checks_off():  # as a user runs it: adjpos's own error, or torch's
        with pytest.raises(Exception) as raised:
            cosine_matrix(torch.randn(5))
        assert not isinstance(raised.value, jaxtyping.TypeCheckError)


def test_every_module_that_declares_shapes_is_checked():
    import adjpos.engines  # declares no shapes

    assert "adjpos.metrics.cosine" in SHAPED and "adjpos.engines" not in SHAPED
    assert type(adjpos.engines.__spec__.loader).__name__ != "_JaxtypingLoader"
    for name in SHAPED:
        module = sys.modules.get(name)
        if module is not None:  # imported in this process: loaded through the hook
            assert type(module.__spec__.loader).__name__ == "_JaxtypingLoader", name
    assert type(sys.modules["adjpos.metrics.cosine"].__spec__.loader).__name__ == "_JaxtypingLoader"
