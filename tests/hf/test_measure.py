"""measure_layers against the functions it summarises, computed independently."""

import numpy as np
import pytest
import torch

import adjpos
from adjpos.hf import hf_config, load_hf, measure_layers, summarise_kinds
from adjpos.stats import variance_ratio
from factories import tiny_config

SMALL = {"num_hidden_layers": 4, "hidden_size": 32, "intermediate_size": 64}


@pytest.fixture(scope="module")
def measured():
    model = load_hf(hf_config("smollm3", SMALL))
    tokens = torch.randint(3, 256, (12, 10), generator=torch.Generator().manual_seed(0))
    return model, tokens, measure_layers(model, tokens, probe_features=("variance",), n_boot=200)


def test_columns_match_the_library_functions(measured):
    model, tokens, table = measured
    assert list(table["kind"]) == ["embed", "rope", "rope", "rope", "nope"]
    assert list(table["layer"]) == list(range(5))
    scores = adjpos.adjacency_score(model, tokens).numpy()  # the one ties default
    np.testing.assert_allclose(table["adjacency"], scores, atol=1e-6)
    np.testing.assert_allclose(table["change"][1:], np.diff(scores), atol=1e-6)
    assert np.isnan(table["change"][0])
    acts = adjpos.capture_residuals(model, tokens).double()
    ratios = [variance_ratio(adjpos.position_variance(a).mean(0).numpy()) for a in acts]
    np.testing.assert_allclose(table["ratio"], ratios)
    for name in ("adjacency", "ratio", "spearman"):
        assert (table[f"{name}_low"] <= table[name] + 1e-12).all()
        assert (table[name] <= table[f"{name}_high"] + 1e-12).all()
    probes = adjpos.probe_positions(model, tokens, features="variance", repeats=1)
    np.testing.assert_allclose(
        table["r2_variance"], [probes.value(x, "variance", "ridge", "r2") for x in range(5)]
    )


def test_summarise_kinds_groups_the_rows(measured):
    _, _, table = measured
    summary = summarise_kinds(table).set_index("kind")
    assert summary.loc["rope", "layers"] == 3 and summary.loc["nope", "layers"] == 1
    rope = table[table["kind"] == "rope"]
    assert summary.loc["rope", "adjacency"] == pytest.approx(rope["adjacency"].mean())
    assert summary.loc["nope", "r2_variance"] == pytest.approx(table["r2_variance"].iloc[-1])


def test_works_on_adjpos_models_and_checks_input():
    model = adjpos.build_model(tiny_config())
    tokens = torch.randint(0, 20, (4, 6), generator=torch.Generator().manual_seed(0))
    table = measure_layers(model, tokens, n_boot=50)
    assert list(table["kind"]) == ["embed", "nope", "nope"]
    with pytest.raises(ValueError, match="at least 2 sequences of at least 3 tokens"):
        measure_layers(model, tokens[:1])


def _rows(changes, rope_changes, lows=None):
    """Layer 1 NoPE in 'released', RoPE in 'none'; one row per seed and layout."""
    import pandas as pd

    rows = []
    for seed, (c, r) in enumerate(zip(changes, rope_changes, strict=True)):
        for layout, value, kind in (("released", c, "nope"), ("none", r, "rope")):
            half = 0.01 if lows is None else lows[seed]
            rows.append(
                {
                    "family": "f",
                    "layout": layout,
                    "seed": seed,
                    "layer": 1,
                    "kind": kind,
                    "adjacency": 0.5 + value,
                    "change": value,
                    "change_low": value - half,
                    "change_high": value + half,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("changes", "rope", "status", "versus"),
    [
        ((0.1, 0.2), (0.0, 0.01), "supported", "above"),
        ((0.1, 0.0), (0.0, 0.01), "supported", "within"),  # one of two seeds: half
        ((-0.1, -0.2), (0.0, 0.01), "not supported", "below"),
        ((0.0, 0.005), (0.0, 0.005), "not shown", "within"),
        ((0.1, -0.1), (0.0, 0.0), "mixed", "within"),
    ],
)
def test_nope_layer_effects_counts(changes, rope, status, versus):
    from adjpos.hf import nope_layer_effects
    from adjpos.stats import Status

    (row,) = nope_layer_effects(_rows(changes, rope)).to_dict("records")
    assert "status" not in row  # counts only: a verdict is the study's to draw
    assert (row["versus_rope"], row["seeds"]) == (versus, 2)
    above, below = sum(c - 0.01 > 0 for c in changes), sum(c + 0.01 < 0 for c in changes)
    assert (row["n_above"], row["n_below"], row["n_within"]) == (above, below, 2 - above - below)
    assert Status.of(row["n_above"], row["n_below"], row["seeds"]).value == status
    diffs = [c - r for c, r in zip(changes, rope, strict=True)]
    assert row["difference"] == pytest.approx(sum(diffs) / 2)
    assert (row["difference_min"], row["difference_max"]) == pytest.approx((min(diffs), max(diffs)))
    assert row["change_low"] == pytest.approx(min(changes) - 0.01)


def test_nope_layer_effects_needs_its_control():
    from adjpos.hf import nope_layer_effects

    rows = _rows((0.1,), (0.0,))
    with pytest.raises(ValueError, match="no all-RoPE control"):
        nope_layer_effects(rows[rows["layout"] == "released"])
    with pytest.raises(ValueError, match="lack the columns"):
        nope_layer_effects(rows.drop(columns="change"))
