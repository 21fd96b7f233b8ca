"""measure_layers on any TransformerLens model: without rows or centring it gives the numbers it
always gave, and with them it agrees with a brute-force computation on a tiny random model."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import adjpos
from adjpos.layerwise import measure_layers
from adjpos.metrics import adjacency_probability, cosine_matrix, position_variance
from adjpos.stats import bootstrap_interval, variance_summary
from factories import tiny_config
from reference import slow_adjacency_rows, slow_cosine

N_BOOT = 64


@pytest.fixture(scope="module")
def model():
    return adjpos.build_model(tiny_config(dtype="float64"))


@pytest.fixture(scope="module")
def tokens():
    """Distinct tokens in each sequence: no two states are equal in exact arithmetic, so no
    cosine ties hang on the last bit of one implementation's rounding."""
    gen = torch.Generator().manual_seed(0)
    return torch.stack([torch.randperm(20, generator=gen)[:10] for _ in range(6)])


def _as_before(model, tokens, ties, batch_size=None):
    """The table measure_layers made before it took rows and center, step by step; each
    layer captured by runs of its own (the per-layer path it replaced)."""
    records, before = [], None
    kinds = adjpos.models.capture_kinds(model)
    for layer in range(len(kinds)):
        acts = adjpos.capture_residuals(model, tokens, layers=[layer], batch_size=batch_size)[0]
        acts = acts.double()
        scores = adjacency_probability(cosine_matrix(acts), ties=ties).numpy()
        low, high = bootstrap_interval(scores, n_boot=N_BOOT)
        change = (math.nan, math.nan, math.nan)
        if before is not None:
            diff = scores - before
            change = (diff.mean(), *bootstrap_interval(diff, n_boot=N_BOOT))
        variance = variance_summary(position_variance(acts).numpy(), n_boot=N_BOOT)
        records.append(
            {
                "layer": layer,
                "kind": kinds[layer],
                "adjacency": scores.mean(),
                "adjacency_low": low,
                "adjacency_high": high,
                "change": change[0],
                "change_low": change[1],
                "change_high": change[2],
                **variance,
            }
        )
        before = scores
    return pd.DataFrame(records)


@pytest.mark.parametrize("ties", ["half", "strict"])
def test_without_rows_or_centring_the_numbers_are_as_before(model, tokens, ties):
    got = measure_layers(model, tokens, ties=ties, n_boot=N_BOOT)
    expected = _as_before(model, tokens, ties)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, rtol=1e-12)
    same = measure_layers(model, tokens, rows=torch.ones_like(tokens, dtype=torch.bool))
    pd.testing.assert_frame_equal(same, measure_layers(model, tokens))


@pytest.mark.parametrize("batch_size", [None, 4])
def test_one_pass_on_a_bridge_gives_the_per_layer_numbers(tokens, batch_size):
    bridge = adjpos.load_hf(adjpos.hf_config("smollm3", {"num_hidden_layers": 4}))
    entries = []
    handle = bridge.blocks[0].register_forward_pre_hook(lambda *args: entries.append(1))
    got = measure_layers(bridge, tokens, n_boot=N_BOOT, batch_size=batch_size)
    handle.remove()
    assert len(entries) == (1 if batch_size is None else 2)  # one forward pass per chunk
    expected = _as_before(bridge, tokens, "strict", batch_size)  # the default
    assert list(got["kind"]) == ["embed", "rope", "rope", "rope", "nope"]
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_exact=True)


def _brute_force(model, tokens, rows, center):
    """[layer, sequence] scores, looped: each sequence's states from TransformerLens's cache,
    centred by hand, the loop cosine and row counts, the mean of the selected rows."""
    names = ["blocks.0.hook_resid_pre"] + [
        f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)
    ]
    n = tokens.shape[1]
    out = np.full((len(names), len(tokens)), np.nan)
    for b, seq in enumerate(tokens):
        with torch.no_grad():
            _, cache = model.run_with_cache(seq[None])
        for layer, name in enumerate(names):
            states = cache[name][0].tolist()
            if center:
                mean = [sum(col) / n for col in zip(*states, strict=True)]
                states = [[x - m for x, m in zip(row, mean, strict=True)] for row in states]
            scores = slow_adjacency_rows(slow_cosine(states), n, "half")
            picked = [s for s, keep in zip(scores, rows[b].tolist(), strict=True) if keep]
            picked = [s for s in picked if not math.isnan(s)]
            if picked:
                out[layer, b] = sum(picked) / len(picked)
    return out


@pytest.mark.parametrize("center", [False, True])
def test_rows_and_centring_agree_with_brute_force(model, tokens, center):
    gen = torch.Generator().manual_seed(1)
    rows = torch.rand(tokens.shape, generator=gen) < 0.4
    rows[0] = False  # a sequence with no row to score: left out of the adjacency columns
    rows[1, :2] = True
    rows[1, 2:] = False  # rows 0 and 1 are never defined: left out as well
    table = measure_layers(model, tokens, rows=rows, center=center, n_boot=N_BOOT)
    scores = _brute_force(model, tokens, rows, center)
    assert np.isnan(scores[:, :2]).all() and not np.isnan(scores[:, 2:]).any()
    scores = scores[:, 2:]
    np.testing.assert_allclose(table["adjacency"], scores.mean(axis=1), rtol=1e-10)
    np.testing.assert_allclose(table["change"][1:], np.diff(scores, axis=0).mean(axis=1))
    bounds = [bootstrap_interval(s, n_boot=N_BOOT) for s in scores]
    np.testing.assert_allclose(table[["adjacency_low", "adjacency_high"]], bounds, rtol=1e-10)
    # The same numbers adjacency_score gives; the variance columns ignore rows and center.
    expected = adjpos.adjacency_score(model, tokens, rows=rows, center=center, ties="half")
    np.testing.assert_allclose(table["adjacency"], expected.numpy(), rtol=1e-10)
    plain = measure_layers(model, tokens, n_boot=N_BOOT)
    np.testing.assert_array_equal(table["ratio"], plain["ratio"])
    assert not np.allclose(table["adjacency"], plain["adjacency"])


def test_one_function_in_the_core_and_in_hf():
    assert adjpos.measure_layers is measure_layers
    assert adjpos.hf.measure_layers is measure_layers
    assert adjpos.hf.LAYERS is adjpos.layerwise.LAYERS


@pytest.mark.usefixtures("user_errors")
def test_bad_options_name_what_is_allowed(model, tokens):
    few = torch.zeros_like(tokens, dtype=torch.bool)
    few[3, 5] = True
    with pytest.raises(ValueError, match=r"rows selects a row k >= 2 in 1 sequence"):
        measure_layers(model, tokens, rows=few)
    with pytest.raises(ValueError, match=r"rows must be a boolean mask of shape \(6, 10\)"):
        measure_layers(model, tokens, rows=few[:, :4])
    with pytest.raises(TypeError, match="center must be True or False"):
        measure_layers(model, tokens, center="yes")
    with pytest.raises(ValueError, match="ties='none' is not allowed"):
        measure_layers(model, tokens, ties="none")
    with pytest.raises(ValueError, match="at least 2 sequences of at least 3 tokens"):
        measure_layers(model, tokens[:1])


def test_skip_first_leaves_the_first_positions_out_of_every_column(model, tokens):
    table = measure_layers(model, tokens, skip_first=3, n_boot=N_BOOT)
    scores = adjpos.adjacency_score(model, tokens, ties="half", skip_first=3, per_sequence=True)
    np.testing.assert_allclose(table["adjacency"], scores.mean(dim=1).numpy(), rtol=1e-12)
    for layer, acts in enumerate(adjpos.capture_residuals(model, tokens)):
        variance = variance_summary(position_variance(acts.double()[:, 3:]).numpy(), n_boot=N_BOOT)
        assert table.loc[layer, "ratio"] == variance["ratio"]
        assert table.loc[layer, "spearman_low"] == variance["spearman_low"]
    assert not np.allclose(table["ratio"], measure_layers(model, tokens, n_boot=N_BOOT)["ratio"])


@pytest.mark.usefixtures("user_errors")
def test_skip_first_must_leave_three_positions(model, tokens):
    with pytest.raises(ValueError, match=r"skip_first=8 leaves 2 positions"):
        measure_layers(model, tokens, skip_first=8)
    rows = torch.zeros_like(tokens, dtype=torch.bool)
    rows[:, 3] = True  # row 3 is defined, unless the first 2 positions are left out
    assert len(measure_layers(model, tokens, rows=rows, n_boot=N_BOOT)) == 3
    with pytest.raises(ValueError, match=r"rows selects a row k >= 4 in 0 sequence"):
        measure_layers(model, tokens, rows=rows, skip_first=2)


def test_the_tie_rule_is_one_default_for_the_api_and_the_cli():
    import inspect

    import adjpos
    from adjpos.cli import _parser
    from adjpos.metrics import DEFAULT_TIES, position_context_adjacency
    from adjpos.scoring import sequence_scores

    assert DEFAULT_TIES == "strict"  # the paper's definition
    for fn in (
        measure_layers,
        adjpos.adjacency_score,
        adjpos.adjacency_probability,
        adjpos.adjacency_rows,
        sequence_scores,
        position_context_adjacency,
    ):
        assert inspect.signature(fn).parameters["ties"].default == DEFAULT_TIES, fn.__name__
    assert _parser().parse_args(["score"]).ties == DEFAULT_TIES
