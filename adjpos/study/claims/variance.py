"""The other carrier: the variance of the hidden state over d_model shrinks with position (Chi
et al.), trained models against random-init controls: per layer, the last-third / first-third
ratio and the Spearman correlation with position, each with a bootstrap interval."""

from __future__ import annotations

from textwrap import wrap
from typing import Any

import pandas as pd

from adjpos.metrics import position_variance
from adjpos.stats import VARIANCE_SUMMARY, every_seed, judge, variance_difference, variance_summary
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, per_seed, seeds_text
from adjpos.study.models import TRAINED, layer_states
from adjpos.study.views import KEYS, paired_seeds, seed_spans_figure, seed_summary, span_of
from adjpos.tables import Table

TITLE = "The other carrier: variance by position"

VARIANCE = KEYS + Table(position="int64", variance="float64")
VARIANCE_LAYERS = KEYS + Table(**VARIANCE_SUMMARY)
# Each trained seed's ratio and Spearman correlation minus its own initial weights'.
VARIANCE_PAIRED = Table(task="string", seed="int64", layer="int64")
VARIANCE_PAIRED += Table(**{k: v for k, v in VARIANCE_SUMMARY.items() if k != "n_sequences"})


def measure(context: Context) -> dict[str, Any]:
    draws = context.criteria.draws
    profiles, layers, paired = measure_variance(context.models, context.sizes, **draws)
    VARIANCE.write(context.results / "variance_by_position.csv", profiles)
    VARIANCE_LAYERS.write(context.results / "variance_by_layer.csv", layers)
    VARIANCE_PAIRED.write(context.results / "variance_paired.csv", paired)
    return variance_numbers(layers, paired)


def measure_variance(
    models: Any, sizes: Any, **draws: Any
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Variance of the hidden state over d_model by position (mean over sequences of one
    length), and per layer its ratio and Spearman correlation with position, each with a
    bootstrap interval over the sequences (`draws`: n_boot and level), for each trained seed
    and its own initial weights; and per seed and layer the trained minus the initial ratio
    and correlation on the same sequences, with paired intervals."""
    profiles, summary, paired, trained = [], [], [], {}
    for key, _, states in layer_states(models, sizes):
        values, (task, model, seed, layer) = position_variance(states).numpy(), key.values()
        profiles += [key | {"position": k, "variance": v} for k, v in enumerate(values.mean(0))]
        summary.append(key | variance_summary(values, **draws))
        if model == TRAINED:
            trained[task, seed, layer] = values
        else:  # the seed's own initial weights, on the same sequences
            difference = variance_difference(trained[task, seed, layer], values, **draws)
            paired.append({"task": task, "seed": seed, "layer": layer, **difference})
    frames = VARIANCE.frame(profiles), VARIANCE_LAYERS.frame(summary)
    return (*frames, VARIANCE_PAIRED.frame(paired))


def variance_numbers(table: pd.DataFrame, paired: pd.DataFrame) -> dict[str, Any]:
    """Per task, model kind and layer: the ratio and Spearman spans over seeds; per task and
    layer, each trained seed's ratio minus its own initial weights' (paired intervals) and
    their mean over seeds with its t-interval."""
    keys = ["task", "model", "layer"]
    spans = {m: seed_summary(table, m, f"{m}_low", f"{m}_high").set_index(keys) for m in LABELS}
    seeds = table.groupby(["task", "model"], sort=False)["seed"].unique()
    cells = []
    for (task, model, layer), ratio in spans["ratio"].iterrows():
        cell = {"task": task, "model": model, "layer": int(layer)} | span_of("ratio", ratio)
        cell |= span_of("spearman", spans["spearman"].loc[task, model, layer])
        cells.append(cell | {"seeds": sorted(int(x) for x in seeds[task, model])})
    versus = []
    for (task, layer), group in paired.groupby(["task", "layer"], sort=False):
        differences = paired_seeds(group, "ratio", "ratio_low", "ratio_high")
        versus.append({"task": task, "layer": int(layer)} | differences)
    return {"cells": cells, "versus": versus}


def shrinks(cell: dict[str, Any]) -> Outcome:
    """For when both spans lie below their null (ratio 1, correlation 0: every seed's
    interval does), against when both lie above, within otherwise."""
    ratio = judge(cell["ratio_low"], cell["ratio_high"], 1.0, 1.0, favour="below")
    rho = judge(cell["spearman_low"], cell["spearman_high"], 0.0, 0.0, favour="below")
    return every_seed([ratio, rho])


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    claim = "{kind} NoPE models: variance shrinks with position (Chi et al.)"
    evidence = f"ratio and Spearman spans of the seeds' {criteria.level:.0%} intervals below "
    evidence += f"1 and 0, layers >= {criteria.first_layer}"
    return Verdict.per_model_kind(numbers["cells"], criteria, claim, shrinks, evidence)


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    versus = {(v["task"], v["layer"]): v for v in numbers["versus"]}
    rows = []
    for c in (c for c in numbers["cells"] if c["layer"] >= criteria.first_layer):
        v = versus.get((c["task"], c["layer"])) if c["model"] == TRAINED else None
        paired = [fmt.span(v["difference"], v["difference_low"], v["difference_high"])] if v else []
        rows.append(
            [c["task"], c["model"], c["layer"]]
            + [fmt.span(c[m], c[f"{m}_low"], c[f"{m}_high"]) for m in LABELS]
            + [seeds_text(c["seeds"]), shrinks(c)]
            + (paired + [per_seed(v, "below")] if v else ["", ""])
        )
    header = ["task", "model", "layer", f"{LABELS['ratio']} (seed span)"]
    header += [f"{LABELS['spearman']} (seed span)", "seeds", "variance shrinks with position"]
    header += ["ratio - initial weights' ratio (t-interval over seeds)", "ratio below initial's"]
    text = fmt.text("variance.section", level=f"{criteria.level:.0%}")
    return fmt.section(figures("variance"), fmt.table(header, rows), text)


# What the two summaries of variance by position are, for tables and figures.
LABELS = {"ratio": "variance ratio, last third / first third of positions"}
LABELS["spearman"] = "rank correlation (Spearman) of variance with position"


def variance_figure(table: pd.DataFrame):
    """Variance by position of the trained models, one panel per task, one line per layer."""
    from adjpos.figures import plot_variance_by_position

    return plot_variance_by_position(table[table["model"] == TRAINED], panel="task", line="layer")


def variance_layers_figure(table: pd.DataFrame):
    """Ratio and Spearman correlation of variance with position by layer, seed spans, each
    row of panels named on its y axis (wrapped to fit beside the panel)."""
    frames = [
        seed_summary(table, m, f"{m}_low", f"{m}_high").assign(metric="<br>".join(wrap(label, 24)))
        for m, label in LABELS.items()
    ]
    title = "Variance against position by layer (seed spans of 95% intervals)"
    return seed_spans_figure(pd.concat(frames), row="metric", title=title)


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    profiles = variance_figure(VARIANCE.read(results / "variance_by_position.csv"))
    layers = variance_layers_figure(VARIANCE_LAYERS.read(results / "variance_by_layer.csv"))
    captions = fmt.texts("variance.captions", **LABELS)
    return fmt.captioned(captions, variance_by_position=profiles, variance_by_layer=layers)
