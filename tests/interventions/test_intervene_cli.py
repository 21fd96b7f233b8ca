"""``adjpos intervene``, called in-process as a user would call it, and its figure."""

import json
import re

import pytest

from adjpos import build_model, get_task, save_model
from adjpos.cli import main
from adjpos.figures import plot_interventions
from adjpos.figures.style import COLORS
from adjpos.interventions import CURVE_DIFFERENCES, INTERVENTION_TABLE
from factories import tiny_config

FAST = [
    "--layers",
    "1",
    "--interventions",
    "none,norm_permute,norm_scale_control",
    "--control-draws",
    "2",
]


@pytest.fixture(autouse=True)
def no_png(monkeypatch):
    monkeypatch.setattr("adjpos.figures.save._write_png", lambda fig, path: "PNG skipped: test")


def test_intervene_writes_its_files_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["intervene", "--model", "pretrained:addition", *FAST, "--n-prompts", "24"]
    args += ["--readouts", "kept,changed"]
    assert main([*args, "--out", str(out)]) == 0
    table = INTERVENTION_TABLE.read(out / "interventions.csv")
    names = ["none", "norm_permute", "norm_scale_control"]
    assert table["intervention"].tolist() == names * 2
    assert table["readout"].tolist() == ["kept"] * 3 + ["changed"] * 3
    tested = table[table["intervention"] == "norm_permute"]
    assert (tested["difference_low"] <= tested["difference"]).all()
    assert (tested["difference"] <= tested["difference_high"]).all()
    assert tested["percentile"].between(0, 100).all()
    assert set(table.loc[table["intervention"] == "norm_scale_control", "control_draws"]) == {2}
    assert set(table["task"]) == {"addition"} and set(table["layer"]) == {1}
    assert (table["exact_match_low"] <= table["exact_match"]).all()
    assert (table["exact_match"] <= table["exact_match_high"]).all()
    settings = json.loads((out / "interventions.json").read_text())["settings"]
    assert settings["n_prompts"] == 24 and settings["layers"] == [1]
    assert settings["readouts"] == ["kept", "changed"] and settings["control_draws"] == 2
    assert (out / "interventions.html").is_file()
    first = capsys.readouterr().out
    assert "exact match [95% interval]" in first and "norm_scale_control" in first
    assert main([*args, "--out", str(out)]) == 0
    assert "resuming: 6 of 6 units" in capsys.readouterr().out
    assert INTERVENTION_TABLE.read(out / "interventions.csv").equals(table)


def test_a_trained_folder_brings_its_task(tmp_path, capsys):
    """A folder without metrics.json needs --task; with it, the command runs."""
    task = get_task("reversal", min_digits=2, max_digits=3)
    folder = tmp_path / "model"
    save_model(build_model(tiny_config(d_vocab=25, n_ctx=task.max_len)), folder)
    args = ["intervene", "--model", str(folder), "--out", str(tmp_path / "a"), *FAST]
    assert main([*args, "--n-prompts", "8"]) == 2
    assert "no metrics.json naming the task" in capsys.readouterr().err
    more = ["--task", "reversal", "--task-param", "min_digits=2", "--task-param", "max_digits=3"]
    assert main([*args, "--n-prompts", "8", *more]) == 0
    settings = json.loads((tmp_path / "a" / "interventions.json").read_text())["settings"]
    assert settings["readouts"] == ["kept"]  # the default: the variant the verdicts use


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--interventions", "none,shuffle"], r"interventions: unknown \['shuffle'\]; choose"),
        (["--layers", "4"], r"layers \[4\] are not in \[0, 3\]"),
        (["--n-prompts", "1"], "--n-prompts must be at least 2"),
        (["--rank", "0"], r"--rank must be in \[1, 64\]"),
        (
            ["--readouts", "kept,last"],
            r"readouts must be .* \['kept', 'changed'\], got \['kept', 'last'\]",
        ),
        (["--control-draws", "0"], "control_draws must be an int >= 1, got 0"),
        (["--doses", "0,1"], r"doses must be distinct shift magnitudes, .* got \(0, 1\)"),
    ],
)
def test_bad_options_are_named(tmp_path, capsys, monkeypatch, extra, message):
    def never(*args, **kwargs):
        raise AssertionError("the model ran before the options were checked")

    monkeypatch.setattr("adjpos.interventions.intervention_table", never)
    args = ["intervene", "--model", "pretrained:addition", "--out", str(tmp_path / "x"), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos intervene: error: ") and err.count("\n") == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "x").exists()  # refused before the folder is claimed


def test_the_position_curve_arms_write_their_differences_and_the_rule(tmp_path, capsys):
    """The arms named (their control comes along): both tables written, read back with their
    own columns, and the rule's reading printed per layer."""
    out = tmp_path / "arms"
    args = ["intervene", "--model", "pretrained:reversal", "--layers", "1", "--out", str(out)]
    args += ["--interventions", "position_shift,position_rotate", "--n-prompts", "12"]
    assert main([*args, "--control-draws", "2", "--doses", "1"]) == 0
    table = INTERVENTION_TABLE.read(out / "interventions.csv")
    assert table["arm"].tolist() == ["shift-1", "shift+1", "rotate", "random"]
    assert table["size_error"].notna().all()
    differences = CURVE_DIFFERENCES.read(out / "curve_differences.csv")
    pairs = set(zip(differences["a"], differences["b"], strict=True))
    assert {("shift+1", "random"), ("rotate", "unchanged"), ("rotate", "shift-1")} <= pairs
    said = capsys.readouterr().out
    assert "size of the full shift by 1" in said
    assert re.search(r"reversal seed 0 layer 1: address \w+, relational \w+, locality", said)
    settings = json.loads((out / "interventions.json").read_text())["settings"]
    assert settings["doses"] == [1]


def test_random_models_are_refused(tmp_path, capsys):
    assert main(["intervene", "--model", "random", "--out", str(tmp_path / "r")]) == 2
    assert "interventions need a trained model" in capsys.readouterr().err


def test_the_figure_joins_no_seeds_and_only_the_baseline_is_black():
    """Seeds are points, never a line across seeds or layers; the unchanged model alone is
    black, however many changes there are."""
    names = ["none"] + [f"change_{i}" for i in range(len(COLORS) + 2)]
    rows = [
        {"seed": seed, "layer": layer, "intervention": name, "control": "none",
         "exact_match": 0.5 + 0.1 * seed}
        for seed in (0, 1, 2)
        for layer in (0, 1)
        for name in names
    ]  # fmt: skip
    fig = plot_interventions(rows)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert {t.name for t in lines} == {"unchanged model"} and len(lines) == 2  # one per layer
    assert all(t.line.color == "#000000" for t in lines)
    assert "#000000" not in {t.marker.color for t in fig.data if t.mode == "markers"}
    with pytest.raises(ValueError, match=r"lack columns \['control'"):
        plot_interventions([{k: v for k, v in rows[0].items() if k != "control"}])


def test_on_text_without_interventions_the_table_picks_its_own(tmp_path, monkeypatch, capsys):
    """``--hf --text`` without --interventions: the options are checked against the default
    interventions before the folder is claimed, and the table gets None (its own default)."""
    import transformers

    from adjpos.hf import hf_config
    from adjpos.interventions import TEXT_TABLE
    from factories import word_tokenizer

    config = hf_config("smollm3", {"hidden_size": 32, "num_hidden_layers": 2})
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "model")
    word_tokenizer(tmp_path / "model")
    (tmp_path / "t.txt").write_text(" ".join(f"w{(7 * i) % 100}" for i in range(200)))
    asked = {}

    def table(model, tokens, **kwargs):
        asked.update(kwargs)
        return TEXT_TABLE.frame([])

    monkeypatch.setattr("adjpos.interventions.text_intervention_table", table)
    argv = ["intervene", "--hf", str(tmp_path / "model"), "--text", str(tmp_path / "t.txt")]
    argv += ["--seq-len", "16", "--n-sequences", "8", "--layers", "1"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    assert asked["interventions"] is None and asked["layers"] == [1]
    assert main([*argv, "--layers", "5", "--out", str(tmp_path / "bad")]) == 2
    assert "layers [5] are not in [0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
