"""The position curve against a loop-by-loop reference, the fitting prompts it needs, and the
table's rule for a spec that runs with the read-out kept only."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.interventions import (
    InterventionSpec,
    NoIntervention,
    fit_prompt_states,
    held_out_prompts,
    intervention_table,
    position_curves,
)
from adjpos.interventions.curve.position import MIN_FIT
from reference import slow_position_curves


def _prompts(seed=0, lengths=(6, 7, 9), n=6, d=5, vocab=8):
    """{L: (states, tokens)}: a token part, a smooth position curve and noise."""
    gen = torch.Generator().manual_seed(seed)
    embed = torch.randn(vocab, d, generator=gen, dtype=torch.float64)
    out = {}
    for length in lengths:
        tokens = torch.randint(0, vocab, (n, length), generator=gen)
        t = torch.arange(length, dtype=torch.float64)[:, None]
        curve = torch.cat([torch.cos(t / 3), torch.sin(t / 3), t / length], dim=1)
        curve = torch.nn.functional.pad(curve, (0, d - 3))
        noise = 0.1 * torch.randn(n, length, d, generator=gen, dtype=torch.float64)
        out[length] = (embed[tokens] + 2 * curve + noise, tokens)
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(MIN_FIT - 1, 6))
def test_the_curves_match_the_slow_reference(seed, d, n):
    prompts = _prompts(seed, lengths=(3, 5, 8), n=n, d=max(d, 3))
    got = position_curves(prompts) if n >= MIN_FIT else None
    nested = {k: (s.tolist(), t.tolist()) for k, (s, t) in prompts.items()}
    want = slow_position_curves(nested, MIN_FIT)
    if n < MIN_FIT:
        assert want == {}
        with pytest.raises(ValueError, match=f"need {MIN_FIT} prompts of one length"):
            position_curves(prompts)
        return
    assert sorted(got) == sorted(want)
    for length, curve in got.items():
        torch.testing.assert_close(curve, torch.tensor(want[length], dtype=torch.float64))


def test_the_fitting_prompts_cover_every_length_and_a_kept_only_spec_runs_kept_only():
    from adjpos import load_pretrained

    model, task = load_pretrained("addition")
    held = held_out_prompts(task, 30, seed=2)
    prompts = fit_prompt_states(model, task, held, 1, seed=2)
    lengths = {len(task.encode(p)) for p in held.test.prompts}
    assert lengths <= {n for n, (s, _) in prompts.items() if len(s) >= MIN_FIT}
    for n, (states, tokens) in prompts.items():
        assert states.shape[:2] == tokens.shape and tokens.shape[1] == n
    kept_only = InterventionSpec(
        "kept_only", "no change, kept only", lambda fit, **_: NoIntervention(), readouts=("kept",)
    )
    table = intervention_table(
        model,
        task,
        layers=[1],
        interventions=["none", kept_only],
        n_prompts=30,
        seed=2,
        readouts=["kept", "changed"],
    )
    assert set(zip(table.readout, table.intervention, strict=True)) == {
        ("kept", "none"),
        ("changed", "none"),
        ("kept", "kept_only"),
    }
    with pytest.raises(ValueError, match=r"\['kept_only'\] need the 'kept' read-out"):
        intervention_table(
            model, task, interventions=[kept_only], readouts=["changed"], n_prompts=30
        )
