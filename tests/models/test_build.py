import dataclasses

import pytest
import torch

from adjpos.models import ModelConfig, build_model, is_position_free
from factories import tiny_config


def _last_logits(model, tokens):
    with torch.no_grad():
        return model(tokens)[:, -1]


@pytest.mark.parametrize("norm", ["LN", "RMSPre", None])
def test_one_layer_nope_ignores_order_of_earlier_tokens(norm):
    model = build_model(tiny_config(n_layers=1, dtype="float64", normalization_type=norm))
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 20, (4, 10), generator=gen)
    perm = torch.randperm(9, generator=gen)
    shuffled = torch.cat([tokens[:, perm], tokens[:, -1:]], dim=1)
    assert not torch.equal(shuffled, tokens)
    torch.testing.assert_close(_last_logits(model, shuffled), _last_logits(model, tokens))


def test_learned_positions_see_the_order():
    model = build_model(tiny_config(n_layers=1, dtype="float64", positional="learned"))
    tokens = torch.randint(0, 20, (4, 10), generator=torch.Generator().manual_seed(0))
    shuffled = torch.cat([tokens[:, :9].flip(1), tokens[:, -1:]], dim=1)
    diff = (_last_logits(model, shuffled) - _last_logits(model, tokens)).abs().max()
    assert diff > 1e-3


def test_w_pos_stays_zero_after_adamw_with_weight_decay(tiny_model, tokens):
    params = list(tiny_model.parameters())  # every parameter, W_pos included, as users write it
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
    before = tiny_model.W_E.detach().clone()
    for _ in range(2):
        loss = tiny_model(tokens, return_type="loss")
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert not torch.equal(before, tiny_model.W_E)  # training did happen
    assert not tiny_model.pos_embed.W_pos.any()
    assert is_position_free(tiny_model)


def test_load_state_dict_reapplies_the_freeze(tiny_model):
    state = tiny_model.state_dict()
    state["pos_embed.W_pos"] = torch.randn_like(state["pos_embed.W_pos"])
    tiny_model.load_state_dict(state)
    assert is_position_free(tiny_model)


@pytest.mark.parametrize("positional", ["learned", "rotary", "alibi"])
def test_positional_models_are_not_position_free(positional):
    assert not is_position_free(build_model(tiny_config(positional=positional)))


def test_build_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = build_model(tiny_config(seed=5))
    after = torch.rand(3)
    b = build_model(tiny_config(seed=5))
    c = build_model(tiny_config(seed=6))
    assert torch.equal(after, expected)
    assert torch.equal(a.W_E, b.W_E) and not torch.equal(a.W_E, c.W_E)


def test_config_maps_onto_transformer_lens():
    cfg = tiny_config(d_mlp=40, init_range=0.3, act_fn="relu", normalization_type="RMS")
    model = build_model(cfg)
    assert model.cfg.d_mlp == 40 and model.cfg.act_fn == "relu"
    assert model.cfg.normalization_type == "RMS" and model.cfg.initializer_range == 0.3
    assert model.adjpos_config == cfg
    assert abs(float(model.W_Q.detach().std()) - 0.3) < 0.05
    assert build_model(tiny_config(attn_only=True)).cfg.attn_only


def test_derived_widths():
    cfg = ModelConfig(d_model=32, n_heads=4)
    assert (cfg.d_head, cfg.d_mlp) == (8, 128)
    assert ModelConfig(d_model=32, n_heads=4, d_head=8) == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 4


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("positional", "sinusoidal", r"'none', 'learned', 'rotary', 'alibi'"),
        ("normalization_type", "BN", r"'LN', 'LNPre', 'RMS', 'RMSPre', None"),
        ("act_fn", "tanh", "relu"),
        ("dtype", "float16", "float32"),
        ("n_layers", 0, "positive int"),
        ("d_model", 2.5, "positive int"),
        ("init_range", -1.0, "positive number"),
        ("attn_only", "yes", "True or False"),
        ("n_heads", 3, "not divisible"),
    ],
)
@pytest.mark.usefixtures("user_errors")
def test_invalid_config_names_the_allowed_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{field: value})


def test_from_dict_warns_on_unknown_keys():
    data = tiny_config().to_dict() | {"from_the_future": 1}
    with pytest.warns(UserWarning, match="from_the_future"):
        assert ModelConfig.from_dict(data) == tiny_config()


@pytest.mark.usefixtures("user_errors")
def test_build_model_rejects_other_configs():
    with pytest.raises(TypeError, match="ModelConfig"):
        build_model({"n_layers": 1})
