"""The report of a study run, assembled from the claims: the claims table from their verdicts,
then one section per claim, each written by its module from the numbers the run wrote.

It measures and computes nothing: every number is read from ``results/numbers/*.json``, every
verdict is a claim's `Verdict` (written to ``results/claims.csv`` too), and the figures are
files the pipeline drew. The same markdown becomes ``report.html`` with Python-Markdown, each
figure embedded interactively.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Any

from adjpos.runs import write_text
from adjpos.study import format as fmt
from adjpos.study.claim import STATUS_RULE, Criteria, Verdict
from adjpos.study.claims import claims
from adjpos.study.claims.models import agreement
from adjpos.study.sizes import StudySizes
from adjpos.tables import Table

TITLE = "adjpos reproduce: report"
# results/claims.csv: one row per verdict.
VERDICTS = Table(claim="string", status="string", n_for="int64", n_against="int64")
VERDICTS += Table(n_within="int64", n_cells="int64", seeds="string", unit="string")
VERDICTS += Table(evidence="string", at_half="string", at_double="string")


def write_report(
    out: str | Path, captions: Mapping[str, str], pngs: set[str], frames: Mapping[str, tuple]
) -> tuple[Path, Path]:
    """Write ``results/claims.csv``, ``report.md`` and ``report.html`` for the run in `out`
    (``run.json``, ``results/``, ``figures/``): `captions` of every figure by stem, `pngs` the
    stems with a PNG (inline in the markdown), `frames` each stem's (width, height) that shows
    it whole in ``report.html`` (`adjpos.figures.save.frame_size`)."""
    import markdown

    out = Path(out)
    VERDICTS.write(out / "results" / "claims.csv", [v.row() for v in verdicts(out)])
    body = markdown.markdown(render(out, captions, pngs, frames=frames), extensions=["tables"])
    write_text(out / "report.md", render(out, captions, pngs))
    # report.html fits a 1,280 px window: the widest figure (figures.style.MAX_WIDTH) framed.
    html = Template(fmt.read("report.html"))
    write_text(out / "report.html", html.substitute(title=TITLE, body=body))
    return out / "report.md", out / "report.html"


def verdicts(out: Path) -> list[Verdict]:
    """Every claim's verdicts on the run in `out`, under the criteria it recorded."""
    numbers, criteria = _numbers(out), run_criteria(out)
    return [v for claim in claims() for v in claim.verdicts(numbers[claim.name], criteria)]


def render(
    out: Path,
    captions: Mapping[str, str],
    pngs: set[str],
    *,
    frames: Mapping[str, tuple] | None = None,
    folder: str = "figures",
    links: bool = True,
    title: str = TITLE,
) -> str:
    """The report as markdown; with `frames` (stem -> (width, height), for ``report.html``),
    each figure embedded in a frame of its size instead of linked.

    `folder` is where the figures are, relative to the report; `links` adds a link to each
    figure's interactive HTML there (off for a copy of the report without them)."""
    record = json.loads((out / "run.json").read_text())
    numbers, criteria = _numbers(out), run_criteria(out)

    def figures(prefix: str) -> str:
        stems = [s for s in captions if s == prefix or s.startswith(prefix + "_")]
        framed = {s: None if frames is None else frames[s] for s in stems}
        return "\n\n".join(
            fmt.figure(f"{folder}/{s}", captions[s], s in pngs, links=links, frame=framed[s])
            for s in stems
        )

    parts = [f"# {title}", _setup(record), "## The claims at a glance"]
    rules = "; ".join(f'"{status}": {rule}' for status, rule in STATUS_RULE.items())
    parts += [claims_table(verdicts(out)), fmt.text("report.status", rules=rules)]
    for claim in claims():
        parts += [f"## {claim.title}", claim.section(numbers[claim.name], criteria, figures)]
        if claim.name == "models":
            parts.append(agreement(numbers, criteria))
    sizes = [[k, _size(k, v)] for k, v in record["spec"]["sizes"].items()]
    parts += ["## Run sizes", fmt.table(["size", "value"], sizes)]
    listed = [(k, f"{v:g}" if isinstance(v, float) else v) for k, v in criteria.to_dict().items()]
    parts += ["## Criteria", fmt.table(["criterion", "value"], listed)]
    parts += [fmt.text("report.ending") + "\n"]
    return "\n\n".join(parts)


def claims_table(found: list[Verdict]) -> str:
    """One row per verdict: the claim, its status, its counts, the seeds, the evidence."""
    rows = [
        [v.claim, v.status.value + (" (sensitive)" if v.sensitive else "")]
        + [v.counts, f"seed{'' if v.seeds.endswith(' only') else 's'} {v.seeds}", v.evidence]
        for v in found
    ]
    return fmt.table(["claim", "status", "cells for, against, within", "seeds", "evidence"], rows)


def _size(name: str, value: Any) -> str:
    """A run size as the report lists it; None as what it means (its help's "None: ...")."""
    if value is not None:
        return fmt.n(value)
    field = {f.name: f for f in dataclasses.fields(StudySizes)}.get(name)
    found = re.search(r"None: ([^;)]+)", field.metadata.get("help", "") if field else "")
    return found.group(1) if found else "the default"


def _numbers(out: Path) -> dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "results" / "numbers").glob("*.json")}


def run_criteria(out: Path) -> Criteria:
    """The criteria the run in `out` recorded (the defaults for a folder without run.json)."""
    path = out / "run.json"
    recorded = json.loads(path.read_text())["spec"].get("criteria", {}) if path.is_file() else {}
    return Criteria.recorded(recorded)


def _setup(record: Mapping[str, Any]) -> str:
    spec, provenance = record["spec"], record["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in provenance["versions"].items())
    models = "trained by this run" if spec["settings"]["train"] else "shipped"
    size, device = spec["settings"]["size"], provenance["device"]
    return fmt.text("report.setup", size=size, device=device, models=models, versions=versions)
