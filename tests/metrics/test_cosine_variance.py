import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.metrics import cosine_matrix, position_variance
from reference import slow_cosine


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([(), (2,), (2, 3)]),
    st.integers(1, 8),
    st.integers(1, 6),
    st.integers(0, 2**31 - 1),
)
def test_cosine_matches_reference(batch, n, d, seed):
    x = torch.randn(*batch, n, d, generator=torch.Generator().manual_seed(seed)).double()
    x[..., 0, :] = 0.0  # a zero vector in every sequence
    sim = cosine_matrix(x)
    assert sim.shape == (*batch, n, n)
    flat = x.reshape(-1, n, d)
    expected = torch.tensor([slow_cosine(m.tolist()) for m in flat], dtype=torch.float64)
    torch.testing.assert_close(sim.reshape(expected.shape), expected)


def test_cosine_zero_vector_and_symmetry():
    x = torch.randn(5, 7, 4)
    x[:, 3] = 0
    sim = cosine_matrix(x)
    assert (sim[:, 3] == 0).all() and (sim[:, :, 3] == 0).all()
    torch.testing.assert_close(sim, sim.mT)
    diag = sim.diagonal(dim1=-2, dim2=-1)
    torch.testing.assert_close(diag[:, [0, 1, 2, 4, 5, 6]], torch.ones(5, 6))


def test_cosine_half_precision_is_upcast():
    x = torch.randn(3, 5, 8)
    torch.testing.assert_close(cosine_matrix(x.bfloat16()), cosine_matrix(x.bfloat16().float()))


def test_variance_is_population_variance():
    x = torch.randn(2, 3, 10, 6).double()
    expected = ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1)
    torch.testing.assert_close(position_variance(x), expected)


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize("fn", [cosine_matrix, position_variance])
def test_bad_input(fn):
    with pytest.raises(ValueError, match="NaN or inf"):
        fn(torch.tensor([[1.0, float("inf")]]))
    with pytest.raises(TypeError, match="floating-point"):
        fn(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="pos, d_model"):
        fn(torch.ones(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("batch", "n", "d"), [(64, 32, 64), (3, 40, 7), (2, 130, 96)])
def test_identical_states_tie_exactly_in_every_row(dtype, batch, n, d):
    """Repeated tokens' embeddings: every row gives their columns one value, bit for bit (MKL's
    float64 x @ x.mT alone does not at 64 x 32 x 64), and a -0.0 is the same state as 0.0."""
    gen = torch.Generator().manual_seed(n)
    table = torch.randn(n // 3, d, generator=gen, dtype=dtype)
    table[0, 0] = 0.0
    tokens = torch.randint(0, n // 3, (batch, n), generator=gen)
    tokens[0, -2:] = 0
    x = table[tokens]
    x[0, -1, 0] = -0.0
    sim = cosine_matrix(x)
    same = tokens[:, :, None] == tokens[:, None, :]
    equal = sim[:, :, :, None] == sim[:, :, None, :]  # [b, k, i, j]: C[k, i] == C[k, j]
    assert bool(equal[same[:, None].expand_as(equal)].all())
    flat = x.reshape(-1, n, d)[:2]
    expected = torch.tensor([slow_cosine(m.tolist()) for m in flat], dtype=torch.float64)
    torch.testing.assert_close(sim[:2].double(), expected, atol=1e-6, rtol=0)
