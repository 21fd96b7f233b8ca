# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial: where a model with NoPE layers keeps position
#
# This notebook analyses a language model that interleaves NoPE layers with RoPE layers,
# end to end: load it, find its NoPE layers, look at the self-cosine matrices of its hidden
# states, score adjacency layer by layer, and probe each layer for position.
#
# It runs offline on a tiny SmolLM3 config with random weights. With hub access, pass a
# model name to `adjpos.load_hf` instead (e.g. `"HuggingFaceTB/SmolLM3-3B"`) and score text
# with its tokenizer (`adjpos.hf.load_tokenizer`, `adjpos.hf.text_tokens`).
#
# The source of this notebook is `docs/tutorial.py` (jupytext); `python docs/make_tutorial.py`
# writes `docs/tutorial.ipynb` from it with the outputs cleared, and the test suite runs it.

# %%
import os

import torch

import adjpos
from adjpos.figures import plot_cosine_heatmaps, plot_layer_kinds, plot_probe_scores
from adjpos.metrics import cosine_matrix

# The test suite sets ADJPOS_TUTORIAL_SIZE=tiny to run everything at a small size.
TINY = os.environ.get("ADJPOS_TUTORIAL_SIZE") == "tiny"
N_SEQUENCES, SEQ_LEN = (12, 12) if TINY else (64, 32)

# %% [markdown]
# ## 1. Load the model and find its NoPE layers
#
# `adjpos.hf_config` builds a config of one of the families with NoPE layers at a tiny size;
# `nope="released"` keeps the family's own interleaving (every fourth layer NoPE).
# `adjpos.layer_kinds` reads each layer's kind from the attention modules.

# %%
size = {"num_hidden_layers": 4} if TINY else "tiny"
model = adjpos.load_hf(adjpos.hf_config("smollm3", size), seed=0)
kinds = adjpos.layer_kinds(model)
print(kinds)
print("position-free:", adjpos.is_position_free(model))

# %% [markdown]
# ## 2. Self-cosine matrices
#
# Capture the residual stream at every layer (layer 0 is the embeddings) and draw the cosine
# similarity between the hidden states of one sequence's positions. Adjacent positions that
# look more alike than distant ones are the pattern the adjacency score measures.

# %%
generator = torch.Generator().manual_seed(0)
tokens = torch.stack(
    [torch.randperm(253, generator=generator)[:SEQ_LEN] + 3 for _ in range(N_SEQUENCES)]
)
states = adjpos.capture_residuals(model, tokens)
names = adjpos.hf.capture_kinds(model)
matrices = [cosine_matrix(layer[0]).numpy() for layer in states]
titles = [f"layer {i} ({kind})" for i, kind in enumerate(names)]
plot_cosine_heatmaps(matrices, titles=titles, columns=len(titles))

# %% [markdown]
# ## 3. Adjacency and variance by layer, grouped by kind
#
# `adjpos.measure_layers` scores every layer with a bootstrap interval over the sequences,
# the change from the layer before, and the variance ratio (last third of the positions over
# the first third; below 1 the variance shrinks with position).

# %%
table = adjpos.measure_layers(model, tokens, n_boot=200)
print(table[["layer", "kind", "adjacency", "adjacency_low", "adjacency_high", "ratio"]].round(3))
print(adjpos.hf.summarise_kinds(table)[["kind", "layers", "adjacency", "ratio"]].round(3))

# %%
plot_layer_kinds(
    table.assign(model="smollm3"),
    color="model",
    low="adjacency_low",
    high="adjacency_high",
    title="Adjacency by layer (rings: NoPE layers)",
)

# %% [markdown]
# ## 4. Probes: can position be read from each layer?
#
# Ridge probes read each token's position from a feature set of each layer's hidden states
# (cross-validated over sequences; `shuffled:` sets are the controls).

# %%
probes = adjpos.probe_positions(
    model,
    tokens,
    features=["variance", "cosine_profile", "shuffled:cosine_profile"],
    repeats=1,
    cv=3,
)
plot_probe_scores(probes)

# %% [markdown]
# ## 5. Against its all-RoPE twin
#
# The same weights with RoPE in every layer (`nope="none"`, same seed): the difference in
# the adjacency score at each layer is what the NoPE layers change.

# %%
twin = adjpos.load_hf(adjpos.hf_config("smollm3", size, nope="none"), seed=0)
released = adjpos.adjacency_score(model, tokens, ties="half")
all_rope = adjpos.adjacency_score(twin, tokens, ties="half")
for layer, (kind, a, b) in enumerate(zip(names, released, all_rope, strict=True)):
    print(f"layer {layer} {kind:>6}: released {a:.3f}  all-RoPE {b:.3f}  difference {a - b:+.4f}")
