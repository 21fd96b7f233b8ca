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
