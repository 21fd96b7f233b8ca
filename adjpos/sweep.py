"""Random-initialisation sweeps: the adjacency score over a grid of model hyperparameters.

A grid maps `ModelConfig` field names to lists of values; every combination is a cell (a list
of such dicts is the union of their products). Each cell x seed (a random-init model scored on
random tokens at every layer) is one unit of an `adjpos.runs.RunFolder`, so an interrupted
sweep resumes where it stopped and gives the same rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from adjpos.engines import Resources, check_engine, run_units
from adjpos.models import ModelConfig, build_model
from adjpos.runs import RunFolder, read_run
from adjpos.tables import Table, config_table
from adjpos.validation import UsageError, check_int_list, check_positive_int, resolve_device

Grid = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]]
# The columns after the grid parameters: what each cell x seed x layer measured.
MEASURED = Table(
    seed="int64", layer="int64", adjacency="float64", variance_slope="float64", seconds="float64"
)
# The default sweep grid answers: which band of init scale and width shows the pattern, how
# depth and normalization placement matter, and how NoPE compares with positional schemes.
DEFAULT_GRID: tuple[dict[str, list[Any]], ...] = (
    {"init_range": [0.02, 0.05, 0.1, 0.2, 0.5], "d_model": [32, 64, 128]},
    {"n_layers": [1, 2, 4, 8], "normalization_type": ["LN", "LNPre", "RMS", None]},
    {"positional": ["none", "learned", "rotary", "alibi"], "init_range": [0.05, 0.1, 0.2]},
)
__all__ = ["DEFAULT_GRID", "MEASURED", "SweepResult", "read_sweep", "rows_of_subgrid", "sweep"]


@dataclass(frozen=True)
class SweepResult:
    """What `sweep` wrote.

    Attributes:
        table: one row per (cell, seed, layer), the rows of ``sweep.csv``.
        params: the grid parameters, in column order.
        out_dir: the results folder.
        ran: cells x seeds computed by this call (the rest were already on disk).
    """

    table: pd.DataFrame
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
    device: str | None = "cpu",
    progress: bool | None = None,
    engine: str = "process",
    address: str | None = None,
) -> SweepResult:
    """Score random-init models over every grid cell and seed; resumable. A bad grid, a folder
    of other settings or an engine that cannot run is refused before any cell runs.

    Args:
        grid: ``{field: [values]}`` of `ModelConfig` fields (or a list of such dicts).
        seeds: model seeds; the random tokens of a seed are the same in every cell.
        n_sequences, seq_len: random sequences per cell, and their tokens.
        out_dir: results folder (``sweep.csv``, ``run.json``, ``done/``).
        base: the config every cell starts from (default `ModelConfig()`).
        device: where the models run ("cpu", "cuda", or "auto"/None: CUDA when present).
        progress: show a progress bar (default: only on a terminal).
        engine, workers, address: as in `adjpos.engines.run_units` (the rows do not depend on
            them).
    """
    check_engine(engine, workers, address)
    base = base if base is not None else ModelConfig()
    subgrids, params = _check_grid(grid)
    seeds = check_int_list("seeds", seeds)
    check_positive_int("n_sequences", n_sequences)
    check_positive_int("seq_len", seq_len)
    device = str(resolve_device(device))
    cells = _cells(subgrids, base, params)
    for cell in cells:
        if seq_len > cell["config"].n_ctx:
            raise UsageError(
                f"seq_len={seq_len} exceeds n_ctx={cell['config'].n_ctx} of cell "
                f"{cell['params']}; raise n_ctx in the grid or base"
            )
    spec = {"grid": [dict(g) for g in subgrids], "params": params, "seeds": seeds}
    spec |= {"n_sequences": n_sequences, "seq_len": seq_len, "base": base.to_dict()}
    folder = RunFolder.open(out_dir, kind="sweep", spec=spec, seed=seeds[0], device=device)
    jobs = [(cell, seed) for cell in cells for seed in seeds]
    todo = [job for job in jobs if not folder.is_done(_unit(*job))]
    disable = None if progress is None else not progress
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc="sweep", disable=disable)
    units = run_units(
        _rows,
        [(cell, seed, n_sequences, seq_len, device) for cell, seed in todo],
        engine=engine,
        workers=workers,
        address=address,
        resources=Resources.for_device(device),
    )
    for (cell, seed, *_), rows in units:
        folder.mark_done(_unit(cell, seed), rows)
        bar.update(1)
    bar.close()
    rows = [row for job in jobs for row in folder.result(_unit(*job))]
    table = sweep_table(params).write(folder.path / "sweep.csv", rows)
    return SweepResult(table, params, folder.path, len(todo))


def sweep_table(params: Sequence[str]) -> Table:
    """The columns of a sweep over `params`: the parameters (typed as `ModelConfig` fields),
    then `MEASURED`."""
    return config_table(ModelConfig, params) + MEASURED


def read_sweep(out_dir: str | os.PathLike) -> pd.DataFrame:
    """The rows of the sweep in `out_dir` (its ``sweep.csv``), typed from its grid."""
    params = read_run(out_dir)["spec"]["params"]
    return sweep_table(params).read(Path(out_dir) / "sweep.csv")


def score_cell(
    cfg: ModelConfig, seed: int, n_sequences: int, seq_len: int, *, device: str = "cpu"
) -> list[dict]:
    """Adjacency (`adjpos.adjacency_score`'s, with its defaults) and variance slope at every
    layer of one random-init model (one cell x seed). The variance slope is the least-squares
    slope of the mean variance at position k against k, over its mean: the relative change per
    position, negative when variance shrinks with position.
    """
    import torch

    from adjpos.capture import iter_residuals
    from adjpos.metrics import position_variance
    from adjpos.scoring import sequence_scores
    from adjpos.seeds import derived_generator

    start = time.perf_counter()
    model = build_model(dataclasses.replace(cfg, seed=seed), device=device)
    gen = derived_generator(seed, "sweep tokens")  # not the stream of the model's weights
    tokens = torch.randint(0, cfg.d_vocab, (n_sequences, seq_len), generator=gen)
    k = torch.arange(seq_len, dtype=torch.float64)
    lengths = torch.full((n_sequences,), seq_len)
    rows = []
    for layer, acts in iter_residuals(model, tokens, progress=False):
        adjacency = float(sequence_scores(acts, lengths).mean())
        variance = position_variance(acts).double().mean(0).cpu()
        slope = float(
            ((k - k.mean()) * (variance - variance.mean())).sum()
            / ((k - k.mean()) ** 2).sum()
            / variance.mean().clamp_min(1e-30)
        )
        rows.append({"layer": layer, "adjacency": adjacency, "variance_slope": slope})
    seconds = time.perf_counter() - start
    return [{**row, "seconds": seconds} for row in rows]


def rows_of_subgrid(
    table: pd.DataFrame, subgrid: Mapping[str, Sequence[Any]], base: ModelConfig
) -> pd.DataFrame:
    """The rows of one sub-grid of a union grid: its own parameters at its values, every other
    at its base value (a rotary model at init 0.1 is not a point of the init x width heatmap).
    """
    keep = pd.Series(True, index=table.index)
    for name in table.columns:
        if name in MEASURED.columns:
            continue
        allowed = list(subgrid[name]) if name in subgrid else [getattr(base, name)]
        column = table[name].astype(object).where(table[name].notna(), None)
        keep &= column.isin(allowed) | (column.isna() & any(v is None for v in allowed))
    return table[keep].reset_index(drop=True)


def last_layer_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Each model's (cell x seed) row at its own deepest layer, so grids that vary depth
    compare like with like."""
    models = [c for c in table.columns if c not in MEASURED.columns or c == "seed"]
    deepest = table.groupby(models, dropna=False)["layer"].transform("max")
    return table[table["layer"] == deepest].reset_index(drop=True)


def _rows(cell, seed, n_sequences, seq_len, device):
    rows = score_cell(cell["config"], seed, n_sequences, seq_len, device=device)
    return [{**cell["params"], "seed": seed, **row} for row in rows]


def _check_grid(grid: Grid) -> tuple[list[dict[str, list[Any]]], list[str]]:
    subgrids = [grid] if isinstance(grid, Mapping) else list(grid)
    fields = [f.name for f in dataclasses.fields(ModelConfig) if f.name != "seed"]
    if not subgrids or any(not isinstance(g, Mapping) or not g for g in subgrids):
        raise UsageError(
            f"the grid is empty; give {{parameter: [values]}} with parameters from {fields}"
        )
    params: list[str] = []
    for sub in subgrids:
        for name, values in sub.items():
            if name not in fields:
                raise UsageError(
                    f"grid parameter {name!r} is not a ModelConfig field; allowed: "
                    f"{fields} (seeds are given separately)"
                )
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise UsageError(
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
                raise UsageError(f"grid cell {changes} is not a valid model: {err}") from None
            values = {name: getattr(cfg, name) for name in params}
            key = json.dumps(values, sort_keys=True)
            if key not in seen:
                seen.add(key)
                cells.append({"params": values, "config": cfg, "key": key})
    return cells


def _unit(cell: dict, seed: int) -> str:
    digest = hashlib.sha256(f"{cell['key']}|{seed}".encode()).hexdigest()[:16]
    return f"cell-{digest}"
