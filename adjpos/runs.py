"""Run folders: the one bookkeeping helper of every long job (training, sweeps, probes, the
study), and the atomic file writes everything in adjpos goes through.

A run folder holds ``run.json`` (the job's kind, its spec: every setting that decides its
results, and its provenance, written once), one marker ``done/UNIT.json`` per finished unit
(holding its JSON result), and whatever the job writes. Re-opening a folder with the same spec
resumes it; another spec, or a non-empty folder that is not a run folder, is refused before
any work. Every file is written to a temporary name and renamed.

Example:
    >>> import tempfile
    >>> folder = RunFolder.open(tempfile.mkdtemp() + "/run", kind="demo", spec={"n": 3})
    >>> folder.is_done("cell-1")
    False
    >>> folder.mark_done("cell-1", {"score": 0.75})
    >>> folder.result("cell-1"), folder.done_units()
    ({'score': 0.75}, ['cell-1'])
    >>> RunFolder.open(folder.path, kind="demo", spec={"n": 4})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    adjpos.validation.UsageError: ... holds a demo run with other settings (n: 3 there, 4 here); ...
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adjpos.validation import UsageError

RUN_FILE = "run.json"
DONE_FOLDER = "done"
LIBRARIES = ("adjpos", "torch", "transformer-lens", "scikit-learn", "numpy", "pandas", "plotly")


def atomic_write(path: str | os.PathLike, write: Callable[[str], Any]) -> None:
    """Call ``write(tmp_path)``, then move the result onto `path` (its folder is created):
    never half a file, and the usual permissions."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)  # mkstemp makes the file private; give it the usual permissions
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write `data` as JSON to `path` atomically."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def check_writable(path: str | os.PathLike) -> Path:
    """Create folder `path` and prove it can be written, or raise `OSError` naming it (before
    any work, so a long job never fails at its end)."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise OSError(f"cannot write to the output folder {str(folder)!r}: {reason}") from None
    return folder


def files_digest(paths: list[Path], *extra: Any) -> str:
    """A SHA-256 of the bytes of the files at `paths` (in the order given; their names are not
    part of it) and of `extra` values: what something drawn from those files was drawn from.

    Example:
        >>> len(files_digest([], "settings"))
        64
    """
    import hashlib

    digest = hashlib.sha256(json.dumps([str(e) for e in extra]).encode())
    for path in paths:
        digest.update(Path(path).read_bytes() + b"\0")
    return digest.hexdigest()


def versions() -> dict[str, str]:
    """Versions of Python, adjpos and the libraries that produce adjpos's numbers."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


class RunFolder:
    """A claimed run folder: open it with `RunFolder.open`."""

    def __init__(self, path: Path, record: dict[str, Any]) -> None:
        self.path = path
        self._record = record

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        kind: str,
        spec: dict[str, Any],
        seed: int | None = None,
        device: str | None = None,
        command: str | None = None,
    ) -> RunFolder:
        """Claim `path` (created if needed) for a `kind` run (``"sweep"``, ``"train"``, ...)
        with `spec`, every setting that decides the results (JSON-able), or resume the run
        already there; `seed`, `device` and `command` (default: argv) are provenance, recorded
        once. Another kind or spec, or files that are not a run's, raise `ValueError`; an
        unwritable folder `OSError`."""
        folder = check_writable(path)
        spec = json.loads(json.dumps(spec))
        record_path = folder / RUN_FILE
        if record_path.is_file():
            record = read_run(folder)
            if record.get("kind") != kind or record.get("spec") != spec:
                raise UsageError(
                    f"{str(folder)!r} holds a {record.get('kind')} run with other settings "
                    f"({_difference(record.get('spec'), spec, record.get('kind') == kind)}); "
                    "use another folder, or delete it to start over"
                )
            return cls(folder, record)
        if any(folder.iterdir()):
            raise UsageError(
                f"{str(folder)!r} is not empty and holds no {RUN_FILE}: it is not an adjpos run "
                "folder; choose an empty or new folder"
            )
        provenance = {
            "command": command if command is not None else " ".join(sys.argv),
            "seed": seed,
            "device": device,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": versions(),
        }
        record = {"kind": kind, "spec": spec, "provenance": provenance}
        write_json(record_path, record)
        return cls(folder, record)

    @staticmethod
    def exists(path: str | os.PathLike) -> bool:
        """Whether `path` holds a run folder."""
        return (Path(path) / RUN_FILE).is_file()

    @property
    def kind(self) -> str:
        return self._record["kind"]

    @property
    def spec(self) -> dict[str, Any]:
        """The settings that decide the results, as recorded."""
        return self._record["spec"]

    @property
    def provenance(self) -> dict[str, Any]:
        """Versions, command, seed, device and start time of the first call."""
        return self._record["provenance"]

    def is_done(self, unit: str) -> bool:
        """Whether `unit` has finished (its marker exists)."""
        return self._marker(unit).is_file()

    def mark_done(self, unit: str, result: Any = None) -> None:
        """Record `unit` as finished, with its JSON-able `result` (write its files first)."""
        write_json(self._marker(unit), {"unit": unit, "result": result})

    def result(self, unit: str) -> Any:
        """The result recorded with finished `unit` (KeyError if it has not finished)."""
        if not self.is_done(unit):
            raise KeyError(f"unit {unit!r} of {self.path} has not finished")
        return json.loads(self._marker(unit).read_text())["result"]

    def done_units(self) -> list[str]:
        """The finished units, sorted by name."""
        folder = self.path / DONE_FOLDER
        if not folder.is_dir():
            return []
        return sorted(json.loads(p.read_text())["unit"] for p in folder.glob("*.json"))

    def _marker(self, unit: str) -> Path:
        if not isinstance(unit, str) or not unit:
            raise ValueError(f"a unit name must be a non-empty string, got {unit!r}")
        return self.path / DONE_FOLDER / (re.sub(r"[^A-Za-z0-9_.=-]", "_", unit) + ".json")


def read_run(path: str | os.PathLike) -> dict[str, Any]:
    """The ``run.json`` of run folder `path` (kind, spec, provenance)."""
    record_path = Path(path) / RUN_FILE
    try:
        return json.loads(record_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"{record_path} is not a readable run record: {err}") from None


def _difference(there: Any, here: Any, same_kind: bool) -> str:
    if not same_kind or not isinstance(there, dict):
        return "another kind of job"
    there, here = _flatten(there), _flatten(here)
    keys = sorted(k for k in set(there) | set(here) if there.get(k) != here.get(k))
    shown = [f"{k}: {_short(there.get(k))} there, {_short(here.get(k))} here" for k in keys[:3]]
    return "; ".join(shown) + ("; ..." if len(keys) > 3 else "")


def _flatten(spec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys, so a difference names the setting."""
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
