"""What every claim of the study is: one module (``adjpos/study/claims/NAME.py``) that
measures, then judges its numbers (see `Claim`); the pipeline writes what `Claim.measure`
returns to ``results/numbers/NAME.json``, and the report judges those numbers alone.

Every verdict is a `Verdict`: a `Status` with its counts, from `Verdict.tally` over cell
`Outcome` s, each decided by `judge` (one interval comparison) and, over seeds, by
`every_seed`; the status rule is `Status.of` (all in `adjpos.stats`, shared with the library).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adjpos.stats import STATUS_RULE, Outcome, Status, every_seed, judge
from adjpos.validation import help_field

__all__ = ["STATUS_RULE", "Outcome", "Status", "every_seed", "judge"]  # defined in adjpos.stats


@dataclass(frozen=True)
class Criteria:
    """Every threshold a verdict of the study uses, in one place (recorded in ``run.json``)."""

    level: float = help_field("confidence level of every interval", 0.95)
    n_boot: int = help_field("bootstrap draws of an interval over sequences", 1000)
    first_layer: int = help_field(
        "the first layer the verdicts count (layer 0, the token embeddings, carries no position)", 1
    )
    min_gap: float = help_field(
        "causal tests: the paired difference's upper bound lies at least this far below 0", 0.1
    )
    size_slack: float = help_field(
        "causal tests: a change at most this many times its control's is matched in size", 1.25
    )
    percentile: float = help_field("causal tests: under this % of a control's draws harm more", 5.0)
    curve_tolerance: float = help_field(
        "position-curve rule: t; an arm breaks (holds) when its bound lies below (above) -t", 0.05
    )
    min_sizes: int = help_field("position-curve rule: the sizes locality needs", 2)
    curve_measurable: float = help_field(
        "position-curve rule: a size whose random control leaves less exact match is not "
        "measurable",
        0.25,
    )
    curve_size_tolerance: float = help_field(
        "position-curve checks: an arm's size lies within this relative distance of its target",
        0.05,
    )
    curve_reach: float = help_field(
        "position-curve checks: the least share of the measured prompts at whose lengths an arm "
        "reaches its size (it is compared on those alone)",
        0.5,
    )
    curve_distance_kept: float = help_field(
        "position-curve checks: a rotation changes the curve's distances at most this much", 1e-6
    )
    curve_locality_drop: float = help_field(
        "position-curve checks: a scatter lowers the curve's adjacency at least this much", 0.05
    )
    text_gap: float = help_field("text causal tests: nats above the control's loss", 0.02)
    solved: float = help_field("exact match a solved task's interval lies above", 0.99)
    chance: float = help_field("the adjacency score of states that carry no order", 0.5)
    band: float = help_field("sweep: the mean score that marks the band of init scales", 0.6)
    theory_tolerance: float = help_field(
        "first-layer theory: the largest gap between measured and predicted that agrees", 0.05
    )

    @property
    def draws(self) -> dict[str, Any]:
        """The bootstrap's options: ``n_boot`` and ``level``."""
        return {"n_boot": self.n_boot, "level": self.level}

    def to_dict(self) -> dict[str, Any]:
        """Every criterion as plain JSON-able values."""
        return dataclasses.asdict(self)

    @classmethod
    def recorded(cls, values: dict[str, Any]) -> Criteria:
        """The criteria a run recorded (a criterion it lacks takes today's default; one this
        version no longer has, such as ``z``, is dropped)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


CRITERIA = Criteria()


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict, as data: its `Status` and the counts it rests on (see
    `Status.of`)."""

    claim: str
    status: Status
    n_for: int
    n_against: int
    n_within: int
    n_cells: int
    seeds: str
    unit: str
    evidence: str
    at_half: str = ""  # the status at half the claim's tolerance ("": not tested)
    at_double: str = ""  # the status at double it

    @property
    def sensitive(self) -> bool:
        """The status moves at half or double the tolerance."""
        return any(s and s != self.status.value for s in (self.at_half, self.at_double))

    @classmethod
    def tally(
        cls, claim: str, outcomes: Iterable[Outcome], *, seeds: str, unit: str, evidence: str
    ) -> Verdict:
        """The verdict of `claim` from its cells' outcomes."""
        outcomes = list(outcomes)
        unknown = [o for o in outcomes if not isinstance(o, Outcome)]
        if unknown:
            raise ValueError(f"outcomes must be Outcome members ({list(Outcome)}), got {unknown}")
        n_for, n_against = outcomes.count(Outcome.FOR), outcomes.count(Outcome.AGAINST)
        status = Status.of(n_for, n_against, len(outcomes))
        n_within = outcomes.count(Outcome.WITHIN)
        return cls(claim, status, n_for, n_against, n_within, len(outcomes), seeds, unit, evidence)

    @classmethod
    def per_model_kind(
        cls, cells: list[dict], criteria: Criteria, claim: str, outcome: Callable, evidence: str
    ) -> list[Verdict]:
        """The verdicts of `claim` (its ``{kind}`` named) for the trained models, then for
        their random-init controls: each over its task x layer cells of layers counted, each
        cell by `outcome`."""
        from adjpos.study.models import RANDOM, TRAINED

        out, words = [], {"unit": "task x layer cell", "evidence": evidence}
        for model, kind in ((TRAINED, "Trained"), (RANDOM, "Random-init")):
            mine = [c for c in cells if c["model"] == model and c["layer"] >= criteria.first_layer]
            seeds = seeds_text(s for c in mine for s in c["seeds"])
            out.append(cls.tally(claim.format(kind=kind), map(outcome, mine), seeds=seeds, **words))
        return out

    @property
    def counts(self) -> str:
        """'2 for, 1 against, 1 within of 4 tasks tested'."""
        units = self.unit[:-1] + "ies" if self.unit.endswith("y") else self.unit + "s"
        return (
            f"{self.n_for} for, {self.n_against} against, {self.n_within} within of "
            f"{self.n_cells} {units if self.n_cells != 1 else self.unit} tested"
        )

    def row(self) -> dict[str, Any]:
        """The verdict as a row of ``results/claims.csv`` (the status as its word)."""
        return dataclasses.asdict(self) | {"status": self.status.value}


def per_seed(cell: dict[str, Any], favour: str = "above", null: float = 0.0) -> Outcome:
    """A cell over its seeds: for when every seed's interval (``cell["per_seed"]``, each
    (low, high, ...)) lies on the `favour` side of `null`, against when every one on the other."""
    seeds = cell["per_seed"]
    return every_seed(judge(low, high, null, null, favour=favour) for low, high, *_ in seeds)


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

    def per_unit(
        self,
        stage: str,
        unit: Callable[..., Any],
        tables: dict,
        *,
        keys: Sequence[tuple[str, int]] | None = None,
    ) -> Any:
        """`unit(models, sizes, criteria, name, seed, folder)` for every (name, seed) of `keys`
        (default: every trained (task, seed)) not done yet, `folder` the run's folder with unit
        names prefixed by the unit's own (`Prefixed`: a unit can resume part by part); it
        returns {name: records}, each written to ``results/NAME_TASK_seed_S.csv`` by its `Table`
        in `tables` {name: Table}, and is marked done (with its ``result``, if any); then
        every unit's rows, by name, and their results in the order of the keys
        (``result``)."""
        import pandas as pd

        from adjpos.engines import Resources, run_units
        from adjpos.tasks import TASKS

        if keys is None:
            keys = [(t, s) for t in TASKS for s in self.models.seeds(t, self.sizes)]
        name = {(t, s): f"{stage} {t} seed {s}" for t, s in keys}

        def path(table: str, key: tuple) -> Path:
            return self.results / (table + name[key][len(stage) :].replace(" ", "_") + ".csv")

        models = None if self.models is None else self.models.fresh()
        jobs = [
            (models, self.sizes, self.criteria, *key, Prefixed(self.folder, name[key]))
            for key in keys
            if not self.folder.is_done(name[key])
        ]
        where = {"engine": self.engine, "workers": self.workers, "address": self.address}
        resources = Resources.for_device(getattr(models, "device", None))
        for (*_, task, seed, _), records in run_units(unit, jobs, **where, resources=resources):
            for table, kind in tables.items():
                kind.write(path(table, (task, seed)), records[table])
            self.folder.mark_done(name[task, seed], records.get("result"))
        found = {t: pd.concat([k.read(path(t, key)) for key in keys]) for t, k in tables.items()}
        return found | {"result": [self.folder.result(name[key]) for key in keys]}


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
        verdicts: ``verdicts(numbers, criteria) -> [Verdict]``: the only place its numbers
            become outcomes (none for an illustration).
        section: ``section(numbers, criteria, figures) -> markdown``, ``figures(prefix)`` the
            markdown of the figures whose stem starts with `prefix`.
        figures: ``figures(results_dir, sizes) -> {stem: (go.Figure, caption)}``.
    """

    name: str
    title: str
    measure: Callable[[Context], dict[str, Any]]
    verdicts: Callable[[dict[str, Any], Criteria], list[Verdict]]
    section: Callable[[dict[str, Any], Criteria, Callable[[str], str]], str]
    figures: Callable[[Path, dict[str, Any]], dict[str, tuple[Any, str]]]
