"""`reproduce`: the whole study in one call, resumable stage by stage.

The run's folder is an `adjpos.runs.RunFolder`: its spec is the settings and every size, each
stage is a unit (probing also one unit per probed model, the sweep one per cell), and a re-run
skips finished units. A stage writes its tidy tables under ``results/`` and the numbers its
claim needs under ``results/numbers/``; the figures and ``report.md``/``report.html`` are drawn
afresh from those files at the end of every run, never from memory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adjpos.engines import Resources, check_engine, run_units
from adjpos.runs import RunFolder, write_json
from adjpos.study.sizes import SIZES, StudySizes
from adjpos.validation import DEVICES, check_choice, help_field, resolve_device

STAGES = (
    "models",
    "cosine",
    "adjacency",
    "variance",
    "dynamics",
    "probing",
    "causal",
    "sweep",
    "theory",
)


@dataclass(frozen=True)
class ReproduceConfig:
    """How `reproduce` runs. Sizes follow from `size` (see `sizes`)."""

    size: str = help_field(
        "'full' (the study's sizes), 'quick' (minutes on a 2-core CPU) or 'tiny' (seconds; only "
        "checks that the pipeline runs, the numbers mean little)",
        "full",
    )
    device: str = help_field(f"one of {DEVICES}; auto = cuda when available", "auto")
    workers: int | None = help_field(
        "worker processes, or CPUs of a local Ray, for the probing, causal and sweep stages "
        "(default: the CPU cores; 0 runs in-process)",
        None,
    )
    engine: str = help_field(
        "'process' (a local process pool) or 'ray' (Ray tasks; see adjpos.engines)", "process"
    )
    address: str | None = help_field("an existing Ray cluster (engine 'ray')", None)
    train: bool = help_field(
        "train the four task models with the shipped recipes instead of loading the shipped "
        "ones (hours on a CPU; a few steps with quick)",
        False,
    )

    def __post_init__(self) -> None:
        check_choice("size", self.size, SIZES)
        check_choice("device", self.device, DEVICES)
        resolve_device(self.device)  # an unavailable device fails here, before any work
        check_engine(self.engine, self.workers, self.address)

    @property
    def resolved_device(self) -> str:
        """The device the run uses: `device`, with auto resolved."""
        return str(resolve_device(self.device))

    @property
    def sizes(self) -> StudySizes:
        """Every size of the run: sequences, seeds, folds, the sweep grid, init scales."""
        return SIZES[self.size]

    def to_dict(self) -> dict[str, Any]:
        """What decides the results (not the workers or the engine, which only change where
        and how fast the units run)."""
        return {"size": self.size, "device": self.device, "train": self.train}


@dataclass(frozen=True)
class ReproduceResult:
    """What a `reproduce` run did and wrote."""

    out_dir: Path = help_field("the run's folder")
    report: Path = help_field("``report.md`` (``report.html`` beside it)")
    ran: tuple[str, ...] = help_field("stages measured by this call")
    skipped: tuple[str, ...] = help_field("stages finished by an earlier call, not measured again")
    figures: tuple[Path, ...] = help_field("figure files written")
    png_skipped: str | None = help_field(
        "why there are no PNGs and how to enable them (None when written)"
    )
    seconds: float = help_field("wall time of this call")


def reproduce(
    out_dir: str | os.PathLike,
    cfg: ReproduceConfig = ReproduceConfig(),
    *,
    on_stage: Callable[[str, int, int, bool], None] | None = None,
) -> ReproduceResult:
    """Run every measurement of the study and write results, figures and a report.

    Args:
        out_dir: the run's folder: ``results/`` (CSV/JSON), ``figures/`` (HTML, PNG when static
            export works), ``report.md``, ``report.html``, and ``models/`` with `cfg.train`.
        cfg: sizes, device and whether to train the task models.
        on_stage: called as ``on_stage(name, index, total, skipped)`` before each stage.

    Raises:
        ValueError: `out_dir` holds a run with other settings or sizes (it is never mixed).
        OSError: `out_dir` cannot be written (before anything runs).
    """
    from adjpos.study import stages

    start = time.perf_counter()
    device = cfg.resolved_device
    spec = {"settings": cfg.to_dict(), "sizes": cfg.sizes.to_dict()}
    folder = RunFolder.open(out_dir, kind="reproduce", spec=spec, device=device)
    out = folder.path
    models = stages.Models(
        device=device,
        train_dir=out / "models" if cfg.train else None,
        train_steps=cfg.sizes.train_steps,
    )
    ran, skipped = [], []
    for index, name in enumerate(STAGES):
        done = folder.is_done(name)
        if on_stage is not None:
            on_stage(name, index, len(STAGES), done)
        if done:
            skipped.append(name)
            continue
        began = time.perf_counter()
        STAGE_RUNNERS[name](folder, models, cfg)
        folder.mark_done(name, {"seconds": round(time.perf_counter() - began, 1)})
        ran.append(name)
    figures, png_skipped = write_outputs(out)
    return ReproduceResult(
        out,
        out / "report.md",
        tuple(ran),
        tuple(skipped),
        figures,
        png_skipped,
        time.perf_counter() - start,
    )


def write_outputs(out: str | Path) -> tuple[tuple[Path, ...], str | None]:
    """Draw every figure of the run in `out` from its result files, then write the report.

    Returns the figure files written and, when PNG export does not work, why (once).
    """
    from adjpos.figures import save_figures
    from adjpos.study.figures import run_figures
    from adjpos.study.report import write_report

    drawn = run_figures(out)
    saved = save_figures({stem: fig for stem, (fig, _) in drawn.items()}, Path(out) / "figures")
    pngs = {p.stem for p in saved.written if p.suffix == ".png"}
    write_report(out, {stem: caption for stem, (_, caption) in drawn.items()}, pngs)
    return saved.written, saved.png_skipped


def _models(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    from adjpos.study import numbers, stages

    table = stages.MODELS.write(
        _results(folder) / "models.csv", stages.measure_models(models, cfg.sizes)
    )
    _numbers(folder, "models", {"models": numbers.records(table)})


def _cosine(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    from adjpos.study import numbers, stages

    scores, panels = stages.measure_cosine(models)
    stages.COSINE_SCORES.write(_results(folder) / "cosine_scores.csv", scores)
    write_json(_results(folder) / "cosine_heatmaps.json", panels)
    _numbers(folder, "cosine", numbers.cosine_numbers(scores))


def _adjacency(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    from adjpos.study import numbers, trained

    table = trained.measure_adjacency(models, cfg.sizes)
    trained.ADJACENCY.write(_results(folder) / "adjacency_by_layer.csv", table)
    _numbers(folder, "adjacency", numbers.adjacency_numbers(table))


def _variance(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    from adjpos.study import numbers, trained

    profiles, layers = trained.measure_variance(models, cfg.sizes)
    trained.VARIANCE.write(_results(folder) / "variance_by_position.csv", profiles)
    trained.VARIANCE_LAYERS.write(_results(folder) / "variance_by_layer.csv", layers)
    _numbers(folder, "variance", numbers.variance_numbers(layers))


def _probing(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    """One unit per probed model (the longest stage), run by the engine, then the combined
    table."""
    from adjpos.probes import PROBE_TABLE, ProbeResult
    from adjpos.study import numbers, stages

    labels = stages.probe_labels(cfg.sizes)
    paths = {label: _results(folder) / f"probes_{slug(label)}.json" for label, _, _ in labels}
    todo = [(task, seed) for label, task, seed in labels if not folder.is_done(f"probing {label}")]
    jobs = [(models.fresh(), cfg.sizes, task, seed) for task, seed in todo]
    for _, text in _run(stages.probe_unit, jobs, cfg, models.device):
        result = ProbeResult.from_json(text)
        result.to_json(paths[result.model])
        folder.mark_done(f"probing {result.model}")
    results = [ProbeResult.from_json(paths[label]) for label, _, _ in labels]
    subjects = [
        {"task": task, "kind": stages.TRAINED if seed is None else stages.RANDOM, "seed": seed}
        for _, task, seed in labels
    ]
    records = [record for result in results for record in result.records()]
    PROBE_TABLE.write(_results(folder) / "probes.csv", records)
    _numbers(folder, "probing", numbers.probe_numbers(results, subjects))


def _causal(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    """One unit per task model, run by the engine, then the combined table."""
    import pandas as pd

    from adjpos.interventions import INTERVENTION_TABLE
    from adjpos.study import numbers, stages
    from adjpos.tasks import TASKS

    path = {task: _results(folder) / f"interventions_{task}.csv" for task in TASKS}
    jobs = [(models.fresh(), cfg.sizes, t) for t in TASKS if not folder.is_done(f"causal {t}")]
    for (_, _, task), records in _run(stages.causal_unit, jobs, cfg, models.device):
        INTERVENTION_TABLE.write(path[task], records)
        folder.mark_done(f"causal {task}")
    tables = [INTERVENTION_TABLE.read(path[task]) for task in TASKS]
    table = INTERVENTION_TABLE.write(
        _results(folder) / "interventions.csv", pd.concat(tables, ignore_index=True)
    )
    _numbers(folder, "causal", numbers.causal_numbers(table))


def _dynamics(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    """One unit per task: its seeds' snapshots, run by the engine, then the combined table."""
    import pandas as pd

    from adjpos.study.dynamics import DYNAMICS, dynamics_numbers, dynamics_unit
    from adjpos.tasks import TASKS

    path = {task: _results(folder) / f"dynamics_{task}.csv" for task in TASKS}
    jobs = [(models.fresh(), cfg.sizes, t) for t in TASKS if not folder.is_done(f"dynamics {t}")]
    for (_, _, task), records in _run(dynamics_unit, jobs, cfg, models.device):
        DYNAMICS.write(path[task], records)
        folder.mark_done(f"dynamics {task}")
    table = pd.concat([DYNAMICS.read(path[task]) for task in TASKS], ignore_index=True)
    table = DYNAMICS.write(_results(folder) / "dynamics.csv", table)
    _numbers(folder, "dynamics", dynamics_numbers(table))


def _run(fn: Callable[..., Any], jobs: list[tuple], cfg: ReproduceConfig, device: str):
    """The stage's units on the run's engine (see `adjpos.engines`)."""
    return run_units(
        fn,
        jobs,
        engine=cfg.engine,
        workers=cfg.workers,
        address=cfg.address,
        resources=Resources.for_device(device),
    )


def _sweep(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    from adjpos.study import numbers, stages
    from adjpos.study.sweep import rows_of_subgrid

    sizes = cfg.sizes
    result = stages.measure_sweep(
        _results(folder) / "sweep",
        sizes,
        workers=cfg.workers,
        device=models.device,
        engine=cfg.engine,
        address=cfg.address,
    )
    first = rows_of_subgrid(result.table, sizes.grid[0], stages.sweep_base(sizes))
    _numbers(folder, "sweep", numbers.sweep_numbers(result.table, first))


def _theory(folder: RunFolder, models: Any, cfg: ReproduceConfig) -> None:
    from adjpos.study import numbers, stages

    table, matrices = stages.measure_theory(cfg.sizes, models.device)
    stages.THEORY.write(_results(folder) / "theory.csv", table)
    write_json(_results(folder) / "theory_matrices.json", matrices)
    _numbers(folder, "theory", numbers.theory_numbers(table))


STAGE_RUNNERS: dict[str, Callable[[RunFolder, Any, ReproduceConfig], None]] = {
    "models": _models,
    "cosine": _cosine,
    "adjacency": _adjacency,
    "variance": _variance,
    "dynamics": _dynamics,
    "probing": _probing,
    "causal": _causal,
    "sweep": _sweep,
    "theory": _theory,
}


def slug(label: str) -> str:
    """A file-name-safe form of a model label."""
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").replace("__", "_")


def _results(folder: RunFolder) -> Path:
    return folder.path / "results"


def _numbers(folder: RunFolder, stage: str, data: dict[str, Any]) -> None:
    write_json(_results(folder) / "numbers" / f"{stage}.json", json.loads(json.dumps(data)))
