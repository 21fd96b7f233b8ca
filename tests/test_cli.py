import pytest

from adjpos import build_model, save_model
from adjpos.cli import main

SMALL = [
    "score",
    "--n-layers",
    "2",
    "--d-model",
    "16",
    "--n-heads",
    "2",
    "--n-sequences",
    "4",
    "--seq-len",
    "10",
]


def _table(text):
    rows = [line.split() for line in text.splitlines()[2:]]
    return {int(layer): float(value) for layer, value in rows}


def test_score_prints_one_row_per_layer(capsys, tmp_path):
    assert main([*SMALL, "--csv", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("adjacency score per layer (NoPE model, 4 x 10 tokens)")
    table = _table(out)
    assert sorted(table) == [0, 1, 2] and all(0 <= v <= 1 for v in table.values())
    csv = (tmp_path / "s.csv").read_text().splitlines()
    assert csv[0] == "layer,adjacency" and len(csv) == 4
    assert abs(float(csv[1].split(",")[1]) - table[0]) < 1e-4


def test_score_options_reach_the_model(capsys):
    assert (
        main(
            [
                *SMALL,
                "--positional",
                "learned",
                "--normalization-type",
                "None",
                "--attn-only",
                "--site",
                "attn_out",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "learned-position model" in out and sorted(_table(out)) == [0, 1]


def test_score_a_checkpoint(capsys, tmp_path):
    from factories import tiny_config

    model = build_model(tiny_config(n_layers=3))
    save_model(model, tmp_path / "m")
    assert (
        main(["score", "--model", str(tmp_path / "m"), "--n-sequences", "3", "--seq-len", "8"]) == 0
    )
    assert sorted(_table(capsys.readouterr().out)) == [0, 1, 2, 3]


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-heads", "3"], "not divisible"),
        (["--positional", "sine"], "choose one of"),
        (["--seq-len", "2"], "shorter than 3"),
        (["--seq-len", "500"], "n_ctx"),
        (["--model", "/nonexistent/ckpt"], "not an adjpos checkpoint"),
        (["--site", "resid_pre"], "choose one of"),
    ],
)
def test_bad_input_exits_2_with_a_message(capsys, args, message):
    assert main([*SMALL, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos score: error:") and message in err


TRAIN = [
    "train",
    "--task",
    "indexing",
    "--task-param",
    "max_digits=3",
    "--n-layers",
    "1",
    "--d-model",
    "16",
    "--n-heads",
    "2",
    "--steps",
    "4",
    "--batch-size",
    "8",
    "--eval-every",
    "2",
    "--eval-size",
    "8",
    "--warmup-steps",
    "1",
]


def test_train_writes_a_loadable_run_and_resumes(capsys, tmp_path):
    import json

    from adjpos import get_task, is_position_free, load_model

    out = tmp_path / "run"
    assert main([*TRAIN, "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("indexing: 4 steps, held-out exact match")
    summary = json.loads((out / "train.json").read_text())
    assert summary["command"].startswith("adjpos train --task indexing")
    assert summary["steps"] == 4 and summary["position_free"] is True
    model = load_model(out)
    width = get_task("indexing", max_digits=3).max_len
    assert is_position_free(model) and model.cfg.d_vocab == 25 and model.cfg.n_ctx == width
    assert main([*TRAIN, "--out", str(out)]) == 2  # refuses to overwrite
    assert "already holds a training run" in capsys.readouterr().err
    assert main([*TRAIN, "--out", str(out), "--resume"]) == 0  # already finished: no-op


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task-param", "max_digits"], "NAME=VALUE"),
        (["--task-param", "width=3"], "unknown parameters ['width']"),
        (["--n-ctx", "5"], "n_ctx=5 is below"),
        (["--device", "tpu"], "choose one of"),
    ],
)
def test_train_bad_input(capsys, tmp_path, args, message):
    assert main([*TRAIN, "--out", str(tmp_path / "r"), *args]) == 2
    assert message in capsys.readouterr().err


SWEEP = [
    "sweep",
    "--n-layers",
    "1",
    "--d-model",
    "16",
    "--n-heads",
    "2",
    "--seeds",
    "0",
    "--n-sequences",
    "3",
    "--seq-len",
    "6",
    "--workers",
    "0",
    "--no-png",
]


def test_sweep_writes_rows_and_figures_and_resumes(capsys, tmp_path):
    args = [
        *SWEEP,
        "--param",
        "init_range=0.05,0.2",
        "--param",
        "d_model=16,32",
        "--out",
        str(tmp_path / "s"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "8 rows (4 cells x seeds computed now)" in out
    names = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert {
        "sweep.csv",
        "sweep.json",
        "sweep_histogram.html",
        "sweep_init_range_by_d_model.html",
        "sweep_layers_by_d_model.html",
    } <= set(names)
    assert main(args) == 0
    assert "(0 cells x seeds computed now)" in capsys.readouterr().out


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--param", "width=1,2"], "not a ModelConfig field"),
        (["--param", "d_model=a,b"], "cannot read"),
        (["--param", "d_model"], "NAME=V1,V2"),
        (["--param", "d_model=15"], "not divisible"),
    ],
)
def test_sweep_bad_input(capsys, tmp_path, args, message):
    assert main([*SWEEP, *args, "--out", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err
