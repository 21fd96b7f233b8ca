"""Trained NoPE layers on text: the shipped language models (all-NoPE, all-RoPE, the hybrid with
every 4th layer NoPE) on held-out text shipped with the package, measured by `adjpos.text_layers`,
the cells decided here (`adjpos.study.claim.per_seed`; `arms_read`: the rule of the position
curve's arms, `adjpos.study.rules`, on text: a loss rise in nats as the harm)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

import adjpos.text_layers as text
from adjpos.interventions.curve.numbers import CellNumbers, arm_kind, cell_numbers
from adjpos.stats import Outcome, every_seed
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Verdict, per_seed, seeds_text
from adjpos.study.rules import cell_outcome, check_passed
from adjpos.text.recipe import LAYOUTS, hybrid_nope_layers

TITLE = "Trained NoPE layers on text"
VIEW = "raw, sink out"  # the view the verdicts judge
PARTS = ("adjacency", "position", "versus", "causal", "differences")


def measure(context: Context) -> dict[str, Any]:
    """Each shipped text model a unit of the run's engine (`text_unit`, resumable), then the
    hybrid paired with the all-RoPE model of its width and seed."""
    sizes = context.sizes
    folders, missing = text.shipped_text_folders(sizes.text_seeds, widths=sizes.text_widths)
    found = {"missing": missing, "seeds": [], "nope_blocks": []} | dict.fromkeys(PARTS, [])
    if not folders:
        return found
    text.shared_tokenizer(folders.values())  # one tokenizer, or a clear error before any work
    tables = {f"text_{p}": table for p, table in text.PARTS.items()}
    done = context.per_unit("text", text_unit, tables, keys=list(folders))
    frames = {p: done[f"text_{p}"] for p in text.PARTS}
    scores = {
        k: {(x[0], x[1]): np.array(x[2]) for x in r["scores"]}
        for k, r in zip(folders, done["result"], strict=True)
    }
    frames["versus"] = text.VERSUS.frame(text.paired_layouts(scores, sizes.text_widths))
    for part in PARTS:
        getattr(text, part.upper()).write(context.results / f"text_{part}.csv", frames[part])
    blocks = done["result"][0]["blocks"]
    return found | {"nope_blocks": blocks} | text.summarise(text.TextLayers(**frames))


def text_unit(
    models: Any, sizes: Any, criteria: Criteria, layout: str, seed: int, folder: Any
) -> dict[str, Any]:
    """One shipped text model (`adjpos.text_layers.measure_text_model` at the study's
    `sizes`, the arms at the hybrid's NoPE blocks where the model has any): its rows by
    table, and (``result``) those blocks and its per-window scores, for the pairing."""
    from adjpos.models import layer_kinds, load_model
    from adjpos.pretrained import pretrained_folder

    where = pretrained_folder(f"text-{layout}", seed)
    model = load_model(where, device=getattr(models, "device", None) or "cpu")
    tokenizer = text.shared_tokenizer([where])
    tokens = text.held_out_windows(tokenizer, sizes.text_sequences, model.cfg.n_ctx)
    blocks = hybrid_nope_layers(model.cfg.n_layers)
    # the arms where a block reads no rotary position (all-RoPE: no NoPE block, no claim)
    tested = blocks if "nope" in layer_kinds(model) else ()
    options = {"folds": min(sizes.cv, len(tokens)), "control_draws": sizes.curve_draws}
    options |= {"doses": sizes.text_doses, "causal_layers": tested}
    rows, scores = text.measure_text_model(model, tokens, layout, seed, **options)
    plain = [[layer, view, x.tolist()] for (layer, view), x in scores.items()]
    found = {"blocks": list(blocks), "scores": plain}
    return {f"text_{p}": r for p, r in rows.items()} | {"result": found}


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    """Layers >= `criteria.first_layer`, the sink left out. Per layout: the adjacency score
    above chance in every seed. After the hybrid's NoPE blocks: the hybrid above the all-RoPE
    model of the same seed, paired over windows. At their input, in the all-NoPE model and the
    hybrid: the rule's address claim on the curve's arms (`text.arms_read`)."""
    after = [b + 1 for b in numbers["nope_blocks"]]
    view = [c for c in numbers["adjacency"] if c["view"] == VIEW]
    chance, gap = (fmt.n(x) for x in (criteria.chance, criteria.text_gap))
    pct = f"{criteria.percentile:g}"  # as the causal claims write it: "fewer than 5%"
    found = [
        (f"Trained language model ({layout}): the adjacency pattern on held-out text", "layer",
         f"every seed's interval above {chance}, sink left out",
         [c for c in view if c["layout"] == layout and c["layer"] >= criteria.first_layer])
        for layout in dict.fromkeys([*LAYOUTS, *(c["layout"] for c in view)])  # d128 too
    ]  # fmt: skip
    found += [
        ("The hybrid's NoPE layers carry more adjacency than the all-RoPE model's same layers",
         "layer", "every seed's paired interval (hybrid - rope) above 0, sink left out",
         [c for c in numbers["versus"] if c["view"] == VIEW and c["layer"] in after]),
        ("NoPE layers read the position curve as an address on text (causal)",
         "layout x layer cell",
         f"every seed: each shift by 1 or 2 (curve moved, size matched) raises the loss beyond the "
         f"random curve of its size by over {gap} nats (interval bound), fewer than {pct}% of "
         f"its draws raising it more; against when no shift's upper bound reaches {gap}",
         [c for c in numbers["causal"] if not c["layout"].startswith("rope")]),
    ]  # fmt: skip
    out = []
    for claim, unit, evidence, cells in found:
        counted = [o for o in (_outcome(c, criteria) for c in cells) if o is not None]
        seeds = seeds_text(s for c in cells for s in c["seeds"])  # the seeds this verdict read
        out.append(Verdict.tally(claim, counted, seeds=seeds, unit=unit, evidence=evidence))
    return out


def _outcome(cell: dict[str, Any], criteria: Criteria) -> Any:
    if "rule" in cell:
        return arms_read(cell["rule"], criteria)
    return per_seed(cell, null=0.0 if "a" in cell else criteria.chance)


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    if not numbers["seeds"]:
        return f"No text model is shipped here ({', '.join(numbers['missing'])} missing)."
    position = {(c["layout"], c["layer"], c["measure"]): c["value"] for c in numbers["position"]}
    rows = []
    for c in (c for c in numbers["adjacency"] if c["view"] == VIEW):
        key, bounds = (c["layout"], c["layer"]), list(zip(*c["per_seed"], strict=True))
        rows.append([*key, c["kind"], fmt.span(c["value"], min(bounds[0]), max(bounds[1]))])
        rows[-1] += [fmt.n(position[(*key, m)]) for m in ("position share", "probe R^2")]
    after = [b + 1 for b in numbers["nope_blocks"]]
    pairs = [c | {"layout": "hybrid - rope"} for c in numbers["versus"] if c["layer"] in after]
    # an arm compared on no window has no numbers (None): its mean is left blank
    paired = [
        [c["layout"], c["layer"], c["view"], fmt.n(c["value"])]
        + [fmt.join([f"[{fmt.n(s[0])}, {fmt.n(s[1])}]" for s in c["per_seed"]])]
        + [_outcome(c, criteria)]
        for c in pairs
    ] + [
        [c["layout"], c["layer"], arm, fmt.n(pd.Series([x[0] for x in per], dtype=float).mean())]
        + [fmt.join([f"[{fmt.n(lo)}, {fmt.n(hi)}]" + ("" if p is None else f" {p:.0f}%")
                     + ("" if _passed(arm, check, criteria) else " check failed")
                     for _, lo, hi, p, *check in per]),
           fmt.join(arms_readings(c["rule"], criteria))
           + f"; address: {_outcome(c, criteria) or 'not counted'}"]
        for c in numbers["causal"] for arm, per in c["arms"].items()
    ]  # fmt: skip
    missing = ", ".join(numbers["missing"]) or "none"
    head = ["layout", "layer", "kind", f"adjacency, {VIEW} (seed span)", "position share", "R^2"]
    before = fmt.text("text.before", seeds=seeds_text(numbers["seeds"]), missing=missing)
    after = [fmt.text("text.paired")]
    after += [fmt.table(["layout", "layer", "change", "mean", "per seed", "reading"], paired)]
    return fmt.section(figures("text"), before, fmt.table(head, rows), *after)


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    from adjpos.figures.text import plot_text_layers

    if not (results / "text_adjacency.csv").is_file():
        return {}
    tables = [getattr(text, p.upper()).read(results / f"text_{p}.csv") for p in PARTS]
    drawn = plot_text_layers(*tables[:2])
    if tables[3]["arm"].notna().any():  # the arms on text, the loss rise as the harm
        drawn["text_curve_arms"] = text_arms_figure(tables[3], tables[4], results)
    words = {"bars": "one seed; bars: its 95% intervals", "range": "one seed"}
    if tables[0]["seed"].nunique() > 1:  # one seed has no span over seeds to show
        words = {"bars": "mean over seeds; bars: seed spans of 95% intervals"}
        words["range"] = "mean over seeds; bars: the seeds' range"
    return fmt.captioned(fmt.texts("text.captions", **words), **drawn)


def text_arms_figure(causal: Any, differences: Any, results: Any) -> Any:
    """The arms' loss against their size per layout (`plot_curve_arms`), with the rule's
    per-size outcomes on text under each panel."""
    from adjpos.figures.curve import plot_curve_arms
    from adjpos.study.claims.hypothesis import readings
    from adjpos.study.report import run_criteria

    criteria, keys = run_criteria(results.parent), ("layout", "layer", "seed")
    cells = cell_numbers(causal, differences, keys=keys, harm=-1)
    found = {c.key: cell_outcome(c, criteria, on_text=True) for c in cells}
    rows = causal[causal["readout"] == "kept"].assign(task=causal["layout"])
    return plot_curve_arms(rows, value="loss", readings=readings(found))


def arms_readings(rule: Sequence[Mapping[str, Any]], criteria: Criteria) -> list[str]:
    """Each seed's reading of the arms (`adjpos.study.rules.cell_outcome`'s: "not read",
    "address", ...) by the rule on text."""
    return [
        cell_outcome(CellNumbers.from_plain((), p), criteria, on_text=True).reading for p in rule
    ]


def arms_read(rule: Sequence[Mapping[str, Any]], criteria: Criteria) -> Outcome | None:
    """A causal cell's address outcome from each seed's rule numbers (`CellNumbers.to_plain`,
    as `adjpos.text_layers.summarise` gives them) by the rule on text (`Criteria.text_gap`
    nats, `Criteria.percentile`): per seed the rule's outcome, then over seeds (`every_seed`);
    None (not counted) when in some seed no shift passed its manipulation check."""
    found = []
    for plain in rule:
        cell = CellNumbers.from_plain((), plain)
        shifts = [(a, c) for s in cell.sizes for a, c in s.checks.items() if arm_kind(a).offsets]
        if not any(check_passed(a, *c, criteria=criteria) for a, c in shifts):
            return None
        found.append(cell_outcome(cell, criteria, on_text=True).address)
    return every_seed(found)


def _passed(arm: str, check: Sequence[float | None], criteria: Criteria) -> bool:
    return check_passed(arm, *(math.nan if v is None else v for v in check), criteria=criteria)
