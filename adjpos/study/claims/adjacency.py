"""Claim 1: in trained NoPE models nearby hidden states are more similar (the adjacency
pattern), against random-init models of the same architecture, in twelve views of the score
(`adjpos.scoring.sequence_views`), each value with a bootstrap interval over sequences and each
trained seed minus its own initial weights a paired one; a cell counts when every seed's holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from adjpos.scoring import sequence_views
from adjpos.stats import bootstrap_interval, paired_difference
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Verdict, every_seed, judge, per_seed, seeds_text
from adjpos.study.models import LEARNED, RANDOM, TRAINED, gen, variants
from adjpos.study.views import (
    INTERVAL,
    KEYS,
    VIEW,
    paired_seeds,
    seed_spans_figure,
    seed_summary,
    span_of,
    task_masks,
)
from adjpos.tables import Table
from adjpos.tables import plain_records as records
from adjpos.tasks import TASKS

TITLE = "Claim 1: nearby hidden states are more similar (the adjacency pattern)"

COUNT = Table(n_sequences="int64")
ADJACENCY = KEYS + VIEW + Table(adjacency="float64") + INTERVAL + Table(mean_cosine="float64")
ADJACENCY += COUNT
# Each trained seed minus its own initial weights on the same sequences (paired).
PAIRED = Table(task="string", seed="int64", layer="int64") + VIEW + Table(difference="float64")
PAIRED += INTERVAL + COUNT
# The views the report shows, (rows, centred, ties) -> label; the first is the study's score.
ADJACENCY_VIEWS = {
    ("all", False, "strict"): "whole (the study's score)",
    ("all", False, "half"): "whole, ties half",
    ("prompt", False, "half"): "prompt rows, ties half",
    ("answer", False, "half"): "answer rows, ties half",
    ("all", True, "half"): "whole, centred, ties half",
    ("prompt", True, "half"): "prompt rows, centred, ties half",
}
MAIN_VIEW = next(iter(ADJACENCY_VIEWS))
# The views the figure draws: the study's score and those of the prompt or answer rows alone.
DRAWN = {k: v for k, v in ADJACENCY_VIEWS.items() if k == MAIN_VIEW or k[0] != "all"}


def measure(context: Context) -> dict[str, Any]:
    table, paired = measure_adjacency(context.models, context.sizes, **context.criteria.draws)
    ADJACENCY.write(context.results / "adjacency_by_layer.csv", table)
    PAIRED.write(context.results / "adjacency_paired.csv", paired)
    return adjacency_numbers(table, paired)


def measure_adjacency(
    models: Any, sizes: Any, *, n_boot: int = 1000, level: float = 0.95
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Adjacency per layer on held-out task sequences in every view, for every trained seed,
    its own initial weights and its learned-position twin, each with a 95% bootstrap interval
    over the sequences; and each trained seed minus its own initial weights on the same
    sequences, with a paired bootstrap interval."""
    out, paired, draws = [], [], {"n_boot": n_boot, "level": level}
    for name in TASKS:
        batch = models.trained(name)[1].sample(sizes.n_sequences, generator=gen(2), split="test")
        tokens, masks = task_masks(batch)
        scored: dict[tuple[str, int], dict] = {}
        for label, seed, model in variants(models, sizes, name):
            for layer, views, cosines in sequence_views(model, tokens, batch.lengths, masks):
                for view, scores in views.items():
                    scored.setdefault((label, seed), {})[layer, view] = scores
                    kept = scores[~np.isnan(scores)]
                    low, high = bootstrap_interval(kept, **draws)
                    key = {"task": name, "model": label, "seed": seed, "layer": layer}
                    out.append(
                        key
                        | dict(zip(VIEW.names, view, strict=True))
                        | {"adjacency": float(kept.mean()), "low": low, "high": high}
                        | {"mean_cosine": float(cosines[view[1]].mean())}
                        | {"n_sequences": kept.size}
                    )
            if label != RANDOM:
                continue
            # the seed's own initial weights: paired with the seed on the same sequences
            for (layer, view), scores in scored[TRAINED, seed].items():
                theirs = scored[label, seed][layer, view]
                difference, low, high = paired_difference(scores, theirs, **draws)
                paired.append(
                    {"task": name, "seed": seed, "layer": layer}
                    | dict(zip(VIEW.names, view, strict=True))
                    | {"difference": difference, "low": low, "high": high}
                    | {"n_sequences": int((~np.isnan(scores - theirs)).sum())}
                )
    return ADJACENCY.frame(out), PAIRED.frame(paired)


def score_view(table: pd.DataFrame, key: tuple[str, bool, str]) -> pd.DataFrame:
    """The rows of one (rows, centred, ties) view."""
    rows, centred, ties = key
    return table[(table["rows"] == rows) & (table["centred"] == centred) & (table["ties"] == ties)]


def adjacency_numbers(table: pd.DataFrame, paired: pd.DataFrame) -> dict[str, Any]:
    """The study's score of each trained seed and its own initial weights per layer, with
    its interval (``scores``); per view, task and layer, the trained models against their
    own initial weights: both seed spans, the difference over seeds with its t-interval, and
    each seed's paired interval (``per_seed``)."""
    views = []
    for key, label in ADJACENCY_VIEWS.items():
        summary = seed_summary(score_view(table, key), "adjacency", "low", "high")
        differences = score_view(paired, key)
        cells = []
        for (task, layer), group in summary.groupby(["task", "layer"], sort=False):
            seeds = differences[(differences["task"] == task) & (differences["layer"] == layer)]
            if seeds.empty or not {TRAINED, RANDOM} <= set(group["model"]):
                continue
            by = group.set_index("model")
            cell = {"task": task, "layer": int(layer)} | span_of("trained", by.loc[TRAINED])
            cell |= span_of("control", by.loc[RANDOM])
            cells.append(cell | paired_seeds(seeds, "difference", "low", "high"))
        views.append({"view": label, "ties": key[2], "cells": cells})
    main = score_view(table, MAIN_VIEW)
    kept = main[main["model"].isin([TRAINED, RANDOM])]
    return {
        "scores": records(kept[["task", "model", "seed", "layer", "adjacency", "low", "high"]]),
        "views": views,
        "means": records(seed_summary(main, "adjacency", "low", "high")),
        "mean_cosine": records(seed_summary(main, "mean_cosine")),
    }


def over_layer0(numbers: dict[str, Any], model: str, criteria: Criteria) -> list[dict]:
    """Per task: the layer compared with layer 0 (the trained models' best layer counted, by
    the mean over seeds; the random-init models' deepest), the means, and the outcome: for
    when every seed's interval there lies above its layer 0's, against when every one below."""
    out = []
    for task in dict.fromkeys(r["task"] for r in numbers["scores"]):
        rows = [r for r in numbers["scores"] if (r["task"], r["model"]) == (task, model)]
        by = {(r["seed"], r["layer"]): (r["low"], r["high"]) for r in rows}
        means = pd.DataFrame(rows).groupby("layer")["adjacency"].mean()
        counted = means[means.index >= criteria.first_layer]
        layer = int(counted.idxmax() if model == TRAINED else counted.index.max())
        seeds = sorted({r["seed"] for r in rows})
        sides = [judge(*by[s, layer], *by[s, 0]) for s in seeds]
        out.append(
            {"task": task, "layer": layer, "value": means[layer], "layer0": means[0]}
            | {"outcome": every_seed(sides), "seeds": seeds}
        )
    return out


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    trained, control = (over_layer0(numbers, m, criteria) for m in (TRAINED, RANDOM))
    counted = [c for c in numbers["views"][0]["cells"] if c["layer"] >= criteria.first_layer]
    seeds = seeds_text(s for t in trained for s in t["seeds"])
    rule, level = f"every seed's {criteria.level:.0%} bootstrap intervals apart", criteria.level
    found = [  # (claim, outcomes, unit, evidence)
        ("Trained NoPE models: nearby hidden states are more similar",
         [t["outcome"] for t in trained], "task",
         f"best layer >= {criteria.first_layer} above layer 0, {rule}"),
        ("Random-init NoPE models of the task architectures show the pattern too",
         [t["outcome"] for t in control], "task",
         f"each trained seed's initial weights: deepest layer above layer 0, {rule}"),
        ("Training strengthens the pattern (control, not a claim of the study)",
         [per_seed(c) for c in counted], "task x layer cell",
         f"each trained seed minus its own initial weights on the same sequences, paired "
         f"{level:.0%} interval above 0 in every seed, layers >= {criteria.first_layer}; the "
         "other views in the report"),
    ]  # fmt: skip
    return [Verdict.tally(c, o, seeds=seeds, unit=u, evidence=e) for c, o, u, e in found]


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    views = numbers["views"]
    per_task = "; ".join(
        f"{t['task']}, {model}: {fmt.n(t['value'])} at layer {t['layer']} against "
        f"{fmt.n(t['layer0'])} at layer 0 ({t['outcome']})"
        for model in (TRAINED, RANDOM)
        for t in over_layer0(numbers, model, criteria)
    )
    cells = {(v["view"], c["task"], c["layer"]): c for v in views for c in v["cells"]}
    rows = [
        [c["task"], c["layer"], fmt.span(c["trained"], c["trained_low"], c["trained_high"])]
        + [fmt.span(c["control"], c["control_low"], c["control_high"])]
        + [fmt.span(c["difference"], c["difference_low"], c["difference_high"])]
        + [per_seed(cells[v["view"], c["task"], c["layer"]]) for v in views]
        for c in views[0]["cells"]
        if c["layer"] >= criteria.first_layer
    ]
    header = ["task", "layer", "trained (seed span)", "own initial weights (seed span)"]
    header += ["trained - own initial weights (t-interval over seeds)"]
    header += [f"{v['view']}: trained above" for v in views]
    said = fmt.text("adjacency.section") + per_task + "."
    parts = [figures("adjacency_by_layer"), by_layer(numbers["means"], "value"), said]
    cos = [r for r in numbers["mean_cosine"] if r["layer"] >= criteria.first_layer]
    cos = {m: [r["value"] for r in cos if r["model"] == m] for m in (TRAINED, RANDOM)}
    cos = ", ".join(f"{m} {fmt.n(min(v))} to {fmt.n(max(v))}" for m, v in cos.items() if v)
    views_text = fmt.text("adjacency.views", n=len(views), drawn=len(DRAWN), cos=cos)
    return fmt.section(*parts, figures("adjacency_views"), views_text, fmt.table(header, rows))


def by_layer(rows: list[dict[str, Any]], value: str) -> str:
    """A table of `value` with one row per (task, model) and one column per layer."""
    layers = sorted({r["layer"] for r in rows})
    by = {(r["task"], r["model"], r["layer"]): r[value] for r in rows}
    keys = dict.fromkeys((r["task"], r["model"]) for r in rows)
    return fmt.table(
        ["task", "model", *[f"layer {x}" for x in layers]],
        [[t, m, *[by.get((t, m, x)) for x in layers]] for t, m in keys],
    )


def adjacency_views_figure(table: pd.DataFrame):
    """The `DRAWN` views of the score by layer, trained against random-init NoPE, seed spans."""
    frames = [
        seed_summary(view[view["model"] != LEARNED], "adjacency", "low", "high").assign(view=label)
        for view, label in ((score_view(table, key), label) for key, label in DRAWN.items())
    ]
    title = f"Adjacency by layer in {len(DRAWN)} views (seed spans of 95% intervals)"
    return seed_spans_figure(pd.concat(frames), row="view", title=title, y_title="adjacency")


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    from adjpos.figures import plot_adjacency_by_layer

    table = ADJACENCY.read(results / "adjacency_by_layer.csv")
    main = plot_adjacency_by_layer(score_view(table, MAIN_VIEW), panel="task", line="model")
    views = adjacency_views_figure(table)
    captions = fmt.texts("adjacency.captions", n=len(DRAWN), views="; ".join(DRAWN.values()))
    return fmt.captioned(captions, adjacency_by_layer=main, adjacency_views=views)
