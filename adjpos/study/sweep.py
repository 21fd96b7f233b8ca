"""Random-initialisation sweeps: the adjacency score over a grid of model hyperparameters.

A grid maps `ModelConfig` field names to lists of values; every combination is a cell (a list
of such dicts is the union of their products). Each cell x seed builds a random-init model,
scores random tokens at every layer, and records the variance slope. Cells run in worker
processes; each finished cell is written atomically to ``DIR/cells/`` and ``DIR/sweep.csv`` is
rebuilt from them, so an interrupted sweep resumes where it stopped and gives the same rows.
"""

from __future__ import annotations

import concurrent.futures as futures
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import multiprocessing
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from adjpos.models import ModelConfig
from adjpos.runs import atomic_write, write_json

Grid = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]]
COLUMNS_AFTER_PARAMS = ("seed", "layer", "adjacency", "variance_slope", "seconds")
# The default grid answers: which band of init scale and width shows the pattern, how depth
# and normalization placement matter, and how NoPE compares with positional schemes.
DEFAULT_GRID: list[dict[str, list[Any]]] = [
    {"init_range": [0.02, 0.05, 0.1, 0.2, 0.5], "d_model": [32, 64, 128]},
    {"n_layers": [1, 2, 4, 8], "normalization_type": ["LN", "LNPre", "RMS", None]},
    {"positional": ["none", "learned", "rotary", "alibi"], "init_range": [0.05, 0.1, 0.2]},
]


@dataclass(frozen=True)
class SweepResult:
    """What `sweep` wrote.

    Attributes:
        rows: one dict per (cell, seed, layer), the rows of ``sweep.csv``.
        params: the grid parameters, in column order.
        out_dir: the results folder.
        ran: cells computed by this call (the rest were already on disk).
    """

    rows: list[dict[str, Any]]
    params: list[str]
    out_dir: Path
    ran: int


def sweep(
    grid: Grid,
    *,
    seeds: Sequence[int] = (0,),
    n_sequences: int = 32,
    seq_len: int = 32,
    out_dir: str | os.PathLike,
    workers: int | None = None,
    base: ModelConfig | None = None,
    progress: bool | None = None,
) -> SweepResult:
    """Score random-init models over every grid cell and seed; resumable.

    Args:
        grid: ``{field: [values]}`` of `ModelConfig` fields (or a list of such dicts).
        seeds: model seeds; the random tokens of a seed are the same in every cell.
        n_sequences: random sequences per cell.
        seq_len: tokens per sequence.
        out_dir: results folder (``sweep.csv``, ``sweep.json``, ``cells/``).
        workers: worker processes (default: the number of CPU cores; 0 runs in-process).
        base: the config every cell starts from (default `ModelConfig()`).
        progress: show a progress bar (default: only on a terminal).

    Raises:
        ValueError: an unknown parameter, a bad value or combination, an empty grid, or an
            `out_dir` holding a sweep with another grid (before any cell runs).
    """
    base = base if base is not None else ModelConfig()
    subgrids, params = _check_grid(grid)
    seeds = _check_seeds(seeds)
    _check_positive("n_sequences", n_sequences)
    _check_positive("seq_len", seq_len)
    cells = _cells(subgrids, base, params)
    for cell in cells:
        if seq_len > cell["config"].n_ctx:
            raise ValueError(
                f"seq_len={seq_len} exceeds n_ctx={cell['config'].n_ctx} of cell "
                f"{cell['params']}; raise n_ctx in the grid or base"
            )
    folder = Path(out_dir)
    spec = {
        "grid": [dict(g) for g in subgrids],
        "seeds": seeds,
        "n_sequences": n_sequences,
        "seq_len": seq_len,
        "base": base.to_dict(),
    }
    _claim_folder(folder, spec)
    jobs = [(cell, seed) for cell in cells for seed in seeds]
    todo = [job for job in jobs if not _cell_path(folder, *job).is_file()]
    bar = tqdm(
        total=len(jobs),
        initial=len(jobs) - len(todo),
        desc="sweep",
        disable=None if progress is None else not progress,
    )
    for cell, seed, rows in _run_all(todo, n_sequences, seq_len, workers):
        write_json(_cell_path(folder, cell, seed), rows)
        _write_csv(folder, jobs, params)
        bar.update(1)
    bar.close()
    return SweepResult(_write_csv(folder, jobs, params), params, folder, len(todo))


def score_cell(cfg: ModelConfig, seed: int, n_sequences: int, seq_len: int) -> list[dict]:
    """Adjacency and variance slope at every layer of one random-init model (one cell x seed).

    The variance slope is the least-squares slope of the mean (over sequences) variance at
    position k against k, divided by its mean over positions: the relative change per
    position; negative when variance shrinks with position.
    """
    import torch

    from adjpos.capture import iter_residuals
    from adjpos.metrics import adjacency_probability, cosine_matrix, position_variance
    from adjpos.models import build_model

    start = time.perf_counter()
    model = build_model(dataclasses.replace(cfg, seed=seed), device="cpu")
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg.d_vocab, (n_sequences, seq_len), generator=gen)
    k = torch.arange(seq_len, dtype=torch.float64)
    rows = []
    for layer, acts in iter_residuals(model, tokens, progress=False):
        adjacency = float(adjacency_probability(cosine_matrix(acts)).double().mean())
        variance = position_variance(acts).double().mean(0)
        slope = float(
            ((k - k.mean()) * (variance - variance.mean())).sum()
            / ((k - k.mean()) ** 2).sum()
            / variance.mean().clamp_min(1e-30)
        )
        rows.append({"layer": layer, "adjacency": adjacency, "variance_slope": slope})
    seconds = time.perf_counter() - start
    return [{**row, "seconds": seconds} for row in rows]


def rows_of_subgrid(
    rows: Sequence[dict[str, Any]], subgrid: Mapping[str, Sequence[Any]], base: ModelConfig
) -> list[dict[str, Any]]:
    """The rows of one sub-grid of a union grid: its own parameters at its values, every other
    parameter at its base value.

    A union grid's rows share every column, so a figure over one sub-grid's parameters must
    not mix in cells of another (a rotary model at init 0.1 is not a point of the init x
    width heatmap).
    """
    if not rows:
        return []
    others = [k for k in rows[0] if k not in subgrid and k not in COLUMNS_AFTER_PARAMS]
    return [
        row
        for row in rows
        if all(row[k] in subgrid[k] for k in subgrid)
        and all(row[k] == getattr(base, k) for k in others)
    ]


def read_sweep_csv(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a ``sweep.csv``, numbers parsed (None stays None), for figures and reports."""
    rows = list(csv.DictReader(io.StringIO(Path(path).read_text())))
    return [{k: _parse(v) for k, v in row.items()} for row in rows]


def _run_all(todo, n_sequences, seq_len, workers):
    if not todo:
        return
    workers = os.cpu_count() or 1 if workers is None else workers
    if workers == 0:
        for cell, seed in todo:
            yield cell, seed, _rows(cell, seed, n_sequences, seq_len)
        return
    context = multiprocessing.get_context("spawn")  # fork is unsafe once torch threads exist
    with futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_one_thread) as pool:
        pending = {
            pool.submit(_rows, cell, seed, n_sequences, seq_len): (cell, seed)
            for cell, seed in todo
        }
        for done in futures.as_completed(pending):
            cell, seed = pending[done]
            yield cell, seed, done.result()


def _rows(cell, seed, n_sequences, seq_len):
    rows = score_cell(cell["config"], seed, n_sequences, seq_len)
    return [{**cell["params"], "seed": seed, **row} for row in rows]


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _check_grid(grid: Grid) -> tuple[list[dict[str, list[Any]]], list[str]]:
    subgrids = [grid] if isinstance(grid, Mapping) else list(grid)
    fields = [f.name for f in dataclasses.fields(ModelConfig) if f.name != "seed"]
    if not subgrids or any(not isinstance(g, Mapping) or not g for g in subgrids):
        raise ValueError(
            f"the grid is empty; give {{parameter: [values]}} with parameters from {fields}"
        )
    params: list[str] = []
    for sub in subgrids:
        for name, values in sub.items():
            if name not in fields:
                raise ValueError(
                    f"grid parameter {name!r} is not a ModelConfig field; allowed: "
                    f"{fields} (seeds are given separately)"
                )
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise ValueError(
                    f"grid parameter {name!r} needs a non-empty list of values, got {values!r}"
                )
            if name not in params:
                params.append(name)
    return [{k: list(v) for k, v in g.items()} for g in subgrids], params


def _cells(subgrids, base, params) -> list[dict[str, Any]]:
    cells, seen = [], set()
    for sub in subgrids:
        for combo in itertools.product(*sub.values()):
            changes = dict(zip(sub, combo, strict=True))
            try:
                cfg = base.with_changes(**changes)
            except (ValueError, TypeError) as err:
                raise ValueError(f"grid cell {changes} is not a valid model: {err}") from None
            values = {name: getattr(cfg, name) for name in params}
            key = json.dumps(values, sort_keys=True)
            if key not in seen:
                seen.add(key)
                cells.append({"params": values, "config": cfg, "key": key})
    return cells


def _cell_path(folder: Path, cell: dict, seed: int) -> Path:
    digest = hashlib.sha256(f"{cell['key']}|{seed}".encode()).hexdigest()[:16]
    return folder / "cells" / f"{digest}.json"


def _claim_folder(folder: Path, spec: dict) -> None:
    meta = folder / "sweep.json"
    if meta.is_file():
        saved = json.loads(meta.read_text())
        if {k: saved.get(k) for k in spec} != json.loads(json.dumps(spec)):
            raise ValueError(
                f"{folder} holds a sweep with a different grid or settings "
                f"({saved.get('grid')}); use another --out folder"
            )
    elif folder.exists() and any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty and holds no sweep.json; choose another folder")
    (folder / "cells").mkdir(parents=True, exist_ok=True)
    write_json(meta, {**spec, "versions": _versions()})


def _write_csv(folder: Path, jobs, params) -> list[dict[str, Any]]:
    rows = []
    for cell, seed in jobs:
        path = _cell_path(folder, cell, seed)
        if path.is_file():
            rows.extend(json.loads(path.read_text()))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*params, *COLUMNS_AFTER_PARAMS], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(folder / "sweep.csv", lambda tmp: Path(tmp).write_text(out.getvalue()))
    return rows


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    names = ("adjpos", "torch", "transformer-lens", "numpy", "numba")
    return {"python": platform.python_version(), **{n: version(n) for n in names}}


def _check_seeds(seeds: Sequence[int]) -> list[int]:
    seeds = list(seeds)
    if not seeds or any(not isinstance(s, int) or isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of ints, got {seeds!r}")
    return seeds


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _parse(text: str) -> Any:
    if text in ("", "None"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)
