"""The command line called in-process: score, train, sweep and reproduce's options, and what
every command shares (--model, --task, --out, --device, --workers, seeds, errors, help).
``adjpos probe`` is in tests/probes/test_probe_cli.py, ``adjpos intervene`` in
tests/interventions/test_intervene_cli.py."""

import csv
import json
import re
from types import SimpleNamespace

import pytest
import torch

from adjpos import adjacency_score, build_model, get_task, load_model, save_model
from adjpos.cli import main
from adjpos.tasks import VOCAB_SIZE
from adjpos.validation import UsageError
from factories import tiny_config

# Every task ships a trained model; listed here so that a deleted one fails a test.
SHIPPED = ("addition", "reversal", "indexing", "ordering")
TINY = ["--n-layers", "2", "--d-model", "16", "--n-heads", "2", "--d-vocab", "20", "--n-ctx", "24"]
SMALL = ["score", *TINY, "--n-sequences", "4", "--seq-len", "10"]


def _csv_scores(path):
    with open(path) as handle:
        return torch.tensor([float(row["adjacency"]) for row in csv.DictReader(handle)])


def _tokens(d_vocab, n_sequences, seq_len, seed=0):
    """The tokens `adjpos score` draws."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, d_vocab, (n_sequences, seq_len), generator=gen)


def _no_model_built(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was built or loaded before the options were checked")

    monkeypatch.setattr("adjpos.models.build_model", refuse)
    monkeypatch.setattr("adjpos.models.load_model", refuse)


# score


def test_score_writes_the_scores_of_the_model_it_describes(tmp_path):
    assert main([*SMALL, "--csv", str(tmp_path / "s.csv")]) == 0
    model = build_model(tiny_config(), device="cpu")
    expected = adjacency_score(model, _tokens(20, 4, 10)).float()  # the defaults agree
    torch.testing.assert_close(_csv_scores(tmp_path / "s.csv"), expected)


def test_score_options_reach_the_model(capsys, tmp_path):
    args = ["--positional", "learned", "--attn-only", "--site", "attn_out", "--seed", "3"]
    assert main([*SMALL, *args, "--csv", str(tmp_path / "s.csv")]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [r[1] for r in rows] == ["learned", "learned"]  # attn_out: one row per block
    model = build_model(tiny_config(positional="learned", attn_only=True, seed=3), device="cpu")
    expected = adjacency_score(model, _tokens(20, 4, 10), site="attn_out")
    expected = expected.float()
    torch.testing.assert_close(_csv_scores(tmp_path / "s.csv"), expected)


def test_score_a_checkpoint(tmp_path):
    save_model(build_model(tiny_config(n_layers=3, seed=5)), tmp_path / "m")
    args = ["--model", str(tmp_path / "m"), "--n-sequences", "3", "--seq-len", "8"]
    assert main(["score", *args, "--csv", str(tmp_path / "s.csv")]) == 0
    model = load_model(tmp_path / "m", device="cpu")
    expected = adjacency_score(model, _tokens(20, 3, 8))
    torch.testing.assert_close(_csv_scores(tmp_path / "s.csv"), expected.float())
    options = ["--ties", "half", "--center", "--skip-first", "2"]
    assert main(["score", *args, *options, "--csv", str(tmp_path / "s.csv")]) == 0
    expected = adjacency_score(model, _tokens(20, 3, 8), ties="half", center=True, skip_first=2)
    torch.testing.assert_close(_csv_scores(tmp_path / "s.csv"), expected.float())


def test_score_loads_a_hugging_face_model_in_the_dtype_asked_for(tmp_path, monkeypatch):
    """--dtype float64 with --hf: the model loads in float64 (exact float64 states), and the
    scores are those of the float64 model."""
    import adjpos.hf
    from adjpos.hf import hf_config, load_hf, save_hf

    small = {"num_hidden_layers": 1, "hidden_size": 16, "intermediate_size": 32}
    folder = save_hf(load_hf(hf_config("smollm3", small)), tmp_path / "hf")
    loaded = []

    def spy(*args, **kwargs):
        loaded.append(load_hf(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr(adjpos.hf, "load_hf", spy)
    args = ["--hf", str(folder), "--random-tokens", "--n-sequences", "3", "--seq-len", "8"]
    assert main(["score", *args, "--dtype", "float64", "--csv", str(tmp_path / "s.csv")]) == 0
    assert {p.dtype for p in loaded[0].parameters()} == {torch.float64}
    model = load_hf(folder, dtype="float64")
    expected = adjacency_score(model, _tokens(model.cfg.d_vocab, 3, 8))
    with open(tmp_path / "s.csv") as handle:
        got = [float(row["adjacency"]) for row in csv.DictReader(handle)]
    assert got == expected.tolist()


def test_score_with_no_options_prints_the_readme_models_python_scores(tmp_path):
    """`adjpos score` alone scores the README's model on the README's tokens: the same
    numbers as `adjpos.adjacency_score` there, ties and all (the random tokens repeat, so
    layer 0 holds tied cosines and a tie rule that differed would show)."""
    assert main(["score", "--csv", str(tmp_path / "s.csv")]) == 0
    from adjpos import ModelConfig

    expected = adjacency_score(build_model(ModelConfig(), device="cpu"), _tokens(64, 64, 32))
    with open(tmp_path / "s.csv") as handle:
        got = [float(row["adjacency"]) for row in csv.DictReader(handle)]
    assert got == expected.tolist()


@pytest.mark.parametrize("name", SHIPPED)
def test_score_each_shipped_model_on_random_tokens(name, tmp_path):
    from adjpos.pretrained import load_pretrained

    args = ["--model", f"pretrained:{name}", "--n-sequences", "2", "--seq-len", "8"]
    assert main(["score", *args, "--device", "cpu", "--csv", str(tmp_path / "s.csv")]) == 0
    model, _ = load_pretrained(name, device="cpu")
    expected = adjacency_score(model, _tokens(model.cfg.d_vocab, 2, 8)).float()
    torch.testing.assert_close(_csv_scores(tmp_path / "s.csv"), expected)


def test_a_truncated_checkpoint_is_named_in_the_error(capsys, tmp_path):
    folder = save_model(build_model(tiny_config()), tmp_path / "m")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert main(["score", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos score: error:") and str(weights) in err and "truncated" in err


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-heads", "3"], "not divisible"),
        (["--positional", "sine"], "choose one of"),
        (["--seq-len", "500"], "--seq-len 500: at most the model's n_ctx, 24"),
        (["--model", "/nonexistent/ckpt"], "--model /nonexistent/ckpt: no such checkpoint"),
        (["--model", "bogusname"], "--model takes random, a checkpoint folder"),
        (["--model", "bogusname"], "or pretrained:TASK[:SEED] (TASK one of addition, "),
        (["--model", "pretrained:division"], "unknown task or seed; choose one of ['pretrained:"),
    ],
)
def test_bad_input_exits_2_with_a_message(capsys, args, message):
    assert main([*SMALL, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("adjpos score: error:") and message in err


def test_an_unwritable_csv_path_stops_score_before_any_work(capsys, tmp_path, monkeypatch):
    _no_model_built(monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for path in (tmp_path, blocker / "s.csv"):
        assert main([*SMALL, "--csv", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("adjpos score: error: --csv") and str(path) in err


# what the commands share


def _command(name, tmp_path):
    out = ["--out", str(tmp_path / "out")]
    return {"score": ["score"], "probe": ["probe", *out], "train": [*TRAIN, *out]}[name]


@pytest.mark.parametrize("command", ["score", "probe", "train"])
def test_device_cuda_without_cuda_exits_2_before_any_work(command, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    _no_model_built(monkeypatch)
    assert main([*_command(command, tmp_path), "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"adjpos {command}: error: device='cuda' was asked for but CUDA is not")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["score", "probe", "train"])
def test_a_bad_choice_is_refused_by_the_parser(command, capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        main([*_command(command, tmp_path), "--device", "tpu"])
    assert stopped.value.code == 2
    assert "argument --device: invalid choice: 'tpu'" in capsys.readouterr().err


def _help(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        main([command, "--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


def _option_entries(text):
    """Each option's help entry, its wrapped lines joined, by its first flag."""
    indented = "\n".join(line for line in text.splitlines() if line.startswith("  "))
    joined = [" ".join(entry.split()) for entry in re.split(r"\n(?=  -)", indented)]
    return {entry.split()[0].rstrip(","): entry for entry in joined}


def test_help_lists_choices_and_shows_each_default_once(capsys):
    score = _option_entries(_help("score", capsys))
    assert score["--site"].startswith("--site {resid_post,resid_mid,attn_out,mlp_out} ")
    assert score["--site"].endswith(" (default: resid_post)")
    assert score["--n-sequences"].endswith("random sequences to score (default: 64)")
    assert score["--attn-only"].endswith("(no MLPs) (default: False)")
    assert score["--d-head"].endswith("(default: d_model // n_heads)")
    for command in ("score", "probe", "train"):
        device = _option_entries(_help(command, capsys))["--device"]
        assert device.startswith("--device {auto,cpu,cuda} ") and device.endswith("(default: auto)")


COMMANDS = ("score", "train", "probe", "intervene", "sweep", "reproduce")


@pytest.mark.parametrize("command", COMMANDS)
def test_no_help_entry_states_its_default_twice(command, capsys):
    for entry in _option_entries(_help(command, capsys)).values():
        assert entry.count("default") <= 1, entry
        assert "(default: None)" not in entry and "(default: [])" not in entry, entry


def test_a_shared_option_reads_the_same_in_every_command(capsys):
    """--task, --task-param, --out, --device and --workers: one name, help text and type each
    (only the default may differ)."""
    entries = {command: _option_entries(_help(command, capsys)) for command in COMMANDS}
    shared = ("--task", "--task-param", "--out", "--device", "--workers")
    for option in shared:
        having = [command for command in COMMANDS if option in entries[command]]
        texts = {re.sub(r" \(default: [^)]*\)$", "", entries[c][option]) for c in having}
        assert len(having) >= 2 and len(texts) == 1, (option, having, texts)
    assert {c for c in COMMANDS if "--task" in entries[c]} == {"train", "probe", "intervene"}
    assert {c for c in COMMANDS if "--workers" in entries[c]} == {"sweep", "reproduce"}
    assert all("--device" in entries[c] for c in COMMANDS)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sweep", "--workers", "-1"], "argument --workers: expected an int >= 0, got '-1'"),
        (["reproduce", "--workers", "two"], "argument --workers: expected an int >= 0"),
        (["train", "--task", "indexing", "--task-param", "max_digits"], "expected NAME=VALUE"),
        (["probe", "--task", "division"], "argument --task: invalid choice: 'division'"),
    ],
)
def test_shared_options_are_checked_by_the_parser(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["probe", "intervene"])
def test_a_task_param_without_a_task_is_refused(command, capsys, tmp_path, monkeypatch):
    _no_model_built(monkeypatch)
    args = [command, "--model", "pretrained:addition", "--task-param", "max_digits=3"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"adjpos {command}: error: --task-param sets a parameter of --task")


# errors: adjpos's own exit 2 with a message; anything else is a bug and shows its traceback


def _failing_score(monkeypatch, error):
    def run(args):
        raise error

    monkeypatch.setattr("adjpos.cli.score._run_score", run)


@pytest.mark.parametrize(
    "error", [UsageError("n must be 3"), OSError("cannot write to the output folder 'x'")]
)
def test_a_user_error_exits_2_with_the_command_and_message(error, capsys, monkeypatch):
    _failing_score(monkeypatch, error)
    assert main(["score"]) == 2
    assert capsys.readouterr().err == f"adjpos score: error: {error}\n"


@pytest.mark.parametrize("error", [TypeError("a bug"), ValueError("a bug in a library call")])
def test_any_other_error_propagates_with_its_traceback(error, capsys, monkeypatch):
    _failing_score(monkeypatch, error)
    with pytest.raises(type(error), match="a bug"):
        main(["score"])
    assert "error:" not in capsys.readouterr().err


def test_validation_errors_are_usage_errors_and_value_errors():
    from adjpos.validation import check_choice

    assert issubclass(UsageError, ValueError)
    with pytest.raises(UsageError, match=r"choose one of \['a', 'b'\]"):
        check_choice("x", "c", ["a", "b"])
    with pytest.raises(UsageError, match="d_model=15 is not divisible"):
        tiny_config(d_model=15, n_heads=2)


# train

TRAIN_MODEL = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2"]
TRAIN_STEPS = ["--steps", "4", "--batch-size", "8", "--eval-every", "2", "--eval-size", "8"]
TRAIN_TASK = ["train", "--task", "indexing", "--task-param", "max_digits=3"]
TRAIN = [*TRAIN_TASK, *TRAIN_MODEL, *TRAIN_STEPS, "--warmup-steps", "1"]


def test_train_writes_a_loadable_run_and_resumes(capsys, tmp_path):
    from adjpos import is_position_free

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


def test_train_starts_from_the_weights_model_names(capsys, tmp_path):
    """With lr 0 and no weight decay, training leaves the starting weights as they were; the
    random-model options are refused with a checkpoint, which has its own architecture."""
    start = build_model(tiny_config(d_vocab=VOCAB_SIZE, n_ctx=32, n_layers=2, seed=7))
    save_model(start, tmp_path / "start")
    frozen = ["--lr", "0", "--weight-decay", "0", "--device", "cpu", "--warmup-steps", "1"]
    args = [*TRAIN_TASK, *TRAIN_STEPS, *frozen, "--model", str(tmp_path / "start")]
    assert main([*args, *TRAIN_MODEL, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert "--n-layers 1, --d-model 16, --n-heads 2: the ModelConfig options build a" in err
    assert not (tmp_path / "refused").exists()
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    trained = load_model(tmp_path / "run", device="cpu")
    assert trained.cfg.n_layers == 2
    for name, value in start.state_dict().items():
        torch.testing.assert_close(trained.state_dict()[name], value, msg=name)


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task-param", "width=3"], "--task-param: unknown parameters ['width']"),
        (["--task-param", "max_digits=0"], "--task-param: max_digits must be a positive int"),
        (["--n-ctx", "5"], "n_ctx=5 is below"),
        (["--model", "pretrained:division"], "unknown task or seed; choose one of"),
    ],
)
def test_train_bad_input(capsys, tmp_path, args, message):
    assert main([*TRAIN, "--out", str(tmp_path / "r"), *args]) == 2
    assert message in capsys.readouterr().err


# sweep

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
        "run.json",
        "plotly.min.js",
        "sweep_histogram.html",
        "sweep_init_range_by_d_model.html",
        "sweep_layers_by_d_model.html",
    } <= set(names)
    # The figures share one plotly.js: each HTML file is small.
    assert max((tmp_path / "s" / n).stat().st_size for n in names if n.endswith(".html")) < 500_000
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


def test_sweep_grid_file_errors_name_the_file(capsys, tmp_path):
    grid = tmp_path / "grid.json"
    for text, message in [
        ("5", "must hold {field: [values]} or a list of them, not 5"),
        ("{", "is not valid JSON"),
    ]:
        grid.write_text(text)
        assert main([*SWEEP, "--grid", str(grid), "--out", str(tmp_path / "x")]) == 2
        assert capsys.readouterr().err.startswith(f"adjpos sweep: error: --grid {grid} {message}")
    missing = tmp_path / "missing.json"
    assert main([*SWEEP, "--grid", str(missing), "--out", str(tmp_path / "x")]) == 2
    assert f"error: --grid {missing}: No such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_sweep_option_errors_name_the_option(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main([*SWEEP, "--seeds", "x", "--out", str(tmp_path / "x")])
    assert "argument --seeds: expected comma-separated ints, got 'x'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_sweep_has_no_seed_and_a_folder_made_with_one_resumes(capsys, tmp_path):
    """--seed once set only the base config's seed, which no model used (each takes a seed of
    --seeds) but the run folder recorded; such a folder still resumes."""
    out = tmp_path / "s"
    args = [*SWEEP, "--param", "init_range=0.05,0.2", "--out", str(out)]
    with pytest.raises(SystemExit):
        main([*args, "--seed", "3"])  # refused, not read as --seeds 3
    assert "unrecognized arguments: --seed 3" in capsys.readouterr().err
    assert not out.exists()
    assert main(args) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["spec"]["base"]["seed"] == 0  # what runs without --seed recorded: they match
    record["spec"]["base"]["seed"] = 3  # what --seed 3 recorded
    (out / "run.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert main(args) == 0
    assert "(0 cells x seeds computed now)" in capsys.readouterr().out


# intervene's seed


def test_intervene_seeds_prompts_with_data_seed(capsys, tmp_path, monkeypatch):
    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop(kwargs["seed"])

    monkeypatch.setattr("adjpos.interventions.intervention_table", stop)
    out = tmp_path / "r"
    args = ["intervene", "--model", "pretrained:addition", "--layers", "1", "--out", str(out)]
    with pytest.raises(SystemExit):
        main([*args, "--seed", "3"])
    assert "unrecognized arguments: --seed 3" in capsys.readouterr().err
    with pytest.raises(Stop, match="^3$"):
        main([*args, "--data-seed", "3"])
    record = json.loads((out / "run.json").read_text())
    # The spec keeps the key folders made with --seed hold, so they resume.
    assert record["spec"]["seed"] == 3 and record["provenance"]["seed"] == 3


# reproduce's size


@pytest.fixture
def reproduce_config(monkeypatch):
    """The ReproduceConfig that `adjpos reproduce` passes on (nothing runs)."""
    seen = {}

    def record(out_dir, cfg, on_stage=None):
        seen["cfg"] = cfg
        report = out_dir / "report.md"
        return SimpleNamespace(png_skipped=None, figures=(), report=report, seconds=0.0)

    monkeypatch.setattr("adjpos.study.pipeline.reproduce", record)
    return seen


@pytest.mark.parametrize(
    ("args", "size"),
    [
        ([], "full"),
        (["--size", "tiny"], "tiny"),
        (["--size", "full"], "full"),
        (["--quick"], "quick"),
        (["--quick", "--size", "quick"], "quick"),
    ],
)
def test_reproduce_size(args, size, reproduce_config, tmp_path):
    out = ["--device", "cpu", "--workers", "0", "--out", str(tmp_path / "r")]
    assert main(["reproduce", *args, *out]) == 0
    assert reproduce_config["cfg"].size == size and reproduce_config["cfg"].workers == 0


def test_reproduce_writes_pngs_unless_told_not_to(reproduce_config, tmp_path):
    out = ["--device", "cpu", "--out", str(tmp_path / "r")]
    assert main(["reproduce", *out]) == 0 and reproduce_config["cfg"].png is True
    assert main(["reproduce", "--no-png", *out]) == 0 and reproduce_config["cfg"].png is False
    # PNGs change no number: the run's identity ignores them
    assert reproduce_config["cfg"].to_dict() == {"size": "full", "device": "cpu", "train": False}


def test_reproduce_refuses_quick_with_another_size(reproduce_config, capsys, tmp_path):
    assert main(["reproduce", "--quick", "--size", "tiny", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "adjpos reproduce: error: --quick means --size quick, but --size tiny was given too\n"
    )
    assert not reproduce_config
    with pytest.raises(SystemExit):
        main(["reproduce", "--size", "huge"])
    assert "argument --size: invalid choice: 'huge'" in capsys.readouterr().err


# Ctrl-C


def _interrupt_call(monkeypatch, target: str, at: int) -> None:
    """Make call number `at` (from 1) of `target` raise KeyboardInterrupt, as Ctrl-C would."""
    module, _, name = target.rpartition(".")
    real = getattr(__import__(module, fromlist=[name]), name)
    calls = iter(range(1, 10_000))

    def interrupted(*args, **kwargs):
        if next(calls) == at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(target, interrupted)


def _last_line(capsys) -> str:
    """The last line of stderr, the progress bars above it closed; no traceback there."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.endswith("\n"), err
    lines = err.splitlines()
    assert sum(line.startswith("adjpos ") for line in lines) == 1, err
    return lines[-1]


def test_an_interrupted_sweep_says_how_to_resume_and_resuming_finishes_it(
    capsys, tmp_path, monkeypatch
):
    from adjpos.sweep import read_sweep

    args = [*SWEEP, "--param", "init_range=0.05,0.1,0.2"]
    with monkeypatch.context() as patch:
        _interrupt_call(patch, "adjpos.sweep.score_cell", at=2)
        assert main([*args, "--out", str(tmp_path / "s")]) == 130
    assert _last_line(capsys) == "adjpos sweep: interrupted; run the same command to resume"
    assert main([*args, "--out", str(tmp_path / "s")]) == 0
    assert "(2 cells x seeds computed now)" in capsys.readouterr().out
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    resumed, whole = (read_sweep(tmp_path / d).drop(columns="seconds") for d in ("s", "whole"))
    assert len(whole) == 3 * 2 and resumed.equals(whole)  # cells x layers 0..1


def test_an_interrupted_training_says_how_to_continue_and_continuing_matches(
    capsys, tmp_path, monkeypatch
):
    """Interrupted at step 4 of 4, after the checkpoint of step 2: continued with --resume,
    the run ends with the weights of a run never interrupted."""
    with monkeypatch.context() as patch:
        _interrupt_call(patch, "adjpos.training.loop._step", at=4)
        assert main([*TRAIN, "--out", str(tmp_path / "run")]) == 130
    hint = "run the same command with --resume to continue"
    assert _last_line(capsys) == f"adjpos train: interrupted; {hint}"
    assert main([*TRAIN, "--out", str(tmp_path / "run"), "--resume"]) == 0
    assert main([*TRAIN, "--out", str(tmp_path / "whole")]) == 0
    resumed, whole = (load_model(tmp_path / d, device="cpu") for d in ("run", "whole"))
    for name, value in whole.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], value, rtol=0, atol=0, msg=name)


def test_an_interrupted_score_ends_with_one_line(capsys, monkeypatch):
    _interrupt_call(monkeypatch, "adjpos.adjacency_score", at=1)
    assert main(SMALL) == 130
    assert _last_line(capsys) == "adjpos score: interrupted"
