"""Hugging Face models through the bridge: configs, loading, layer kinds, scores, errors."""

import re

import pytest
import torch
import transformers

import adjpos
from adjpos.cli import main
from adjpos.hf import FAMILIES, NOPE_LAYOUTS, hf_config, layer_kinds, load_hf, text_tokens
from factories import tiny_bridge, tiny_config, word_tokenizer
from reference import slow_adjacency_probability, slow_cosine

SMALL = {"num_hidden_layers": 4, "hidden_size": 32, "intermediate_size": 64}


def _expected_kinds(config) -> list[str]:
    """The kinds the config asks for, from its fields (not from the modules)."""
    n = config.num_hidden_layers
    if config.model_type in ("smollm3", "llama4_text"):
        rope = "rope" if config.model_type == "smollm3" else "chunked_rope"
        return [rope if x else "nope" for x in config.no_rope_layers]
    if config.model_type == "exaone4" and config.sliding_window is None:
        return ["rope"] * n
    return ["sliding_rope" if t == "sliding_attention" else "nope" for t in config.layer_types]


def _saved(tmp_path, config, name="model"):
    """A random-weight model written with save_pretrained, as a user's checkpoint would be."""
    folder = tmp_path / name
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def _hf_hidden_states(folder, tokens):
    """Each layer's states from the Hugging Face model itself: hidden_states 0..L-1, and the
    last decoder layer's output (hidden_states[L] is after the final norm)."""
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float64, experts_implementation="eager"
    )
    last = {}
    hook = hf.model.layers[-1].register_forward_hook(
        lambda _m, _i, out: last.setdefault("x", out[0] if isinstance(out, tuple) else out)
    )
    with torch.no_grad():
        states = list(hf(tokens, output_hidden_states=True).hidden_states)
    hook.remove()
    return [*states[:-1], last["x"]]


def _slow_scores(states, ties="strict"):
    scores = []
    for layer in states:
        per_seq = [
            slow_adjacency_probability(slow_cosine(seq.tolist()), len(seq), ties) for seq in layer
        ]
        scores.append(sum(per_seq) / len(per_seq))
    return torch.tensor(scores, dtype=torch.float64)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_saved_folder_loads_kinds_match_and_scores_match_hf(family, tmp_path, capsys):
    config = hf_config(family, SMALL)
    folder = _saved(tmp_path, config)
    model = load_hf(folder, dtype="float64")  # float32 noise could flip a near-tied pair
    assert layer_kinds(model) == _expected_kinds(config)
    assert "nope" in layer_kinds(model)  # the released interleaving has a NoPE layer
    tokens = torch.randint(3, 256, (3, 9), generator=torch.Generator().manual_seed(1))
    states = _hf_hidden_states(folder, tokens)
    captured = adjpos.capture_residuals(model, tokens)
    # The bridge's Cohere2 RoPE layers differ from transformers' by ~3e-4 (float64 too);
    # every other family matches to rounding.
    atol = 1e-3 if family == "cohere2" else 1e-5
    for layer, state in enumerate(states):
        torch.testing.assert_close(captured[layer], state, atol=atol, rtol=0)
    reference = _slow_scores(states)
    got = adjpos.adjacency_score(model, tokens)
    if family == "cohere2":  # such noise may reorder a near-tied pair (1/7 of one row)
        torch.testing.assert_close(got, reference, atol=0.05, rtol=0)
    else:
        torch.testing.assert_close(got, reference)

    capsys.readouterr()
    assert main(["score", "--hf", str(folder), "--random-tokens", "--n-sequences", "3"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [r[0] for r in rows] == [str(i) for i in range(config.num_hidden_layers + 1)]
    assert [r[1] for r in rows] == ["embed", *_expected_kinds(config)]
    assert all(0 <= float(r[2]) <= 1 for r in rows)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("nope", NOPE_LAYOUTS)
def test_layouts_read_back_from_the_modules(family, nope):
    config = hf_config(family, SMALL, nope=nope)
    kinds = layer_kinds(load_hf(config))
    assert kinds == _expected_kinds(config)
    if nope == "all":
        assert kinds == ["nope"] * 4
    if nope == "none":
        assert "nope" not in kinds
    if nope == "released":
        assert kinds[3] == "nope" and "nope" not in kinds[:3]


def test_layer_kinds_of_hooked_transformers_and_native_bridges():
    assert layer_kinds(adjpos.build_model(tiny_config())) == ["nope", "nope"]
    assert layer_kinds(adjpos.build_model(tiny_config(positional="learned"))) == ["learned"] * 2
    assert layer_kinds(adjpos.build_model(tiny_config(positional="rotary"))) == ["rope"] * 2
    assert layer_kinds(tiny_bridge()) == ["rope", "rope"]
    from transformer_lens.model_bridge import TransformerBridge

    native = TransformerBridge.boot_native(
        dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=20, n_ctx=24,
             act_fn="gelu", seed=0, positional_embedding_type="standard")
    )  # fmt: skip
    assert layer_kinds(native) == ["learned"] * 2 and not adjpos.is_position_free(native)
    with torch.no_grad():
        native.pos_embed.W_pos.zero_()
    native.pos_embed.W_pos.requires_grad_(False)
    assert layer_kinds(native) == ["nope"] * 2 and adjpos.is_position_free(native)
    with pytest.raises(TypeError, match="HookedTransformer or a TransformerBridge"):
        layer_kinds(torch.nn.Linear(2, 2))


def test_the_bridge_config_would_have_said_rotary():
    """Why kinds are read from the modules: the bridge's config says rotary for all-NoPE."""
    model = load_hf(hf_config("smollm3", SMALL, nope="all"))
    assert model.cfg.positional_embedding_type == "rotary"
    assert layer_kinds(model) == ["nope"] * 4


def test_user_size_and_fields():
    config = hf_config("afmoe", {"num_hidden_layers": 8}, hidden_size=32)
    assert config.num_hidden_layers == 8 and config.hidden_size == 32
    assert config.layer_types.count("full_attention") == 2


def test_config_errors():
    with pytest.raises(ValueError, match=r"unknown family 'gpt5'.*smollm3"):
        hf_config("gpt5")
    with pytest.raises(ValueError, match="nope='some'.*released"):
        hf_config("smollm3", nope="some")
    with pytest.raises(ValueError, match="size='huge'"):
        hf_config("smollm3", "huge")


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match=r"not supported by the TransformerLens bridge.*Llama"):
        load_hf(transformers.CTRLConfig(vocab_size=32, n_layer=1, n_embd=16, n_head=2))
    with pytest.raises(ValueError, match="pad_token_id=128004 lies outside the vocabulary of 256"):
        load_hf(hf_config("smollm3", SMALL, pad_token_id=128004))
    config = hf_config("cohere2", SMALL)
    config.sliding_window = None
    with pytest.raises(ValueError, match="sliding_window=None.*without RoPE"):
        load_hf(config)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        load_hf(empty)
    hf_config("smollm3", SMALL).save_pretrained(tmp_path / "config_only")
    with pytest.raises(ValueError, match="a config but no weights"):
        load_hf(tmp_path / "config_only")
    with pytest.raises(ValueError, match=r"cannot load 'nobody/no-such-model'.*offline"):
        load_hf("nobody/no-such-model", offline=True)
    with pytest.raises(ValueError, match="dtype='float99'"):
        load_hf(hf_config("smollm3", SMALL), dtype="float99")
    with pytest.raises(TypeError, match="source must be"):
        load_hf(3)


def test_dtype_is_applied():
    model = load_hf(hf_config("smollm3", SMALL), dtype="float64")
    assert next(model.parameters()).dtype == torch.float64


def test_text_is_tokenized_into_sequences(tmp_path, capsys):
    folder = _saved(tmp_path, hf_config("exaone4", SMALL))
    text = " ".join(f"w{(7 * i) % 100}" for i in range(50))
    (tmp_path / "t.txt").write_text(text)
    assert main(["score", "--hf", str(folder), "--text", str(tmp_path / "t.txt")]) == 2
    assert "has no tokenizer" in capsys.readouterr().err
    tokenizer = word_tokenizer(folder)
    tokens = text_tokens(tokenizer, text, 8)
    assert tokens.shape == (6, 8)
    assert tokens[1, 0].item() == 4 + (7 * 8) % 100  # the 9th word, in order
    assert text_tokens(tokenizer, text, 8, max_sequences=2).shape == (2, 8)
    with pytest.raises(ValueError, match="fewer than one sequence of 64"):
        text_tokens(tokenizer, text, 64)

    capsys.readouterr()
    argv = ["score", "--hf", str(folder), "--text", str(tmp_path / "t.txt"), "--seq-len", "8"]
    assert main([*argv, "--csv", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out
    assert "6 x 8 tokens of" in out
    expected = adjpos.adjacency_score(load_hf(folder), tokens)  # the defaults agree
    import pandas as pd

    table = pd.read_csv(tmp_path / "s.csv")
    assert list(table["kind"]) == ["embed", "sliding_rope", "sliding_rope", "sliding_rope", "nope"]
    torch.testing.assert_close(torch.tensor(table["adjacency"].to_numpy()), expected)


def test_text_with_a_bos_token_and_the_measure_options(tmp_path, capsys):
    folder = _saved(tmp_path, hf_config("exaone4", SMALL))
    tokenizer = word_tokenizer(folder, bos="<s>")
    text = " ".join(f"w{(7 * i) % 100}" for i in range(50))
    (tmp_path / "t.txt").write_text(text)
    words = tokenizer(text, add_special_tokens=False)["input_ids"]
    tokens = text_tokens(tokenizer, text, 8, bos=True)
    assert tokens.shape == (7, 8) and (tokens[:, 0] == 1).all()  # 50 words, 7 per sequence
    assert tokens[:, 1:].reshape(-1).tolist() == words[:49]  # none skipped
    assert torch.equal(text_tokens(str(folder), text, 8, bos=True), tokens)  # from the folder
    assert text_tokens(tokenizer, text, 8, bos=True, max_sequences=3).shape == (3, 8)
    with pytest.raises(ValueError, match="max_sequences must be"):
        text_tokens(tokenizer, text, 8, max_sequences=0)
    with pytest.raises(ValueError, match="no room for text after the BOS"):
        text_tokens(tokenizer, text, 1, bos=True)
    with pytest.raises(ValueError, match="has no BOS token"):
        text_tokens(word_tokenizer(tmp_path / "other"), text, 8, bos=True)

    argv = ["score", "--hf", str(folder), "--text", str(tmp_path / "t.txt"), "--seq-len", "8"]
    options = ["--bos", "--ties", "half", "--center", "--skip-first", "1"]
    assert main([*argv, *options, "--csv", str(tmp_path / "s.csv")]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "7 x 8 tokens of" in header and "with BOS" in header
    assert header.endswith("ties=half, center=True, skip_first=1)")
    expected = adjpos.adjacency_score(
        load_hf(folder), tokens, ties="half", center=True, skip_first=1
    )
    import pandas as pd

    got = torch.tensor(pd.read_csv(tmp_path / "s.csv")["adjacency"].to_numpy())
    torch.testing.assert_close(got, expected)
    assert main([*argv]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[0]
        .endswith("no BOS; ties=strict, center=False, skip_first=0)")
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--random-tokens"], "--random-tokens goes with --hf"),
        (["--hf", "x"], "--hf needs --text FILE"),
        (["--bos"], "--bos goes with --text"),
        (["--skip-first", "30"], "skip_first=30 leaves 2 positions"),
        (["--skip-first", "-1"], "skip_first must be an int >= 0"),
        (["--hf", "x", "--random-tokens", "--model", "pretrained:addition"], "either --model"),
    ],
)
def test_score_option_errors(argv, message, capsys):
    assert main(["score", *argv]) == 2
    assert re.search(re.escape(message), capsys.readouterr().err)


def test_seed_fixes_the_random_weights_and_spares_the_global_rng():
    config = hf_config("smollm3", SMALL)
    state = torch.random.get_rng_state()
    a, b, c = (load_hf(config, seed=s) for s in (0, 0, 1))
    assert torch.equal(torch.random.get_rng_state(), state)
    weights = [next(m.original_model.parameters()) for m in (a, b, c)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_first_layer_theory_accepts_a_bridge_whose_block_0_is_nope():
    from adjpos.theory import compare_first_layer

    tokens = torch.stack(
        [torch.randperm(250, generator=torch.Generator().manual_seed(i))[:8] + 3 for i in range(16)]
    )
    nope = compare_first_layer(
        load_hf(hf_config("smollm3", SMALL, nope="all")), tokens, site="attn_out"
    )
    assert nope.mean_abs_error < 0.1  # random init: near-uniform attention, as the theory has
    with pytest.raises(ValueError, match=r"layer_kinds\(model\)\[0\] is not 'nope'"):
        compare_first_layer(load_hf(hf_config("smollm3", SMALL)), tokens)
