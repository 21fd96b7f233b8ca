"""Feature sets: values against loop references, and no position leak by construction."""

import math

import pytest
import torch

from adjpos.probes import BASE_FEATURE_SETS, FEATURE_SETS, position_features, shuffle_positions
from adjpos.probes.features import needs_one_length, random_orders
from reference import slow_cosine

COSINE_SETS = [name for name in BASE_FEATURE_SETS if name.startswith("cosine")]


def _acts(batch=3, pos=7, d=5, seed=0):
    return torch.randn(batch, pos, d, generator=torch.Generator().manual_seed(seed))


def test_cosine_sets_match_loop_references():
    acts = _acts(batch=2, pos=6, d=4).double()
    got = {name: position_features(acts, name) for name in COSINE_SETS}
    for b in range(2):
        sim = slow_cosine(acts[b].tolist())
        for k in range(6):
            others = [sim[k][j] for j in range(6) if j != k]
            expected = {
                "cosine_profile": others,
                "cosine_sorted": sorted(others, reverse=True),
                "cosine_mean": [sum(others) / 5],
                "cosine_first": [sim[k][0] if k else math.nan],
                "cosine_previous": [sim[k][k - 1] if k else math.nan],
            }
            for name, values in expected.items():
                torch.testing.assert_close(
                    got[name][b, k], torch.tensor(values, dtype=torch.float64), equal_nan=True
                )


def test_per_vector_sets():
    acts = _acts().double()
    torch.testing.assert_close(position_features(acts, "resid"), acts)
    torch.testing.assert_close(
        position_features(acts, "variance")[..., 0], acts.var(-1, correction=0)
    )
    torch.testing.assert_close(position_features(acts, "norm")[..., 0], acts.norm(dim=-1))


@pytest.mark.parametrize("name", BASE_FEATURE_SETS)
def test_position_free_states_give_every_position_the_same_features(name):
    """The leak check: when no hidden state depends on its position, nothing in the features
    may either. A diagonal set to a constant (instead of deleted) would fail here."""
    state = torch.randn(1, 1, 8, generator=torch.Generator().manual_seed(1))
    same_token = torch.full((2, 9), 2)
    feats = position_features(state.expand(2, 9, 8).clone(), name, tokens=same_token, d_vocab=3)
    defined = feats[:, 1:] if name in ("cosine_first", "cosine_previous") else feats
    assert torch.equal(defined, defined[:, :1].expand_as(defined))
    widths = {"cosine_profile": 8, "cosine_sorted": 8, "resid": 8, "token_identity": 5 * 3}
    assert feats.shape[-1] == widths.get(name, 1)


def test_position_zero_has_no_backward_feature():
    for name in ("cosine_first", "cosine_previous"):
        feats = position_features(_acts(), name)
        assert feats[:, 0].isnan().all() and feats[:, 1:].isfinite().all()


def test_shuffle_moves_whole_states_and_leaves_the_global_rng_alone():
    acts = _acts(batch=4, pos=9)
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    shuffled = shuffle_positions(acts, seed=5)
    assert torch.equal(torch.rand(3), before)
    order = random_orders(4, 9, seed=5)
    assert torch.equal(shuffled, acts[torch.arange(4)[:, None], order])
    assert not torch.equal(order, torch.arange(9).expand(4, 9))
    assert torch.equal(order.sort(dim=1).values, torch.arange(9).expand(4, 9))


@pytest.mark.parametrize("name", BASE_FEATURE_SETS)
def test_shuffled_set_is_the_set_on_shuffled_states(name):
    acts = _acts()
    tokens = torch.randint(0, 7, acts.shape[:2], generator=torch.Generator().manual_seed(0))
    got = position_features(acts, "shuffled:" + name, seed=3, tokens=tokens, d_vocab=7)
    moved = shuffle_positions(tokens[..., None].float(), seed=3)[..., 0].long()
    want = position_features(shuffle_positions(acts, seed=3), name, tokens=moved, d_vocab=7)
    torch.testing.assert_close(got, want, equal_nan=True)


def test_token_identity_reads_the_window_around_the_ends():
    tokens = torch.tensor([[3, 1, 4, 1, 5]])
    feats = position_features(torch.zeros(1, 5, 2), "token_identity", tokens=tokens, d_vocab=6)
    blocks = feats.reshape(1, 5, 5, 6).argmax(dim=-1)  # the id in each of the 5 slots
    assert blocks[0, 0].tolist() == [1, 5, 3, 1, 4]  # k-2, k-1 wrap to the last two tokens
    assert blocks[0, 2].tolist() == [3, 1, 4, 1, 5]
    with pytest.raises(ValueError, match="needs the tokens"):
        position_features(torch.zeros(1, 5, 2), "token_identity")


def test_which_sets_need_one_length():
    assert [n for n in BASE_FEATURE_SETS if needs_one_length(n)] == [
        "cosine_profile",
        "cosine_sorted",
        "cosine_mean",
        "token_identity",
    ]
    assert all(needs_one_length(n) for n in FEATURE_SETS if n.startswith("shuffled:"))


@pytest.mark.usefixtures("user_errors")
def test_unknown_feature_set_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown feature sets \['cosine'\]; choose from"):
        position_features(_acts(), "cosine")
    with pytest.raises(ValueError, match="shuffled:NAME"):
        position_features(_acts(), "shuffled:position")
