"""The decomposition claim's numbers from states built to hold a known pattern."""

import numpy as np
import pandas as pd
import pytest
import torch

from adjpos.metrics.decompose import SHARE_PARTS
from adjpos.study.claim import per_seed
from adjpos.study.claims.decomposition import DECOMPOSITION, decomposition_numbers, layer_row
from adjpos.study.models import RANDOM, TRAINED


def _states(curve_scale, seed):
    """Sequences of one length over 6 tokens: a smooth shared curve (an arc), each token's
    embedding, noise of scale 1; and the tokens."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(12.0, dtype=torch.float64)[:, None]
    curve = torch.cat([torch.cos(t / 6), torch.sin(t / 6), t / 12 - 0.5], dim=1)
    curve = torch.cat([curve, torch.zeros(12, 5, dtype=torch.float64)], dim=1)
    tokens = torch.randint(0, 6, (48, 12), generator=gen)
    embed = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    noise = torch.randn(48, 12, 8, generator=gen, dtype=torch.float64)
    return curve_scale * curve + embed[tokens] + noise, tokens


def test_a_strong_curve_carries_the_pattern_and_noise_alone_does_not():
    row = layer_row(*_states(4.0, 0), n_boot=200)
    for fit in ("", "_held_out"):
        assert sum(row[f"{p}_share{fit}"] for p in SHARE_PARTS) == pytest.approx(1.0)
    assert row["position_share_held_out"] == pytest.approx(row["position_share"], abs=0.02)
    assert row["token_share_held_out"] > 0.05  # the tokens are a part of their own
    assert row["position"] > 0.9 and row["difference_low"] > 0.0
    assert row["pc1"] + row["pc2"] + row["pc3"] == pytest.approx(1.0, abs=0.05)
    assert row["rest_low"] <= row["rest"] <= row["rest_high"]
    noise = layer_row(*_states(0.0, 1), n_boot=200)
    assert noise["difference_low"] < 0.0 < noise["difference_high"]
    # in sample a curve of noise holds a share; held out it holds none
    assert noise["position_share"] > 0 > noise["position_share_held_out"]


def test_a_cell_is_above_only_when_every_seed_is():
    rows = []
    for model, scales in ((TRAINED, (4.0, 4.0)), (RANDOM, (4.0, 0.0))):
        for seed, scale in enumerate(scales):
            key = {"task": "addition", "model": model, "seed": seed, "layer": 1}
            rows.append(key | layer_row(*_states(scale, seed), n_boot=200))
    numbers = decomposition_numbers(DECOMPOSITION.frame(rows))
    versus = {c["model"]: per_seed(c) for c in numbers["cells"]}
    assert versus == {TRAINED: "for", RANDOM: "within"}
    trained = next(c for c in numbers["cells"] if c["model"] == TRAINED)
    assert len(trained["per_seed"]) == 2 and trained["seeds"] == [0, 1]
    table = pd.DataFrame(rows)
    assert trained["position"] == pytest.approx(table[table["model"] == TRAINED]["position"].mean())
    assert np.isfinite([trained["difference_low"], trained["difference_high"]]).all()
