"""Claim 1: in trained NoPE models nearby hidden states are more similar (the adjacency
pattern), and how the trained models compare with random-init models of the same
architecture, in twelve views of the score (see `adjpos.study.views`).

Each (model, seed, layer, view) value carries a percentile bootstrap interval over sequences;
a group of seeds spans from its lowest interval to its highest, and one group is above
(below) another only when the two spans are apart: a difference inside the seed spread is
not a difference.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from adjpos.stats import bootstrap_interval, compare_intervals, paired_difference, seed_interval
from adjpos.study import format as fmt
from adjpos.study.claim import (
    Context,
    Criteria,
    Verdict,
    across_seeds,
    seed_agreement,
    seeds_text,
    toward,
)
from adjpos.study.models import LEARNED, RANDOM, TRAINED, gen, variants
from adjpos.study.views import (
    records,
    seed_spans_figure,
    seed_summary,
    sequence_views,
    span_of,
    task_masks,
)
from adjpos.tables import Table
from adjpos.tasks import TASKS

TITLE = "Claim 1: nearby hidden states are more similar (the adjacency pattern)"

ADJACENCY = Table(
    task="string",
    model="string",
    seed="Int64",
    layer="int64",
    rows="string",
    centred="boolean",
    ties="string",
    adjacency="float64",
    low="float64",
    high="float64",
    mean_cosine="float64",
    n_sequences="int64",
)
# Each trained seed minus its own initial weights on the same sequences (paired).
PAIRED = Table(
    task="string",
    seed="int64",
    layer="int64",
    rows="string",
    centred="boolean",
    ties="string",
    difference="float64",
    low="float64",
    high="float64",
    n_sequences="int64",
)
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


def measure(context: Context) -> dict[str, Any]:
    n_boot = context.criteria.n_boot
    table, paired = measure_adjacency(context.models, context.sizes, n_boot=n_boot)
    ADJACENCY.write(context.results / "adjacency_by_layer.csv", table)
    PAIRED.write(context.results / "adjacency_paired.csv", paired)
    return adjacency_numbers(table, paired)


def measure_adjacency(
    models: Any, sizes: Any, *, n_boot: int = 1000
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Adjacency per layer on held-out task sequences in every view, for every trained seed,
    its own initial weights and its learned-position twin, each with a 95% bootstrap interval
    over the sequences; and each trained seed minus its own initial weights on the same
    sequences, with a paired bootstrap interval."""
    out, paired = [], []
    for name in TASKS:
        batch = models.trained(name)[1].sample(sizes.n_sequences, generator=gen(2), split="test")
        tokens, masks = task_masks(batch)
        scored: dict[tuple[str, int], dict] = {}
        for label, seed, model in variants(models, sizes, name):
            for layer, views, cosines in sequence_views(model, tokens, batch.lengths, masks):
                for view, scores in views.items():
                    scored.setdefault((label, seed), {})[layer, view] = scores
                    kept = scores[~np.isnan(scores)]
                    low, high = bootstrap_interval(kept, n_boot=n_boot)
                    key = {"task": name, "model": label, "seed": seed, "layer": layer}
                    out.append(
                        key
                        | dict(zip(("rows", "centred", "ties"), view, strict=True))
                        | {"adjacency": float(kept.mean()), "low": low, "high": high}
                        | {"mean_cosine": float(cosines[view[1]].mean())}
                        | {"n_sequences": kept.size}
                    )
            if label == RANDOM:  # the seed's own initial weights: pair them with the seed
                paired += _paired(name, seed, scored[TRAINED, seed], scored[label, seed], n_boot)
    return ADJACENCY.frame(out), PAIRED.frame(paired)


def _paired(name: str, seed: int, trained: dict, control: dict, n_boot: int) -> list[dict]:
    rows = []
    for (layer, view), scores in trained.items():
        theirs = control[layer, view]
        difference, low, high = paired_difference(scores, theirs, n_boot=n_boot)
        rows.append(
            {"task": name, "seed": seed, "layer": layer}
            | dict(zip(("rows", "centred", "ties"), view, strict=True))
            | {"difference": difference, "low": low, "high": high}
            | {"n_sequences": int((~np.isnan(scores - theirs)).sum())}
        )
    return rows


def score_view(table: pd.DataFrame, key: tuple[str, bool, str]) -> pd.DataFrame:
    """The rows of one (rows, centred, ties) view."""
    rows, centred, ties = key
    return table[(table["rows"] == rows) & (table["centred"] == centred) & (table["ties"] == ties)]


def adjacency_numbers(table: pd.DataFrame, paired: pd.DataFrame) -> dict[str, Any]:
    """Per view, task and layer >= 1: each trained seed minus its own initial weights on the
    same sequences (paired), "above" or "below" only when every seed's interval is
    ("versus"); per task (the study's score): the trained models' best layer >= 1 against
    their layer 0, and the controls' deepest layer against theirs, seed by seed."""
    views = []
    for key, label in ADJACENCY_VIEWS.items():
        summary = seed_summary(score_view(table, key), "adjacency", "low", "high")
        differences = score_view(paired, key)
        cells = [
            _versus(task, layer, group, differences) for (task, layer), group in _cells(summary)
        ]
        counts = Counter(c["versus"] for c in cells)
        views.append(
            {"view": label, "rows": key[0], "centred": key[1], "ties": key[2], "cells": cells}
            | {"counts": {v: counts.get(v, 0) for v in ("above", "below", "within")}}
        )
    main = score_view(table, MAIN_VIEW)
    return {
        "per_task": [_layer0(main, task) for task in main["task"].unique()],
        "views": views,
        "layers": sorted(int(x) for x in table["layer"].unique()),
        "means": records(seed_summary(main, "adjacency", "low", "high")),
        "mean_cosine": records(seed_summary(main, "mean_cosine")),
    }


def _cells(summary: pd.DataFrame):
    for (task, layer), group in summary.groupby(["task", "layer"], sort=False):
        if layer >= 1 and {TRAINED, RANDOM} <= set(group["model"]):
            yield (task, layer), group.set_index("model")


def _versus(task: str, layer: int, by: pd.DataFrame, paired: pd.DataFrame) -> dict[str, Any]:
    mine, theirs = by.loc[TRAINED], by.loc[RANDOM]
    seeds = paired[(paired["task"] == task) & (paired["layer"] == layer)]
    sides = [compare_intervals(r.low, r.high, 0.0, 0.0) for r in seeds.itertuples()]
    mean, low, high = seed_interval(seeds["difference"])
    return (
        {"task": task, "layer": int(layer)}
        | span_of("trained", mine)
        | span_of("control", theirs)
        | {"difference": mean, "difference_low": low, "difference_high": high}
        | {"seeds": len(sides), "seeds_above": sides.count("above")}
        | {"seeds_below": sides.count("below"), "versus": across_seeds(sides)}
    )


def _layer0(main: pd.DataFrame, task: str) -> dict[str, Any]:
    """The trained models' best layer >= 1 (by the mean over seeds) against their layer 0,
    and the controls' deepest layer against theirs: 'above' or 'below' when every seed's two
    intervals are apart that way, 'within' otherwise."""
    rows = main[main["task"] == task]
    layers = sorted(int(x) for x in rows["layer"].unique())
    trained, control = rows[rows["model"] == TRAINED], rows[rows["model"] == RANDOM]
    means = trained.groupby("layer")["adjacency"].mean()
    best, deepest = int(means.loc[layers[1:]].idxmax()), int(layers[-1])
    control_means = control.groupby("layer")["adjacency"].mean()
    return {
        "task": task,
        "best_layer": best,
        "trained_best": float(means.loc[best]),
        "trained_layer0": float(means.loc[layers[0]]),
        "trained_vs_layer0": _every_seed(trained, best, layers[0]),
        "control_deepest": float(control_means.loc[deepest]),
        "control_layer0": float(control_means.loc[layers[0]]),
        "control_vs_layer0": _every_seed(control, deepest, layers[0]),
        "seeds": sorted(int(s) for s in trained["seed"].unique()),
    }


def _every_seed(rows: pd.DataFrame, layer: int, base: int) -> str:
    outcomes = set()
    for _, seed_rows in rows.groupby("seed"):
        a, b = seed_rows.set_index("layer").loc[layer], seed_rows.set_index("layer").loc[base]
        outcomes.add(compare_intervals(a["low"], a["high"], b["low"], b["high"]))
    return outcomes.pop() if len(outcomes) == 1 else "within"


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    per_task, main = numbers["per_task"], numbers["views"][0]
    trained = [toward(t["trained_vs_layer0"]) for t in per_task]
    control = [toward(t["control_vs_layer0"]) for t in per_task]
    counts = "; ".join(
        f"{v['view']}: above {v['counts']['above']}, below {v['counts']['below']}, "
        f"within {v['counts']['within']}"
        for v in numbers["views"]
        if v["ties"] == "half" or v is main
    )
    seeds = seeds_text(s for t in per_task for s in t["seeds"])
    return [
        Verdict.tally(
            "Trained NoPE models: nearby hidden states are more similar",
            trained,
            seeds=seeds,
            unit="task",
            evidence="best layer >= 1 above layer 0, every seed's 95% bootstrap intervals apart",
        ),
        Verdict.tally(
            "Random-init NoPE models of the task architectures show the pattern too",
            control,
            seeds=seeds,
            unit="task",
            evidence="each trained seed's initial weights: deepest layer above layer 0, every "
            "seed's 95% intervals apart",
        ),
        Verdict.tally(
            "Training strengthens the pattern (control, not a claim of the study)",
            [toward(c["versus"]) for c in main["cells"]],
            seeds=seeds,
            unit="task x layer cell",
            evidence="each trained seed minus its own initial weights on the same sequences, "
            "paired 95% interval above 0 in every seed, layers >= 1 ("
            f"{seed_agreement(main['cells'])}); by view: {counts}",
        ),
    ]


def section(numbers: dict[str, Any], figures: Any) -> str:
    views = numbers["views"]
    per_task = "; ".join(
        f"{t['task']}: trained {fmt.n(t['trained_best'])} at layer {t['best_layer']} against "
        f"{fmt.n(t['trained_layer0'])} at layer 0 ({t['trained_vs_layer0']}, seeds "
        f"{seeds_text(t['seeds'])}); random-init NoPE {fmt.n(t['control_deepest'])} at its "
        f"deepest layer against {fmt.n(t['control_layer0'])} ({t['control_vs_layer0']})"
        for t in numbers["per_task"]
    )
    verdict = {(v["view"], c["task"], c["layer"]): c["versus"] for v in views for c in v["cells"]}
    rows = [
        [c["task"], c["layer"], fmt.span(c["trained"], c["trained_low"], c["trained_high"])]
        + [fmt.span(c["control"], c["control_low"], c["control_high"])]
        + [fmt.span(c["difference"], c["difference_low"], c["difference_high"])]
        + [f"{c['seeds_above']} / {c['seeds_below']} of {c['seeds']}"]
        + [verdict.get((v["view"], c["task"], c["layer"])) for v in views]
        for c in views[0]["cells"]
    ]
    header = ["task", "layer", "trained (seed span)", "own initial weights (seed span)"]
    header += ["trained - own initial (t-interval over seeds)", "seeds above / below"]
    means = [{**r, "adjacency": r["value"]} for r in numbers["means"]]
    return SECTION.format(
        figure=figures("adjacency_by_layer"),
        table=by_layer(means, "adjacency"),
        text=per_task + ".",
        views_figure=figures("adjacency_views"),
        mean_cosine=_mean_cosine(numbers),
        views_table=fmt.table(header + [f"trained is: {v['view']}" for v in views], rows),
        versus=_versus_text(views),
    )


SECTION = """{figure}

{table}

What it shows: {text} On task sequences layer 0 is not at chance (the prompt format puts the
same characters at the same places), so each layer is compared with layer 0, not with 0.5.
Uncertainty: each model's 95% bootstrap interval over sequences; with several seeds a
difference counts only when it holds for every seed's intervals.

### Trained against their own initial weights, in six views of the score

{views_figure}

The whole-sequence score mixes the prompt rows (which know only the prompt) with the answer
rows (each answer character resembles the character it copies), rewards states that all point
the same way (mean cosine between two positions of a sequence, trained and random-init by
layer: {mean_cosine}), and with strict ties puts chance below 0.5 where tokens repeat.
So each layer >= 1 is compared in six views, pair by pair: each trained seed against its own
initial weights (the random-init NoPE model it was trained from) on the same sequences, their
difference with a paired 95% bootstrap interval over the sequences. A cell is "above" or
"below" only when every seed's interval is; otherwise it is "within". The table gives the
study's score (mean over seeds, with the span of the seeds' intervals), the difference (mean
over seeds, with its Student-t interval over seeds), how many seeds lie above and below, then
the verdict of each view (results/adjacency_by_layer.csv has every view's scores,
results/adjacency_paired.csv every seed's difference).

{views_table}

{versus}"""


def by_layer(rows: list[dict[str, Any]], value: str) -> str:
    """A table of `value` with one row per (task, model) and one column per layer."""
    layers = sorted({r["layer"] for r in rows})
    by = {(r["task"], r["model"], r["layer"]): r[value] for r in rows}
    keys = dict.fromkeys((r["task"], r["model"]) for r in rows)
    return fmt.table(
        ["task", "model", *[f"layer {x}" for x in layers]],
        [[t, m, *[by.get((t, m, x)) for x in layers]] for t, m in keys],
    )


def _mean_cosine(numbers: dict[str, Any]) -> str:
    """The range of the mean cosine over layers >= 1, trained and random-init."""
    rows = [r for r in numbers["mean_cosine"] if r["layer"] >= 1]
    ranges = {m: [r["value"] for r in rows if r["model"] == m] for m in (TRAINED, RANDOM)}
    return ", ".join(f"{m} {fmt.n(min(v))} to {fmt.n(max(v))}" for m, v in ranges.items() if v)


def _versus_text(views: list[dict[str, Any]]) -> str:
    """Per view the counts, then the task x layer cells where every view agrees."""
    counts = "; ".join(
        f"{v['view']}: below in {v['counts']['below']}, within in {v['counts']['within']}, "
        f"above in {v['counts']['above']}"
        for v in views
    )
    outcome = {(v["view"], c["task"], c["layer"]): c["versus"] for v in views for c in v["cells"]}
    cells = [(c["task"], c["layer"]) for c in views[0]["cells"]]
    agree = {
        side: [c for c in cells if all(outcome.get((v["view"], *c)) == side for v in views)]
        for side in ("below", "above")
    }
    return (
        f"Of {len(cells)} task x layer cells, the trained models are {counts}. Below in every "
        f"view: {fmt.cells(agree['below'])}; above in every view: {fmt.cells(agree['above'])}. "
        "Elsewhere the verdict depends on the view or the seeds disagree."
    )


CAPTIONS = {
    "adjacency_by_layer": "Adjacency score per layer (the study's score: whole sequence, ties "
    "strict; layer 0 = token embeddings), per task: the trained NoPE models, random-init NoPE "
    "models of the same architecture, and random-init models with learned positions (mean "
    "over seeds; bars: std over seeds).",
    "adjacency_views": "Adjacency score per layer in four views (rows: the study's score, the "
    "prompt rows, the answer rows, the prompt rows of centred states; ties as half except in "
    "the first), trained against their own initial weights (mean over seeds; bars: from the "
    "lowest to the highest seed's 95% bootstrap interval over sequences).",
}


def adjacency_figure(table: pd.DataFrame):
    """Adjacency by layer, one panel per task, one line per model kind."""
    from adjpos.figures import plot_adjacency_by_layer

    return plot_adjacency_by_layer(table, panel="task", line="model")


def adjacency_views_figure(table: pd.DataFrame):
    """Four views of the score by layer, trained against random-init NoPE, seed spans."""
    shown = [(k, v) for i, (k, v) in enumerate(ADJACENCY_VIEWS.items()) if i == 0 or k[0] != "all"]
    frames = [
        seed_summary(view[view["model"] != LEARNED], "adjacency", "low", "high").assign(view=label)
        for view, label in ((score_view(table, key), label) for key, label in shown)
    ]
    title = "Adjacency by layer in four views (seed spans of 95% intervals)"
    return seed_spans_figure(pd.concat(frames), row="view", title=title, y_title="adjacency")


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    table = ADJACENCY.read(results / "adjacency_by_layer.csv")
    return {
        "adjacency_by_layer": (
            adjacency_figure(score_view(table, MAIN_VIEW)),
            CAPTIONS["adjacency_by_layer"],
        ),
        "adjacency_views": (adjacency_views_figure(table), CAPTIONS["adjacency_views"]),
    }
