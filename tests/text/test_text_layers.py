"""The text models' layers on held-out text (`adjpos.text_layers`) against the library's own
scores, the shipped models found (and the missing named) in a temporary package folder, and
the held-out excerpt shipped in the package."""

import pytest
import torch

import adjpos
from adjpos.text import corpus
from adjpos.text.recipe import layout_config
from adjpos.text.tokenizer import save_tokenizer, train_tokenizer
from adjpos.text_layers import (
    CURVE_DOSES,
    CURVE_INTERVENTIONS,
    VIEWS,
    held_out_windows,
    measure_text_models,
    shared_tokenizer,
    shipped_text_folders,
    summarise,
)

TINY = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 300, "n_ctx": 24}
WORDS = "the king and queen of a land far away did speak with love to all".split()


def generated_text(lines: int = 800) -> str:
    picks = torch.randint(0, len(WORDS), (lines, 8), generator=torch.Generator().manual_seed(0))
    return "".join(" ".join(WORDS[i] for i in row) + ".\n" for row in picks.tolist())


@pytest.fixture(scope="module")
def measured():
    models = {
        (layout, seed): adjpos.build_model(layout_config(layout, **TINY, seed=seed))
        for layout in ("nope", "rope", "hybrid")
        for seed in (0, 1)
    }
    tokens = torch.randint(0, 300, (8, 24), generator=torch.Generator().manual_seed(3))
    result = measure_text_models(models, tokens, causal_layers=[3], control_draws=2, n_boot=200)
    return models, tokens, result


def test_each_view_is_the_librarys_adjacency_score(measured):
    models, tokens, result = measured
    table = result.adjacency.set_index(["layout", "seed", "view", "layer"])
    for view, (centred, skip) in VIEWS.items():
        expected = adjpos.adjacency_score(
            models["hybrid", 1], tokens, center=centred, skip_first=skip
        )
        found = [table.loc[("hybrid", 1, view, layer), "adjacency"] for layer in range(5)]
        assert found == pytest.approx(expected.tolist(), abs=1e-9)
    kinds = result.adjacency.query("layout == 'hybrid' and seed == 0 and view == 'raw'")["kind"]
    assert kinds.tolist() == ["embed", "rope", "rope", "rope", "nope"]


def test_the_hybrid_against_rope_is_the_difference_of_their_scores(measured):
    _, _, result = measured
    table = result.adjacency.set_index(["layout", "seed", "view", "layer"])["adjacency"]
    versus = result.versus
    assert set(versus["seed"]) == {0, 1} and set(versus[["a", "b"]].agg("-".join, axis=1)) == {
        "hybrid-rope"
    }
    for _, r in versus.iterrows():
        expected = table["hybrid", r.seed, r.view, r.layer] - table["rope", r.seed, r.view, r.layer]
        assert r.difference == pytest.approx(expected, abs=1e-12)
        assert r.low <= r.difference + 1e-12 and r.difference <= r.high + 1e-12
    # Same weights below the hybrid's NoPE block 3: rope and hybrid agree up to layer 3.
    early = versus[versus["layer"] <= 3]
    assert (early["difference"].abs() < 1e-9).all()


def test_position_and_causal_rows_and_their_numbers(measured):
    _, _, result = measured
    measures = set(result.position["measure"])
    assert measures == {"token share", "position share", "context share", "probe R^2"}
    causal = result.causal
    assert set(causal["intervention"]) == {*CURVE_INTERVENTIONS, "position_random"}
    assert set(causal["layer"]) == {3} and set(causal["skip_first"]) == {1}
    assert set(causal["dose"].dropna()) == set(CURVE_DOSES) == {1, 2}
    numbers = summarise(result)
    (cell,) = [c for c in numbers["causal"] if c["layout"] == "nope"]
    assert cell["seeds"] == [0, 1] and len(cell["rule"]) == 2
    shifts = {f"shift{s}{m}" for s in "+-" for m in CURVE_DOSES}
    assert set(cell["arms"]) == shifts | {"rotate", "scatter", "edges"}
    columns = ["loss_difference", "loss_difference_low", "loss_difference_high", "percentile"]
    for m in CURVE_DOSES:
        rows = causal.query(f"layout == 'nope' and arm == 'shift+{m}'")
        assert [a[:4] for a in cell["arms"][f"shift+{m}"]] == rows[columns].to_numpy().tolist()
        # the rule reads each difference with a loss rise as the harm: negated, ends swapped
        for plain, (_, r) in zip(cell["rule"], rows.iterrows(), strict=True):
            (size,) = [s for s in plain["sizes"] if f"shift+{m}" in s["checks"]]
            found = {(a, b): rest for a, b, *rest in size["differences"]}
            value, low, high = found[f"shift+{m}", "random"]
            assert (value, low, high) == pytest.approx(
                [-r.loss_difference, -r.loss_difference_high, -r.loss_difference_low]
            )
    assert set(result.differences["layout"]) == {"nope", "rope", "hybrid"}
    assert numbers["seeds"] == [0, 1]


def _install(folder, layout, seed, tokenizer):
    model = adjpos.build_model(layout_config(layout, **TINY, seed=seed))
    target = folder / f"text-{layout}" / f"seed{seed}"
    adjpos.save_model(model, target)
    save_tokenizer(tokenizer, target)


def test_shipped_models_are_found_and_the_missing_named(tmp_path, monkeypatch):
    monkeypatch.setattr("adjpos.pretrained.HERE", tmp_path)
    assert shipped_text_folders() == ({}, []) and shared_tokenizer([]) is None
    tokenizer = train_tokenizer(generated_text(), 300)
    for layout, seed in (("nope", 0), ("rope", 0), ("nope", 1)):
        _install(tmp_path, layout, seed, tokenizer)
    folders, missing = shipped_text_folders()
    assert sorted(folders) == [("nope", 0), ("nope", 1), ("rope", 0)]
    assert missing == ["text-rope:1", "text-hybrid:0", "text-hybrid:1"]
    assert adjpos.load_model(folders["rope", 0], n_ctx=48).cfg.n_ctx == 48
    found = shared_tokenizer(folders.values())
    assert found.encode("the king").ids == tokenizer.encode("the king").ids
    assert shipped_text_folders([1])[1] == ["text-rope:1", "text-hybrid:1"]
    save_tokenizer(train_tokenizer(generated_text()[:5000], 280), tmp_path / "text-nope" / "seed1")
    with pytest.raises(ValueError, match="different tokenizers"):
        shared_tokenizer(shipped_text_folders()[0].values())


def test_held_out_windows_spread_over_the_text():
    tokenizer = train_tokenizer(generated_text(), 300)
    windows = held_out_windows(tokenizer, 5, 16, text=generated_text())
    ids = torch.tensor(tokenizer.encode(generated_text()).ids)
    assert windows.shape == (5, 16) and torch.equal(windows[0], ids[:16])
    with pytest.raises(ValueError, match="windows of 16 tokens, not 100000"):
        held_out_windows(tokenizer, 100_000, 16, text=generated_text())


def test_the_shipped_excerpt_is_the_test_splits():
    text = corpus.held_out_text()
    assert len(text) > 25_000 and "\n\n" in text
    if not (corpus.corpus_dir() / "manifest.json").is_file():
        pytest.skip("the corpus is not cached here (it is never downloaded by the tests)")
    assert corpus.held_out_excerpt() == text
    assert text.split("\n\n")[0] in corpus.read_split("test")
