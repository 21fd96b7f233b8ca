"""The probing stage's unit (`adjpos.study.claims.probing` runs them): one trained seed and the
random-init copy of its own initial weights, probed on the same held-out sequences, and their
paired comparisons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import torch

from adjpos.probes import PROBE_TABLE, ProbeResult, probe_positions, sequences_of_length
from adjpos.probes.compare import COMPARISON_TABLE, compare_scores, score_sequences
from adjpos.probes.order import order_scores, reconstruct_order
from adjpos.study.claim import Criteria
from adjpos.study.models import RANDOM, TRAINED, gen
from adjpos.tables import Table

# The comparisons within each trained model: name -> (a, b, probe, metric).
COMPARISONS = {
    "cosine_first_vs_variance": ("cosine_first", "variance", "spline", "r2"),
    "cosine_previous_vs_variance": ("cosine_previous", "variance", "spline", "r2"),
    "profile_vs_variance_ridge": ("cosine_profile", "variance", "ridge", "r2"),
}
# Order reconstruction: name -> (a, b, whether both rank only the states after position 0).
ORDER_COMPARISONS = {
    "seriation_vs_variance_sort": ("spectral_seriation", "variance_sort", False),
    "first_sort_vs_variance_sort": ("first_similarity_sort", "variance_sort", True),
}
# The carriers compared between a trained model (a) and its own initial weights (b).
CONTROL_CARRIERS = {
    "variance (spline R^2)": ("variance", "variance", "spline", "r2"),
    "cosine_first (spline R^2)": ("cosine_first", "cosine_first", "spline", "r2"),
    "cosine_previous (spline R^2)": ("cosine_previous", "cosine_previous", "spline", "r2"),
    "resid (logistic accuracy)": ("resid", "resid", "logistic", "accuracy"),
}

# probes.csv: every score of every probed model, with the trained seed it belongs to.
PROBES = Table(task="string", seed="int64", kind="string", control_seed="Int64") + PROBE_TABLE
# probe_comparisons.csv (two feature sets of a trained model) and probe_copies.csv (a carrier
# of a trained model, a, against its own initial weights, b): one row per paired comparison.
PROBE_COMPARISONS = Table(task="string", seed="int64", comparison="string") + COMPARISON_TABLE


@dataclass(frozen=True)
class ProbeSubject:
    """One probed model: a trained seed or the random-init copy of its initial weights, and
    the held-out sequences of its task (the same for every seed and copy)."""

    label: str
    task: str
    seed: int  # the trained seed (a copy has that seed's initial weights)
    model: Any
    tokens: torch.Tensor


def probe_unit(models: Any, sizes: Any, criteria: Criteria, task: str, seed: int, *_: Any) -> dict:
    """One unit of the probing stage (`Context.per_unit`), all in its ``result``: both models'
    `ProbeResult` s (as JSON), the comparisons within the trained model and, for each of the
    `CONTROL_CARRIERS`, the trained model minus its copy at each one's best layer. The copy
    is the seed's `Models.control`; both read the task's held-out sequences of one length."""
    model, spec = models.trained(task, seed)
    tokens = sequences_of_length(spec, sizes.n_probe_sequences, generator=gen(4))
    pair = ((TRAINED, model), (RANDOM, models.control(task, seed)))
    subjects = [ProbeSubject(f"{k} {task} seed {seed}", task, seed, m, tokens) for k, m in pair]
    trained, copy = subjects
    first, draws = criteria.first_layer, criteria.draws
    probed = [json.loads(measure_probes(s, sizes).to_json()) for s in (trained, copy)]
    unit = {"task": task, "seed": seed, "trained": probed[0], "control": probed[1]}
    unit["comparisons"] = compare_within(trained, sizes, first, **draws)
    unit["copies"] = _paired(trained, copy, CONTROL_CARRIERS, sizes, first, **draws)
    return {"result": unit}


def measure_probes(subject: ProbeSubject, sizes: Any) -> ProbeResult:
    """Every feature set with every probe, and order reconstruction."""
    common = {"model_name": subject.label, "progress": False}
    options = {"features": list(sizes.features), "probe": list(sizes.probes), "cv": sizes.cv}
    options |= {"repeats": sizes.repeats}
    result = probe_positions(subject.model, subject.tokens, **options, **common)
    return result + reconstruct_order(subject.model, subject.tokens, **common)


def compare_within(subject: ProbeSubject, sizes: Any, first: int = 1, **draws: Any) -> list[dict]:
    """The `COMPARISONS` this size measures and the `ORDER_COMPARISONS` of one trained model,
    each side at its best layer >= `first`: the rows of ``probe_comparisons.csv``."""
    rows = _paired(subject, subject, COMPARISONS, sizes, first, **draws)
    layers = list(range(first, subject.model.cfg.n_layers + 1))
    for name, (a, b, drop_first) in ORDER_COMPARISONS.items():
        taus = order_scores(subject.model, subject.tokens, layers=layers, drop_first=drop_first)
        found = compare_scores(taus[a], taus[b], metric="abs_kendall_tau", best_layer=True, **draws)
        rows += _named(subject, name, found)
    return rows


def _paired(a: ProbeSubject, b: ProbeSubject, specs: dict, sizes: Any, first: int, **draws: Any):
    """Set a on model `a` minus set b on model `b` for each spec (a, b, probe, metric) whose
    sets and probe this size measures, at layers >= `first`; two sets of one model are
    scored together, on the positions both have."""
    first, second, layers = a, b, list(range(first, a.model.cfg.n_layers + 1))
    rows = []
    for probe in sizes.probes:
        wanted = {
            name: (a, b, metric)
            for name, (a, b, p, metric) in specs.items()
            if p == probe and {a, b} <= set(sizes.features)
        }
        if not wanted:
            continue
        if first is second:
            groups = [(a, b) for a, b, _ in wanted.values()]
            mine = theirs = _scores(first, groups, probe, layers, sizes)
        else:  # the same set on two models: the same samples and folds
            groups = [(a,) for a, _, _ in wanted.values()]
            mine, theirs = (_scores(s, groups, probe, layers, sizes) for s in (first, second))
        for (name, (a, b, metric)), x, y in zip(wanted.items(), mine, theirs, strict=True):
            found = compare_scores(x[a], y[b], metric=metric, best_layer=True, **draws)
            rows += _named(first, name, found)
    return rows


def _named(subject: ProbeSubject, name: str, rows: list[dict]) -> list[dict[str, Any]]:
    return [{"task": subject.task, "seed": subject.seed, "comparison": name} | r for r in rows]


def _scores(subject: ProbeSubject, groups: list, probe: str, layers: list, sizes: Any) -> list:
    return score_sequences(
        subject.model, subject.tokens, groups, probe=probe, layers=layers, cv=sizes.cv, seed=0
    )


def slug(label: str) -> str:
    """A file-name-safe form of a model label."""
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").replace("__", "_")


def probe_records(unit: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kind, control_seed in ((TRAINED, None), (RANDOM, unit["seed"])):
        result = unit["trained" if kind == TRAINED else "control"]
        keys = {"task": unit["task"], "seed": unit["seed"], "kind": kind}
        rows += [keys | {"control_seed": control_seed} | r for r in result.records()]
    return rows
