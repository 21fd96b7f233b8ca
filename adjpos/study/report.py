"""The figures and the report of a `reproduce` run, drawn from its result files alone.

Each section of the report is one claim of the study: a figure, a table of the numbers behind
it, and one paragraph, written from those numbers, saying what they show (including where they
do not support the claim). ``report.md`` embeds the PNGs when static export works and links the
interactive HTML figures always; ``report.html`` embeds the interactive figures.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

import plotly.graph_objects as go
import torch

from adjpos.figures import (
    plot_adjacency_by_layer,
    plot_cosine_heatmaps,
    plot_first_layer_theory,
    plot_probe_scores,
    plot_variance_by_position,
    save_figures,
    sweep_heatmap,
    sweep_histogram,
    sweep_layer_lines,
)
from adjpos.figures.sweep import last_layer_scores
from adjpos.metrics import adjacency_probability
from adjpos.models import ModelConfig
from adjpos.probes import ProbeResult
from adjpos.runs import write_text
from adjpos.study import stages
from adjpos.study.sweep import read_sweep_csv, rows_of_subgrid

Block = tuple  # ("h2", text) | ("p", text) | ("table", header, rows) | ("figure", stem, caption)


class Report:
    """Blocks of a report, and the figures they show, rendered to markdown and HTML."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.blocks: list[Block] = []
        self.figures: dict[str, go.Figure] = {}

    def heading(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def paragraph(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: list[str], rows: list[list[Any]]) -> None:
        self.blocks.append(("table", header, [[_cell(v) for v in row] for row in rows]))

    def figure(self, stem: str, fig: go.Figure, caption: str) -> None:
        self.figures[stem] = fig
        self.blocks.append(("figure", stem, caption))

    def markdown(
        self,
        pngs: set[str],
        *,
        folder: str = "figures",
        links: bool = True,
        title: str = "adjpos reproduce: report",
    ) -> str:
        """The report as markdown; `pngs` are the figures with a PNG in `folder`, and `links`
        adds a link to each figure's interactive HTML there."""
        parts = []
        for block in self.blocks:
            kind = block[0]
            if kind == "h2":
                parts.append(f"## {block[1]}")
            elif kind == "p":
                parts.append(block[1])
            elif kind == "table":
                header, rows = block[1], block[2]
                lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                lines += ["| " + " | ".join(row) + " |" for row in rows]
                parts.append("\n".join(lines))
            else:
                stem, caption = block[1], block[2]
                link = f" ([interactive figure]({folder}/{stem}.html))" if links else ""
                image = f"![{caption}]({folder}/{stem}.png)\n\n" if stem in pngs else ""
                parts.append(f"{image}*{caption}*{link}")
        return f"# {title}\n\n" + "\n\n".join(parts) + "\n"

    def html(self) -> str:
        parts = []
        for block in self.blocks:
            kind = block[0]
            if kind == "h2":
                parts.append(f"<h2>{html.escape(block[1])}</h2>")
            elif kind == "p":
                parts.append(f"<p>{html.escape(block[1])}</p>")
            elif kind == "table":
                head = "".join(f"<th>{html.escape(h)}</th>" for h in block[1])
                body = "".join(
                    "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                    for row in block[2]
                )
                parts.append(f"<table><tr>{head}</tr>{body}</table>")
            else:
                div = self.figures[block[1]].to_html(full_html=False, include_plotlyjs=False)
                parts.append(
                    f"<figure>{div}<figcaption>{html.escape(block[2])}</figcaption></figure>"
                )
        style = (
            "body{font-family:Helvetica,Arial,sans-serif;max-width:1060px;margin:2em auto;"
            "line-height:1.45}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:2px 8px;text-align:right}figcaption{font-style:italic}"
        )
        return (
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>adjpos reproduce</title>"
            f"<style>{style}</style><script src='figures/plotly.min.js'></script></head><body>"
            "<h1>adjpos reproduce: report</h1>" + "\n".join(parts) + "</body></html>\n"
        )


def write_report(out: Path) -> tuple[tuple[Path, ...], str | None]:
    """Draw every figure from ``out/results`` and write ``report.md`` and ``report.html``.

    Returns the figure files written and, when PNG export does not work, why (once).
    """
    report = build_report(out)
    saved = save_figures(report.figures, out / "figures")
    pngs = {p.stem for p in saved.written if p.suffix == ".png"}
    for name, text in (("report.md", report.markdown(pngs)), ("report.html", report.html())):
        write_text(out / name, text)
    return saved.written, saved.png_skipped


def build_report(out: Path) -> Report:
    """The report of the run in `out`, figures included, from its result files alone."""
    results = out / "results"
    run = json.loads((results / "run.json").read_text())
    report = Report(out)
    _setup(report, run, results)
    _adjacency(report, results)
    _cosine(report, results)
    _variance(report, results)
    _probing(report, results)
    _sweep(report, results, run["sizes"])
    _theory(report, results, run["sizes"]["theory_heatmap_scale"])
    _limits(report)
    return report


def _setup(report: Report, run: dict, results: Path) -> None:
    models = json.loads((results / "models.json").read_text())
    settings, versions = run["settings"], run["versions"]
    report.heading("The models")
    report.paragraph(
        f"Settings: {settings['size']} run on device "
        f"{settings['device']}; "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + ". Every number below is in results/ (CSV and JSON); the figures are in figures/."
    )
    report.table(
        ["task", "model", "parameters", "layers x d_model x heads", "exact match", "prompts"],
        [
            [
                m["task"],
                m["source"],
                m["parameters"],
                f"{m['n_layers']} x {m['d_model']} x {m['n_heads']}",
                m["accuracy"],
                m["n_prompts"],
            ]
            for m in models
        ],
    )
    worst = min(models, key=lambda m: m["accuracy"])
    report.paragraph(
        "Each task model is a causal transformer with no positional encoding (NoPE), "
        f"{'trained by this run' if models[0]['source'] != 'shipped' else 'shipped with adjpos'}. "
        f"Exact-match accuracy (whole answer right, greedy decoding) on fresh held-out prompts is "
        f"at least {worst['accuracy']:.3f} ({worst['task']}): the models solve their tasks, so "
        "they must know where their tokens are."
    )


def _adjacency(report: Report, results: Path) -> None:
    rows = read_sweep_csv(results / "adjacency_by_layer.csv")
    means = _mean_by(rows, ("task", "model", "layer"), "adjacency")
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    kinds = list(dict.fromkeys(r["model"] for r in rows))
    layers = sorted({r["layer"] for r in rows})
    report.heading("Claim 1: nearby hidden states are more similar (the adjacency pattern)")
    report.figure(
        "adjacency_by_layer",
        plot_adjacency_by_layer(rows, panel="task", line="model"),
        "Adjacency score per layer (0.5 = chance; layer 0 = token embeddings), per task: the "
        "trained NoPE model, random-init NoPE models of the same architecture, and random-init "
        "models with learned positions.",
    )
    report.table(
        ["task", "model", *[f"layer {layer}" for layer in layers]],
        [[t, k, *[means.get((t, k, layer)) for layer in layers]] for t in tasks for k in kinds],
    )
    lines, beats, lowest = [], 0, 1.0
    for t in tasks:
        lowest = min(lowest, *(means[(t, stages.RANDOM, layer)] for layer in layers[1:]))
        best = max(layers[1:], key=lambda layer: means[(t, stages.TRAINED, layer)])
        trained, base = means[(t, stages.TRAINED, best)], means[(t, stages.TRAINED, 0)]
        random = max(means[(t, stages.RANDOM, layer)] for layer in layers[1:])
        beats += trained > random
        lines.append(
            f"{t}: trained {trained:.2f} at layer {best} (layer 0: {base:.2f}), random-init NoPE "
            f"at most {random:.2f}"
        )
    report.paragraph(
        "What it shows: " + "; ".join(lines) + f". The trained model's best layer scores above "
        f"the random-init model of the same architecture in {beats} of {len(tasks)} tasks. On "
        "task sequences layer 0 is not at chance: the prompt format puts the same characters at "
        "the same places, so compare each layer with layer 0, not with 0.5. The random-init "
        f"NoPE models score at least {lowest:.2f} at every layer >= 1 of every task, without "
        "any training."
        + (
            " Training does not strengthen the pattern in these models: it leaves the trained "
            "models below untrained copies of their own architecture, while their residual "
            "streams come to carry position linearly (the resid probe of Claim 2)."
            if beats < len(tasks) / 2
            else ""
        )
    )


def _cosine(report: Report, results: Path) -> None:
    panels = json.loads((results / "cosine_heatmaps.json").read_text())
    report.heading("Claim 1, seen: self-cosine matrices of one prompt per task")
    for task in dict.fromkeys(p["task"] for p in panels):
        mine = [p for p in panels if p["task"] == task]
        n_layers = max(p["layer"] for p in mine) + 1
        fig = plot_cosine_heatmaps(
            [p["matrix"] for p in mine],
            titles=[f"{p['model']}, layer {p['layer']}" for p in mine],
            labels=[list(p["text"]) for p in mine],
            title=f"Self-cosine similarity, {task}: {mine[0]['text']}",
            columns=n_layers,
        )
        report.figure(
            f"cosine_{task}",
            fig,
            f"{task}: cosine similarity of each position's hidden state (rows) with the earlier "
            "positions (columns), trained (top) and random-init (bottom), every layer; axes "
            "carry the characters of the sequence ('.' ends the answer).",
        )
    scores = {
        (p["task"], p["model"], p["layer"]): float(
            adjacency_probability(torch.tensor(p["matrix"], dtype=torch.float64))
        )
        for p in panels
    }
    deepest = max(p["layer"] for p in panels)
    report.table(
        ["task", "model", *[f"layer {layer}" for layer in range(deepest + 1)]],
        [
            [t, m, *[scores.get((t, m, layer)) for layer in range(deepest + 1)]]
            for t, m in dict.fromkeys((p["task"], p["model"]) for p in panels)
        ],
    )
    report.paragraph(
        "What it shows: at layer 0 a cell depends only on its two characters (a repeated "
        "character is bright wherever it recurs). Where the pattern holds, each row is brightest "
        "next to the diagonal and fades with distance; the table gives the adjacency score of "
        "each matrix (the share of ordered pairs in its rows; 0.5 = chance) for this one "
        "sequence, which the table of Claim 1 averages over many."
    )


def _variance(report: Report, results: Path) -> None:
    rows = read_sweep_csv(results / "variance_by_position.csv")
    trained = [r for r in rows if r["model"] == stages.TRAINED]
    report.heading("The other carrier: variance by position")
    report.figure(
        "variance_by_position",
        plot_variance_by_position(trained, panel="task", line="layer"),
        "Variance of the trained models' hidden states over d_model, by position (mean over "
        "held-out sequences of one length), one line per layer.",
    )
    table, falls = [], {stages.TRAINED: 0, stages.RANDOM: 0}
    for (task, model), per in _group(rows, ("task", "model")).items():
        last = max(r["layer"] for r in per)
        values = [
            r["variance"] for r in sorted(per, key=lambda r: r["position"]) if r["layer"] == last
        ]
        third = max(1, len(values) // 3)
        ratio = mean(values[-third:]) / mean(values[:third])
        falls[model] += ratio < 1
        table.append([task, model, last, len(values), ratio])
    report.table(
        ["task", "model", "layer", "positions", "variance last third / first third"], table
    )
    n_tasks = len({r[0] for r in table})
    report.paragraph(
        "What it shows: a ratio below 1 (variance lower over the last third of the positions "
        "than over the first third, at the deepest layer) is the shrinkage Chi et al. describe. "
        f"It holds in {falls[stages.RANDOM]} of {n_tasks} random-init models and in "
        f"{falls[stages.TRAINED]} of {n_tasks} trained ones: training reshapes the variance "
        "profile around the prompt's format (see the figure), so it is a weaker guide to "
        "position after training than at initialisation. Whether a probe can read the "
        "position from it as well as from similarity is the next claim."
    )


def _probing(report: Report, results: Path) -> None:
    table, wins, orders, names, trained_resid = [], 0, 0, [], []
    report.heading("Claim 2: similarity carries position better than variance (probes)")
    for path in sorted(results.glob("probes_*.json")):
        result = ProbeResult.from_json(path)
        report.figure(
            path.stem, plot_probe_scores(result), f"Position probes per layer: {result.model}."
        )
        best = {name: _best_r2(result, name) for name in ("variance", "cosine_profile", "resid")}
        order = {
            method: max(
                (s for s in result.scores if s.probe == method and s.layer >= 1),
                key=lambda s: s.value,
            )
            for method in ("spectral_seriation", "variance_sort")
        }
        control = max(
            s.value
            for s in result.scores
            if s.features.startswith("shuffled:") and s.metric == "r2"
        )
        wins += _value(best["cosine_profile"]) > _value(best["variance"])
        orders += order["spectral_seriation"].value > order["variance_sort"].value
        if result.model.startswith(stages.TRAINED) and best["resid"] is not None:
            trained_resid.append(best["resid"].value)
        names.append(result.model)
        table.append(
            [
                result.model,
                *[_at_layer(b) for b in best.values()],
                control,
                _at_layer(order["spectral_seriation"]),
                _at_layer(order["variance_sort"]),
                order["variance_sort"].baseline,
            ]
        )
    report.table(
        [
            "model",
            "variance R^2 (layer)",
            "cosine profile R^2",
            "resid R^2",
            "shuffled control, max R^2",
            "order tau: seriation (layer)",
            "order tau: variance sort",
            "tau chance",
        ],
        table,
    )
    report.paragraph(
        f"What it shows: ridge R^2 at the best layer >= 1 (chance 0): the cosine profile "
        f"(similarities to every other position, diagonal deleted) reads position better than "
        f"the variance in {wins} of {len(names)} models. The shuffled controls stay near 0, so "
        "nothing in the features leaks the position by construction. Order reconstruction, the "
        "leak-free form of the claim, recovers the order of shuffled hidden states from the "
        "cosine matrix alone (spectral seriation) or from the variances alone: at the best "
        f"layer >= 1 the cosine matrix orders the tokens better in {orders} of {len(names)} "
        "models (|Kendall's tau| beside its chance level). "
        + (
            f"In every trained model a linear probe reads position from the raw residual with "
            f"R^2 >= {min(trained_resid):.2f}: training writes an explicit position code. "
            if trained_resid and min(trained_resid) >= 0.9
            else ""
        )
        + "On task data layer 0 is not at chance (fixed prompt formats), which is why only "
        "layers >= 1 count."
    )


def _sweep(report: Report, results: Path, sizes: dict) -> None:
    rows = read_sweep_csv(results / "sweep" / "sweep.csv")
    base = ModelConfig(n_layers=sizes["sweep_layers"])
    first = rows_of_subgrid(rows, sizes["grid"][0], base)
    report.heading("Claim 3: the pattern in random-init models, over which hyperparameters")
    report.figure(
        "sweep_init_by_width",
        sweep_heatmap(first, "init_range", "d_model"),
        "Random-init NoPE models: adjacency score at the deepest layer over init scale "
        "and width (mean over seeds).",
    )
    report.figure(
        "sweep_histogram",
        sweep_histogram(rows),
        "Adjacency scores of every random-init model of the sweep.",
    )
    positional = next((g for g in sizes["grid"] if "positional" in g), None)
    if positional is not None:
        sub = rows_of_subgrid(rows, positional, base)
        report.figure(
            "sweep_by_positional",
            sweep_layer_lines(sub, "positional"),
            "Random-init models: NoPE against learned, rotary and alibi positions.",
        )
    depth = next((g for g in sizes["grid"] if "normalization_type" in g), None)
    if depth is not None:
        sub = rows_of_subgrid(rows, depth, base)
        report.figure(
            "sweep_depth_by_norm",
            sweep_heatmap(sub, "n_layers", "normalization_type"),
            "Random-init NoPE models: depth against normalization placement.",
        )
    last = max(r["layer"] for r in first)
    by_init = _mean_by([r for r in first if r["layer"] == last], ("init_range",), "adjacency")
    report.table(
        ["init_range", f"mean adjacency at layer {last}"],
        [[k[0], v] for k, v in sorted(by_init.items())],
    )
    band = [k[0] for k, v in sorted(by_init.items()) if v >= 0.6]
    finals = last_layer_scores(rows)
    above = sum(score > 0.5 for score in finals)
    report.paragraph(
        f"What it shows: {above} of {len(finals)} random-init models (every grid cell and "
        f"seed, NoPE or not) score above chance at their deepest layer. "
        + (
            f"Among the NoPE models of the init x width grid the pattern is clearest (mean "
            f"score >= 0.6) at init scales {band}; "
            if band
            else "No init scale of the init x width grid reaches a mean score of 0.6; "
        )
        + "the first-layer argument explains why it weakens at both ends (see Claim 4)."
    )


def _theory(report: Report, results: Path, scale: float) -> None:
    rows = read_sweep_csv(results / "theory.csv")
    mats = json.loads((results / "theory_matrices.json").read_text())
    report.heading("Claim 4: the first-layer argument")
    report.figure(
        "theory_first_layer",
        plot_first_layer_theory(rows),
        "One-layer random-init NoPE models: measured first-layer adjacency against the "
        "prediction for near-uniform attention, and how uniform attention really is.",
    )
    report.figure(
        "theory_cosine",
        plot_cosine_heatmaps(
            [m.get("measured", m.get("predicted")) for m in mats],
            titles=[f"{m['site']} {'measured' if 'measured' in m else 'predicted'}" for m in mats],
            title=f"First layer at init_range {scale}: measured and predicted self-cosine",
            columns=2,
        ),
        f"Mean first-layer self-cosine matrix of a one-layer model at init_range {scale}, "
        "measured and predicted, attention output alone (attn_out) and with the residual "
        "(resid_mid).",
    )
    means = _mean_by(rows, ("init_range", "site"), "measured_adjacency")
    predicted = _mean_by(rows, ("init_range", "site"), "predicted_adjacency")
    entropy = _mean_by(rows, ("init_range", "site"), "entropy_ratio")
    keys = sorted(means)
    report.table(
        ["init_range", "site", "attention entropy ratio", "measured", "predicted"],
        [[k[0], k[1], entropy[k], means[k], predicted[k]] for k in keys],
    )
    close = [k[0] for k in keys if k[1] == "attn_out" and abs(means[k] - predicted[k]) < 0.05]
    report.paragraph(
        "What it shows: with near-uniform attention (entropy ratio near 1) the averaging "
        "argument predicts the measured first-layer score; it holds within 0.05 for the "
        f"attention output at init scales {close}. As init grows, attention becomes peaked "
        "(entropy ratio falls) and the measured score leaves the prediction; the residual "
        "(resid_mid) adds an unshared term and lowers both."
    )


def _limits(report: Report) -> None:
    report.heading("What this does not show")
    report.paragraph(
        "These are short sequences (at most about 30 tokens, as in the study). How the pattern "
        "resolves at long lengths, and whether attention uses it, are open; adjpos measures "
        "both (examples/adjacency_by_length.py, examples/trained_adjacency_by_length.py, "
        "examples/probes_by_length.py) and its documentation (docs/known-and-open.md) lists "
        "the choices made where the study is silent."
    )


def _best_r2(result: ProbeResult, name: str) -> Any:
    """The best ridge R^2 score of feature set `name` over layers >= 1 (None if not probed)."""
    scores = [s for s in result.scores if (s.features, s.metric) == (name, "r2") and s.layer >= 1]
    return max(scores, key=lambda s: s.value) if scores else None


def _value(score: Any) -> float:
    return float("-inf") if score is None else score.value


def _at_layer(score: Any) -> str:
    return "not probed" if score is None else f"{score.value:.2f} ({score.layer})"


def _mean_by(rows: list[dict], keys: tuple[str, ...], value: str) -> dict[tuple, float]:
    return {k: mean(r[value] for r in v) for k, v in _group(rows, keys).items()}


def _group(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return groups


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)
