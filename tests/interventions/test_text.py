"""Causal tests on text: next-token loss on the continuation against a plain computation,
the context-only change, stacked and chunked draws, skip_first, and ``adjpos intervene --hf``."""

import json

import pytest
import torch
import transformers

from adjpos import build_model
from adjpos.cli import main
from adjpos.hf import hf_config, load_hf, text_tokens
from adjpos.interventions import (
    TEXT_TABLE,
    NormPermute,
    intervene,
    text_intervention_table,
)
from adjpos.interventions import text as text_module
from adjpos.metrics import adjacency_probability, cosine_matrix
from adjpos.scoring import sequence_scores
from factories import tiny_bridge, tiny_config, word_tokenizer


def _model():
    return build_model(tiny_config(n_layers=2, d_model=32, n_heads=4, dtype="float64"))


def _tokens(n=8, pos=12, vocab=20, seed=0):
    return torch.randint(0, vocab, (n, pos), generator=torch.Generator().manual_seed(seed))


def test_the_baseline_is_the_plain_next_token_loss_of_the_continuation():
    model, tokens = _model(), _tokens()
    table = text_intervention_table(model, tokens, layers=[1], interventions=["none"], cut=5)
    row = table.iloc[0]
    test = tokens[4:]
    with torch.inference_mode():
        logits, cache = model.run_with_cache(test, names_filter=["blocks.1.hook_resid_pre"])
    nll = torch.nn.functional.cross_entropy(
        logits[:, 5:-1].reshape(-1, logits.shape[-1]), test[:, 6:].reshape(-1), reduction="none"
    )
    right = (logits[:, 5:-1].argmax(-1) == test[:, 6:]).double()
    assert row.loss == pytest.approx(float(nll.mean()))
    assert row.accuracy == pytest.approx(float(right.mean()))
    assert row.loss_low <= row.loss <= row.loss_high
    states = cache["blocks.1.hook_resid_pre"]
    score = adjacency_probability(cosine_matrix(states)).mean()  # the default ties
    assert row.adjacency_at_layer == pytest.approx(float(score))
    assert row.perturbation == 0 and row.n_sequences == 4 and row.cut == 5


@pytest.mark.parametrize("skip", [0, 2])
def test_skip_first_hides_the_first_positions_from_the_intervention(skip):
    """The intervention sees the sequence from position skip on, as if it began there."""
    model, tokens = _model(), _tokens(n=3)
    seen = {}

    def grab(acts, hook):
        seen["after"] = acts.clone()

    site = "blocks.1.hook_resid_pre"
    _, clean = model.run_with_cache(tokens, names_filter=[site])
    with intervene(model, NormPermute(seed=3), layer=1, skip_first=skip):
        with model.hooks(fwd_hooks=[(site, grab)]):
            model(tokens)
    before = clean[site]
    expected = torch.cat([before[:, :skip], NormPermute(seed=3)(before[:, skip:])], dim=1)
    torch.testing.assert_close(seen["after"], expected)
    with pytest.raises(ValueError, match="skip_first must be an int >= 0"):
        with intervene(model, NormPermute(), layer=1, skip_first=-1):
            pass
    with pytest.raises(ValueError, match="readout_from=1 is before skip_first=2"):
        with intervene(model, NormPermute(), layer=1, readout_from=1, skip_first=2):
            pass


def test_with_the_readout_kept_only_the_context_changes_at_the_layer():
    model, tokens = _model(), _tokens(n=3)
    site = "blocks.1.hook_resid_pre"
    _, clean = model.run_with_cache(tokens, names_filter=[site])
    seen = {}
    for keep in (True, False):
        with intervene(model, NormPermute(seed=1), layer=1, readout_from=6, keep_readout=keep):
            _, cache = model.run_with_cache(tokens, names_filter=[site])
        seen[keep] = cache[site]
    torch.testing.assert_close(seen[True][:, 6:], clean[site][:, 6:])
    assert not torch.allclose(seen[True][:, :6], clean[site][:, :6])
    assert not torch.allclose(seen[False][:, 6:], clean[site][:, 6:])


@pytest.mark.parametrize("layer", [0, 1])
def test_each_draw_starts_at_the_changed_block_as_the_whole_model_would(layer):
    """A change of block `layer`'s input runs the blocks before it once (start_at_layer): the
    loss and the states written equal the whole model run under the change."""
    model, test = _model(), _tokens(n=5)
    draws = [NormPermute(seed=3), NormPermute(seed=4)]
    got = text_module._measure(model, test, draws, layer, 5, 1, False)
    site = f"blocks.{layer}.hook_resid_pre"
    for draw, change in enumerate(draws):
        with torch.inference_mode():
            with intervene(model, change, layer=layer, readout_from=5, skip_first=1):
                logits, cache = model.run_with_cache(test, names_filter=[site])
        nll = torch.nn.functional.cross_entropy(
            logits[:, 5:-1].transpose(1, 2), test[:, 6:], reduction="none"
        ).mean(dim=1)
        torch.testing.assert_close(torch.as_tensor(got["loss"][draw]), nll)
        score = sequence_scores(cache[site], torch.full((5,), 12), skip_first=1)
        torch.testing.assert_close(torch.as_tensor(got["adjacency"][draw]), score.double())


def test_draws_chunked_to_the_logits_budget_give_the_same_rows(monkeypatch):
    model, tokens = _model(), _tokens()
    names = ["none", "norm_permute", "norm_scale_control", "subspace_swap", "subspace_swap_random"]
    kwargs = {"layers": [1], "interventions": names, "control_draws": 3, "rank": 2}
    together = text_intervention_table(model, tokens, **kwargs)
    monkeypatch.setattr(text_module, "_LOGITS_BUDGET", 1)  # one draw per forward pass
    alone = text_intervention_table(model, tokens, **kwargs)
    numeric = [c for c in TEXT_TABLE.columns if together[c].dtype.kind == "f"]
    torch.testing.assert_close(
        torch.tensor(together[numeric].to_numpy(dtype=float)),
        torch.tensor(alone[numeric].to_numpy(dtype=float)),
        equal_nan=True,
    )
    tested = together.set_index("intervention").loc["norm_permute"]
    control = together.set_index("intervention").loc["norm_scale_control"]
    assert tested.loss_difference == pytest.approx(tested.loss - control.loss)
    assert tested.loss_difference_low <= tested.loss_difference <= tested.loss_difference_high
    assert 0 <= tested.percentile <= 100 and control.control_draws == 3


def test_a_bridge_runs_every_intervention_but_uniform_attention():
    model = tiny_bridge()
    table = text_intervention_table(model, _tokens(pos=10), layers=[1], control_draws=2)
    assert "uniform_attention" not in set(table.intervention)
    assert {"subspace_swap", "leace_position", "erase_random"} <= set(table.intervention)
    assert set(table.readout) == {"kept"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tokens": _tokens(n=3)}, "at least 4 sequences"),
        ({"cut": 11}, r"cut must be an int in .* = \[2, 10\]"),
        ({"cut": 3, "skip_first": 2}, r"cut must be an int in .* = \[4, 10\]"),
        ({"skip_first": -1}, "skip_first must be an int >= 0"),
        ({"layers": [2]}, r"layers \[2\] are not in \[0, 1\]"),
        ({"interventions": ["position_shift"], "doses": [0]}, "doses must be distinct shift"),
        (
            {"interventions": ["position_shift"], "doses": [6], "skip_first": 1},
            r"doses \[6\] shift the curve past the context: .* cut - skip_first = 5",
        ),
        (
            {"interventions": ["position_rotate"], "readouts": ["kept", "changed"]},
            r"\['position_rotate'\] run on text with the read-out kept only",
        ),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    tokens = kwargs.pop("tokens", _tokens())
    with pytest.raises(ValueError, match=message):
        text_intervention_table(_model(), tokens, **kwargs)


def test_intervene_on_a_hugging_face_model_and_a_text_file(tmp_path, capsys):
    config = hf_config("smollm3", {"hidden_size": 32, "num_hidden_layers": 2})
    folder = tmp_path / "model"
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    word_tokenizer(folder)
    text = " ".join(f"w{(7 * i) % 100}" for i in range(200))
    (tmp_path / "t.txt").write_text(text)
    out = tmp_path / "run"
    argv = ["intervene", "--hf", str(folder), "--text", str(tmp_path / "t.txt"), "--out", str(out)]
    options = ["--seq-len", "16", "--n-sequences", "8", "--layers", "1", "--skip-first", "1"]
    options += ["--interventions", "none,norm_permute,norm_scale_control", "--control-draws", "2"]
    assert main([*argv, *options]) == 0
    printed = capsys.readouterr().out
    assert "next-token loss on the continuation (positions 8 on), 4 sequences" in printed
    table = TEXT_TABLE.read(out / "interventions.csv")
    expected = text_intervention_table(
        load_hf(folder),
        text_tokens(str(folder), text, 16, max_sequences=8),
        layers=[1],
        interventions=["none", "norm_permute", "norm_scale_control"],
        skip_first=1,
        control_draws=2,
        model_name=str(folder),
    )
    assert table.drop(columns="model").round(9).equals(expected.drop(columns="model").round(9))
    settings = json.loads((out / "interventions.json").read_text())["settings"]
    assert settings["cut"] == 8 and settings["skip_first"] == 1 and settings["n_sequences"] == 8
    assert main([*argv, *options]) == 0  # resumes from the finished units
    assert TEXT_TABLE.read(out / "interventions.csv").equals(table)
    bad = ["intervene", "--model", "pretrained:addition", "--skip-first", "1"]
    assert main([*bad, "--out", str(tmp_path / "x")]) == 2
    assert "--skip-first go with --hf and --text" in capsys.readouterr().err
    assert main(["intervene", "--hf", str(folder), "--out", str(tmp_path / "y")]) == 2
    assert "--hf and --text go together" in capsys.readouterr().err
    arms = ["--interventions", "position_rotate", "--doses", "1", "--out", str(tmp_path / "a")]
    assert main([*argv[:5], *options[:6], *arms]) == 2  # no word repeats: no curve
    assert "the position curve is zero here" in capsys.readouterr().err
    (tmp_path / "t.txt").write_text(" ".join(f"w{(7 * i) % 5}" for i in range(200)))
    assert main([*argv[:5], *options[:6], *arms]) == 0
    table = TEXT_TABLE.read(tmp_path / "a" / "interventions.csv")
    assert list(table["arm"]) == ["rotate", "random"] and set(table["dose"]) == {1}
    settings = json.loads((tmp_path / "a" / "interventions.json").read_text())["settings"]
    assert settings["doses"] == [1]
