"""Checks of inputs that the commands share and that need a look outside: a GGUF file (read
before a model is built from it) and a Ray cluster's address (reached before any work)."""

from __future__ import annotations

from pathlib import Path

from adjpos.cli._options import for_option
from adjpos.validation import UsageError


def check_hf_gguf(source: str) -> None:
    """``--hf SOURCE`` naming a GGUF file (or a folder holding one): a complete one."""
    from adjpos.models.gguf import find_gguf

    gguf = for_option("--hf", find_gguf, source)
    if gguf is not None:
        for_option("--hf", check_gguf_file, gguf)


def check_gguf_file(path: Path) -> None:
    """Raise naming `path` unless it is a complete GGUF file: it starts with the GGUF magic, and
    the gguf package reads its header, metadata and the tensors the header announces (a file
    cut short fails there). Checked before a model is built from it."""
    import struct

    from adjpos.models.gguf import check_gguf_reader

    with path.open("rb") as handle:
        magic = handle.read(4)
    if not magic:
        raise UsageError(f"{path}: the file is empty, not a GGUF file")
    if magic != b"GGUF":
        raise UsageError(
            f"{path}: not a GGUF file (it does not start with the GGUF magic bytes, b'GGUF')"
        )
    check_gguf_reader()
    from gguf import GGUFReader

    try:
        GGUFReader(path)
    except (ValueError, IndexError, struct.error):  # the reader's errors on a short file
        raise UsageError(
            f"{path}: not a complete GGUF file ({path.stat().st_size} bytes): its header or "
            "the tensor data it announces is cut short or damaged"
        ) from None


def check_ray_address(engine: str, address: str | None) -> None:
    """``--address``: an address of a form Ray reads (auto, HOST:PORT or ray://HOST:PORT), of a
    cluster that answers from here. Checked before any work: Ray itself would fail on it only
    when the first stage that runs on Ray starts, maybe minutes into a job.
    """
    if address is None:
        return
    if engine != "ray":
        raise UsageError(
            f"--address {address}: goes with --engine ray (a Ray cluster); add --engine ray or "
            "leave --address out"
        )
    leave_out = "or leave --address out to start a local Ray"
    target = address
    if address == "auto":
        target = _running_ray(leave_out)
        if target is None:
            return
    host, sep, port = target.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"--address {address}: expected auto, HOST:PORT (the head of a cluster this machine "
            f"belongs to, e.g. 10.0.0.5:6379) or ray://HOST:PORT (Ray Client, e.g. "
            f"ray://head:10001); {leave_out}"
        )
    import socket

    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        raise UsageError(
            f"--address {address}: cannot connect to {host}:{port} ({reason}); give the "
            f"address of a running Ray cluster, {leave_out}"
        ) from None


def _running_ray(leave_out: str) -> str | None:
    """The address ``--address auto`` means (RAY_ADDRESS, or the cluster last started on this
    machine), found as Ray finds it; None where this Ray has no such lookup (or no Ray: the
    engine's own check says so)."""
    try:
        from ray._private.services import get_ray_address_from_environment
    except ImportError:  # no Ray, or a Ray whose lookup moved: leave it to ray.init
        return None
    try:
        return get_ray_address_from_environment("auto", None)
    except ConnectionError:
        raise UsageError(
            "--address auto: no running Ray cluster found on this machine (start one with "
            f"`ray start --head`, or set RAY_ADDRESS), {leave_out}"
        ) from None
