"""The report of a study run: a markdown template filled with the numbers the stages wrote.

It draws nothing (the figures are files the pipeline wrote; the report links or embeds them),
computes no metric (every number is read from ``results/numbers/*.json``), and imports
neither torch nor plotly. Each verdict is a function of numbers and their uncertainty: a
difference inside twice its standard error (or a seed range) is a tie, not a win. The same
markdown becomes ``report.html`` with Python-Markdown, each figure embedded interactively.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adjpos.runs import write_text

TITLE = "adjpos reproduce: report"
TEMPLATE = """# {title}

{setup}

## The claims at a glance

{claims}

## The models

{models}

Each task model is a causal transformer with no positional encoding (NoPE), {source}. Exact-match
accuracy (whole answer right, greedy decoding) on fresh held-out prompts is at least {worst}: the
models solve their tasks, so they must know where their tokens are.

## Claim 1: nearby hidden states are more similar (the adjacency pattern)

{fig_adjacency_by_layer}

{adjacency_table}

What it shows: {adjacency_text} On task sequences layer 0 is not at chance (the prompt format
puts the same characters at the same places), so each layer is compared with layer 0, not with
0.5. Uncertainty: each model's 95% bootstrap interval over sequences; with several seeds a
difference counts only when it holds for every seed's intervals.

### Trained against untrained copies, in six views of the score

{fig_adjacency_views}

The whole-sequence score mixes the prompt rows (which know only the prompt) with the answer
rows (each answer character resembles the character it copies), rewards states that all point
the same way (mean cosine between two positions of a sequence, trained and random-init by
layer: {mean_cosine_text}), and with strict ties puts chance below 0.5 where tokens repeat.
So each layer >= 1 is compared in six views: trained seeds against random-init NoPE seeds of
the same architecture on the same sequences. A group spans from its lowest seed's 95% interval
to its highest; "above" or "below" needs the two spans apart, so a difference inside the seed
spread is no difference. The table gives the study's score with its spans, then the verdict of
each view (every view's numbers are in results/adjacency_by_layer.csv).

{views_table}

{versus_text}

## Claim 1, seen: self-cosine matrices of one prompt per task

{fig_cosine}

{cosine_table}

What it shows: at layer 0 a cell depends only on its two characters (a repeated character is
bright wherever it recurs). Where the pattern holds, each row is brightest next to the diagonal
and fades with distance; the table gives the adjacency score of each matrix for this one
sequence, which the table of Claim 1 averages over many.

## The other carrier: variance by position

{fig_variance_by_position}

{fig_variance_by_layer}

{variance_table}

What it shows: a ratio below 1 (variance lower over the last third of the positions than over
the first third) with a negative Spearman correlation of variance with position is the
shrinkage Chi et al. describe; each cell is the mean over seeds with the span of the seeds'
95% bootstrap intervals over sequences, and it counts as shrinking only when both spans lie
below their null (1 and 0). {variance_text}

## When the pattern appears: training dynamics

{fig_dynamics}

{dynamics_accuracy_table}

{dynamics_table}

What it shows: {dynamics_text}

## Claim 2: similarity carries position better than variance (probes)

{fig_probes}

One number against one, under the same flexible probe (spline R^2 at the best layer >= 1,
layer in brackets, ± its standard error over the folds), beside what the prompt format gives
away:

{probe_table}

Each trained model against random-init copies of its own architecture on the very same
sequences (best layer >= 1 of each):

{probe_control_table}

Order reconstruction from shuffled hidden states (|Kendall's tau|, best layer >= 1, ± its
standard error over sequences):

{order_table}

What it shows: {probe_text}

## Does the model read the pattern? (causal tests)

{fig_interventions}

Each trained model on fresh held-out prompts with one carrier of position changed at the input
of one block (layer 0 = the token embeddings), beside its control (exact match under greedy
decoding, the change active at every step, with its 95% bootstrap interval over prompts; "change
size" is the mean relative size ||x' - x|| / ||x|| of the change to the states, the control's in
brackets):

{causal_table}

What it shows: {causal_text}

## Claim 3: the pattern in random-init models, over which hyperparameters

{fig_sweep}

{sweep_table}

What it shows: {sweep_text}

## Claim 4: the first-layer argument

{fig_theory}

{theory_table}

What it shows: {theory_text}

## Run sizes

{sizes_table}

## What this does not show

These are short sequences (at most about 30 tokens, as in the study). How the pattern resolves
at long lengths, and whether attention uses it, are open; adjpos measures both
(examples/adjacency_by_length.py, examples/trained_adjacency_by_length.py,
examples/probes_by_length.py) and its documentation (docs/known-and-open.md) lists the choices
made where the study is silent.
"""


def write_report(out: str | Path, captions: Mapping[str, str], pngs: set[str]) -> tuple[Path, Path]:
    """Fill the template from the run in `out` and write ``report.md`` and ``report.html``.

    Args:
        out: the run's folder (``run.json``, ``results/``, ``figures/``).
        captions: figure stem -> caption, for every figure written to ``figures/``.
        pngs: the stems that also have a PNG (shown inline in the markdown).
    """
    import markdown

    out = Path(out)
    md = render(out, captions, pngs, html=False)
    body = markdown.markdown(render(out, captions, pngs, html=True), extensions=["tables"])
    write_text(out / "report.md", md)
    write_text(out / "report.html", _HTML.format(title=TITLE, body=body))
    return out / "report.md", out / "report.html"


def render(
    out: Path,
    captions: Mapping[str, str],
    pngs: set[str],
    *,
    html: bool,
    folder: str = "figures",
    links: bool = True,
    title: str = TITLE,
) -> str:
    """The report as markdown; with `html`, figures are embedded instead of linked.

    `folder` is where the figures are, relative to the report; `links` adds a link to each
    figure's interactive HTML there (off for a copy of the report without them)."""
    record = json.loads((out / "run.json").read_text())
    numbers = {
        p.stem: json.loads(p.read_text()) for p in (out / "results" / "numbers").glob("*.json")
    }

    def figures(prefix: str) -> str:
        stems = [s for s in captions if s == prefix or s.startswith(prefix + "_")]
        return "\n\n".join(
            _figure(f"{folder}/{s}", captions[s], s in pngs, html=html, links=links) for s in stems
        )

    models = numbers["models"]["models"]
    worst = min(models, key=lambda m: m["accuracy"])
    fields = {
        "title": title,
        "setup": _setup(record),
        "claims": _table(["claim", "verdict", "evidence"], claims(numbers)),
        "models": _models_table(models),
        "source": "trained by this run" if worst["source"] != "shipped" else "shipped with adjpos",
        "worst": f"{_n(worst['accuracy'])} ({worst['task']})",
        "fig_adjacency_by_layer": figures("adjacency_by_layer"),
        "fig_cosine": figures("cosine"),
        "fig_variance_by_position": figures("variance_by_position"),
        "fig_variance_by_layer": figures("variance_by_layer"),
        "fig_dynamics": figures("dynamics"),
        "fig_adjacency_views": figures("adjacency_views"),
        "fig_probes": figures("probes"),
        "fig_interventions": figures("interventions"),
        "fig_sweep": figures("sweep"),
        "fig_theory": figures("theory"),
        "sizes_table": _table(
            ["size", "value"], [[k, _n(v)] for k, v in record["spec"]["sizes"].items()]
        ),
    }
    fields.update(_adjacency_fields(numbers["adjacency"]))
    fields["cosine_table"] = _by_layer(numbers["cosine"]["scores"], "adjacency")
    fields.update(_variance_fields(numbers["variance"]))
    fields.update(_dynamics_fields(numbers["dynamics"]))
    fields.update(_probe_fields(numbers["probing"]))
    fields.update(_causal_fields(numbers["causal"]))
    fields.update(_sweep_fields(numbers["sweep"]))
    fields.update(_theory_fields(numbers["theory"]))
    return TEMPLATE.format(**fields)


def claims(numbers: Mapping[str, Any]) -> list[list[str]]:
    """One row per claim: the claim, its verdict, and the evidence, from the numbers alone."""
    adjacency, probes = numbers["adjacency"]["per_task"], numbers["probing"]["tasks"]
    trained_up = sum(t["trained_vs_layer0"] == "above" for t in adjacency)
    control_up = sum(t["control_vs_layer0"] == "above" for t in adjacency)
    views = numbers["adjacency"]["views"]
    versus = views[0]["counts"]
    variance = numbers["variance"]
    where, blocks = variance["where"], variance["blocks"]
    shrinks = {m: len(w["shrinks"]) for m, w in where.items()}
    cosine_wins = [p["cosine_vs_variance"] for p in probes]
    profile_wins = [p["profile_vs_variance_ridge"] for p in probes]
    order_wins = [p["seriation_vs_variance_sort"] for p in probes]
    first_wins = [p["first_sort_vs_variance_sort"] for p in probes]
    probe_versus = Counter(v["versus"] for v in numbers["probing"]["trained_vs_control"])
    sweep, theory = numbers["sweep"], numbers["theory"]
    close = theory["attn_out_within_0.05"]
    close_effective = theory["attn_out_within_0.05_effective"]
    n_tasks, n_probed = len(adjacency), len(probes)
    return [
        [
            "Trained NoPE models: nearby hidden states are more similar",
            _verdict(trained_up, n_tasks),
            f"best layer >= 1 above layer 0 for every seed (95% bootstrap intervals apart) in "
            f"{trained_up} of {n_tasks} tasks",
        ],
        [
            "Random-init NoPE models show the pattern too",
            _verdict(control_up, n_tasks),
            f"deepest layer above layer 0 in {control_up} of {n_tasks} task architectures; "
            f"{sweep['nope_above_chance']} of {sweep['nope_models']} NoPE sweep models above "
            "0.5 at their deepest layer",
        ],
        [
            "Training strengthens the pattern (control, not a claim of the study)",
            _verdict(versus["above"], sum(versus.values())),
            f"{_seed_counts(views[0])}, task x layer cells >= 1, seed spans of 95% intervals "
            "apart: "
            + "; ".join(
                f"{v['view']}: above {v['counts']['above']}, below {v['counts']['below']}, "
                f"within {v['counts']['within']}"
                for v in views
                if v["ties"] == "half" or v is views[0]
            ),
        ],
        [
            "Variance shrinks with position (Chi et al.)",
            _verdict(sum(shrinks.values()), sum(blocks.values())),
            "ratio and Spearman spans below 1 and 0, task x layer cells >= 1: "
            + "; ".join(
                f"{m} {shrinks[m]} of {blocks[m]} ({_cells(where[m]['shrinks'])})" for m in where
            ),
        ],
        [
            "Probes read position better from cosine similarities than from variance",
            _verdict(_wins(cosine_wins), n_probed) + _one_seed(cosine_wins),
            "one number against one under the spline probe (best layer >= 1, 2 standard errors "
            "over the folds): the best backward cosine number above the variance in "
            f"{_wins(cosine_wins)}, tied in {_ties(cosine_wins)}, below in "
            f"{_below(cosine_wins)} of {n_probed} trained models; the many-number profile "
            f"under ridge, not like against like, above in {_wins(profile_wins)} of {n_probed}",
        ],
        [
            "The cosine matrix orders shuffled states better than the variances",
            _verdict(_wins(order_wins), n_probed),
            f"spectral seriation above the variance sort (|Kendall's tau|, best layer >= 1, 2 "
            f"standard errors over sequences) in {_wins(order_wins)} of {n_probed} trained "
            f"models; the backward-only first-similarity sort above it in {_wins(first_wins)} "
            f"of {n_probed}",
        ],
        [
            "Training adds position information the random-init copies lack (control, not a "
            "claim of the study)",
            _verdict(probe_versus.get("above", 0), sum(probe_versus.values())),
            f"trained best score above the range of random-init copies of its architecture on "
            f"the same sequences in {probe_versus.get('above', 0)}, within in "
            f"{probe_versus.get('within', 0)}, below in {probe_versus.get('below', 0)} of "
            f"{sum(probe_versus.values())} task x carrier cells",
        ],
        *_causal_claims(numbers["causal"]),
        [
            "The first-layer averaging argument predicts the first layer",
            _verdict(len(close), theory["scales"]),
            f"attention output within 0.05 of the full-width prediction at {len(close)} of "
            f"{theory['scales']} init scales ({_list(close) or 'none'}); of the prediction at "
            f"the value vectors' effective width at {len(close_effective)} "
            f"({_list(close_effective) or 'none'})",
        ],
    ]


def _setup(record: Mapping[str, Any]) -> str:
    spec, provenance = record["spec"], record["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in provenance["versions"].items())
    models = "trained by this run" if spec["settings"]["train"] else "shipped"
    return (
        f"Sizes: {spec['settings']['size']} (listed under Run sizes); device used: "
        f"{provenance['device']}; models: {models}; "
        f"versions: {versions}. Every number below is in results/ (CSV and JSON; the numbers "
        "behind each verdict in results/numbers/); the figures are in figures/."
    )


def _models_table(models: Sequence[Mapping[str, Any]]) -> str:
    return _table(
        [
            "task",
            "seed",
            "model",
            "parameters",
            "layers x d_model x heads",
            "exact match (95% interval)",
            "prompts",
        ],
        [
            [
                m["task"],
                m["seed"],
                m["source"],
                m["parameters"],
                f"{m['n_layers']} x {m['d_model']} x {m['n_heads']}",
                _span(m["accuracy"], m["accuracy_low"], m["accuracy_high"]),
                m["n_prompts"],
            ]
            for m in models
        ],
    )


def _adjacency_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    lines = [
        f"{t['task']}: trained {_n(t['trained_best'])} at layer {t['best_layer']} against "
        f"{_n(t['trained_layer0'])} at layer 0 ({t['trained_vs_layer0']}, {t['seeds']} "
        f"seed{'s' if t['seeds'] > 1 else ''}); random-init NoPE {_n(t['control_deepest'])} at "
        f"its deepest layer against {_n(t['control_layer0'])} ({t['control_vs_layer0']})"
        for t in numbers["per_task"]
    ]
    views = numbers["views"]
    verdicts = {(v["view"], c["task"], c["layer"]): c["versus"] for v in views for c in v["cells"]}
    rows = [
        [
            c["task"],
            c["layer"],
            _span(c["trained"], c["trained_low"], c["trained_high"]),
            _span(c["control"], c["control_low"], c["control_high"]),
            *[verdicts.get((v["view"], c["task"], c["layer"])) for v in views],
        ]
        for c in views[0]["cells"]
    ]
    cosine = {(r["task"], r["model"], r["layer"]): r["value"] for r in numbers["mean_cosine"]}
    deep = [x for x in numbers["layers"] if x >= 1]
    ranges = {
        model: [v for (_, m, x), v in cosine.items() if m == model and x in deep]
        for model in ("trained", "random-init")
    }
    return {
        "adjacency_table": _by_layer(
            [{**r, "adjacency": r["value"]} for r in numbers["means"]], "adjacency"
        ),
        "adjacency_text": "; ".join(lines) + ".",
        "views_table": _table(
            [
                "task",
                "layer",
                "trained (seed span)",
                "random-init (seed span)",
                *[f"trained is: {v['view']}" for v in views],
            ],
            rows,
        ),
        "mean_cosine_text": ", ".join(
            f"{m} {_n(min(v))} to {_n(max(v))}" for m, v in ranges.items() if v
        ),
        "versus_text": _versus_text(views),
    }


def _versus_text(views: Sequence[Mapping[str, Any]]) -> str:
    """Per view the counts, then the task x layer cells where every view agrees."""
    counts = [
        f"{v['view']}: below in {v['counts']['below']}, within in {v['counts']['within']}, "
        f"above in {v['counts']['above']}"
        for v in views
    ]
    cells = [(c["task"], c["layer"]) for c in views[0]["cells"]]
    agree = {}
    for outcome in ("below", "above"):
        agree[outcome] = [
            cell
            for cell in cells
            if all(
                any((c["task"], c["layer"]) == cell and c["versus"] == outcome for c in v["cells"])
                for v in views
            )
        ]
    total = len(cells)
    return (
        f"Of {total} task x layer cells, the trained models are {'; '.join(counts)}. Below in "
        f"every view: {_cells(agree['below'])}; above in every view: {_cells(agree['above'])}. "
        "Elsewhere the verdict depends on the view or lies inside the seed spread."
    )


def _seed_counts(view: Mapping[str, Any]) -> str:
    """'3 trained and 3 random-init seeds per task' (ranges where tasks differ)."""
    counts = []
    for key, name in (("trained_seeds", "trained"), ("control_seeds", "random-init")):
        found = sorted({c[key] for c in view["cells"]}) or [0]
        span = str(found[0]) if len(found) == 1 else f"{found[0]} to {found[-1]}"
        counts.append(f"{span} {name}")
    return f"{counts[0]} and {counts[1]} seeds per task"


def _cells(cells: Sequence[Sequence[Any]]) -> str:
    """(task, layer) cells as 'task (layers a, b), ...'."""
    if not cells:
        return "none"
    by_task: dict[str, list[int]] = {}
    for task, layer in cells:
        by_task.setdefault(task, []).append(layer)
    return ", ".join(f"{task} ({_layers(layers)})" for task, layers in by_task.items())


def _span(value: Any, low: Any, high: Any) -> str:
    return f"{_n(value)} ({_n(low)} to {_n(high)})"


def _by_layer(records: Sequence[Mapping[str, Any]], value: str) -> str:
    """A table of `value` with one row per (task, model) and one column per layer."""
    layers = sorted({r["layer"] for r in records})
    by = {(r["task"], r["model"], r["layer"]): r[value] for r in records}
    keys = dict.fromkeys((r["task"], r["model"]) for r in records)
    return _table(
        ["task", "model", *[f"layer {x}" for x in layers]],
        [[t, m, *[by.get((t, m, x)) for x in layers]] for t, m in keys],
    )


def _variance_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    rows = [
        [
            c["task"],
            c["model"],
            c["layer"],
            _span(c["ratio"], c["ratio_low"], c["ratio_high"]),
            _span(c["spearman"], c["spearman_low"], c["spearman_high"]),
            c["seeds"],
            c["outcome"],
        ]
        for c in numbers["cells"]
    ]
    where, blocks = numbers["where"], numbers["blocks"]
    parts = [
        f"{model}: shrinks in {len(w['shrinks'])} of {blocks[model]} task x layer cells >= 1 "
        f"({_cells(w['shrinks'])}), grows in {len(w['grows'])}"
        for model, w in where.items()
    ]
    versus = Counter(v["versus"] for v in numbers["versus"])
    more = [(v["task"], v["layer"]) for v in numbers["versus"] if v["versus"] == "below"]
    return {
        "variance_table": _table(
            ["task", "model", "layer", "ratio (span)", "Spearman (span)", "seeds", "variance"],
            rows,
        ),
        "variance_text": "; ".join(parts) + ". Trained against random-init, layer by layer: "
        f"the trained ratio span lies below the controls' in {versus.get('below', 0)} of "
        f"{len(numbers['versus'])} cells ({_cells(more)}), above in {versus.get('above', 0)}.",
    }


def _dynamics_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    if not numbers["tasks"]:
        return {
            "dynamics_accuracy_table": "",
            "dynamics_table": "",
            "dynamics_text": "nothing: no measured model has training snapshots (the shipped "
            "models keep them for seed 0 when trained with them; see docs/pretrained.md).",
        }
    accuracy = _table(
        ["task", "seed", "first snapshot at 99% exact match", "last step", "final exact match"],
        [
            [a["task"], a["seed"], a["first_step_99"], a["final_step"], a["final_accuracy"]]
            for a in numbers["accuracy"]
        ],
    )
    shown = [t for t in numbers["trajectories"] if t["metric"] in DYNAMICS_SHOWN]
    table = _table(
        ["task", "seed", "metric", "layer", "start", "peak (step)", "end", "end vs start"],
        [
            [
                t["task"],
                t["seed"],
                t["metric"],
                t["layer"],
                t["start"],
                f"{_n(t['peak'])} ({t['peak_step']})",
                t["end"],
                "rises" if t["rises"] else "falls" if t["falls"] else "no change",
            ]
            for t in shown
        ],
    )
    counts = {}
    for metric in DYNAMICS_SHOWN:
        mine = [t for t in numbers["trajectories"] if t["metric"] == metric]
        counts[metric] = (
            f"{metric}: rises in {sum(t['rises'] for t in mine)}, falls in "
            f"{sum(t['falls'] for t in mine)} of {len(mine)} task x layer trajectories, "
            f"ends below its peak in {sum(t['fades_after_peak'] for t in mine)}"
        )
    text = (
        "from the initial weights (step 0) to the end of training, with the end against the "
        "start judged by 95% intervals apart: "
        + "; ".join(counts.values())
        + ". Snapshots are log-spaced, so early training is seen in detail; one seed per task."
    )
    return {"dynamics_accuracy_table": accuracy, "dynamics_table": table, "dynamics_text": text}


# The dynamics metrics the report tabulates (dynamics.csv has them all).
DYNAMICS_SHOWN = ("adjacency", "adjacency_prompt_centred", "variance_ratio", "probe_gain")

ONE_NUMBER_COLUMNS = ("variance", "norm", "cosine_first", "cosine_previous", "cosine_mean")


def _probe_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    rows, versus = numbers["tasks"], numbers["trained_vs_control"]
    one = [r["cosine_vs_variance"] for r in rows]
    profile = [r["profile_vs_variance_ridge"] for r in rows]
    orders = [r["seriation_vs_variance_sort"] for r in rows]
    firsts = [r["first_sort_vs_variance_sort"] for r in rows]
    counts = Counter(v["versus"] for v in versus)
    identity = [r["token_identity_r2"]["value"] for r in rows if r["token_identity_r2"]]
    return {
        "probe_table": _table(
            [
                "task",
                "variance",
                "norm",
                "cosine_first",
                "cosine_previous",
                "cosine_mean",
                "backward cosine vs variance",
                "profile vs variance (ridge, many vs one)",
                "token_identity R^2",
                "resid accuracy, layer 0",
                "resid accuracy, best",
            ],
            [
                [
                    r["task"],
                    *[_score(r[f"{n}_spline"]) for n in ONE_NUMBER_COLUMNS],
                    r["cosine_vs_variance"],
                    r["profile_vs_variance_ridge"],
                    _score(r["token_identity_r2"]),
                    _score(r["resid_accuracy_layer0"]),
                    _score(r["resid_accuracy"]),
                ]
                for r in rows
            ],
        ),
        "probe_control_table": _table(
            ["task", "carrier", "trained", "random-init copies", "trained vs copies"],
            [
                [
                    v["task"],
                    v["carrier"],
                    f"{v['trained']:.3f} ({v['layer']})",
                    f"{v['control_low']:.3f} to {v['control_high']:.3f}",
                    v["versus"],
                ]
                for v in versus
            ],
        ),
        "order_table": _table(
            [
                "task",
                "seriation (all pairs)",
                "first-similarity sort (backward)",
                "variance sort",
                "chance",
            ],
            [
                [
                    r["task"],
                    _score(r["spectral_seriation_tau"]),
                    _score(r["first_similarity_sort_tau"]),
                    _score(r["variance_sort_tau"]),
                    (r["variance_sort_tau"] or {}).get("chance"),
                ]
                for r in rows
            ],
        ),
        "probe_text": "One number against one under the spline probe, the best backward-only "
        "cosine number (the similarity to the first or to the previous token, what the model "
        f"itself can compare at position k) is above the variance in {_wins(one)}, tied in "
        f"{_ties(one)} and below in {_below(one)} of {len(rows)} trained models{_one_seed(one)}. "
        "The older comparison, the cosine profile (one similarity per other position, later "
        f"tokens included) against the one variance number under ridge, favours the profile "
        f"({_wins(profile)} of {len(rows)}) because it is many numbers against one. On task "
        "sequences the format alone names the position (token_identity R^2 "
        f"{_list([round(v, 2) for v in identity]) or 'not probed'}), and layer 0 already reads "
        "much of it, so the gain of a later layer over layer 0 is what the model computed. "
        f"Against the random-init copies of the same architecture on the same sequences the "
        f"trained models are above the copies' range in {counts.get('above', 0)}, within it in "
        f"{counts.get('within', 0)} and below it in {counts.get('below', 0)} of {len(versus)} "
        "task x carrier cells (range widened by 2 standard errors over the folds). Order "
        "reconstruction: "
        f"seriation of the whole cosine matrix is ahead of the variance sort in {_wins(orders)} "
        f"of {len(rows)} models, the backward-only first-similarity sort in {_wins(firsts)} "
        "(ties within 2 standard errors over sequences).",
    }


# The causal claims: what each tested intervention would show if the model needed that carrier.
CAUSAL_CLAIMS = {
    ("norm_permute", "norm_permute_mirrored"): "The model reads position from the norms: "
    "moving them between positions, every cosine kept, breaks the task beyond a size-matched "
    "control (causal test)",
    ("subspace_swap",): "The model reads position from its position subspace: swapping it "
    "between positions, norms kept, breaks the task beyond a random subspace of its rank "
    "(causal test)",
    ("leace_position",): "The model needs linear position information: erasing it breaks the "
    "task beyond erasing as many directions of shuffled labels (causal test)",
}
CAUSAL_WORDS = {
    "norm_permute": "norms moved (random permutation)",
    "norm_permute_mirrored": "norms moved (mirrored)",
    "subspace_swap": "position subspace swapped",
    "leace_position": "position erased (LEACE)",
    "uniform_attention": "uniform attention",
}


def _causal_claims(numbers: Mapping[str, Any]) -> list[list[str]]:
    """A cell where the change is no worse than its control is no evidence either way, so a
    claim with no necessary cell is "not shown", not refuted."""
    rows = [r for r in numbers["rows"] if r["layer"] >= 1]
    claims_rows = []
    for names, claim in CAUSAL_CLAIMS.items():
        mine = [r for r in rows if r["intervention"] in names]
        if not mine:
            claims_rows.append([claim, "not measured", "not in this run's interventions"])
            continue
        verdicts = Counter(r["verdict"] for r in mine)
        hits = verdicts.get("necessary", 0)
        verdict = _verdict(hits, len(mine)) if hits else "not shown"
        others = ", ".join(f"{v} at {n}" for v, n in verdicts.items() if v != "necessary")
        measured = [n for n in names if any(r["intervention"] == n for r in mine)]
        claims_rows.append(
            [
                claim,
                verdict,
                f"necessary at {hits} of {len(mine)} task x layer x intervention cells "
                f"(layers >= 1; {', '.join(measured)}); {others}",
            ]
        )
    return claims_rows


def _causal_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    rows = numbers["rows"]

    def interval(value: Any, low: Any, high: Any) -> str:
        return "" if value is None else f"{value:.3f} ({low:.3f} to {high:.3f})"

    table = _table(
        [
            "task",
            "layer",
            "change",
            "exact match",
            "control",
            "control's exact match",
            "baseline",
            "change size",
            "verdict",
        ],
        [
            [
                r["task"],
                r["layer"],
                CAUSAL_WORDS.get(r["intervention"], r["intervention"]),
                interval(r["exact_match"], r["low"], r["high"]),
                r["control"],
                interval(r["control_exact_match"], r["control_low"], r["control_high"]),
                r["baseline"],
                f"{r['perturbation']:.2f}"
                + (
                    ""
                    if r["control_perturbation"] is None
                    else f" ({r['control_perturbation']:.2f})"
                ),
                r["verdict"],
            ]
            for r in rows
        ],
    )
    inner = [r for r in rows if r["layer"] >= 1]
    norm_lines, total_beyond = [], 0
    for name, words in (
        ("norm_permute", "a random permutation"),
        ("norm_permute_mirrored", "the mirror"),
    ):
        mine = [r for r in inner if r["intervention"] == name]
        if not mine:
            continue
        dropped = sum(r["verdict"] != "not needed" for r in mine)
        beyond = [r for r in mine if r["verdict"] == "necessary"]
        total_beyond += len(beyond)
        where = ", ".join(f"{r['task']} {r['layer']}" for r in beyond) or "none"
        norm_lines.append(
            f"moved by {words}, below the baseline in {dropped} and beyond the size-matched "
            f"control in {len(beyond)} of {len(mine)} cells (task and layer: {where})"
        )
    reading = (
        "where the drop goes beyond the control, it is where the norms went, not only how much "
        "they changed, that broke the task; elsewhere a change of norms this large breaks the "
        "model wherever it lands, and the drop shows nothing about position"
        if total_beyond
        else "a change of norms this large breaks the model wherever it lands, so these drops "
        "do not show that the model reads position from the norms"
    )
    per_task = []
    for task in dict.fromkeys(r["task"] for r in rows):
        found = numbers["necessary"].get(task, {})
        named = [
            f"{CAUSAL_WORDS.get(name, name)} at {_layers([x for x in layers if x >= 1])}"
            for name, layers in found.items()
            if any(x >= 1 for x in layers)
        ]
        per_task.append(f"{task}: {'; '.join(named) or 'no carrier beyond its control'}")
    text = (
        "Every cosine kept and the norms moved (layers >= 1): "
        + ("; ".join(norm_lines) or "not measured")
        + f". The size-matched control applies the very same norm ratios at random places, so "
        f'{reading}. Carriers whose change breaks the task beyond its control ("necessary": '
        f"exact match below the control's interval and at least {_n(numbers['min_gap'])} below "
        f"it, with a change at most {_n(numbers['size_slack'])} times the control's; uniform "
        f"attention has no matched control and is judged against the baseline): "
        f"{'; '.join(per_task)}. At layer 0 the states are the token embeddings, which carry "
        'no position: the "position" subspace and LEACE there find the directions of the '
        "tokens the format puts at each place, so layer 0 is shown but left out of the counts. "
        "Each verdict is for one trained model per task, and the intervals are over prompts "
        "only (not over training seeds)."
    )
    return {"causal_table": table, "causal_text": text}


def _layers(layers: Sequence[int]) -> str:
    return f"layer{'s' if len(layers) > 1 else ''} {_list(layers)}"


def _sweep_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    band = [r["init_range"] for r in numbers["by_init"] if r["mean"] >= 0.6]
    return {
        "sweep_table": _table(
            ["init_range", f"mean adjacency at layer {numbers['deepest_layer']}", "std", "models"],
            [[r["init_range"], r["mean"], r["std"], r["n"]] for r in numbers["by_init"]],
        ),
        "sweep_text": f"{numbers['above_chance']} of {numbers['models']} random-init models "
        f"(every grid cell and seed, NoPE or not) and {numbers['nope_above_chance']} of "
        f"{numbers['nope_models']} NoPE ones score above chance at their deepest layer. In the "
        "init x width grid the mean score reaches 0.6 at init scales "
        f"{_list(band) if band else 'none'}; the first-layer argument explains why the pattern "
        "weakens at both ends (Claim 4).",
    }


def _theory_fields(numbers: Mapping[str, Any]) -> dict[str, str]:
    return {
        "theory_table": _table(
            [
                "init_range",
                "site",
                "attention entropy ratio",
                "measured",
                "std over seeds",
                "predicted (full width)",
                "effective width",
                "predicted (effective width)",
            ],
            [
                [
                    r["init_range"],
                    r["site"],
                    r["entropy_ratio"],
                    r["measured"],
                    r["measured_std"],
                    r["predicted"],
                    r["effective_width"],
                    r["predicted_effective"],
                ]
                for r in numbers["rows"]
            ],
        ),
        "theory_text": "with near-uniform attention (entropy ratio near 1) the averaging "
        "argument predicts the measured first-layer score; it holds within 0.05 for the "
        f"attention output at init scales {_list(numbers['attn_out_within_0.05']) or 'none'} "
        "at the full width d_model, and at "
        f"{_list(numbers['attn_out_within_0.05_effective']) or 'none'} at the effective "
        "width of the value vectors ((tr S)^2 / tr(S^2) of their covariance: the prediction "
        "assumes isotropic value vectors, and the real ones span fewer directions). As "
        "init grows, attention becomes peaked (the entropy ratio falls) and the measured score "
        "leaves the prediction; the residual (resid_mid) adds an unshared term and lowers both.",
    }


def _figure(path: str, caption: str, png: bool, *, html: bool, links: bool) -> str:
    if html:
        return (
            f'<figure><iframe src="{path}.html" width="1040" height="560" '
            f'style="border:0"></iframe><figcaption>{caption}</figcaption></figure>'
        )
    image = f"![{caption}]({path}.png)\n\n" if png else ""
    link = f" ([interactive figure]({path}.html))" if links else ""
    return f"{image}*{caption}*{link}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_n(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _n(value: Any) -> str:
    """A number or value as prose: floats to 3 decimals, lists joined, nothing as a blank."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return _list(value) or "none"
    if isinstance(value, dict):  # a sub-grid: its axes
        return " x ".join(f"{k} ({_list(v)})" for k, v in value.items())
    return str(value)


def _list(values: Sequence[Any]) -> str:
    joiner = "; " if any(isinstance(v, dict) for v in values) else ", "
    return joiner.join(_n(v) for v in values)


def _score(score: Mapping[str, Any] | None) -> str:
    """'value ± standard error (layer)'; the std over seeds where there is no standard error."""
    if score is None:
        return "not probed"
    for key in ("sem", "std"):
        error = score.get(key)
        if error is not None and error == error:  # NaN: not measured
            return f"{score['value']:.2f} ± {error:.2f} ({score['layer']})"
    return f"{score['value']:.2f} ({score['layer']})"


def _verdict(hits: int, total: int) -> str:
    if total and hits == total:
        return "supported"
    return "partly supported" if hits else "not supported"


def _wins(outcomes: Sequence[str]) -> int:
    return sum(o.startswith("above") for o in outcomes)


def _ties(outcomes: Sequence[str]) -> int:
    return sum(o == "tie" for o in outcomes)


def _below(outcomes: Sequence[str]) -> int:
    return sum(o.startswith("below") for o in outcomes)


def _one_seed(outcomes: Sequence[str]) -> str:
    return " (one seed: no spread to judge by)" if any("one seed" in o for o in outcomes) else ""


_HTML = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:Helvetica,Arial,sans-serif;max-width:1060px;margin:2em auto;
line-height:1.45}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;
text-align:right}}figcaption{{font-style:italic}}</style></head><body>
{body}
</body></html>
"""
