"""The text stage of the study (`adjpos.study.claims.text`) on tiny text models installed in a
temporary package folder, and with none installed (as in a copy without the text models)."""

import dataclasses
import json

import pytest

import adjpos
from adjpos.figures.style import label
from adjpos.study.claim import CRITERIA, Context, Status
from adjpos.study.claims import claim
from adjpos.study.sizes import SIZES
from adjpos.text.recipe import LAYOUTS, layout_config
from adjpos.text.tokenizer import save_tokenizer, train_tokenizer
from adjpos.text_layers import shipped_text_folders
from adjpos.validation import UsageError
from factories import MemoryFolder

STAGE = claim("text")
TINY = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 300, "n_ctx": 24}


def generated_text() -> str:
    words = "the king and queen of a land far away did speak with love".split()
    return "".join(
        f"{words[i % 12]} {words[(i * 7) % 12]} {words[(i * 5) % 12]}.\n" for i in range(900)
    )


def run_stage(results):
    """The stage in this process (its units read the models of the patched package folder),
    its numbers as the pipeline writes them."""
    context = Context(MemoryFolder(results.parent), None, SIZES["tiny"], CRITERIA)
    context = dataclasses.replace(context, workers=0)
    return json.loads(json.dumps(STAGE.measure(context)))


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    monkeypatch.setattr("adjpos.pretrained.HERE", tmp_path / "pretrained")
    tokenizer = train_tokenizer(generated_text(), 300)
    for layout in ("nope", "rope", "hybrid"):
        target = tmp_path / "pretrained" / f"text-{layout}" / "seed0"
        adjpos.save_model(adjpos.build_model(layout_config(layout, **TINY, seed=0)), target)
        save_tokenizer(tokenizer, target)
    (tmp_path / "results").mkdir()
    return tmp_path / "results"


def test_the_stage_measures_judges_and_draws_the_shipped_models(shipped):
    numbers = run_stage(shipped)
    assert numbers["seeds"] == [0] and numbers["missing"] == [] and numbers["nope_blocks"] == [3]
    assert {c["layout"] for c in numbers["adjacency"]} == {"nope", "rope", "hybrid"}
    assert {c["layer"] for c in numbers["versus"]} == set(range(5))
    # the arms in the models with NoPE blocks (all-RoPE has none, and no claim on them)
    assert {(c["layout"], c["layer"]) for c in numbers["causal"]} == {("nope", 3), ("hybrid", 3)}
    found = STAGE.verdicts(numbers, CRITERIA)
    counted = [
        all(any(ok for a, ok in p["sizes"][0]["checks"].items() if "shift" in a) for p in c["rule"])
        for c in numbers["causal"]
        if c["layout"] != "rope"
    ]
    assert len(counted) == 2 and [v.n_cells for v in found] == [4, 4, 4, 1, sum(counted)]
    assert all(v.seeds == "0 only" for v in found)
    text = STAGE.section(numbers, CRITERIA, lambda prefix: f"[{prefix} figures]")
    assert "[text figures]" in text and "| hybrid | 4 | nope |" in text
    assert "| hybrid - rope | 4 | raw, sink out |" in text and "| nope | 3 | shift+1 |" in text
    figures = STAGE.figures(shipped, {})
    assert set(figures) == {"text_adjacency", "text_position", "text_curve_arms"}
    arms = figures["text_curve_arms"][0]  # one panel per layout at the NoPE block's input
    assert [a.text for a in arms.layout.annotations[:2]] == [
        f"{label(x)}, layer 3" for x in ("nope", "hybrid")
    ]
    assert any(a.text.startswith("size ") for a in arms.layout.annotations)
    assert {t.name for t in figures["text_adjacency"][0].data} == {"NoPE", "RoPE", "hybrid"}


def test_without_text_models_the_stage_says_so_and_judges_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("adjpos.pretrained.HERE", tmp_path)
    numbers = run_stage(tmp_path / "results")
    found = STAGE.verdicts(numbers, CRITERIA)
    assert found and all(v.status == Status.NOT_SHOWN and v.n_cells == 0 for v in found)
    assert "No text model is shipped" in STAGE.section(numbers, CRITERIA, lambda p: "")
    assert STAGE.figures(tmp_path, {}) == {}


def test_a_shift_that_fails_its_check_is_reported_not_counted():
    """A cell of one seed whose shifts raise the loss 0.3 nats beyond the random curve's:
    for, and with both shifts' checks failed shown but not counted."""
    from adjpos.interventions import cell_numbers

    names = ["shift-1", "shift+1", "rotate", "scatter", "random"]
    key = {"layout": "nope", "seed": 0, "layer": 3, "readout": "kept", "dose": 1}
    rise = {"shift-1": 0.3, "shift+1": 0.3, "rotate": 0.0, "scatter": 0.0}
    differences = [
        key | {"a": a, "b": "random", "value": v, "low": v - 0.01, "high": v + 0.01}
        for a, v in rise.items()
    ]
    numbers = {"seeds": [0], "nope_blocks": [3], "adjacency": [], "versus": []}
    for passed, n_for in ((True, 1), (False, 0)):
        rows = [key | {"arm": a, "size_target": 0.2, "percentile": 0.0} for a in names]
        # the shifts' curve moved its way (check number 1.0) or not at all (0.0)
        moved = {a: 1.0 if passed else 0.0 for a in names if "shift" in a}
        checks = moved | {"rotate": 0.0, "scatter": 0.3}
        rows = [r | {"size_error": 0.0, "check_value": checks.get(r["arm"])} for r in rows]
        (rule,) = cell_numbers(rows, differences, keys=("layout", "seed", "layer"), harm=-1)
        arms = {a: [[v, v - 0.01, v + 0.01, 0.0, 0.0, checks[a]]] for a, v in rise.items()}
        cell = {"layout": "nope", "layer": 3, "seeds": [0], "rule": [rule.to_plain()]}
        cell["arms"] = arms
        found = STAGE.verdicts(numbers | {"causal": [cell]}, CRITERIA)
        assert (found[-1].n_for, found[-1].n_cells) == (n_for, n_for)
    numbers |= {"causal": [cell], "missing": [], "position": []}
    section = STAGE.section(numbers, CRITERIA, lambda p: "")
    assert "check failed" in section and "address: not counted" in section


def test_each_verdict_names_the_seeds_it_read():
    def cell(layout, seeds):
        per_seed = [[0.55, 0.6]] * len(seeds)
        return {"layout": layout, "layer": 1, "view": "raw, sink out", "per_seed": per_seed}

    adjacency = [cell("nope", [0, 1, 2]) | {"seeds": [0, 1, 2]}, cell("rope", [0]) | {"seeds": [0]}]
    numbers = {"nope_blocks": [3], "adjacency": adjacency, "versus": [], "causal": []}
    found = STAGE.verdicts(numbers, CRITERIA)
    assert [v.seeds for v in found] == ["0, 1, 2", "0 only", "none", "none", "none"]


def test_the_second_width_is_read_by_its_own_names(shipped, tmp_path):
    target = tmp_path / "pretrained" / "text-nope-d128" / "seed0"
    adjpos.save_model(adjpos.build_model(layout_config("nope", **TINY, seed=0)), target)
    save_tokenizer(train_tokenizer(generated_text(), 300), target)
    folders, missing = shipped_text_folders(widths=(64, 128))
    assert list(folders) == [(x, 0) for x in ("nope", "rope", "hybrid", "nope-d128")]
    assert missing == ["text-rope-d128:0", "text-hybrid-d128:0"]
    assert list(shipped_text_folders()[0]) == [(x, 0) for x in LAYOUTS]  # the recipe's width
    with pytest.raises(UsageError, match="text_widths must be among"):
        dataclasses.replace(SIZES["tiny"], text_widths=(64, 96))
