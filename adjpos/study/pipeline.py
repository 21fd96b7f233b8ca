"""`reproduce`: the whole study in one call, resumable claim by claim (each claim a unit of
an `adjpos.runs.RunFolder`, and most of them units within; a re-run skips finished ones). The
figures, ``results/claims.csv`` and the report are drawn from the result files at the end of
every run, never from memory (figures already drawn from the same files are kept).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adjpos.engines import check_engine, start_early
from adjpos.runs import RunFolder, files_digest, write_json
from adjpos.study.claim import CRITERIA, Context
from adjpos.study.claims import NAMES, claim, claims
from adjpos.study.sizes import SIZES, StudySizes
from adjpos.validation import DEVICES, check_choice, help_field, resolve_device


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
        "worker processes, or a local Ray's CPUs, for the stages' units (default: the CPU cores; "
        "0 runs in-process)",
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
    png: bool = help_field(
        "also write each figure as PNG when static export works (kaleido and a Chrome); "
        "False writes HTML only, which is faster and changes no number",
        True,
    )

    def __post_init__(self) -> None:
        check_choice("size", self.size, SIZES)
        check_choice("device", self.device, DEVICES)
        resolve_device(self.device)  # an unavailable device fails here, before any work
        check_engine(self.engine, self.workers, self.address)

    @property
    def sizes(self) -> StudySizes:
        """Every size of the run: sequences, seeds, folds, the sweep grid, init scales."""
        return SIZES[self.size]

    def to_dict(self) -> dict[str, Any]:
        """What decides the results (not the workers, the engine or the PNGs, which only
        change where and how fast the units run and which files show the figures)."""
        return {"size": self.size, "device": self.device, "train": self.train}


@dataclass(frozen=True)
class ReproduceResult:
    """What a `reproduce` run did and wrote."""

    out_dir: Path = help_field("the run's folder")
    report: Path = help_field("``report.md`` (``report.html`` beside it)")
    ran: tuple[str, ...] = help_field("stages measured by this call")
    skipped: tuple[str, ...] = help_field("stages finished by an earlier call, not measured again")
    figures: tuple[Path, ...] = help_field("figure files written")
    png_skipped: str | None = help_field("why there are no PNGs, how to enable them (or None)")
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
    from adjpos.study.models import Models

    start, device = time.perf_counter(), str(resolve_device(cfg.device))
    spec = {"settings": cfg.to_dict(), "sizes": cfg.sizes.to_dict(), "criteria": CRITERIA.to_dict()}
    folder = RunFolder.open(out_dir, kind="reproduce", spec=spec, device=device)
    train_dir = folder.path / "models" if cfg.train else None
    models = Models(device=device, train_dir=train_dir, train_steps=cfg.sizes.train_steps)
    context = Context(folder, models, cfg.sizes, CRITERIA, cfg.engine, cfg.workers, cfg.address)
    start_early(cfg.engine, cfg.workers)  # the workers' imports overlap the first stages
    ran, skipped = [], []
    for index, name in enumerate(NAMES):
        done = folder.is_done(name)
        if on_stage is not None:
            on_stage(name, index, len(NAMES), done)
        if done:
            skipped.append(name)
            continue
        began = time.perf_counter()
        numbers = claim(name).measure(context)
        path = folder.path / "results" / "numbers" / f"{name}.json"
        write_json(path, json.loads(json.dumps(numbers)))
        folder.mark_done(name, {"seconds": round(time.perf_counter() - began, 1)})
        ran.append(name)
    out, (figures, png_skipped) = folder.path, write_outputs(folder.path, png=cfg.png)
    done = (tuple(ran), tuple(skipped), figures, png_skipped, time.perf_counter() - start)
    return ReproduceResult(out, out / "report.md", *done)


def write_outputs(out: str | Path, *, png: bool = True) -> tuple[tuple[Path, ...], str | None]:
    """Draw every figure of the run in `out` from its result files (HTML, and PNG with `png`
    when static export works), then write ``results/claims.csv`` and the report: the figure
    files written and, when PNGs were not written, why (once). Figures drawn before from the
    same result files, `png` and adjpos code (``figures/drawn.json``) are kept as they are."""
    from adjpos.figures.save import frame_size, save_figures
    from adjpos.study.report import write_report

    out = Path(out)
    results = (p for p in (out / "results").rglob("*") if p.name != "claims.csv")
    sources = sorted(p for p in results if p.is_file())
    code = sorted(Path(__file__).parents[1].rglob("*.py"))
    spec = json.loads((out / "run.json").read_text())["spec"]
    source = files_digest([*sources, *code], png, spec, [p.relative_to(out) for p in sources])
    record_path = out / "figures" / "drawn.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    if record.get("source") != source or not all((out / p).is_file() for p in record["written"]):
        drawn = run_figures(out)
        saved = save_figures({s: fig for s, (fig, _) in drawn.items()}, out / "figures", png=png)
        files = [str(p.relative_to(out)) for p in saved.written]
        record = {"source": source, "written": files, "png_skipped": saved.png_skipped}
        record["captions"] = [(stem, caption) for stem, (_, caption) in drawn.items()]  # in order
        record["frames"] = {stem: frame_size(fig) for stem, (fig, _) in drawn.items()}
        write_json(record_path, record)
    written = tuple(out / p for p in record["written"])
    pngs = {p.stem for p in written if p.suffix == ".png"}
    frames = {stem: tuple(frame) for stem, frame in record["frames"].items()}
    write_report(out, dict(record["captions"]), pngs, frames)
    return written, record["png_skipped"]


def run_figures(out: str | Path) -> dict[str, tuple[Any, str]]:
    """Every figure of the run in `out`, with its caption, drawn by each claim from its
    result files: {stem: (go.Figure, caption)}."""
    sizes = json.loads((Path(out) / "run.json").read_text())["spec"]["sizes"]
    drawn = (each.figures(Path(out) / "results", sizes) for each in claims())
    return {stem: figure for figures in drawn for stem, figure in figures.items()}
