"""RoPE removed from chosen layers of real weights: ``load_hf(source, nope_layers=...)``.

Each checkpoint is a tiny random-weight model saved with save_pretrained, its RoPE theta not
any family's default (12345), so a twin that silently fell back to a default theta would
change the logits.
"""

import pytest
import torch
import transformers

import adjpos
from adjpos.cli import main
from adjpos.hf import hf_config, layer_kinds, load_hf, save_hf
from adjpos.validation import UsageError

THETA = 12345.0
SIZE = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "pad_token_id": None,
    "bos_token_id": None,
    "eos_token_id": None,
    "initializer_range": 0.2,  # attention far from uniform, so RoPE and its theta matter
}
CONFIGS = {
    "llama": lambda **f: transformers.LlamaConfig(**{**SIZE, "rope_theta": THETA, **f}),
    # tied embeddings, a head width other than hidden / heads, biases everywhere
    "llama-tied": lambda **f: transformers.LlamaConfig(
        **{**SIZE, "rope_theta": THETA, **f},
        tie_word_embeddings=True,
        head_dim=16,
        attention_bias=True,
        mlp_bias=True,
    ),
    # Llama 3's frequency scaling must come through with the theta
    "llama3-scaled": lambda **f: transformers.LlamaConfig(
        **{**SIZE, **f},
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": THETA,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    ),
    "qwen2": lambda **f: transformers.Qwen2Config(**{**SIZE, "rope_theta": THETA, **f}),
    "qwen2-sliding": lambda **f: transformers.Qwen2Config(
        **{**SIZE, "rope_theta": THETA, **f},
        use_sliding_window=True,
        sliding_window=5,
        max_window_layers=2,
    ),
    "qwen3": lambda **f: transformers.Qwen3Config(**{**SIZE, "rope_theta": THETA, **f}),
    "smollm3": lambda **f: transformers.SmolLM3Config(
        **{**SIZE, "rope_theta": THETA, "no_rope_layers": [1] * 4, **f}
    ),
}
TOKENS = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(0))


def _saved(tmp_path, family, **fields):
    """A checkpoint folder, as a user's would be (seeded random weights)."""
    folder = tmp_path / family
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformers.AutoModelForCausalLM.from_config(CONFIGS[family](**fields)).save_pretrained(
            folder
        )
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """`_saved(family)` with the family's own fields, saved once for the file: the tests only
    read these folders."""
    root, folders = tmp_path_factory.mktemp("checkpoints"), {}

    def saved(family):
        if family not in folders:
            folders[family] = _saved(root, family)
        return folders[family]

    return saved


@pytest.fixture(scope="module")
def original(checkpoint):
    """`load_hf` of the family's checkpoint as saved, loaded once for the file (read only)."""
    models = {}

    def loaded(family):
        if family not in models:
            models[family] = load_hf(checkpoint(family))
        return models[family]

    return loaded


def _logits(model, tokens=TOKENS):
    with torch.no_grad():
        return model(tokens)


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_no_layer_made_nope_gives_the_original_logits_exactly(family, checkpoint, original):
    folder, original = checkpoint(family), original(family)
    control = load_hf(folder, nope_layers="none")
    assert torch.equal(_logits(control), _logits(original))
    assert torch.equal(_logits(load_hf(folder, nope_layers=[])), _logits(original))
    assert layer_kinds(control) == layer_kinds(original)  # "sliding_rope" where windowed
    params = control.original_model.config.rope_parameters
    assert params["rope_theta"] == THETA
    assert params == original.original_model.config.rope_parameters
    expected = "Qwen3ForCausalLM" if family == "qwen3" else "SmolLM3ForCausalLM"
    assert type(control.original_model).__name__ == expected


@pytest.mark.parametrize("theta", [10000.0, 2e6])  # Llama's default, and SmolLM3's
def test_the_theta_matters_here(theta, tmp_path, original):
    """The check above has teeth: the same weights under a default theta give other logits."""
    original = original("llama")
    default = load_hf(_saved(tmp_path / "default", "llama", rope_theta=theta))
    assert not torch.allclose(_logits(default), _logits(original), atol=1e-2)


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "smollm3"])
@pytest.mark.parametrize(
    ("nope_layers", "expected"),
    [
        (2, [1, 3]),
        (4, [3]),
        ([0, 2], [0, 2]),
        ((3,), [3]),
        (range(2), [0, 1]),
        ("all", [0, 1, 2, 3]),
    ],
)
def test_exactly_the_chosen_layers_lose_rope(family, nope_layers, expected, checkpoint, original):
    original = original(family)
    model = load_hf(checkpoint(family), nope_layers=nope_layers)
    assert layer_kinds(model) == ["nope" if i in expected else "rope" for i in range(4)]
    # The layers before the first NoPE one are untouched: their outputs are the original's;
    # the first NoPE layer changes its output, and so the logits.
    first = expected[0]
    got = adjpos.capture_residuals(model, TOKENS)
    want = adjpos.capture_residuals(original, TOKENS)
    assert torch.equal(got[: first + 1], want[: first + 1])  # embeddings, then blocks < first
    assert not torch.allclose(got[first + 1], want[first + 1], atol=1e-4)
    assert not torch.allclose(_logits(model), _logits(original), atol=1e-4)


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_an_all_nope_one_layer_model_is_position_free(family, tmp_path):
    folder = _saved(tmp_path, family, num_hidden_layers=1)
    model = load_hf(folder, nope_layers="all")
    assert layer_kinds(model) == ["nope"] and adjpos.is_position_free(model)
    shuffled = torch.cat([TOKENS[:, :-1][:, torch.randperm(11)], TOKENS[:, -1:]], dim=1)
    torch.testing.assert_close(_logits(model, shuffled)[:, -1], _logits(model)[:, -1])
    control = load_hf(folder, nope_layers="none")  # with RoPE the order matters
    assert not adjpos.is_position_free(control)
    assert not torch.allclose(_logits(control, shuffled)[:, -1], _logits(control)[:, -1])


def test_released_is_smollm3s_every_fourth_layer(tmp_path):
    config = hf_config("smollm3", {"num_hidden_layers": 8}, nope="all")
    model = load_hf(config, nope_layers="released")
    assert layer_kinds(model) == ["rope", "rope", "rope", "nope"] * 2
    assert config.no_rope_layers == [0] * 8  # the caller's config is left as it was
    assert layer_kinds(load_hf(config, nope_layers=4)) == layer_kinds(model)


def test_a_config_source_keeps_its_random_weights(tmp_path):
    config = CONFIGS["llama"]()
    original, control = load_hf(config, seed=3), load_hf(config, seed=3, nope_layers="none")
    assert torch.equal(_logits(control), _logits(original))
    assert config.model_type == "llama"


def test_tied_weights_stay_tied(checkpoint):
    hf = load_hf(checkpoint("llama-tied"), nope_layers=[1]).original_model
    assert hf.lm_head.weight is hf.model.embed_tokens.weight


def test_a_rebuilt_model_saves_as_smollm3_and_loads_back(tmp_path, checkpoint):
    model = load_hf(checkpoint("qwen2"), nope_layers=[1])
    folder = save_hf(model, tmp_path / "saved")
    again = load_hf(folder)
    assert layer_kinds(again) == ["rope", "nope", "rope", "rope"]
    assert torch.equal(_logits(again), _logits(model))
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder)  # transformers reads it too
    assert (
        hf.config.no_rope_layers == [1, 0, 1, 1]
        and hf.config.rope_parameters["rope_theta"] == THETA
    )


def test_a_qwen3_with_nope_layers_refuses_to_be_saved(tmp_path, checkpoint):
    model = load_hf(checkpoint("qwen3"), nope_layers=[1])
    with pytest.raises(UsageError, match=r"NoPE layers \[1\].*cannot record"):
        save_hf(model, tmp_path / "saved")
    save_hf(load_hf(checkpoint("qwen3"), nope_layers="none"), tmp_path / "control")


def test_a_gguf_file_takes_the_option(tmp_path):
    pytest.importorskip("gguf")
    from factories import tiny_gguf

    tiny_gguf(tmp_path / "tiny.gguf")
    original = load_hf(tmp_path / "tiny.gguf")
    assert torch.equal(
        _logits(load_hf(tmp_path / "tiny.gguf", nope_layers="none")), _logits(original)
    )
    assert layer_kinds(load_hf(tmp_path / "tiny.gguf", nope_layers="all")) == ["nope", "nope"]


@pytest.mark.parametrize(
    ("nope_layers", "message"),
    [
        ("every", r"'all', 'none', 'released', an int k >= 1"),
        (0, r"nope_layers=0 is not allowed"),
        (True, r"nope_layers=True is not allowed"),
        (2.0, r"nope_layers=2.0 is not allowed"),
        ({1}, r"is not allowed"),
        ([1, "2"], r"must list layer indices"),
        ([4], r"layer 4 is out of range; this model has layers 0 to 3"),
        ([-1], r"layer -1 is out of range"),
        ([1, 1], r"lists layer 1 more than once"),
        (5, r"makes no layer NoPE in a model of 4 layers"),
        ("released", r"needs a family with a released NoPE layout \(SmolLM3.*LlamaForCausalLM"),
    ],
)
def test_bad_values_are_refused_by_name(nope_layers, message, tmp_path):
    with pytest.raises(UsageError, match=message):
        load_hf(CONFIGS["llama"](), nope_layers=nope_layers)


@pytest.mark.parametrize("family", ["cohere2", "llama4"])
def test_other_families_are_refused(family):
    with pytest.raises(UsageError, match=r"nope_layers works on LlamaForCausalLM.*not on"):
        load_hf(hf_config(family, {"num_hidden_layers": 2}), nope_layers="all")


def test_score_takes_nope_layers(checkpoint, capsys):
    folder = checkpoint("llama")
    args = ["score", "--hf", str(folder), "--random-tokens", "--n-sequences", "2"]
    assert main([*args, "--nope-layers", "every:2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "with nope_layers=2" in lines[0]
    assert [line.split()[1] for line in lines[2:]] == ["embed", "rope", "nope", "rope", "nope"]
    assert main([*args, "--nope-layers", "0,3"]) == 0
    kinds = [line.split()[1] for line in capsys.readouterr().out.splitlines()[2:]]
    assert kinds == ["embed", "nope", "rope", "rope", "nope"]
    assert main([*args, "--nope-layers", "9"]) == 2
    assert "layer 9 is out of range" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--nope-layers", "every:0"])
    assert "every:K (K >= 1)" in capsys.readouterr().err
    assert main(["score", "--nope-layers", "all"]) == 2
    assert "--nope-layers goes with --hf" in capsys.readouterr().err
