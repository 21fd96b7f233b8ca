"""The rule over the position-curve arms, fed synthetic numbers of model kinds whose answer is
known (a model that ignores the curve, one that reads its absolute directions, an address
reader that matches positions by similarity, a locality reader, an edge reader, noise),
reaching every outcome of every claim, sizes whose random control breaks the task left
unmeasured; and the bootstrap over prompts and draws against a loop."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.interventions.curve.numbers import CellNumbers, SizeNumbers
from adjpos.stats import Interval, Outcome, paired_draw_difference
from adjpos.study.claim import CRITERIA
from adjpos.study.rules import CLAIMS, check_passed, hypothesis_outcomes, row_passed

SHIFTS = ("shift+1", "shift-1")
TESTED = (*SHIFTS, "rotate", "scatter", "remove", "edges")
NAMES = (*TESTED, "random", "edges_random", "unchanged")
CONTROL = {"edges": "edges_random"}  # each tested arm's random control ("random" if not here)
# A check number that passes each arm's check (the arm table's `Check`; NaN: none to pass).
PASSING = {"shift+1": 0.9, "shift-1": 0.9, "rotate": 0.0, "scatter": 0.3, "edges": 1.0}


def size_numbers(em, *, width=0.02, follow=0.5, failed=(), size=0.1):
    """One size from each arm's exact match: every difference the rule reads as
    a - b +- width, every check passed but `failed`, the shifts' share of wrong answers at
    offset k `follow` above the random control's (+- 0.05)."""
    pairs = [(a, CONTROL.get(a, "random")) for a in TESTED]
    pairs += [("rotate", "unchanged"), ("scatter", "rotate")]
    pairs += [(a, s) for s in SHIFTS for a in ("rotate", "scatter")]
    differences = {
        (a, b): Interval(em[a] - em[b], em[a] - em[b] - width, em[a] - em[b] + width)
        for a, b in pairs
    }
    offsets = {
        s: {j: Interval(v, v - 0.05, v + 0.05) for j, v in ((k, 0.6), (-k, 0.02), (0, 0.0))}
        for s, k in zip(SHIFTS, (1, -1), strict=True)
    }
    follows = dict.fromkeys(SHIFTS, Interval(follow, follow - 0.05, follow + 0.05))
    checks = {a: (1.0 if a in failed else 0.0, PASSING.get(a, math.nan)) for a in TESTED}
    controls = {c: em[c] for c in ("random", "edges_random")}
    return SizeNumbers(size, differences, checks, offsets, controls=controls, follows=follows)


def cell(em_by_size, **options):
    return CellNumbers(("reversal", 1, 0), [size_numbers(em, **options) for em in em_by_size])


def outcome(em_by_size, **options):
    return hypothesis_outcomes([cell(em_by_size, **options)])["cells"][("reversal", 1, 0)]


BASE = {"unchanged": 0.95, "random": 0.9, "edges_random": 0.9, "edges": 0.9}
IGNORES = dict.fromkeys(NAMES, 0.95)
ABSOLUTE = BASE | {"shift+1": 0.05, "shift-1": 0.0, "rotate": 0.02, "scatter": 0.05}
ABSOLUTE |= {"remove": 0.1}
ADDRESS = BASE | {"shift+1": 0.055, "shift-1": 0.0, "rotate": 0.92, "scatter": 0.23}
ADDRESS |= {"remove": 0.5, "edges": 0.2}
LOCALITY = dict.fromkeys(NAMES, 0.9) | {"unchanged": 0.95, "scatter": 0.1, "remove": 0.6}


def test_a_model_that_ignores_the_curve_is_not_read_and_against_address_and_locality():
    got = outcome([IGNORES] * 3)
    assert (got.address, got.relational, got.locality) == ("against", "within", "against")
    assert got.reading == "not read"


def test_an_absolute_direction_reader_is_against_relational():
    got = outcome([ABSOLUTE] * 3)
    assert (got.address, got.relational, got.locality) == ("for", "against", "against")
    assert got.reading == "address+absolute"


def test_an_address_matched_by_similarity_is_address_and_relational():
    got = outcome([ADDRESS] * 3)
    assert (got.address, got.relational, got.locality) == ("for", "for", "against")
    assert got.boundary == "for"  # this kind reads its runs' edges too
    assert got.reading == "address+relational+boundary"


def test_an_edge_reader_is_boundary_and_nothing_else():
    got = outcome([IGNORES | {"edges": 0.3}] * 2)
    assert (got.address, got.locality, got.boundary) == ("against", "against", "for")
    assert got.reading == "boundary"
    assert outcome([IGNORES] * 2).boundary == "against"


def test_a_size_whose_random_control_breaks_the_task_is_not_measurable():
    """Below 0.25 exact match under the random curve, nothing the run arms do can be told
    apart: their claims are left within and counted; the edges, against their own control,
    are still read."""
    broken = ADDRESS | {"random": 0.2}
    got = outcome([broken] * 3)
    assert (got.address, got.relational, got.locality) == ("within",) * 3
    assert got.not_measurable == 3 and got.boundary == "for"
    assert outcome([broken, ADDRESS, ADDRESS]).not_measurable == 1
    looser = dataclasses.replace(CRITERIA, curve_measurable=0.1)
    judged = hypothesis_outcomes([cell([broken] * 3)], looser)["cells"][("reversal", 1, 0)]
    assert judged.not_measurable == 0 and judged.address == "for"


def test_a_locality_reader_needs_two_sizes():
    got = outcome([LOCALITY] * 3)
    assert (got.address, got.relational, got.locality) == ("against", "within", "for")
    assert got.reading == "locality"
    wide = dict.fromkeys(NAMES, 0.9)  # the other sizes: nothing breaks, but wide intervals
    one = outcome([LOCALITY, wide, wide], width=0.2)
    assert one.locality == "within"  # one size for, two that could still go either way
    assert outcome([LOCALITY, IGNORES, IGNORES]).locality == "against"  # two sizes against
    # Too few sizes to reach two is not evidence against: one undecided size stays within.
    assert outcome([wide], width=0.2).locality == "within"
    assert outcome([IGNORES]).locality == "against"  # one size, and it is against


def test_wrong_answers_that_do_not_follow_the_shift_leave_address_within():
    """A shift that breaks the task while its wrong answers sit at its offset no more often
    than the random curve's is not an address (within): against needs the shift to hold."""
    assert outcome([ABSOLUTE] * 3, follow=-0.3).address == "within"
    assert outcome([ABSOLUTE] * 3, follow=0.03).address == "within"  # the interval spans 0
    assert outcome([ABSOLUTE] * 3, follow=0.1).address == "for"


def test_noise_is_undecided():
    got = outcome([ADDRESS] * 3, width=1.0)
    assert (got.address, got.relational, got.locality) == ("within",) * 3
    assert got.reading == "undecided"


def test_an_arm_whose_check_failed_is_not_counted():
    got = outcome([ADDRESS] * 3, failed=("rotate",))
    assert got.relational == "within" and got.locality == "within"
    assert got.address == "for"
    assert {arm for _, arm in got.not_counted} == {"rotate"} and len(got.not_counted) == 3
    assert outcome([ADDRESS] * 3, failed=SHIFTS).address == "within"


def test_every_outcome_of_every_claim_is_reached_and_tallied():
    cells = [
        CellNumbers(("t", i, 0), [size_numbers(em, **opt) for _ in range(3)])
        for i, (em, opt) in enumerate(
            [
                (IGNORES, {}),
                (ABSOLUTE, {}),
                (ADDRESS, {}),
                (LOCALITY, {}),
                (ADDRESS, {"width": 1.0}),
            ]
        )
    ]
    result = hypothesis_outcomes(cells)
    for claim in CLAIMS:
        tally = result["claims"][claim]
        assert all(tally[o] for o in Outcome), (claim, tally)
        assert sorted(sum(tally.values(), [])) == sorted(c.key for c in cells)
    readings = {c.reading for c in result["cells"].values()}
    assert {"not read", "undecided", "locality", "address+absolute"} <= readings
    assert "address+relational+boundary" in readings


def test_the_tolerance_is_read_from_the_interval_bound():
    # a shift 0.06 below its control: breaks when the interval is tight, not when it is wide
    em = IGNORES | {"shift+1": 0.89, "shift-1": 0.89}
    assert outcome([em] * 3, width=0.005).address == "for"
    assert outcome([em] * 3, width=0.02).address == "within"
    wider = dataclasses.replace(CRITERIA, curve_tolerance=0.1)
    strict = hypothesis_outcomes([cell([em] * 3, width=0.005)], wider)
    assert strict["cells"][("reversal", 1, 0)].address == "against"


def test_each_arms_check_is_judged_from_its_numbers_by_the_criteria():
    for arm, value in PASSING.items():
        assert check_passed(arm, 0.0, value, criteria=CRITERIA)
        assert not check_passed(arm, 0.06, value, criteria=CRITERIA)  # size 6% off its target
        assert not check_passed(arm, 0.0, math.nan, criteria=CRITERIA)  # a check never measured
    assert check_passed("remove", 0.05, math.nan, criteria=CRITERIA)  # the size alone
    assert not check_passed("rotate", 0.0, 1e-5, criteria=CRITERIA)  # a distance moved
    assert not check_passed("scatter", 0.0, 0.01, criteria=CRITERIA)  # locality barely lowered
    assert not check_passed("shift-2", 0.0, 0.0, criteria=CRITERIA)  # the curve stayed
    # sized on half the prompts or more: compared on those; on fewer, not counted
    assert check_passed("scatter", 0.0, PASSING["scatter"], 0.5, criteria=CRITERIA)
    assert not check_passed("scatter", 0.0, PASSING["scatter"], 0.51, criteria=CRITERIA)
    looser = dataclasses.replace(
        CRITERIA, curve_locality_drop=0.005, curve_size_tolerance=0.1, curve_reach=0.3
    )
    assert check_passed("scatter", 0.06, 0.01, 0.6, criteria=looser)  # thresholds: the criteria


def test_an_arm_rows_check_reads_its_numbers_by_name():
    row = {"arm": "scatter", "size_error": 0.0, "check_value": PASSING["scatter"]}
    assert row_passed(row)  # a row without unreached_share reached every prompt
    assert not row_passed(row | {"unreached_share": 0.7})
    assert not row_passed(row | {"check_value": None})
    assert not row_passed(row | {"size_error": math.nan})
    frame_row = next(pd.DataFrame([row | {"unreached_share": 0.2}]).itertuples())
    assert row_passed(frame_row)


def slow_draw_bootstrap(a, b, n_boot, seed):
    """The same draws as `paired_draw_difference`, resampled by loops."""
    rng = np.random.default_rng(seed)
    prompts = rng.integers(0, a.shape[1], size=(n_boot, a.shape[1]))
    draws_a = rng.integers(0, len(a), size=(n_boot, len(a)))
    draws_b = rng.integers(0, len(b), size=(n_boot, len(b)))
    boots = []
    for r in range(n_boot):
        mean_a = np.mean([a[d, p] for d in draws_a[r] for p in prompts[r]])
        mean_b = np.mean([b[d, p] for d in draws_b[r] for p in prompts[r]])
        boots.append(mean_a - mean_b)
    return np.quantile(boots, [0.025, 0.975])


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 5), st.integers(2, 12))
def test_the_draw_bootstrap_matches_a_loop(seed, draws_a, draws_b, prompts):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, size=(draws_a, prompts)).astype(float)
    b = rng.integers(0, 2, size=(draws_b, prompts)).astype(float)
    got = paired_draw_difference(a, b, n_boot=50, seed=seed)
    low, high = slow_draw_bootstrap(a, b, 50, seed)
    assert (got.low, got.high) == pytest.approx((low, high))
    assert got.value == pytest.approx(a.mean() - b.mean())


def test_the_draws_widen_the_interval_and_a_constant_gap_has_none():
    rng = np.random.default_rng(0)
    hits = rng.integers(0, 2, size=(1, 200)).astype(float)
    gap = paired_draw_difference(hits, hits - 0.5)
    assert (gap.value, gap.low, gap.high) == pytest.approx((0.5, 0.5, 0.5))
    shared = rng.random(200)
    draws = shared + rng.normal(0, 0.3, size=(20, 200)) * rng.normal(1, 1, size=(20, 1))
    one = paired_draw_difference(shared[None], draws.mean(0, keepdims=True))
    many = paired_draw_difference(shared[None], draws)
    assert many.high - many.low > one.high - one.low
    with pytest.raises(ValueError, match="same prompts"):
        paired_draw_difference(np.zeros((2, 3)), np.zeros((2, 4)))
