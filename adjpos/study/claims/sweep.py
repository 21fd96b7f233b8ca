"""Claim 3: random-init NoPE models show the pattern too, over which hyperparameters: the
random-init sweep (`adjpos.sweep`) over the study's grid, each cell x seed one model scored on
random tokens. The sweep keeps one score per model with no interval, so the verdict counts
point estimates (deepest layer above chance) and says so.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from adjpos.models import ModelConfig
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, judge, seeds_text
from adjpos.sweep import last_layer_rows, read_sweep, rows_of_subgrid, sweep
from adjpos.tables import plain_records as records

TITLE = "Claim 3: the pattern in random-init models, over which hyperparameters"


def measure(context: Context) -> dict[str, Any]:
    sizes, where = context.sizes, {"engine": context.engine, "address": context.address}
    where |= {"workers": context.workers, "device": context.models.device}
    result = measure_sweep(context.results / "sweep", sizes, **where)
    first = rows_of_subgrid(result.table, sizes.grid[0], sweep_base(sizes))
    return sweep_numbers(result.table, first)


def measure_sweep(out_dir: Any, sizes: Any, *, workers: int | None, **where: Any):
    """The random-init sweep (its own run folder, resumable cell by cell); `where` is the
    device, engine and address."""
    options = {"n_sequences": sizes.sweep_sequences, "seq_len": sizes.sweep_len}
    options |= {"seeds": list(sizes.sweep_seeds), "base": sweep_base(sizes), "workers": workers}
    return sweep(list(sizes.grid), out_dir=out_dir, **options, **where)


def sweep_base(sizes: Any) -> ModelConfig:
    """The config every cell of the study's sweep starts from."""
    return ModelConfig(n_layers=sizes.sweep_layers)


def sweep_numbers(table: pd.DataFrame, first_subgrid: pd.DataFrame) -> dict[str, Any]:
    """Every random-init model's score at its deepest layer (NoPE and all), and the mean
    score by init scale in the first sub-grid, with its std over cells x seeds."""
    deepest = last_layer_rows(table)
    nope = deepest[deepest["positional"] == "none"] if "positional" in deepest else deepest
    last = first_subgrid[first_subgrid["layer"] == first_subgrid["layer"].max()]
    by_init = last.groupby("init_range")["adjacency"].agg(["mean", "std", "size"]).reset_index()
    return {
        "deepest": [float(a) for a in deepest["adjacency"]],
        "nope_deepest": [float(a) for a in nope["adjacency"]],
        "seeds": sorted(int(s) for s in table["seed"].unique()),
        "deepest_layer": int(last["layer"].max()),
        "by_init": records(by_init.rename(columns={"size": "n"})),
    }


def above_chance(score: float, criteria: Criteria) -> Outcome:
    """A model's deepest score (a point: the sweep keeps no interval) against chance."""
    return judge(score, score, criteria.chance, criteria.chance)


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    claim = "Random-init NoPE models over a hyperparameter grid show the pattern"
    evidence = f"deepest layer above chance ({fmt.n(criteria.chance)}), point estimates over "
    evidence += "random sequences (the sweep keeps no interval)"
    words = {"seeds": seeds_text(numbers["seeds"]), "unit": "NoPE sweep model"}
    outcomes = [above_chance(a, criteria) for a in numbers["nope_deepest"]]
    return [Verdict.tally(claim, outcomes, **words, evidence=evidence)]


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    band = [r["init_range"] for r in numbers["by_init"] if r["mean"] >= criteria.band]
    header = ["initial weight scale (std)", f"mean adjacency at layer {numbers['deepest_layer']}"]
    rows = [[r["init_range"], r["mean"], r["std"], r["n"]] for r in numbers["by_init"]]
    table = fmt.table([*header, "std", "models"], rows)
    every, nope = (
        sum(above_chance(a, criteria) == Outcome.FOR for a in numbers[key])
        for key in ("deepest", "nope_deepest")
    )
    models = {"n": len(numbers["deepest"]), "n_nope": len(numbers["nope_deepest"])}
    scales = {"band": fmt.n(criteria.band), "scales": fmt.join(band) if band else "none"}
    text = fmt.text("sweep.section", every=every, nope=nope, **models, **scales)
    return fmt.section(figures("sweep"), table, text)


def sweep_figures(table: pd.DataFrame, grid: Any, base: ModelConfig) -> dict[str, Any]:
    """The sweep's heatmap (init x width), histogram, and the positional and depth figures
    when the grid has those sub-grids."""
    from adjpos.figures import sweep_heatmap, sweep_histogram, sweep_layer_lines

    grid = list(grid)
    first = rows_of_subgrid(table, grid[0], base)
    out = {"sweep_init_by_width": sweep_heatmap(first, "init_range", "d_model")}
    out["sweep_histogram"] = sweep_histogram(table)
    for sub in (rows_of_subgrid(table, g, base) for g in grid if "positional" in g):
        out["sweep_by_positional"] = sweep_layer_lines(sub, "positional")
    for sub in (rows_of_subgrid(table, g, base) for g in grid if "normalization_type" in g):
        out["sweep_depth_by_norm"] = sweep_heatmap(sub, "n_layers", "normalization_type")
    return out


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    base = ModelConfig(n_layers=sizes["sweep_layers"])
    drawn = sweep_figures(read_sweep(results / "sweep"), sizes["grid"], base)
    return {stem: (fig, fmt.texts("sweep.captions")[stem]) for stem, fig in drawn.items()}
