"""derive_seed: equal arguments give equal seeds, every change gives another one."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from adjpos.seeds import derive_seed, derived_generator

labels = st.lists(st.one_of(st.integers(0, 10**6), st.text(max_size=8)), max_size=4)


@given(seed=st.integers(0, 2**32), labels=labels)
def test_a_derived_seed_is_repeatable_and_in_range(seed, labels):
    first = derive_seed(seed, *labels)
    assert first == derive_seed(seed, *labels)
    assert 0 <= first < 2**63
    torch.Generator().manual_seed(first)  # torch takes it


@given(seed=st.integers(0, 2**32), labels=labels)
def test_a_32_bit_seed_is_in_numpys_legacy_range(seed, labels):
    first = derive_seed(seed, *labels, bits=32)
    assert first == derive_seed(seed, *labels, bits=32) and 0 <= first < 2**32
    np.random.RandomState(first)  # numpy's legacy seeding (scikit-learn, TransformerLens) takes it


def test_seeds_and_labels_each_change_the_seed():
    base = derive_seed(0, "draw", 1)
    others = {
        derive_seed(1, "draw", 1),
        derive_seed(0, "draw", 2),
        derive_seed(0, "draws", 1),
        derive_seed(0, 1, "draw"),
        derive_seed(0, "draw"),
    }
    assert base not in others and len(others) == 5


def test_the_arithmetic_it_replaces_collides_and_it_does_not():
    # seed * 1_000_003 + k collides: (1, 0) and (0, 1_000_003) name one stream.
    assert 1 * 1_000_003 + 0 == 0 * 1_000_003 + 1_000_003
    assert derive_seed(1, 0) != derive_seed(0, 1_000_003)


def test_many_derived_seeds_are_distinct():
    seeds = {derive_seed(s, "draw", k) for s in range(50) for k in range(50)}
    assert len(seeds) == 2500


def test_the_generator_draws_as_its_seed_says():
    a = torch.rand(3, generator=derived_generator(4, "x"))
    b = torch.rand(3, generator=torch.Generator().manual_seed(derive_seed(4, "x")))
    assert torch.equal(a, b)


@pytest.mark.parametrize("bad", [-1, 1.5, None, True])
def test_a_bad_seed_or_label_is_refused_by_name(bad, user_errors):
    with pytest.raises(ValueError, match="seed|label"):
        derive_seed(bad)
    with pytest.raises(ValueError, match="label"):
        derive_seed(0, bad)
    with pytest.raises(ValueError, match="bits must be 63 or 32"):
        derive_seed(0, "draw", bits=bad)


# The derived streams of the library: each is derive_seed's, none is arithmetic on the seed.


def _draws(generator: torch.Generator) -> torch.Tensor:
    return torch.rand(8, generator=generator)


@pytest.mark.parametrize(("seed", "step"), [(0, 0), (0, 1), (1, 0), (3, 250)])
def test_the_training_batches_are_derived_streams(seed, step):
    from adjpos.training.loop import batch_generator

    expected = _draws(derived_generator(seed, "batch", step))
    assert torch.equal(_draws(batch_generator(seed, step)), expected)


def test_the_training_batches_of_two_seeds_are_not_the_same_stream():
    # seed * 1_000_000_007 + step gave (1, 0) and (0, 1_000_000_007) one batch.
    from adjpos.training.loop import batch_generator

    assert not torch.equal(_draws(batch_generator(1, 0)), _draws(batch_generator(0, 1_000_000_007)))


def test_the_probe_repeats_are_derived_streams():
    from adjpos import build_model, probe_positions
    from factories import tiny_config

    model = build_model(tiny_config(), device="cpu")
    tokens = torch.randint(0, 20, (6, 8), generator=torch.Generator().manual_seed(0))
    result = probe_positions(
        model, tokens, layers=[1], features="variance", cv=2, seed=3, repeats=3
    )
    assert result.seeds == tuple(derive_seed(3, "probe repeat", r, bits=32) for r in range(3))
    # seed + r gave seeds 3 and 4 two of their three repeats in common.
    again = probe_positions(model, tokens, layers=[1], features="variance", cv=2, seed=4, repeats=3)
    assert not set(result.seeds) & set(again.seeds)
