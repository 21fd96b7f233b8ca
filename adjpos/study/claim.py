"""What every claim of the study is: one module that measures, counts and says.

A claim module (``adjpos/study/claims/NAME.py``) reads top to bottom: measure -> tables ->
numbers -> verdicts -> sentences -> figures; `adjpos.study.claims.claim` makes its `Claim` from
its ``TITLE`` and those functions. The pipeline
calls `Claim.measure` once per run (the module writes its tables under ``results/`` and returns
its numbers, which the pipeline writes to ``results/numbers/NAME.json``); the report calls
`Claim.verdicts` and `Claim.section` on those numbers alone, and `Claim.figures` on the tables.

Every verdict is a `Verdict`: a status from `STATUSES` with its counts, computed by
`Verdict.tally` from cell outcomes, each of them decided by `adjpos.stats.compare_intervals`
under one `Criteria`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adjpos.validation import help_field

STATUSES = ("supported", "mixed", "not supported", "not shown")
# A cell's outcome for a claim (see `toward`).
FOR, AGAINST, WITHIN = "for", "against", "within"


@dataclass(frozen=True)
class Criteria:
    """Every threshold a verdict of the study uses, in one place (recorded in ``run.json``)."""

    z: float = help_field(
        "standard errors a difference must exceed to count (probes: over folds or sequences)",
        2.0,
    )
    level: float = help_field("confidence level of every bootstrap interval", 0.95)
    n_boot: int = help_field("bootstrap draws of an interval over sequences", 1000)
    n_boot_prompts: int = help_field("bootstrap draws of an interval over prompts", 2000)
    min_gap: float = help_field(
        "causal tests: exact match must fall at least this far below the control's", 0.1
    )
    size_slack: float = help_field(
        "causal tests: a change at most this many times its control's is matched in size", 1.25
    )
    solved: float = help_field("exact match at which a task counts as solved", 0.99)
    chance: float = help_field("the adjacency score of states that carry no order", 0.5)
    band: float = help_field("sweep: the mean score that marks the band of init scales", 0.6)
    theory_tolerance: float = help_field(
        "first-layer theory: the largest gap between measured and predicted that agrees", 0.05
    )

    def to_dict(self) -> dict[str, Any]:
        """Every criterion as plain JSON-able values."""
        return dataclasses.asdict(self)


CRITERIA = Criteria()


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict, as data: its status and the counts it rests on.

    `status` is "supported" (every cell for), "mixed" (some for, some against or within),
    "not supported" (none for, some against) or "not shown" (none for, none against)."""

    claim: str
    status: str
    n_for: int
    n_against: int
    n_within: int
    n_cells: int
    seeds: str
    unit: str
    evidence: str

    @classmethod
    def tally(
        cls, claim: str, outcomes: Iterable[str], *, seeds: str, unit: str, evidence: str
    ) -> Verdict:
        """The verdict of `claim` from its cells' outcomes (each `FOR`, `AGAINST` or
        `WITHIN`)."""
        outcomes = list(outcomes)
        unknown = sorted(set(outcomes) - {FOR, AGAINST, WITHIN})
        if unknown:
            raise ValueError(f"outcomes must be {FOR!r}, {AGAINST!r} or {WITHIN!r}, got {unknown}")
        n_for, n_against = outcomes.count(FOR), outcomes.count(AGAINST)
        n_within = outcomes.count(WITHIN)
        if n_for and n_for == len(outcomes):
            status = "supported"
        elif n_for:
            status = "mixed"
        else:
            status = "not supported" if n_against else "not shown"
        return cls(claim, status, n_for, n_against, n_within, len(outcomes), seeds, unit, evidence)

    @property
    def counts(self) -> str:
        """'2 of 4 for, 1 against, 1 within' (the parts that are not zero after the first)."""
        units = self.unit[:-1] + "ies" if self.unit.endswith("y") else self.unit + "s"
        parts = [f"{self.n_for} of {self.n_cells} {units} for"]
        parts += [f"{n} {w}" for n, w in ((self.n_against, AGAINST), (self.n_within, WITHIN)) if n]
        return ", ".join(parts)


def toward(outcome: str, favour: str = "above") -> str:
    """A `compare_intervals` outcome as a claim's: `FOR` when it is `favour`, `WITHIN` when
    "within", `AGAINST` when the other way."""
    if outcome == "within":
        return WITHIN
    return FOR if outcome == favour else AGAINST


def across_seeds(sides: Iterable[str]) -> str:
    """A cell's `compare_intervals` outcome over its seeds: "above" or "below" only when
    every seed's is, else "within" (a cell counts only when it holds for every seed)."""
    found = set(sides)
    return found.pop() if len(found) == 1 and found <= {"above", "below"} else "within"


def seed_agreement(cells: Iterable[dict[str, Any]]) -> str:
    """How the seeds of paired cells (``seeds``, ``seeds_above``, ``seeds_below``) agree:
    'above in all 3 seeds in 2 of 8 cells, in some of them in 3'."""
    cells = list(cells)
    every = sum(c["seeds_above"] == c["seeds"] > 0 for c in cells)
    some = sum(0 < c["seeds_above"] < c["seeds"] for c in cells)
    below = sum(c["seeds_below"] == c["seeds"] > 0 for c in cells)
    n = max((c["seeds"] for c in cells), default=0)
    return (
        f"above in all {n} seeds in {every} of {len(cells)} cells, in some of them in {some}, "
        f"below in all in {below}"
    )


def seeds_text(seeds: Iterable[Any]) -> str:
    """'0, 1, 2', or '0 only' for a single seed."""
    found = sorted({int(s) for s in seeds})
    if len(found) == 1:
        return f"{found[0]} only"
    return ", ".join(str(s) for s in found) or "none"


@dataclass
class Context:
    """What a claim's `measure` works with: the run's folder, its models, sizes, criteria and
    where its units run."""

    folder: Any  # adjpos.runs.RunFolder
    models: Any  # adjpos.study.models.Models
    sizes: Any  # adjpos.study.sizes.StudySizes
    criteria: Criteria
    engine: str = "process"
    workers: int | None = None
    address: str | None = None

    @property
    def results(self) -> Path:
        """The run's ``results/`` folder."""
        return Path(self.folder.path) / "results"

    def units(self, fn: Callable[..., Any], jobs: list[tuple]) -> Any:
        """`fn` over `jobs` on the run's engine (see `adjpos.engines.run_units`)."""
        from adjpos.engines import Resources, run_units

        return run_units(
            fn,
            jobs,
            engine=self.engine,
            workers=self.workers,
            address=self.address,
            resources=Resources.for_device(self.models.device),
        )

    def per_task(self, stage: str, unit: Callable[..., Any], table: Any) -> Any:
        """`unit(models, sizes, task)` for every task not done yet, each task's records written
        to ``results/STAGE_TASK.csv`` as `table` and marked done; then every task's rows."""
        import pandas as pd

        from adjpos.tasks import TASKS

        path = {task: self.results / f"{stage}_{task}.csv" for task in TASKS}
        todo = [t for t in TASKS if not self.folder.is_done(f"{stage} {t}")]
        jobs = [(self.models.fresh(), self.sizes, task) for task in todo]
        for (_, _, task), records in self.units(unit, jobs):
            table.write(path[task], records)
            self.folder.mark_done(f"{stage} {task}")
        return pd.concat([table.read(path[task]) for task in TASKS], ignore_index=True)

    def per_seed(self, stage: str, unit: Callable[..., Any], table: Any) -> Any:
        """`unit(models, sizes, task, seed, folder)` for every trained (task, seed) not done
        yet, `folder` the run's folder with unit names prefixed by the stage, task and seed
        (`Prefixed`, so that a unit can resume part by part); each unit's records written to
        ``results/STAGE_TASK_seed_S.csv`` as `table` and marked done; then every unit's rows."""
        import pandas as pd

        from adjpos.tasks import TASKS

        pairs = [(t, s) for t in TASKS for s in self.models.seeds(t, self.sizes)]
        name = {(t, s): f"{stage} {t} seed {s}" for t, s in pairs}
        path = {(t, s): self.results / f"{stage}_{t}_seed_{s}.csv" for t, s in pairs}
        todo = [pair for pair in pairs if not self.folder.is_done(name[pair])]
        jobs = [
            (self.models.fresh(), self.sizes, *pair, Prefixed(self.folder, name[pair]))
            for pair in todo
        ]
        for (_, _, task, seed, _), records in self.units(unit, jobs):
            table.write(path[task, seed], records)
            self.folder.mark_done(name[task, seed])
        return pd.concat([table.read(path[pair]) for pair in pairs], ignore_index=True)


@dataclass(frozen=True)
class Prefixed:
    """A run folder whose unit names all start with `prefix` (``is_done``, ``result`` and
    ``mark_done`` of `adjpos.runs.RunFolder`): the parts of one unit of a stage."""

    folder: Any  # adjpos.runs.RunFolder
    prefix: str

    def is_done(self, unit: str) -> bool:
        return self.folder.is_done(f"{self.prefix} {unit}")

    def result(self, unit: str) -> Any:
        return self.folder.result(f"{self.prefix} {unit}")

    def mark_done(self, unit: str, result: Any = None) -> None:
        self.folder.mark_done(f"{self.prefix} {unit}", result)


@dataclass(frozen=True)
class Claim:
    """One claim of the study, end to end.

    Attributes:
        name: the stage's name (``results/numbers/NAME.json``, the run's unit).
        title: the heading of its section in the report.
        measure: ``measure(context) -> numbers``: writes the tables, returns JSON-able numbers.
        verdicts: ``verdicts(numbers, criteria) -> [Verdict]`` (none for an illustration).
        section: ``section(numbers, figures) -> markdown``; ``figures(prefix)`` gives the
            markdown of the figures whose stem starts with `prefix`.
        figures: ``figures(results_dir, sizes) -> {stem: (go.Figure, caption)}``.
    """

    name: str
    title: str
    measure: Callable[[Context], dict[str, Any]]
    verdicts: Callable[[dict[str, Any], Criteria], list[Verdict]]
    section: Callable[[dict[str, Any], Callable[[str], str]], str]
    figures: Callable[[Path, dict[str, Any]], dict[str, tuple[Any, str]]]
