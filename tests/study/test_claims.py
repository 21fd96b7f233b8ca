"""The claims' verdicts follow from their numbers alone. Each claim's `verdicts` is fed
synthetic numbers whose cells are built to be for, against or within, and must count them so,
every verdict of the claim; the status rule (`Status.of`) is checked on its own table."""

import pytest

from adjpos.study.claim import CRITERIA, Outcome, Status, Verdict, every_seed, judge, seeds_text
from adjpos.study.claims import NAMES, claim
from adjpos.study.models import RANDOM, TRAINED

FOR, AGAINST, WITHIN = Outcome.FOR, Outcome.AGAINST, Outcome.WITHIN
# Cell outcomes -> the status they must give; every case but the last reaches "against".
CASES = {
    "every outcome": ([FOR, AGAINST, WITHIN, FOR], Status.MIXED),
    "against only": ([AGAINST, AGAINST, WITHIN], Status.NOT_SUPPORTED),
    "for, none against": ([FOR, FOR, WITHIN], Status.SUPPORTED),
    "few for": ([FOR, WITHIN, WITHIN], Status.LIMITED),
    "within only": ([WITHIN, WITHIN], Status.NOT_SHOWN),
}
SEEDS = (0, 1, 2)
# An interval above, below or straddling 0 (or a reference shifted by it).
ABOUT_ZERO = {FOR: (0.1, 0.2), AGAINST: (-0.2, -0.1), WITHIN: (-0.1, 0.1)}


def _shifted(outcome, by, favour_below=False):
    low, high = ABOUT_ZERO[outcome]
    return (by - high, by - low) if favour_below else (by + low, by + high)


def _models(outcomes):
    accuracy = {FOR: (0.995, 0.999), AGAINST: (0.9, 0.95), WITHIN: (0.985, 0.995)}
    return {
        "models": [
            {"task": f"t{i}", "seed": 0, "accuracy": 0.99, "n_prompts": 2000}
            | dict(zip(("accuracy_low", "accuracy_high"), accuracy[o], strict=True))
            for i, o in enumerate(outcomes)
        ]
    }


def _adjacency(outcomes):
    scores, cells = [], []
    for i, o in enumerate(outcomes):
        for model in (TRAINED, RANDOM):
            for seed in SEEDS:
                key = {"task": f"t{i}", "model": model, "seed": seed}
                scores.append(key | {"layer": 0, "adjacency": 0.55, "low": 0.5, "high": 0.6})
                low, high = _shifted(o, 0.55)
                scores.append(key | {"layer": 1, "adjacency": (low + high) / 2, "low": low})
                scores[-1]["high"] = high
        cells.append({"task": f"t{i}", "layer": 1, "per_seed": [ABOUT_ZERO[o]] * len(SEEDS)})
    return {"scores": scores, "views": [{"view": "whole", "ties": "strict", "cells": cells}]}


def _variance(outcomes):
    ratio = {FOR: (0.5, 0.8), AGAINST: (1.2, 1.5), WITHIN: (0.9, 1.1)}
    cells = [
        {"task": f"t{i}", "model": model, "layer": 1, "seeds": list(SEEDS)}
        | {"ratio_low": ratio[o][0], "ratio_high": ratio[o][1]}
        | dict(zip(("spearman_low", "spearman_high"), _shifted(o, 0.0, True), strict=True))
        for model in (TRAINED, RANDOM)
        for i, o in enumerate(outcomes)
    ]
    return {"cells": cells, "versus": []}


def _decomposition(outcomes):
    cells = [
        {"task": f"t{i}", "model": model, "layer": 1, "seeds": list(SEEDS)}
        | {"per_seed": [ABOUT_ZERO[o]] * len(SEEDS)}
        for model in (TRAINED, RANDOM)
        for i, o in enumerate(outcomes)
    ]
    return {"cells": cells}


def _dynamics(outcomes):
    trajectories = [
        {"task": f"t{i}", "seed": seed, "metric": metric, "layer": 1}
        | {"start_low": 0.5, "start_high": 0.6}
        | dict(zip(("end_low", "end_high"), _shifted(o, 0.55), strict=True))
        for metric in ("adjacency", "probe_gain")
        for i, o in enumerate(outcomes)
        for seed in SEEDS
    ]
    return {"trajectories": trajectories}


def _probing(outcomes):
    def side(o):
        return dict(zip(("low", "high"), ABOUT_ZERO[o], strict=True))

    compared = ("cosine_first_vs_variance", "seriation_vs_variance_sort")
    rows = [
        {"task": f"t{i}", "seed": seed, "backward": compared[0]}
        | {"comparisons": {c: side(o) for c in compared}}
        for i, o in enumerate(outcomes)
        for seed in SEEDS
    ]
    versus = [
        {"task": f"t{i}", "comparison": "variance (spline R^2)", "seed": seed} | side(o)
        for i, o in enumerate(outcomes)
        for seed in SEEDS
    ]
    return {"rows": rows, "versus": versus, "seeds": list(SEEDS)}


def _causal(outcomes):
    from adjpos.interventions import SPECS
    from adjpos.study.claims.causal import CLAIMS

    # the first intervention of the table that tests each claim
    tested = {c: next(n for n, s in SPECS.items() if s.claim == c) for c in CLAIMS}

    em = {FOR: 0.1, AGAINST: 0.97, WITHIN: 0.5}
    difference = {FOR: (-0.8, -0.85, -0.75), AGAINST: (0.0, -0.05, 0.05), WITHIN: (-0.1, -0.3, 0.1)}
    rows = [
        {"task": f"t{i}", "seed": seed, "layer": 1, "intervention": name, "readout": "kept"}
        | {"control": "a control", "exact_match": em[o], "low": em[o] - 0.05, "high": em[o] + 0.05}
        | {"baseline_low": 0.96, "baseline_high": 1.0, "perturbation": 0.5}
        | {"control_perturbation": 0.5}
        | dict(zip(("difference", "difference_low", "difference_high"), difference[o], strict=True))
        for name in tested.values()
        for i, o in enumerate(outcomes)
        for seed in SEEDS
    ]
    return {"rows": rows, "seeds": list(SEEDS)}


# The position-curve arms of `_hypothesis`: exact match per arm at each of three sizes, every
# claim at once for, against (the shifts holding at one size; breaking at the others, with a
# rotation and a scatter as bad as them and wrong answers that do not follow) or within
# (intervals too wide to say).
ARMS = ("shift+1", "shift-1", "rotate", "scatter", "remove", "edges", "random")
ARMS += ("edges_random", "unchanged")
READS = dict(zip(ARMS, (0.5, 0.5, 0.94, 0.1, 0.6, 0.3, 0.9, 0.9, 0.95), strict=True))
HOLDS = dict(zip(ARMS, (0.9, 0.9, 0.9, 0.9, 0.5, 0.9, 0.9, 0.9, 0.95), strict=True))
BREAKS = dict(zip(ARMS, (0.05, 0.05, 0.05, 0.05, 0.5, 0.9, 0.9, 0.9, 0.95), strict=True))
CURVE = {FOR: [READS] * 3, AGAINST: [HOLDS, BREAKS, BREAKS], WITHIN: [READS] * 3}
IGNORES = dict.fromkeys(ARMS, 0.95)  # no change of the curve matters


def _curve_cell(task, seed, em, *, width=0.02, follow=0.5, layer=1, readout="kept"):
    """One cell's numbers as the hypothesis claim writes them, at three sizes (`em` one
    exact match per arm, or a list of three): every pair the rule reads as a - b +- `width`,
    the shifts' share of wrong answers at their offset `follow` above the random curve's
    (+- 0.05), every check passed."""
    ems = em if isinstance(em, list) else [em] * 3
    pairs = [(a, "random") for a in ARMS[:5]] + [("edges", "edges_random")]
    pairs += [("rotate", "unchanged"), ("scatter", "rotate")]
    pairs += [(a, s) for s in ARMS[:2] for a in ("rotate", "scatter")]
    offsets = {
        s: [[k, 0.6, 0.55, 0.65], [-k, 0.02, 0.0, 0.05], [0, None, None, None]]
        for s, k in (("shift+1", 1), ("shift-1", -1))
    }
    follows = dict.fromkeys(ARMS[:2], [follow, follow - 0.05, follow + 0.05])
    # every arm's size on target and its check number passing (the curve moved, distances
    # kept, locality dropped; none to read for the removal)
    passing = dict(zip(ARMS[:6], (1.0, 1.0, 0.0, 0.3, None, 1.0), strict=True))
    checks = {a: [0.0, v] for a, v in passing.items()}
    sizes = []
    for x, em in zip((0.1, 0.2, 0.3), ems, strict=True):
        d = [[a, b, em[a] - em[b], em[a] - em[b] - width, em[a] - em[b] + width] for a, b in pairs]
        controls = {c: em[c] for c in ("random", "edges_random")}
        sizes.append(
            {"size": x, "differences": d, "checks": checks, "offsets": offsets}
            | {"controls": controls, "follows": follows}
        )
    key = {"task": task, "seed": seed, "layer": layer, "readout": readout, "direction": 1}
    return key | {"sizes": sizes}


def _hypothesis(outcomes):
    """One task x layer x seed cell per outcome (against: wrong answers that follow no shift)."""
    options = {FOR: {}, AGAINST: {"follow": -0.3}, WITHIN: {"width": 1.0}}
    cells = [
        _curve_cell(f"t{i}", SEEDS[i % 3], CURVE[o], **options[o]) for i, o in enumerate(outcomes)
    ]
    return {"cells": cells, "seeds": list(SEEDS)}


def _sweep(outcomes):
    score = {FOR: 0.7, AGAINST: 0.3, WITHIN: CRITERIA.chance}  # a point at chance: within
    return {"nope_deepest": [score[o] for o in outcomes], "seeds": list(SEEDS)}


def _theory(outcomes):
    measured = {FOR: (0.60, 0.62), AGAINST: (0.80, 0.82), WITHIN: (0.55, 0.70)}
    rows = [
        {"init_range": 0.1 * (i + 1), "site": "attn_out", "predicted": 0.61}
        | dict(zip(("measured_low", "measured_high"), measured[o], strict=True))
        for i, o in enumerate(outcomes)
    ]
    return {"rows": rows, "seeds": list(SEEDS)}


def _text(outcomes):
    def cells(by, tail=(), **key):
        return [
            key
            | {"layer": i + 1, "value": by}
            | {"per_seed": [[*_shifted(o, by), *tail]] * len(SEEDS), "seeds": list(SEEDS)}
            for i, o in enumerate(outcomes)
        ]

    view = {"view": "raw, sink out"}
    adjacency = [c for x in ("nope", "rope", "hybrid") for c in cells(0.5, layout=x, **view)]
    # the shifts' loss minus the random curve's, in the rule's harm orientation (negated)
    harm = {FOR: (-0.3, -0.31, -0.29), AGAINST: (0.0, -0.001, 0.001), WITHIN: (-0.1, -0.3, 0.1)}
    causal = [
        {"layout": "nope", "layer": i + 1, "seeds": list(SEEDS)}
        | {"rule": [_text_rule(harm[o])] * len(SEEDS)}
        for i, o in enumerate(outcomes)
    ]
    return {"seeds": list(SEEDS), "nope_blocks": list(range(len(outcomes)))} | {
        "adjacency": adjacency,
        "versus": cells(0.0, a="hybrid", b="rope", **view),
        "causal": causal,
    }


def _text_rule(difference):
    shifts = ("shift-1", "shift+1")
    size = {"size": 0.05, "checks": dict.fromkeys(shifts, [0.0, 1.0]), "offsets": {}}
    size |= {"differences": [[a, "random", *difference] for a in shifts]}
    return {"direction": 1, "sizes": [size | {"percentiles": dict.fromkeys(shifts, 0.0)}]}


BUILDERS = {
    "models": _models,
    "adjacency": _adjacency,
    "variance": _variance,
    "decomposition": _decomposition,
    "dynamics": _dynamics,
    "probing": _probing,
    "causal": _causal,
    "hypothesis": _hypothesis,
    "sweep": _sweep,
    "theory": _theory,
    "text": _text,
}


def test_every_claim_with_a_verdict_has_a_builder():
    assert set(BUILDERS) == set(NAMES) - {"cosine"}
    assert claim("cosine").verdicts({"scores": []}, CRITERIA) == []  # an illustration


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_verdict_of_each_claim_counts_its_cells(name, case):
    outcomes, status = CASES[case]
    found = claim(name).verdicts(BUILDERS[name](outcomes), CRITERIA)
    assert found
    for verdict in found:
        counts = (verdict.n_for, verdict.n_against, verdict.n_within, verdict.n_cells)
        assert counts == (*(outcomes.count(o) for o in Outcome), len(outcomes)), verdict.claim
        assert verdict.status == status
        assert verdict.seeds in (seeds_text(SEEDS), "0 only")


def test_layers_below_the_first_counted_are_left_out():
    import dataclasses

    numbers = _decomposition([FOR, AGAINST])
    later = dataclasses.replace(CRITERIA, first_layer=2)
    assert claim("decomposition").verdicts(numbers, later)[0].n_cells == 0


def test_a_seed_that_disagrees_leaves_the_cell_within():
    numbers = _decomposition([FOR])
    for cell in numbers["cells"]:
        cell["per_seed"][1] = ABOUT_ZERO[AGAINST]
    verdict = claim("decomposition").verdicts(numbers, CRITERIA)[0]
    assert (verdict.n_within, verdict.status) == (1, Status.NOT_SHOWN)


@pytest.mark.parametrize(
    ("n_for", "n_against", "n_cells", "status"),
    [
        (4, 0, 4, Status.SUPPORTED),
        (2, 0, 4, Status.SUPPORTED),  # half the cells
        (13, 0, 16, Status.SUPPORTED),
        (1, 0, 4, Status.LIMITED),
        (1, 0, 12, Status.LIMITED),  # one cell of twelve is not "mixed"
        (1, 1, 4, Status.MIXED),
        (3, 1, 4, Status.MIXED),
        (0, 1, 4, Status.NOT_SUPPORTED),
        (0, 0, 4, Status.NOT_SHOWN),
        (0, 0, 0, Status.NOT_SHOWN),
    ],
)
def test_the_status_rule(n_for, n_against, n_cells, status):
    assert Status.of(n_for, n_against, n_cells) == status
    outcomes = [FOR] * n_for + [AGAINST] * n_against
    outcomes += [WITHIN] * (n_cells - n_for - n_against)
    verdict = Verdict.tally("c", outcomes, seeds="0 only", unit="task", evidence="e")
    assert verdict.status == status and verdict.row()["status"] == status.value
    assert verdict.counts.endswith(f"of {n_cells} {'task' if n_cells == 1 else 'tasks'} tested")


def test_a_verdict_refuses_a_word_for_an_outcome():
    with pytest.raises((TypeError, ValueError), match="outcomes"):  # typechecked in tests
        Verdict.tally("c", ["above"], seeds="0", unit="task", evidence="e")


@pytest.mark.parametrize(
    ("interval", "reference", "favour", "outcome"),
    [
        ((0.6, 0.7), (0.4, 0.55), "above", FOR),
        ((0.6, 0.7), (0.4, 0.55), "below", AGAINST),
        ((0.5, 0.7), (0.4, 0.55), "above", WITHIN),
        ((-0.3, -0.2), (-0.1, -0.1), "below", FOR),  # an upper bound beyond a gap
        ((float("nan"), 0.2), (0.0, 0.0), "above", WITHIN),
    ],
)
def test_judge(interval, reference, favour, outcome):
    assert judge(*interval, *reference, favour=favour) == outcome


def test_every_seed():
    assert every_seed([FOR, FOR]) == FOR and every_seed([AGAINST]) == AGAINST
    assert every_seed([FOR, AGAINST]) == WITHIN and every_seed([FOR, WITHIN]) == WITHIN
    assert every_seed([]) == WITHIN


def test_old_criteria_load_without_their_dropped_fields():
    import dataclasses

    from adjpos.study.claim import Criteria

    old = {"z": 2.0, "n_boot_prompts": 2000, "level": 0.9}
    assert Criteria.recorded(old) == Criteria(level=0.9)
    assert {"z", "n_boot_prompts"}.isdisjoint(f.name for f in dataclasses.fields(Criteria))


def test_a_table_keeps_a_pipe_inside_its_cell_and_aligns_text_left_numbers_right():
    import markdown

    from adjpos.study.format import table

    text = table(["claim", "n", "evidence"], [["a", 3, "|Kendall's tau| of 0.5"], ["b", None, "c"]])
    lines = text.splitlines()
    assert lines[1] == "|:---|---:|:---|"
    page = markdown.markdown(text, extensions=["tables"])
    assert page.count("<td") == 6 and "|Kendall's tau| of 0.5</td>" in page
    assert 'style="text-align: left;">a</td>' in page
    assert 'style="text-align: right;">3</td>' in page


def _hypothesis_verdicts(cells):
    found = claim("hypothesis").verdicts({"cells": cells, "seeds": list(SEEDS)}, CRITERIA)
    return {v.claim.split(":")[0]: v for v in found}


def test_a_model_that_ignores_the_curve_is_against_address_and_locality():
    """No change of the curve breaks the task: address and locality against (a shift holds
    against its random control, the scatter against the shifts), relational within (there
    is no broken shift to set the rotation against)."""
    found = _hypothesis_verdicts([_curve_cell("reversal", s, IGNORES) for s in SEEDS])
    address, relational, locality, boundary = found.values()
    assert boundary.status == Status.NOT_SUPPORTED
    assert address.status == locality.status == Status.NOT_SUPPORTED
    assert (address.n_against, locality.n_against, address.n_cells) == (3, 3, 3)
    assert relational.status == Status.NOT_SHOWN and relational.n_within == 3
    assert "reversal: no address at layer 1 in 3 of 3 seeds" in address.evidence


def test_a_model_that_reads_absolute_directions_is_against_relational():
    """The rotation (every curve distance kept) breaks the task as much as the shifts."""
    absolute = READS | {"rotate": 0.5}
    found = _hypothesis_verdicts([_curve_cell("indexing", s, absolute) for s in SEEDS])
    assert found["The model matches positions by similarity"].status == Status.NOT_SUPPORTED
    address = found["The model reads the position curve as an address"]
    assert address.status == Status.SUPPORTED
    assert "indexing: the curve is read as an address at layer 1 in 3 of 3 seeds" in (
        address.evidence
    )


def test_the_curve_claims_count_the_kept_readout_and_layers_from_the_first():
    cells = [_curve_cell("reversal", 0, READS, layer=x) for x in (0, 1, 2)]
    cells += [_curve_cell("reversal", 0, IGNORES, layer=1, readout="changed")]
    (address, *_) = _hypothesis_verdicts(cells).values()
    assert (address.n_for, address.n_cells) == (2, 2)
    assert "at layer 1 in 1 of 1 seeds, layer 2 in 1 of 1 seeds" in address.evidence


def test_a_verdict_that_moves_with_the_tolerance_is_marked_sensitive():
    """Shifts 0.07 below the random curve (+- 0.005): they break beyond t = 0.05 and at half
    of it, and hold at double it (their lower bound above -0.1): address is supported at t,
    not supported at 2t, so its verdict is sensitive; the others do not move."""
    near = READS | {"shift+1": 0.83, "shift-1": 0.83}
    found = _hypothesis_verdicts([_curve_cell("reversal", s, near, width=0.005) for s in SEEDS])
    address = found["The model reads the position curve as an address"]
    assert address.status == Status.SUPPORTED
    assert (address.at_half, address.at_double) == ("supported", "not supported")
    assert address.sensitive and address.row()["at_double"] == "not supported"
    boundary = found["The model reads where each run of digits begins and ends"]
    assert not boundary.sensitive and boundary.at_half == boundary.status.value
