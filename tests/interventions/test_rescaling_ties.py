"""`norm_permute` gives each state another position's norm: a positive factor per state, which
leaves every cosine as it was. The intervention table's adjacency of the states it writes is
then the unchanged states' exactly, whatever the float rounding of the product (repeated
tokens' states tie at layer 0, and the tie tolerance keeps them tied)."""

from adjpos import load_pretrained
from adjpos.interventions import intervention_table


def test_norm_permute_leaves_the_adjacency_at_its_layer_exactly():
    model, task = load_pretrained("addition", seed=0)
    table = intervention_table(
        model,
        task,
        layers=[0, 1],
        interventions=["none", "norm_permute"],
        n_prompts=8,
        control_draws=2,
        progress=False,
    )
    adjacency = table.set_index(["layer", "intervention"])["adjacency_at_layer"]
    assert len(adjacency) == 4
    for layer in (0, 1):
        assert adjacency[layer, "norm_permute"] == adjacency[layer, "none"]
