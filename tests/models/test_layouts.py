"""Per-layer position schemes (ModelConfig.nope_layers): a NoPE layer's attention scores do not
depend on position, a RoPE layer's do, and `layer_kinds` says which is which, for the three
text layouts, after a save/load round trip and at a longer context; and every layout of one
seed starts from the same weights."""

import pytest
import torch

import adjpos
from adjpos.models import ModelConfig, build_model, is_position_free, layer_kinds
from adjpos.text.recipe import LAYOUTS, hybrid_nope_layers, layout_config, layout_of
from factories import tiny_config


def _score_spread(model, layer):
    """Max - min over the causal attention scores of `layer` when every position of its input
    is the same vector: 0 exactly when nothing in the scores depends on position."""
    d_model = model.cfg.d_model
    row = torch.randn(d_model, generator=torch.Generator().manual_seed(layer), dtype=torch.float64)

    def constant(resid, hook):
        return row.to(resid.dtype).expand_as(resid).clone()

    tokens = torch.zeros(1, 12, dtype=torch.long)
    name = f"blocks.{layer}.attn.hook_attn_scores"
    with model.hooks(fwd_hooks=[(f"blocks.{layer}.hook_resid_pre", constant)]):
        _, cache = model.run_with_cache(tokens, names_filter=name)
    scores = cache[name][0]  # head query key
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    values = scores[:, causal]
    return float((values.max(-1).values - values.min(-1).values).max())


def _model(layout, **overrides):
    fields = dict(n_layers=8, d_model=16, n_heads=2, d_vocab=20, n_ctx=24, dtype="float64")
    return build_model(layout_config(layout, **{**fields, **overrides}))


@pytest.mark.parametrize("layout", ["nope", "rope", "hybrid"])
def test_layer_kinds_say_which_layers_see_position(layout):
    model = _model(layout)
    kinds = layer_kinds(model)
    expected = {
        "nope": ["nope"] * 8,
        "rope": ["rope"] * 8,
        "hybrid": ["rope", "rope", "rope", "nope"] * 2,
    }[layout]
    assert kinds == expected
    for layer, kind in enumerate(kinds):
        spread = _score_spread(model, layer)
        if kind == "nope":
            assert spread < 1e-12, (layer, spread)
        else:
            assert spread > 1e-3, (layer, spread)


def test_only_the_all_nope_layout_is_position_free():
    assert is_position_free(_model("nope"))
    assert not is_position_free(_model("rope"))
    assert not is_position_free(_model("hybrid"))


@pytest.mark.parametrize("layout", ["rope", "hybrid"])
def test_layout_survives_save_load_and_a_longer_context(layout, tmp_path):
    model = _model(layout)
    adjpos.save_model(model, tmp_path)
    tokens = torch.randint(0, 20, (3, 24), generator=torch.Generator().manual_seed(0))
    for n_ctx in (None, 96):
        loaded = adjpos.load_model(tmp_path, n_ctx=n_ctx)
        assert layer_kinds(loaded) == layer_kinds(model)
        assert loaded.adjpos_config.nope_layers == model.adjpos_config.nope_layers
        torch.testing.assert_close(loaded(tokens), model(tokens))
    assert loaded(torch.zeros(1, 96, dtype=torch.long)).shape == (1, 96, 20)


def test_hybrid_differs_from_rope_only_in_its_nope_layers():
    rope, hybrid = _model("rope"), _model("hybrid")
    for (name, a), (_, b) in zip(
        rope.state_dict().items(), hybrid.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)  # same seed, same weights
    tokens = torch.randint(0, 20, (2, 12), generator=torch.Generator().manual_seed(1))
    _, cache_r = rope.run_with_cache(tokens)
    _, cache_h = hybrid.run_with_cache(tokens)
    torch.testing.assert_close(
        cache_r["blocks.2.hook_resid_post"], cache_h["blocks.2.hook_resid_post"]
    )
    assert not torch.allclose(
        cache_r["blocks.3.hook_resid_post"], cache_h["blocks.3.hook_resid_post"]
    )


def test_nope_layers_config_round_trips_and_old_configs_load():
    cfg = tiny_config(n_layers=8, positional="rotary", nope_layers=(7, 3))
    assert cfg.nope_layers == (3, 7)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    old = tiny_config().to_dict()
    del old["nope_layers"]
    assert ModelConfig.from_dict(old).nope_layers == ()


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"positional": "none", "nope_layers": (1,)}, "positional='rotary' only"),
        ({"positional": "learned", "nope_layers": (1,)}, "positional='rotary' only"),
        ({"positional": "rotary", "nope_layers": (2,)}, "distinct blocks from 0 to 1"),
        ({"positional": "rotary", "nope_layers": (1, 1)}, "distinct blocks"),
        ({"positional": "rotary", "nope_layers": ("a",)}, "list of block indices"),
        ({"positional": "rotary", "nope_layers": 1}, "list of block indices"),
    ],
)
def test_invalid_nope_layers_are_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        tiny_config(**overrides)


def test_layouts_and_their_inverse():
    assert hybrid_nope_layers(12) == (3, 7, 11)
    for layout in ("nope", "rope", "hybrid"):
        assert layout_of(layout_config(layout, n_layers=8)) == layout
    assert layout_of(tiny_config(n_layers=8, positional="rotary", nope_layers=(0,))) is None
    assert layout_of(tiny_config(positional="learned")) is None
    with pytest.raises(ValueError, match="at least 4 layers"):
        layout_config("hybrid", n_layers=3)
    with pytest.raises(ValueError, match="layout decides"):
        layout_config("rope", positional="none")
    with pytest.raises(ValueError, match="layout"):
        layout_config("alibi")


@pytest.mark.parametrize(
    ("seed", "size"),
    [(0, dict(n_layers=4, d_model=16, n_heads=2)), (3, dict(n_layers=8, d_model=24, n_heads=4))],
)
def test_every_layout_starts_from_the_same_weights(seed, size):
    """One seed, one start: only where position enters differs (NoPE's W_pos is zero; the
    rotary models have none), so a comparison of layouts is not one of random draws."""
    fields = dict(d_vocab=20, n_ctx=24, seed=seed, **size)
    states = {x: build_model(layout_config(x, **fields)).state_dict() for x in LAYOUTS}
    learned = build_model(ModelConfig(**fields, positional="learned")).state_dict()
    alibi = build_model(ModelConfig(**fields, positional="alibi")).state_dict()
    assert not states["nope"]["pos_embed.W_pos"].any()
    assert learned["pos_embed.W_pos"].any()
    for other in (states["rope"], states["hybrid"], learned, alibi):
        shared = (set(states["nope"]) & set(other)) - {"pos_embed.W_pos"}
        unshared = {name.rsplit(".", 1)[-1] for name in set(states["nope"]) ^ set(other)}
        assert unshared <= {"W_pos", "rotary_sin", "rotary_cos", "alibi"}, unshared
        for name in sorted(shared):
            torch.testing.assert_close(states["nope"][name], other[name], rtol=0, atol=0, msg=name)
    other_seed = build_model(layout_config("rope", **{**fields, "seed": seed + 1})).state_dict()
    assert not torch.equal(states["rope"]["blocks.0.attn.W_Q"], other_seed["blocks.0.attn.W_Q"])
