"""probe_positions on models: the leakage checks, agreement with plain scikit-learn, bad input."""

import numpy as np
import pytest
import torch

from adjpos import FEATURE_SETS, build_model, capture_residuals, probe_positions
from adjpos.probes.features import ONE_NUMBER_SETS
from adjpos.probes.fit import make_probe
from adjpos.seeds import derive_seed
from factories import tiny_config

# Worst |score - chance| seen at layer 0 over 4 model/data seeds was about half of these.
TOLERANCE = {"r2": 0.05, "mae": 0.15, "accuracy": 0.06, "mean_abs_distance": 0.8}


def _model(**overrides):
    return build_model(tiny_config(d_model=32, d_vocab=48, n_ctx=32, **overrides), device="cpu")


def _tokens(n_seq=40, n_pos=16, seed=0):
    return torch.randint(0, 48, (n_seq, n_pos), generator=torch.Generator().manual_seed(seed))


def test_every_probe_is_at_chance_on_nope_embeddings():
    """Layer 0 of a NoPE model is the token embedding: no feature set may find position."""
    result = probe_positions(
        _model(),
        _tokens(),
        layers=[0],
        features=FEATURE_SETS,
        probe=["ridge", "logistic", "spline"],
        cv=4,
        repeats=1,
    )
    one_number = [n for n in FEATURE_SETS if n.removeprefix("shuffled:") in ONE_NUMBER_SETS]
    assert len(result.scores) == len(FEATURE_SETS) * 4 + len(one_number) * 2
    for score in result.scores:
        assert score.above_chance < TOLERANCE[score.metric], score


def test_resid_finds_position_in_a_learned_position_models_embeddings():
    result = probe_positions(
        _model(positional="learned"),
        _tokens(),
        layers=[0],
        features=["resid", "shuffled:resid"],
        probe=["ridge", "logistic"],
        cv=4,
        repeats=2,
    )
    assert result.value(0, "resid", "logistic", "accuracy") > 0.9
    assert result.value(0, "resid", "ridge", "r2") > 0.5
    shuffled = [s for s in result.scores if s.features == "shuffled:resid"]
    assert all(s.above_chance < TOLERANCE[s.metric] for s in shuffled)


def test_shuffled_controls_are_at_chance_where_position_is_strong():
    result = probe_positions(
        _model(positional="learned"),
        _tokens(),
        features=["shuffled:cosine_profile"],
        probe="logistic",
        cv=4,
        repeats=1,
    )
    assert all(s.above_chance < TOLERANCE[s.metric] for s in result.scores)


def test_cosine_profile_finds_position_in_a_random_nope_model():
    result = probe_positions(_model(), _tokens(), layers=[2], features="cosine_profile", cv=4)
    score = result.find(2, "cosine_profile", "ridge", "r2")
    assert score.value > 0.15 and score.baseline == pytest.approx(0, abs=1e-9)
    repeats = tuple(derive_seed(0, "probe repeat", r, bits=32) for r in range(3))
    assert score.std > 0 and result.seeds == repeats


def test_matches_plain_scikit_learn():
    """One score recomputed by hand: features, grouped folds and metric."""
    from sklearn.model_selection import GroupKFold

    model, tokens = _model(), _tokens(n_seq=12, n_pos=8)
    result = probe_positions(model, tokens, layers=[1], features="variance", cv=3, repeats=1)
    acts = capture_residuals(model, tokens, layers=[1])[0]
    x = acts.double().var(-1, correction=0).reshape(-1, 1).numpy()
    y, groups = np.tile(np.arange(8), 12), np.repeat(np.arange(12), 8)
    seed = derive_seed(0, "probe repeat", 0, bits=32)  # the first repeat's folds
    folds = list(GroupKFold(3, shuffle=True, random_state=seed).split(x, y, groups))
    maes = []
    for train, test in folds:
        predicted = make_probe("ridge").fit(x[train], y[train]).predict(x[test])
        maes.append(np.abs(predicted - y[test]).mean())
    assert result.value(1, "variance", "ridge", "mae") == pytest.approx(np.mean(maes))
    assert all(not set(groups[tr]) & set(groups[te]) for tr, te in folds)


def test_mixed_lengths_for_the_sets_that_allow_them():
    tokens, lengths = _tokens(n_seq=10), torch.tensor([16, 9, 12, 16, 5, 7, 16, 8, 10, 11])
    result = probe_positions(
        _model(),
        tokens,
        lengths=lengths,
        layers=[0, 1],
        features=["variance", "cosine_first"],
        cv=2,
        repeats=1,
    )
    assert result.seq_len == 16 and len(result.scores) == 2 * 2 * 2


def test_result_round_trips_and_exports(tmp_path):
    from adjpos import ProbeResult
    from adjpos.probes import PROBE_TABLE

    result = probe_positions(_model(), _tokens(n_seq=6, n_pos=6), features="norm", cv=2)
    path = tmp_path / "r.json"
    result.to_json(path)
    assert ProbeResult.from_json(path) == result == ProbeResult.from_json(path.read_text())
    lines = result.to_csv(tmp_path / "r.csv").splitlines()
    assert lines[0] == (
        "model,layer,features,probe,metric,value,baseline,std,sem,backward_only,"
        "gain_chance,gain_layer0,gain_token_identity"
    )
    assert len(lines) == 1 + 3 * 2 and lines[1].startswith("model,0,norm,ridge,r2,")
    frame = PROBE_TABLE.read(tmp_path / "r.csv")
    assert frame.equals(result.to_frame())  # every number round-trips exactly
    assert list(frame.columns)[7] == "std" and len(frame) == 6
    assert frame["backward_only"].all()  # norm uses the state at k only
    at_zero = frame[frame["layer"] == 0]
    assert (at_zero["gain_layer0"] == 0).all() and frame["gain_token_identity"].isna().all()
    assert len((result + result).scores) == 12
    with pytest.raises(KeyError, match="this result has layers"):
        result.value(9, "norm", "ridge", "r2")


@pytest.mark.usefixtures("user_errors")
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(features=["variance", "cosine"]), r"unknown feature sets \['cosine'\]"),
        (
            dict(probe="svm"),
            r"unknown probes \['svm'\]; choose from \['ridge', 'logistic', 'spline'\]",
        ),
        (dict(layers=[0, 3]), r"layers must be .* in \[0, 2\]"),
        (dict(cv=7), "6 sequences are too few for cv=7"),
        (dict(cv=1), "at least 2 folds"),
        (dict(repeats=0), "repeats must be a positive int"),
        (
            dict(lengths=torch.tensor([12, 12, 9, 12, 12, 12])),
            r"\['cosine_profile'\] need sequences of one length, got lengths from 9 to 12",
        ),
        (dict(lengths=torch.tensor([12, 2, 9, 12, 12, 12])), "shorter than 3 tokens"),
    ],
)
def test_bad_input_fails_before_any_forward_pass(tiny_model, tokens, kwargs, message, monkeypatch):
    def no_capture(*args, **kwargs):
        raise AssertionError("ran the model before checking the input")

    monkeypatch.setattr("adjpos.probes.positions.iter_residuals", no_capture)
    kwargs = {"features": ["variance", "cosine_profile"], "cv": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        probe_positions(tiny_model, tokens, **kwargs)


def test_result_files_are_written_into_new_folders(tmp_path):
    from adjpos import ProbeResult

    result = probe_positions(_model(), _tokens(n_seq=6, n_pos=6), features="norm", cv=2)
    result.to_json(tmp_path / "new" / "deeper" / "r.json")
    result.to_csv(tmp_path / "other" / "r.csv")
    assert ProbeResult.from_json(tmp_path / "new" / "deeper" / "r.json") == result
    assert (tmp_path / "other" / "r.csv").read_text().startswith("model,layer,features")


def test_token_identity_sees_the_format_of_a_task_and_nothing_in_random_tokens():
    """The leak-aware baseline: a task's format puts the same characters at the same places,
    so the tokens alone name the position; uniformly random tokens name nothing."""
    from adjpos.probes import sequences_of_length
    from adjpos.tasks import VOCAB_SIZE, get_task

    task = get_task("indexing")
    model = build_model(tiny_config(d_model=32, d_vocab=VOCAB_SIZE, n_ctx=32), device="cpu")
    tokens = sequences_of_length(task, 24, generator=torch.Generator().manual_seed(0))
    random = torch.randint(0, VOCAB_SIZE, tokens.shape, generator=torch.Generator().manual_seed(1))
    options = dict(layers=[0, 1], features=["token_identity", "norm"], probe="logistic", cv=4)
    on_task = probe_positions(model, tokens, **options)
    on_random = probe_positions(model, random, **options)
    identity = on_task.find(0, "token_identity", "logistic", "accuracy")
    assert identity.value > identity.baseline + 0.5
    chance = on_random.find(0, "token_identity", "logistic", "accuracy")
    assert chance.above_chance < TOLERANCE["accuracy"]
    assert [s.layer for s in on_task.scores if s.features == "token_identity"] == [0, 0]
    rows = on_task.to_frame().set_index(["layer", "features", "metric"])
    norm = rows.loc[(1, "norm", "accuracy")]
    assert norm["gain_token_identity"] == pytest.approx(norm["value"] - identity.value)
    assert norm["gain_layer0"] == pytest.approx(
        norm["value"] - on_task.value(0, "norm", "logistic", "accuracy")
    )
    distance = rows.loc[(1, "norm", "mean_abs_distance")]  # lower is better: the sign flips
    assert distance["gain_chance"] == pytest.approx(distance["baseline"] - distance["value"])
