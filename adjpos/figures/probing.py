"""Probe scores against layer, in panels that each hold one kind of feature set.

A panel is one probe and metric for one group of feature sets: the *backward-only* sets (what
the model itself sees at position k), the sets that also use later tokens, and the shuffled
controls. Panels without scores are never drawn.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from adjpos.figures.style import CHANCE, CONTROL_DASH, apply_style, color, label
from adjpos.validation import UsageError

if TYPE_CHECKING:
    from adjpos.probes.result import ProbeResult

METRIC_TITLES = {"r2": "R^2", "mae": "mean abs. error (lower is better)", "accuracy": "accuracy"}
METRIC_TITLES |= {"mean_abs_distance": "mean abs. distance (lower is better)"}
METRIC_TITLES |= {"abs_kendall_tau": "|Kendall's tau|"}
# Order reconstruction methods share one panel per group, so cosine and variance sit side by
# side.
ORDER_METRIC, ORDER_PANEL = "abs_kendall_tau", "order of shuffled states"
GROUPS = {"backward": "backward-only sets", "later": "sets using later tokens"}
GROUPS["control"] = "shuffled controls"
# The one set that does not depend on the layer: drawn as a level line across the layers.
LAYER_FREE = "token_identity"
# The feature sets (adjpos.probes.features, and the order reconstruction's cosine matrix) in
# the order of their colours (`style.color`): each keeps its colour in every probe figure,
# whichever sets a result holds. The cosine matrix, alone in its panels, takes the blue nearest
# the variance's; the token identity, beside the cosine sets, the brown.
FEATURE_ORDER = ("variance", "norm", "cosine_first", "cosine_previous", "cosine_mean")
FEATURE_ORDER += ("cosine_profile", "cosine_sorted", "resid", "cosine_matrix", "token_identity")
SHUFFLED = "shuffled:"


def plot_probe_scores(
    result: ProbeResult, *, title: str | None = None, columns: int = 2
) -> go.Figure:
    """Score vs layer for every feature set, one panel per (probe, metric, group of sets).

    Groups keep apart the backward-only sets (solid lines), the sets that also read later
    tokens (dash-dot) and the ``shuffled:`` controls (dotted). Each feature set keeps one
    colour in every panel and every probe figure (`feature_colours`: a control takes its
    set's); its chance baseline is the thin dashed line of the same colour,
    named "chance: SET" in the legend. ``token_identity``, which does not depend on the layer,
    is a level line. Error bars are the std in the result (over seeds, or over sequences
    for order reconstruction).

    Args:
        result: a `ProbeResult` (from `adjpos.probe_positions`, `adjpos.reconstruct_order`,
            or both added together).
        title: figure title (default: names the model and the data).
        columns: panels per row.
    """
    if not result.scores:
        raise UsageError("the result holds no scores to plot")
    panels: dict[tuple[str, str, str], list] = {}
    for score in result.scores:
        panels.setdefault(_panel(score), []).append(score)
    keys = list(panels)
    rows = math.ceil(len(keys) / columns)
    specs = [
        [{} if r * columns + c < len(keys) else None for c in range(columns)] for r in range(rows)
    ]
    titles = [f"{p}: {METRIC_TITLES.get(m, m)}<br>{GROUPS[g]}" for p, m, g in keys]
    spacing = dict(horizontal_spacing=0.1, vertical_spacing=min(0.5 / rows, 0.22))
    fig = make_subplots(rows=rows, cols=columns, specs=specs, subplot_titles=titles, **spacing)
    colours = feature_colours(result.feature_sets)
    layers = result.layers
    shown: set[str] = set()
    for index, key in enumerate(keys):
        where = dict(row=index // columns + 1, col=index % columns + 1)
        for name in colours:
            scores = [s for s in panels[key] if s.features == name]
            if scores:
                for trace in _traces(name, scores, colours[name], key[2], layers, shown):
                    fig.add_trace(trace, **where)
        fig.update_xaxes(title_text="layer", dtick=1, **where)
        metric = METRIC_TITLES.get(key[1], key[1])
        fig.update_yaxes(title_text=metric.split(" (")[0], **where)  # its panel title says more
    data = f"{result.n_sequences} sequences x {result.seq_len} tokens"
    default = f"Where is position? {result.model}: {data}"
    return apply_style(fig, title=title or default, rows=rows)


def feature_colours(names: list[str]) -> dict[str, str]:
    """Each feature set's colour (`FEATURE_ORDER`, then sets it lacks in first-seen order); a
    ``shuffled:`` control takes its set's colour, its line dotted."""
    bases = [name.removeprefix(SHUFFLED) for name in names]
    extra = [b for b in dict.fromkeys(bases) if b not in FEATURE_ORDER]
    index = {base: i for i, base in enumerate((*FEATURE_ORDER, *extra))}
    return {name: color(index[base]) for name, base in zip(names, bases, strict=True)}


def _panel(score) -> tuple[str, str, str]:
    probe = ORDER_PANEL if score.metric == ORDER_METRIC else score.probe
    if score.features.startswith(SHUFFLED):
        group = "control"
    else:
        group = "backward" if score.backward_only else "later"
    return probe, score.metric, group


def _traces(name, scores, colour, group, layers, shown: set[str]) -> list[go.Scatter]:
    scores = sorted(scores, key=lambda s: s.layer)
    x = [s.layer for s in scores]
    values, baselines = [s.value for s in scores], [s.baseline for s in scores]
    spread = [0.0 if math.isnan(s.std) else s.std for s in scores]
    if name == LAYER_FREE and len(scores) == 1:  # the same at every layer
        x, values, baselines, spread = layers, values * len(layers), baselines * len(layers), []
    # dash-dot, not long dashes: the legend's short sample of a long dash looks solid
    dash = {"control": CONTROL_DASH, "later": "dashdot"}.get(group, "solid")
    group = dict(x=x, legendgroup=name, showlegend=name not in shown)
    bars = dict(type="data", array=spread, thickness=1, width=3)
    line = go.Scatter(y=values, error_y=bars, mode="lines+markers", name=label(name), **group)
    line.update(line=dict(color=colour, dash=dash))
    chance = go.Scatter(y=baselines, mode="lines", name=f"chance: {label(name)}", **group)
    chance.update(hoverinfo="name+y", line={**CHANCE, "color": colour, "width": 1})
    shown.add(name)
    return [line, chance]
