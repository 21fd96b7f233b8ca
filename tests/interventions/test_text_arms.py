"""The position curve's arms on text (`text_intervention_table` with dosed specs): rows with
their manipulation checks, a shift that moves the curve by k, a model whose continuation cannot
read the context (its attention outputs zeroed) read as "not read", and the rule on hand-built
text rows (`cell_numbers` with ``harm=-1``, a loss rise as the harm) reaching for, against and not
counted."""

import pandas as pd
import pytest
import torch

from adjpos import build_model
from adjpos.interventions import cell_numbers, text_intervention_table
from adjpos.study.claim import CRITERIA
from adjpos.study.claims.text import arms_read, arms_readings
from adjpos.study.rules import cell_outcome
from factories import tiny_config

ARMS = ["position_shift", "position_rotate", "position_scatter", "position_random"]
TEXT_KEYS = ("model", "layer")
SIZE = ["perturbation", "size_target", "parameter", "distance_change", "curve_offset"]
CHECKS = [*SIZE, "curve_adjacency", "curve_adjacency_before", "prompt_adjacency"]


def _model(seed=0):
    return build_model(tiny_config(n_layers=2, d_model=32, n_heads=4, dtype="float64", seed=seed))


def _tokens(n=8, pos=14, seed=0):
    return torch.randint(0, 20, (n, pos), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def arms():
    options = {"layers": [1], "interventions": ["none", *ARMS], "doses": [1], "skip_first": 1}
    return text_intervention_table(
        _model(), _tokens(), control_draws=2, return_differences=True, **options
    )


def test_each_arm_gives_a_row_with_its_checks_beside_the_random_curve(arms):
    table, differences = arms
    rows = table[table["arm"].notna()].set_index("arm")
    assert set(rows.index) == {"shift-1", "shift+1", "rotate", "scatter", "random"}
    assert rows[CHECKS].notna().all().all()
    # a random model's curve has no locality to lose: scattering a run's interior of three
    # changes it less than a shift, so the scatter reaches the size nowhere and is compared
    # on no window (its check fails); the other arms reach it everywhere
    sized = rows.drop(index="scatter")
    assert sized["size_error"].notna().all() and (sized["unreached_share"] == 0).all()
    assert rows.loc["scatter", "unreached_share"] == 1 and pd.isna(
        rows.loc["scatter", "size_error"]
    )
    assert pd.isna(rows.loc["scatter", "loss_difference"]) and "scatter" not in set(
        differences["a"]
    )
    assert rows.loc["rotate", "distance_change"] < 1e-9  # a rotation keeps every distance
    tested = rows.drop(index=["random", "scatter"])
    assert (tested["loss_difference_low"] <= tested["loss_difference"]).all()
    assert (tested["loss_difference"] <= tested["loss_difference_high"]).all()
    assert tested["percentile"].between(0, 100).all() and rows["dose"].eq(1).all()
    # the paired difference from the random curve is the difference of the mean losses
    expected = tested["loss"] - rows.loc["random", "loss"]
    assert tested["loss_difference"].to_numpy() == pytest.approx(expected.to_numpy())
    pairs = set(zip(differences["a"], differences["b"], strict=True))
    assert {("shift+1", "random"), ("rotate", "unchanged"), ("rotate", "shift-1")} <= pairs
    assert not any(c.startswith("error_offset") for c in table.columns)


def test_a_shift_moves_the_curve_by_k(arms):
    """The run is the context after its first position, 1 .. L - 2 of the curve's length
    L = cut + 1 - skip_first; at its full size a shift by +1 moves each of its positions onto
    the curve of t - 1, by -1 onto t + 1, each clamped to the run (its first, or its last,
    keeps its point); a blended shift keeps the side."""
    table, _ = arms
    changed = 14 // 2 - 1 - 1  # the run: cut - skip_first - 1 positions
    full = {"shift+1": -(changed - 1) / changed, "shift-1": (changed - 1) / changed}
    rows = table[table["arm"].isin(list(full))]
    assert (rows["parameter"] == 1).any()  # the smaller full shift sets the size
    for r in rows.itertuples():
        assert r.curve_offset * r.offset < 0
        if r.parameter == 1:
            assert r.curve_offset == pytest.approx(full[r.arm])


def test_a_continuation_that_cannot_read_the_context_is_not_read():
    """Every attention output from the changed layer on zeroed: the continuation's loss cannot
    move, so every arm holds against the random curve: address against, "not read"."""
    model = _model(seed=1)
    with torch.no_grad():
        for block in model.blocks[1:]:
            block.attn.W_O.zero_()
    options = {"layers": [1], "interventions": ARMS, "doses": [1], "skip_first": 1}
    table, differences = text_intervention_table(
        model, _tokens(), control_draws=2, return_differences=True, **options
    )
    assert table["loss_difference"].dropna().abs().max() < 1e-12
    (cell,) = cell_numbers(table, differences, keys=TEXT_KEYS, harm=-1)
    found = cell_outcome(cell, CRITERIA, on_text=True)
    assert (found.address, found.reading) == ("against", "not read")


# A check number that passes each arm's check (its row of the arm table), as measured.
PASSING = {"shift-1": 1.0, "shift+1": 1.0, "rotate": 0.0, "scatter": 0.3}


def _rows(loss, *, passed=None, percentile=0.0, width=0.01):
    """Hand-built text rows and differences of one cell from each arm's mean loss: every
    difference a - b +- width, every check passed but where `passed` says otherwise (there
    the size is off its target)."""
    passed = passed or {}
    names = ["shift-1", "shift+1", "rotate", "scatter", "random"]
    rows = [
        {"model": "m", "layer": 3, "readout": "kept", "dose": 1, "arm": a, "size_target": 0.2}
        | {"size_error": 0.0 if passed.get(a, True) else 1.0, "check_value": PASSING.get(a)}
        | {"percentile": percentile}
        for a in names
    ]
    pairs = [(a, "random") for a in names[:4]] + [("rotate", "unchanged"), ("scatter", "rotate")]
    pairs += [(a, s) for s in names[:2] for a in ("rotate", "scatter")]
    differences = [
        {"model": "m", "layer": 3, "readout": "kept", "dose": 1, "a": a, "b": b}
        | {"value": loss[a] - loss[b], "low": loss[a] - loss[b] - width}
        | {"high": loss[a] - loss[b] + width}
        for a, b in pairs
    ]
    return rows, differences


def _read(loss, **options):
    (cell,) = cell_numbers(*_rows(loss, **options), keys=TEXT_KEYS, harm=-1)
    return cell_outcome(cell, CRITERIA, on_text=True), [cell.to_plain()]


IGNORES = dict.fromkeys(["shift-1", "shift+1", "rotate", "scatter", "random", "unchanged"], 3.0)
ADDRESS = IGNORES | {"shift-1": 3.4, "shift+1": 3.3, "scatter": 3.5, "rotate": 3.0}


def test_the_rule_on_text_reads_a_loss_rise_as_the_harm():
    found, plain = _read(IGNORES)
    assert (found.address, found.reading) == ("against", "not read")
    assert str(arms_read(plain, CRITERIA)) == "against"
    found, plain = _read(ADDRESS)
    assert (found.address, found.relational, found.locality) == ("for", "for", "for")
    assert arms_readings(plain, CRITERIA) == ["address+relational+locality"]
    assert str(arms_read(plain * 2, CRITERIA)) == "for"  # two seeds, both for
    # a rise inside the threshold is neither: its lower bound is not above 0.02 nats
    found, _ = _read(IGNORES | {"shift-1": 3.025, "shift+1": 3.025})
    assert found.address == "within"


def test_the_draws_percentile_and_the_checks_gate_the_rule():
    found, _ = _read(ADDRESS, percentile=10.0)  # 10% of the random draws raise it more
    assert found.address == "within"
    found, plain = _read(ADDRESS, passed={"shift-1": False, "shift+1": False})
    assert found.address == "within" and {arm for _, arm in found.not_counted} == {
        "shift-1",
        "shift+1",
    }
    assert arms_read(plain, CRITERIA) is None  # no shift counted: the cell is not counted
    found, _ = _read(ADDRESS, passed={"shift+1": False})
    assert found.address == "for" and found.not_counted == ((0.2, "shift+1"),)
