"""The run-folder helper and atomic writes: claim, refuse, resume, provenance once."""

import json

import pytest

from adjpos.runs import RunFolder, atomic_write, check_writable, read_run, write_json


def test_a_claimed_folder_records_spec_and_provenance_once(tmp_path):
    folder = RunFolder.open(tmp_path / "r", kind="job", spec={"n": 2}, seed=3, device="cpu")
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert record["kind"] == "job" and record["spec"] == {"n": 2}
    assert record["provenance"]["seed"] == 3 and record["provenance"]["device"] == "cpu"
    assert "torch" in record["provenance"]["versions"]
    before = (tmp_path / "r" / "run.json").read_text()
    again = RunFolder.open(tmp_path / "r", kind="job", spec={"n": 2}, seed=9, device="cuda")
    assert (tmp_path / "r" / "run.json").read_text() == before  # provenance of the first call
    assert (
        again.provenance["seed"] == 3 and folder.spec == again.spec == read_run(folder.path)["spec"]
    )


def test_units_are_skipped_once_done_and_keep_their_results(tmp_path):
    folder = RunFolder.open(tmp_path / "r", kind="job", spec={})
    assert folder.done_units() == [] and not folder.is_done("cell a/1")
    folder.mark_done("cell a/1", [{"score": 0.25}])
    folder.mark_done("stage", None)
    reopened = RunFolder.open(tmp_path / "r", kind="job", spec={})
    assert reopened.is_done("cell a/1") and reopened.result("cell a/1") == [{"score": 0.25}]
    assert reopened.done_units() == ["cell a/1", "stage"]
    with pytest.raises(KeyError, match="has not finished"):
        reopened.result("other")
    with pytest.raises(ValueError, match="non-empty string"):
        reopened.is_done("")


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        ("job", {"n": 3, "deep": {"a": 1}}, r"other settings \(n: 2 there, 3 here\)"),
        ("job", {"n": 2, "deep": {"a": 5}}, r"deep.a: 1 there, 5 here"),
        ("other", {"n": 2, "deep": {"a": 1}}, "holds a job run.*another kind of job"),
    ],
)
def test_a_folder_made_with_other_settings_is_refused(tmp_path, kind, spec, message):
    RunFolder.open(tmp_path / "r", kind="job", spec={"n": 2, "deep": {"a": 1}})
    with pytest.raises(ValueError, match=message):
        RunFolder.open(tmp_path / "r", kind=kind, spec=spec)


def test_a_non_empty_folder_that_is_no_run_is_refused_and_left_alone(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(ValueError, match="not empty and holds no run.json"):
        RunFolder.open(tmp_path, kind="job", spec={})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_an_unwritable_folder_fails_before_any_work(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="cannot write to the output folder"):
        check_writable(tmp_path / "file" / "run")
    with pytest.raises(OSError, match="cannot write to the output folder"):
        RunFolder.open(tmp_path / "file" / "run", kind="job", spec={})


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.json"
    write_json(path, {"old": 1})

    def fail(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, fail)
    assert json.loads(path.read_text()) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
