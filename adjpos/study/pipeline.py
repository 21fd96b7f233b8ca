"""`reproduce`: the whole study in one call, resumable stage by stage.

Stages run in order; each writes its numbers under ``DIR/results/`` and then a marker
``DIR/results/<stage>.done.json``, so a re-run skips finished stages (the sweep and training
also resume inside a stage). The figures and ``report.md``/``report.html`` are drawn afresh
from the result files at the end of every run, never from memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adjpos.runs import write_json

STAGES = ("models", "cosine", "adjacency", "variance", "probing", "sweep", "theory")
DEVICES = ("auto", "cpu", "cuda")
SIZES = ("tiny", "quick", "full")
QUICK_GRID = [
    {"init_range": [0.02, 0.1, 0.5], "d_model": [32, 64]},
    {"positional": ["none", "learned", "rotary", "alibi"]},
]
_CARRIERS = ["variance", "norm", "cosine_profile", "cosine_first", "cosine_previous", "resid"]
_CONTROLS = ["shuffled:cosine_profile", "shuffled:resid"]

_FULL: dict[str, Any] = {
    "n_eval": 2000,
    "n_sequences": 256,
    "control_seeds": [0, 1, 2],
    "n_probe_sequences": 64,
    "features": _CARRIERS + _CONTROLS,
    # The logistic probe costs most of the run (one multinomial fit per fold, seed, layer and
    # set): it reads the three main carriers once.
    "logistic_features": ["variance", "cosine_profile", "resid"],
    "logistic_repeats": 1,
    "cv": 5,
    "repeats": 3,
    "sweep_seeds": [0, 1, 2],
    "sweep_sequences": 32,
    "sweep_len": 32,
    "sweep_layers": 4,
    "theory_scales": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0],
    "theory_seeds": [0, 1, 2],
    "theory_sequences": 256,
    "theory_samples": 512,
    "theory_heatmap_scale": 0.1,
    "train_steps": None,  # the shipped recipe
}
_QUICK: dict[str, Any] = {
    "n_eval": 200,
    "n_sequences": 64,
    "control_seeds": [0],
    "n_probe_sequences": 32,
    "features": ["variance", "cosine_profile", "resid", "shuffled:cosine_profile"],
    "logistic_features": [],
    "cv": 4,
    "repeats": 1,
    "grid": QUICK_GRID,
    "sweep_seeds": [0],
    "sweep_sequences": 8,
    "sweep_len": 16,
    "sweep_layers": 2,
    "theory_scales": [0.02, 0.1, 0.5],
    "theory_seeds": [0],
    "theory_sequences": 64,
    "theory_samples": 128,
    "train_steps": 40,
}
_TINY: dict[str, Any] = {
    **_QUICK,
    "n_eval": 8,
    "n_sequences": 8,
    "n_probe_sequences": 8,
    "features": ["variance", "cosine_profile", "shuffled:cosine_profile"],
    "cv": 2,
    "grid": [{"init_range": [0.1], "d_model": [16]}, {"positional": ["none", "learned"]}],
    "sweep_sequences": 2,
    "sweep_len": 6,
    "sweep_layers": 1,
    "theory_scales": [0.1],
    "theory_sequences": 8,
    "theory_samples": 8,
    "train_steps": 2,
}
_SMALLER = {"quick": _QUICK, "tiny": _TINY}


@dataclass(frozen=True)
class ReproduceConfig:
    """How `reproduce` runs. Sizes follow from `size` (see `sizes`)."""

    size: str = dataclasses.field(
        default="full",
        metadata={
            "help": "'full' (the study's sizes), 'quick' (minutes on a 2-core CPU) or 'tiny' "
            "(seconds; only checks that the pipeline runs, the numbers mean little)"
        },
    )
    device: str = dataclasses.field(
        default="auto", metadata={"help": f"one of {DEVICES}; auto = cuda when available"}
    )
    workers: int | None = dataclasses.field(
        default=None, metadata={"help": "sweep worker processes (default: the CPU cores)"}
    )
    train: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "train the four task models with the shipped recipes instead of "
            "loading the shipped ones (hours on a CPU; a few steps with quick)"
        },
    )

    def __post_init__(self) -> None:
        import torch

        if self.size not in SIZES:
            raise ValueError(f"size={self.size!r} is not allowed; choose one of {SIZES}")
        if self.device not in DEVICES:
            raise ValueError(f"device={self.device!r} is not allowed; choose one of {DEVICES}")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device='cuda' was asked for but CUDA is not available; use 'cpu'")
        if self.workers is not None and (
            not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 0
        ):
            raise ValueError(
                f"workers must be an int >= 0 (0 runs in-process), got {self.workers!r}"
            )

    @property
    def resolved_device(self) -> str:
        import torch

        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    @property
    def sizes(self) -> dict[str, Any]:
        """Every size of the run: sequences, seeds, folds, the sweep grid, init scales."""
        from adjpos.study.sweep import DEFAULT_GRID

        return {**_FULL, "grid": DEFAULT_GRID, **_SMALLER.get(self.size, {})}

    def to_dict(self) -> dict[str, Any]:
        """What decides the results (not `workers`, which only changes the speed)."""
        return {"size": self.size, "device": self.device, "train": self.train}


@dataclass(frozen=True)
class ReproduceResult:
    """What a `reproduce` run did and wrote."""

    out_dir: Path = dataclasses.field(metadata={"help": "the run's folder"})
    report: Path = dataclasses.field(metadata={"help": "``report.md`` (``report.html`` beside it)"})
    ran: tuple[str, ...] = dataclasses.field(metadata={"help": "stages measured by this call"})
    skipped: tuple[str, ...] = dataclasses.field(
        metadata={"help": "stages finished by an earlier call, not measured again"}
    )
    figures: tuple[Path, ...] = dataclasses.field(metadata={"help": "figure files written"})
    png_skipped: str | None = dataclasses.field(
        metadata={"help": "why there are no PNGs and how to enable them (None when written)"}
    )
    seconds: float = dataclasses.field(metadata={"help": "wall time of this call"})


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
        ValueError: `out_dir` holds a run with other settings (it is never mixed).
        OSError: `out_dir` cannot be written (before anything runs).
    """
    from adjpos.study import stages
    from adjpos.study.report import write_report

    start = time.perf_counter()
    out = Path(out_dir)
    results = out / "results"
    _claim_folder(out, cfg)
    sizes = cfg.sizes
    models = stages.Models(out, cfg.resolved_device, cfg.train, sizes["train_steps"])
    work: dict[str, Callable[[], None]] = {
        "models": lambda: stages.run_models(models, results, sizes),
        "cosine": lambda: stages.run_cosine(models, results),
        "adjacency": lambda: stages.run_adjacency(models, results, sizes),
        "variance": lambda: stages.run_variance(models, results, sizes),
        "probing": lambda: stages.run_probing(models, results, sizes),
        "sweep": lambda: stages.run_sweep(results, sizes, cfg.workers),
        "theory": lambda: stages.run_theory(results, sizes, cfg.resolved_device),
    }
    ran, skipped = [], []
    for index, name in enumerate(STAGES):
        marker = results / f"{name}.done.json"
        if on_stage is not None:
            on_stage(name, index, len(STAGES), marker.is_file())
        if marker.is_file():
            skipped.append(name)
            continue
        began = time.perf_counter()
        work[name]()
        write_json(marker, {"stage": name, "seconds": round(time.perf_counter() - began, 1)})
        ran.append(name)
    figures, png_skipped = write_report(out)
    return ReproduceResult(
        out,
        out / "report.md",
        tuple(ran),
        tuple(skipped),
        figures,
        png_skipped,
        time.perf_counter() - start,
    )


def _claim_folder(out: Path, cfg: ReproduceConfig) -> None:
    """Create `out` and record the settings, or refuse a folder made with other settings."""
    results = out / "results"
    try:
        results.mkdir(parents=True, exist_ok=True)
        probe = results / ".writable"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OSError(f"cannot write to the output folder {str(out)!r}: {err.strerror}") from None
    path = results / "run.json"
    if path.is_file():
        earlier = json.loads(path.read_text())
        if earlier["settings"] != cfg.to_dict():
            raise ValueError(
                f"{str(out)!r} holds a reproduce run with other settings "
                f"({earlier['settings']}); these are {cfg.to_dict()}: use another --out, or "
                "delete the folder to start over"
            )
        if earlier["sizes"] != json.loads(json.dumps(cfg.sizes)):
            raise ValueError(
                f"{str(out)!r} holds a reproduce run made with other sizes (another version of "
                "adjpos): use another --out, or delete the folder to start over"
            )
        return
    write_json(path, {"settings": cfg.to_dict(), "sizes": cfg.sizes, "versions": versions()})


def versions() -> dict[str, str]:
    """Versions of Python, adjpos and the libraries that produced the numbers."""
    from importlib.metadata import version

    names = ("adjpos", "torch", "transformer-lens", "scikit-learn", "numpy", "plotly")
    return {"python": platform.python_version(), **{n: version(n) for n in names}}
