"""The position curve's arms through the intervention table and its runner: the intervention
each arm builds does to the states what its arm says (random states), every row carries the
arm columns, the paired differences rebuild the rule's numbers (against the rule fed by hand
from each draw's hits), and bad settings are refused by name."""

import dataclasses

import numpy as np
import pytest
import torch

from adjpos import load_pretrained
from adjpos.interventions import (
    CURVE_DIFFERENCES,
    INTERVENTION_TABLE,
    SPECS,
    Dose,
    Fitted,
    cell_numbers,
    held_out_prompts,
    intervention_table,
    text_intervention_table,
)
from adjpos.interventions.curve.arms import TOLERANCE, CurveArm
from adjpos.interventions.curve.change import (
    apply_curve,
    build_curve_change,
    measured_curves,
    reached_prompts,
)
from adjpos.interventions.curve.columns import ARM_TABLE, curve_columns, fit_position_probe
from adjpos.interventions.curve.numbers import CellNumbers, SizeNumbers
from adjpos.interventions.specs import plan_units
from adjpos.runs import RunFolder
from adjpos.stats import Interval, paired_draw_difference, paired_share_difference
from adjpos.study.rules import hypothesis_outcomes
from adjpos.tasks.offsets import OFFSETS
from adjpos.training.decode import predict_cached
from factories import random_prompts

ARMS = [name for name, spec in SPECS.items() if spec.dosed]
COUNTS = {6: 5, 7: 3, 9: 4}  # measured prompts per length: the matching's weights


def _runs_of(tokens):
    """Two runs whose split depends on the prompt (as addition's operands do)."""
    split = 1 + int(tokens[0]) % 2
    return ((0, split), (split + 2, len(tokens) - 2))


@pytest.mark.parametrize("name", ARMS)
def test_each_arm_changes_the_prompt_states_as_its_curve_says(name):
    """Handed a prompt as `intervene` hands it (the positions before the read-out), an arm's
    intervention for the prompt's runs adds c' - c at its positions (norms kept) and nothing
    elsewhere; it needs the runs and the read-out kept."""
    prompts = random_prompts()
    spec = SPECS[name]
    dose = Dose(1, 1 if "offsets" in spec.params else None)
    fitted = Fitted(8, prompts=prompts, counts=COUNTS, runs_of=_runs_of)
    change = spec.build(fitted, draw=1, dose=dose)
    states = prompts[7][0]
    for runs in (((0, 1), (3, 5)), ((0, 4),)):
        curve, new = change.curves[7], change.new_curve(7, runs)
        changed = change.changed(7, runs)
        assert not changed[-1]  # no run reaches the read-out
        before = states[:, :6]
        got = change.at(runs)(before, readout=torch.zeros(6, dtype=torch.bool))
        want = apply_curve(states, curve, new, changed)[:, :6]
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got.norm(dim=-1), before.norm(dim=-1))
        assert torch.equal(got[:, ~changed[:6]], before[:, ~changed[:6]])
        # a scatter needs interiors of two positions or more (the fitting prompts' have none
        # at this length: it is left as it is there)
        assert torch.allclose(got, before) == change.matched[7].absent
    with pytest.raises(ValueError, match=r"apply change.at\(runs\)"):
        change(before, readout=torch.zeros(6, dtype=torch.bool))
    with pytest.raises(ValueError, match="the read-out kept"):
        change.at(runs)(states, readout=torch.arange(7) >= 6)


def test_every_arm_is_built_at_the_dose_size_within_five_percent_at_every_length():
    """Each arm's built intervention reaches, at every prompt length, the size of the full
    interior shift by m there (the edges arm whole, its control at the edges' size), and a
    shift is a shift by its own offset."""
    prompts = random_prompts(d=8, lengths=(13, 14, 16), n=10)
    fitted = Fitted(8, prompts=prompts, counts={13: 5, 14: 3, 16: 4}, runs_of=_long_runs)
    for size in (1, 2):
        built = [
            SPECS[n].build(fitted, draw=d, dose=Dose(size, k))
            for n in ARMS
            if size == 1 or n != "position_scatter"  # an interior reaches the shift by 1
            for k in ((-size, size) if "offsets" in SPECS[n].params else (None,))
            for d in range(2)
        ]
        for length in (13, 14, 16):
            dosed = {b.matched[length].target for b in built if not b.arm.kind.on == "edges"}
            assert len(dosed) == 1 and dosed.pop() > 0
            edges = {b.matched[length].target for b in built if b.arm.kind.on == "edges"}
            assert len(edges) == 1
        for b in built:
            assert b.size_errors and max(b.size_errors) <= TOLERANCE, b.arm
            assert all(reached_prompts([b], [13, 14, 16]))
        shifts = [b for b in built if b.arm.arm == "shift"]
        assert {b.arm.offset for b in shifts} == {-size, size}
        for length in (13, 14, 16):  # the smaller full shift, unblended, at every length
            assert max(b.matched[length].parameter for b in shifts) == 1.0
    # the counts weigh the lengths: the curves are those of the measured lengths only
    assert sorted(measured_curves(prompts, {13: 1, 16: 1})) == [13, 16]
    with pytest.raises(ValueError, match=r"no position curve fitted for prompt lengths \[5\]"):
        build_curve_change(prompts, {5: 2}, CurveArm("rotate"), size=1, runs_of=_long_runs)


def test_a_fractional_dose_is_that_share_of_the_shift_by_one_with_the_shifts_blended_to_it():
    prompts = random_prompts(d=8, lengths=(13, 16), n=10)
    fitted = Fitted(8, prompts=prompts, counts={13: 5, 16: 4}, runs_of=_long_runs)
    assert [d.offset for d in SPECS["position_shift"].doses([0.5, 2])] == [-1, 1, -2, 2]
    assert [d.key for d in SPECS["position_rotate"].doses([0.5, 1])] == ["size0.5", "size1"]
    half = [SPECS["position_shift"].build(fitted, draw=0, dose=Dose(0.5, k)) for k in (-1, 1)]
    whole = [SPECS["position_shift"].build(fitted, draw=0, dose=Dose(1, k)) for k in (-1, 1)]
    for length in (13, 16):
        target = whole[0].matched[length].target
        for shift in half:
            assert shift.matched[length].target == pytest.approx(target / 2)
            assert shift.matched[length].reached and shift.matched[length].parameter < 1
        assert max(shift.matched[length].parameter for shift in whole) == 1.0
    # the shift's check reads the direction it moves in: the same at half a blend as whole
    counts = {13: 5, 16: 4}
    fitted = Fitted(8, prompts=prompts, counts=counts, runs_of=lambda t: ((1, len(t) - 2),))
    shifts = [SPECS["position_shift"].build(fitted, draw=0, dose=Dose(m, 1)) for m in (0.5, 1)]
    measured = dict(
        lengths=[13] * 5 + [16] * 4,
        states={(n, ((1, n - 2),)): prompts[n][0][: counts[n]] for n in counts},
        tokens={n: prompts[n][1] for n in counts},
        probe=fit_position_probe(prompts, counts),
    )
    moved = [curve_columns([b], None, **measured)["curve_moved"] for b in shifts]
    assert moved[0] == pytest.approx(moved[1]) and moved[0] > 0


def _long_runs(tokens):
    split = 4 + int(tokens[0]) % 2
    return ((0, split), (split + 2, len(tokens) - 2))


def test_an_arm_that_can_change_nothing_at_a_length_leaves_it_and_says_how_many_prompts():
    prompts = random_prompts()
    fitted = Fitted(8, prompts=prompts, counts=COUNTS, runs_of=lambda t: ((1, 3),))
    scatter = SPECS["position_scatter"].build(fitted, draw=0, dose=Dose(1))
    # a run of three positions has an interior of one: nothing to scatter at any length
    assert all(m.absent for m in scatter.matched.values())
    assert scatter.size_errors == [] and reached_prompts([scatter], [7, 7]) == [False, False]


def test_lengths_an_arm_cannot_bring_to_its_size_are_left_out_and_counted():
    """A scatter of a short interior falls short of the shift by 2: those lengths are not
    reached (no size error there, their prompts left out)."""
    counts = {13: 5, 14: 3, 16: 4}
    prompts = random_prompts(d=8, lengths=tuple(counts), n=10)
    runs_of = lambda tokens: ((0, 4),) if len(tokens) < 16 else ((0, 14),)  # noqa: E731
    fitted = Fitted(8, prompts=prompts, counts=counts, runs_of=runs_of)
    built = [SPECS["position_scatter"].build(fitted, draw=d, dose=Dose(2)) for d in range(2)]
    for b in built:
        for n, m in b.matched.items():
            assert b.reaches(n) == (abs(m.size / m.target - 1) <= TOLERANCE) == m.reached
        short = [n for n in counts if not b.reaches(n)]
        assert short and len(short) < len(counts)  # the case at hand: some lengths, not all
        assert b.size_errors and max(b.size_errors) <= TOLERANCE
    lengths = [13, 14, 16, 16]
    want = [all(b.reaches(n) for b in built) for n in lengths]
    assert reached_prompts(built, lengths) == want


@pytest.fixture(scope="module")
def reversal_arms(tmp_path_factory):
    """Every arm on the shipped reversal model: 12 prompts, one size, two draws, the read-out
    kept, kept in a run folder (whose rows still hold each draw's hits)."""
    model, task = load_pretrained("reversal")
    folder = RunFolder.open(tmp_path_factory.mktemp("arms") / "run", kind="test", spec={})
    options = dict(layers=[1], n_prompts=12, control_draws=2, doses=[1], seed=0, model_seed=0)
    options |= dict(readouts=["kept"], interventions=ARMS)
    table, differences = intervention_table(
        model, task, **options, folder=folder, return_differences=True
    )
    return model, task, options, folder, table, differences


def test_every_arm_row_carries_its_columns(reversal_arms):
    _, _, _, _, table, differences = reversal_arms
    assert list(table.columns) == INTERVENTION_TABLE.names
    assert list(differences.columns) == CURVE_DIFFERENCES.names
    tested = ["shift-1", "shift+1", "rotate", "scatter", "remove", "edges"]
    names = [*tested, "random", "edges_random"]
    assert set(table["readout"]) == {"kept"}  # no run reaches the read-out
    rows = table.set_index("arm").loc[names]
    apart = ("arm", "offset", "n_wrong", "check_value")
    must = [c for c in ARM_TABLE.names if c not in apart]
    must = [c for c in must if not c.startswith("error_offset_share")]
    # the edges' locality: a curve's adjacency needs three changed positions, a run has two
    local = ["curve_adjacency", "curve_adjacency_before", "locality_drop"]
    assert rows.loc[["edges", "edges_random"], local].isna().all().all()
    must = [c for c in must if c not in local]
    assert rows[must].notna().all().all(), rows[must].isna().sum()
    # a check number where the arm table gives the arm a check
    checked = ["shift-1", "shift+1", "rotate", "scatter", "edges"]
    assert rows.loc[checked, "check_value"].notna().all()
    assert rows.loc[["remove", "random", "edges_random"], "check_value"].isna().all()
    assert (rows.loc[checked, "curve_moved"] > 0).loc[["shift-1", "shift+1", "edges"]].all()
    assert rows.loc["shift+1", "offset"] == 1 and rows.loc["shift-1", "offset"] == -1
    assert rows.loc[["rotate", "random", "edges"], "offset"].isna().all()
    drawn = ["rotate", "scatter", "random", "edges_random"]
    assert set(rows.loc[drawn, "control_draws"]) == {2}
    assert rows.loc[tested, "percentile"].between(0, 100).all()  # among the draws
    assert rows.loc[tested, "control"].tolist() == [
        *(["position_random"] * 5),
        "position_edges_random",
    ]
    # one size: the run arms matched to it at every length, the edges' control to the edges
    assert rows.loc[["shift-1", "rotate", "remove", "random"], "size_target"].nunique() == 1
    assert (rows.loc[["shift-1", "shift+1", "rotate", "random"], "size_error"] <= TOLERANCE).all()
    assert rows.loc["edges", "size_error"] == 0
    assert rows.loc["rotate", "distance_change"] < 1e-6
    # the row's difference from its control is the differences table's
    shares = differences[differences["measure"] == "offset_share"]
    assert sorted(zip(shares["a"], shares["b"], strict=True)) == [
        ("shift+1", "random"),
        ("shift-1", "random"),
    ]
    for r in differences[differences["measure"] == "outcome"].to_dict("records"):
        if r["b"] == rows.loc[r["a"], "control"].removeprefix("position_"):
            got = rows.loc[r["a"], ["difference", "difference_low", "difference_high"]]
            assert list(got) == pytest.approx([r["value"], r["low"], r["high"]])
    for j in OFFSETS:
        share = rows[f"error_offset_share_{j}"].dropna()
        assert share.between(0, 1).all()


def _by_hand(folder, model, task, options, readout):
    """The rule's numbers of the one cell, from each unit's raw row (each draw's hits) and
    the unchanged model's hits: the pairs as the rule names them."""
    units = plan_units(
        model, options["layers"], ARMS, options["readouts"], options["control_draws"], [1]
    )
    raw = {}
    for unit in units:
        row = folder.result(unit.key)
        if row["readout"] == readout:
            raw[row["arm"]] = row
    held = held_out_prompts(task, options["n_prompts"], seed=options["seed"])
    decoded = predict_cached(model, task, list(held.test.prompts))
    hits = {a: np.array(r["draw_hits"], float) for a, r in raw.items()}
    right = zip(decoded, held.test.answers, strict=True)
    hits["unchanged"] = np.array([[a == b for a, b in right]], float)
    shifts = ["shift+1", "shift-1"]
    pairs = [(a, "random") for a in [*shifts, "rotate", "scatter", "remove"]]
    pairs += [("edges", "edges_random")]
    pairs += [("rotate", "unchanged"), ("scatter", "rotate")]
    pairs += [(a, s) for s in shifts for a in ("rotate", "scatter")]
    # each pair on the prompts at lengths both arms reach (a short run's scatter falls short)
    reach = {a: np.array(r["reached"], bool) for a, r in raw.items()}
    reach["unchanged"] = np.ones(hits["unchanged"].shape[1], bool)
    assert not reach["scatter"].all() and reach["shift+1"].all()  # the case at hand
    for a, r in raw.items():  # the share left out of its pairs
        assert r["unreached_share"] == pytest.approx(1 - reach[a].mean())
    kept = {(a, b): reach[a] & reach[b] for a, b in pairs}
    differences = {
        (a, b): paired_draw_difference(hits[a][:, kept[a, b]], hits[b][:, kept[a, b]])
        for a, b in pairs
    }
    checks = {
        a: (r["size_error"], _nan(r["check_value"]), r["unreached_share"]) for a, r in raw.items()
    }
    offsets = {
        s: {
            j: Interval(*(raw[s][f"error_offset_share_{j}{e}"] for e in ("", "_low", "_high")))
            for j in OFFSETS
        }
        for s in shifts
    }
    # each shift's share of wrong characters at its offset (reversal: +k) against the random
    # curve's, from each prompt's counts (the draws summed)
    follows = {}
    for s, k in (("shift+1", 1), ("shift-1", -1)):
        col = raw[s]["offset_counts"]["offsets"].index(k)
        pick = [np.asarray(raw[a]["offset_counts"][c])[:, col] for a in (s, "random")
                for c in ("hits", "totals")]  # fmt: skip
        follows[s] = paired_share_difference(*pick)
    size = SizeNumbers(raw["rotate"]["size_target"], differences, checks, offsets, follows=follows)
    return CellNumbers(("reversal", 1, 0), [size], direction=1)


def test_the_saved_tables_give_the_rule_what_the_hits_give_it(reversal_arms, tmp_path):
    readout = "kept"
    model, task, options, folder, table, differences = reversal_arms
    INTERVENTION_TABLE.write(tmp_path / "t.csv", table)
    CURVE_DIFFERENCES.write(tmp_path / "d.csv", differences)
    saved = INTERVENTION_TABLE.read(tmp_path / "t.csv")
    (cell,) = cell_numbers(saved, CURVE_DIFFERENCES.read(tmp_path / "d.csv"), readout=readout)
    expected = _by_hand(folder, model, task, options, readout)
    (size,), (want,) = cell.sizes, expected.sizes
    assert cell.key == expected.key and cell.direction == expected.direction
    assert size.size == pytest.approx(want.size)
    assert set(size.checks) == set(want.checks)
    for arm, numbers in want.checks.items():
        assert size.checks[arm] == pytest.approx(numbers, nan_ok=True), arm
    assert set(size.differences) == set(want.differences)
    assert set(size.follows) == set(want.follows) == {"shift+1", "shift-1"}
    for arm, interval in want.follows.items():
        got = size.follows[arm]
        assert [got.value, got.low, got.high] == pytest.approx(
            [interval.value, interval.low, interval.high], nan_ok=True
        ), arm
    for pair, interval in want.differences.items():
        got = size.differences[pair]
        assert [got.value, got.low, got.high] == pytest.approx(
            [interval.value, interval.low, interval.high]
        ), pair
    found = hypothesis_outcomes([cell])["cells"][cell.key]
    direct = hypothesis_outcomes([expected])["cells"][expected.key]
    assert (found.address, found.relational, found.locality, found.reading) == (
        direct.address,
        direct.relational,
        direct.locality,
        direct.reading,
    )


def test_a_finished_run_resumes_from_its_folder(reversal_arms):
    model, task, options, folder, table, differences = reversal_arms
    again, found = intervention_table(
        model, task, **options, folder=folder, return_differences=True
    )
    assert again.equals(table) and found.equals(differences)


@pytest.mark.usefixtures("user_errors")
def test_bad_arm_settings_are_named():
    shift = SPECS["position_shift"]
    with pytest.raises(ValueError, match=r"position_shift: offsets must be nonzero ints"):
        dataclasses.replace(shift, params={"arm": "shift", "offsets": ("one",)})
    with pytest.raises(ValueError, match=r"offsets must be nonzero ints, got \(0, 1\)"):
        dataclasses.replace(shift, params={"arm": "shift", "offsets": (0, 1)})
    model, _ = load_pretrained("reversal")
    with pytest.raises(ValueError, match=r"control_draws must be an int >= 1, got 0"):
        plan_units(model, [1], ["position_rotate"], ["kept"], 0)
    for bad in ([0], [1.5], [1, 1], [True], [-0.5]):
        with pytest.raises(ValueError, match=r"doses must be distinct shift magnitudes, ints >= 1"):
            plan_units(model, [1], ["position_rotate"], ["kept"], 2, bad)
    with pytest.raises(ValueError, match="is dosed: pass its dose"):
        shift.build(Fitted(8, prompts=random_prompts(), counts=COUNTS))
    tokens = torch.randint(0, 5, (4, 12))
    with pytest.raises(ValueError, match=r"doses \[6\] shift the curve past the context: .* = 6"):
        text_intervention_table(
            model, tokens, layers=[1], interventions=["position_rotate"], doses=[1, 6]
        )


def test_a_dosed_spec_brings_its_control_and_runs_a_shift_at_its_own_size():
    model, _ = load_pretrained("reversal")
    units = plan_units(model, [1], ["position_shift"], ["kept"], 2, [1, 2, 3])
    keys = [u.key for u in units]
    assert keys[:4] == [
        f"layer1-kept-position_shift-size{m}-offset{k:+d}"
        for m, k in ((1, -1), (1, 1), (2, -2), (2, 2))
    ]
    assert keys[4:] == [f"layer1-kept-position_random-size{m}" for m in (1, 2, 3)]


def _nan(value):
    return float("nan") if value is None else float(value)
