"""Trained NoPE layers on text: the shipped language models (all-NoPE, all-RoPE, the hybrid with
every 4th layer NoPE) on held-out text shipped with the package, measured by `adjpos.text.layers`;
the verdicts judge the raw score with the sink left out, the hybrid's NoPE layers against the same
layers of the all-RoPE model of the same seed, and the causal position-curve tests."""

from __future__ import annotations

from typing import Any

from adjpos.interventions import SPECS
from adjpos.study import format as fmt
from adjpos.study.claim import Context, Criteria, Outcome, Verdict, every_seed, judge, seeds_text
from adjpos.text import layers as text
from adjpos.text.recipe import hybrid_nope_layers

TITLE = "Trained NoPE layers on text"
VIEW = "raw, sink out"  # the view the verdicts judge
PARTS = ("adjacency", "position", "versus", "causal")


def measure(context: Context) -> dict[str, Any]:
    models, tokenizer, missing = text.shipped_text_models(context.sizes.text_seeds)
    if not models:
        return {"missing": missing, "seeds": [], "nope_blocks": []} | dict.fromkeys(PARTS, [])
    cfg = next(iter(models.values())).cfg
    tokens = text.held_out_windows(tokenizer, context.sizes.text_sequences, cfg.n_ctx)
    blocks = hybrid_nope_layers(cfg.n_layers)
    options = {"control_draws": context.sizes.control_draws, **context.criteria.draws}
    result = text.measure_text_models(
        models, tokens, causal_layers=blocks, folds=min(context.sizes.cv, len(tokens)), **options
    )
    for part in PARTS:
        getattr(text, part.upper()).write(
            context.results / f"text_{part}.csv", getattr(result, part)
        )
    return {"missing": missing, "nope_blocks": list(blocks)} | text.summarise(result)


def above(cell: dict[str, Any], null: float) -> Outcome:
    """For when every seed's interval lies above `null`, against when every one below."""
    return every_seed(judge(low, high, null, null) for low, high in cell["per_seed"])


def reads_curve(cell: dict[str, Any], criteria: Criteria) -> Outcome:
    """Per seed, for when the loss minus the control's has its lower bound above
    `criteria.text_gap` and the change is at most `criteria.size_slack` times the control's,
    against when its upper bound is below `text_gap`; then over seeds (`every_seed`)."""
    found = []
    for low, high, size, control in cell["per_seed"]:
        matched = size <= criteria.size_slack * control
        reads, unread = low > criteria.text_gap and matched, high < criteria.text_gap
        found.append(Outcome.FOR if reads else Outcome.AGAINST if unread else Outcome.WITHIN)
    return every_seed(found)


def verdicts(numbers: dict[str, Any], criteria: Criteria) -> list[Verdict]:
    """Layers >= `criteria.first_layer`, sink left out. Per layout: the adjacency score above
    chance. After the hybrid's NoPE blocks: the hybrid above the all-RoPE model of the same seed.
    At their input: the curve's neighbours scattered raise the loss beyond mirroring it, in the
    all-NoPE model and the hybrid."""
    seeds, after = seeds_text(numbers["seeds"]), [b + 1 for b in numbers["nope_blocks"]]
    mine = [
        c for c in numbers["adjacency"] if c["view"] == VIEW and c["layer"] >= criteria.first_layer
    ]
    found = [
        (
            f"Trained language model ({layout}): the adjacency pattern on held-out text",
            "layer",
            [above(c, criteria.chance) for c in mine if c["layout"] == layout],
            f"every seed's interval above {fmt.n(criteria.chance)}, sink left out",
        )
        for layout in ("nope", "rope", "hybrid")
    ]
    versus = [above(c, 0.0) for c in numbers["versus"] if c["view"] == VIEW and c["layer"] in after]
    found.append(
        (
            "The hybrid's NoPE layers carry more adjacency than the all-RoPE model's same layers",
            "layer",
            versus,
            "every seed's paired interval (hybrid - rope) above 0",
        )
    )
    causal = [reads_curve(c, criteria) for c in numbers["causal"] if c["layout"] != "rope"]
    found.append(
        (
            "NoPE layers read the position curve's neighbours on text (causal)",
            "layout x layer cell",
            causal,
            f"every seed: loss above the control's by {fmt.n(criteria.text_gap)} nats or more",
        )
    )
    return [Verdict.tally(c, o, seeds=seeds, unit=u, evidence=e) for c, u, o, e in found]


def section(numbers: dict[str, Any], criteria: Criteria, figures: Any) -> str:
    if not numbers["seeds"]:
        return f"No text model is shipped here ({', '.join(numbers['missing'])} missing)."
    position = {(c["layout"], c["layer"], c["measure"]): c["value"] for c in numbers["position"]}
    rows, after = [], [b + 1 for b in numbers["nope_blocks"]]
    for c in (c for c in numbers["adjacency"] if c["view"] == VIEW):
        key, bounds = (c["layout"], c["layer"]), list(zip(*c["per_seed"], strict=True))
        rows.append([*key, c["kind"], fmt.span(c["value"], min(bounds[0]), max(bounds[1]))])
        rows[-1] += [fmt.n(position[(*key, m)]) for m in ("position share", "probe R^2")]
    pairs = [
        c | {"change": f"hybrid - rope, {c['view']}"}
        for c in numbers["versus"]
        if c["layer"] in after
    ]
    pairs += [c | {"change": SPECS[c["intervention"]].label} for c in numbers["causal"]]
    paired = [
        [c.get("layout", ""), c["layer"], c["change"], fmt.n(c["value"])]
        + [fmt.join([f"[{fmt.n(b[0])}, {fmt.n(b[1])}]" for b in c["per_seed"]])]
        + [above(c, 0.0) if "view" in c else reads_curve(c, criteria)]
        for c in pairs
    ]
    missing = ", ".join(numbers["missing"]) or "none"
    header = ["layout", "layer", "kind", f"adjacency, {VIEW} (seed span)", "position share"]
    before = BEFORE.format(seeds=seeds_text(numbers["seeds"]), missing=missing)
    tables = [fmt.table([*header, "probe R^2"], rows), PAIRED]
    tables.append(fmt.table(["layout", "layer", "change", "mean", "per seed", "reading"], paired))
    return fmt.section(figures("text"), before, *tables)


BEFORE = """The shipped language models (seeds {seeds}; not shipped: {missing}) on windows of
held-out Shakespeare (adjpos/text/heldout.txt, plays no model trained on). Per residual layer
(0 = the embeddings): the adjacency score with position 0 (the attention sink) left out, the
held-out position share of the states, the cross-validated ridge R^2 of position (chance 0):"""
PAIRED = """Paired by seed, intervals over the same windows: after each of the hybrid's NoPE blocks
the hybrid minus the all-RoPE model; at the input of those blocks (causal, every layout) the
continuation's next-token loss with the position curve's neighbours scattered minus with it
mirrored (a change of the same size), the sink kept:"""
CAPTIONS = {
    "text_adjacency": "Adjacency score by layer of the text models on held-out text, in four "
    "views (mean over seeds; bars: seed spans of 95% intervals).",
    "text_position": "Held-out decomposition shares and the ridge probe's R^2 of position by "
    "layer of the text models (mean over seeds; bars: the seeds' range).",
}


def figures(results: Any, sizes: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    from adjpos.figures.text import plot_text_layers

    if not (results / "text_adjacency.csv").is_file():
        return {}
    tables = [getattr(text, p.upper()).read(results / f"text_{p}.csv") for p in PARTS[:2]]
    return fmt.captioned(CAPTIONS, **plot_text_layers(*tables))
