"""One tiny `reproduce` run for the whole session, shared by every test file and xdist worker."""

import dataclasses
import json
from pathlib import Path

import pytest
from filelock import FileLock

from adjpos.study.pipeline import ReproduceResult, reproduce
from factories import TINY_REPRODUCE


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, worker_id):
    """(folder, what the run did): the first worker to ask runs it under a file lock and
    records its `ReproduceResult`; the others read that record. Tests copy the folder before
    changing anything in it."""
    root = tmp_path_factory.getbasetemp()
    root = root if worker_id == "master" else root.parent
    out, record = root / "tiny-reproduce" / "run", root / "tiny-reproduce" / "result.json"
    with FileLock(str(root / "tiny-reproduce.lock")):
        if not record.is_file():
            result = reproduce(out, TINY_REPRODUCE)
            fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
            record.write_text(json.dumps(fields, default=str))
    fields = json.loads(record.read_text())
    fields |= {"out_dir": Path(fields["out_dir"]), "report": Path(fields["report"])}
    fields |= {k: tuple(fields[k]) for k in ("ran", "skipped")}
    return out, ReproduceResult(**fields | {"figures": tuple(map(Path, fields["figures"]))})
