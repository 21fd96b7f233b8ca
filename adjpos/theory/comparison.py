"""Set a model's measured first layer beside the first-layer prediction.

Two forward passes, both stopped after block 0 and both through
`run_with_cache(names_filter=...)`, which removes its hooks on exit: the tokens as given (the
hidden states at `site`, block 0's attention pattern and logits), and every token alone (a
batch of one-token sequences: a lone token's attention output is exactly its value vector as
written to the residual stream, W_O of each head's value plus b_O; with NoPE its residual input
is its token embedding), for the residual ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from adjpos.capture import check_site, check_tokens, hook_name
from adjpos.metrics import cosine_matrix
from adjpos.metrics.checks import check_scorable
from adjpos.models import is_bridge, is_position_free, layer_kinds
from adjpos.scoring import sequence_scores
from adjpos.theory.prediction import predicted_cosine
from adjpos.types import TokenInput
from adjpos.validation import UsageError, check_choice, help_field

THEORY_SITES = ("resid_post", "resid_mid", "attn_out")
_PATTERN = "blocks.0.attn.hook_pattern"
_SCORES = "blocks.0.attn.hook_attn_scores"
_EMBED = "blocks.0.hook_resid_pre"
_ATTN_OUT = "blocks.0.hook_attn_out"


@dataclass(frozen=True)
class FirstLayerComparison:
    """A model's first layer measured against `adjpos.predicted_cosine`.

    Matrices are indexed [k, j]: row k is the later (query) position. `error` holds
    measured - predicted on the strict lower triangle j < k (each pair once; the diagonal is 1
    on both sides) and NaN elsewhere. Entropies are in nats.
    """

    site: str = help_field(f"where the hidden states were read (block 0), one of {THEORY_SITES}")
    residual_ratio: float = help_field(
        "rho of the prediction: mean |embedding|^2 / mean |value vector|^2; 0 at attn_out"
    )
    measured: Float[Tensor, "pos pos"] = help_field("mean self-cosine matrix over the sequences")
    measured_sem: Float[Tensor, "pos pos"] = help_field(
        "standard error of that mean: std over sequences / sqrt(batch)"
    )
    predicted: Float[Tensor, "pos pos"] = help_field(
        "predicted_cosine(pos, residual_ratio=residual_ratio)"
    )
    error: Float[Tensor, "pos pos"] = help_field("measured - predicted for j < k, NaN elsewhere")
    measured_adjacency: float = help_field(
        "adjacency score at `site`: mean over the sequences (as `adjpos.adjacency_score`)"
    )
    attention_entropy: Float[Tensor, " pos"] = help_field(
        "entropy of block 0's attention per query position, mean over heads and sequences"
    )
    uniform_entropy: Float[Tensor, " pos"] = help_field(
        "log(k+1): the entropy of uniform attention over positions 0..k, the maximum"
    )
    attention_logit_var: float = help_field(
        "variance of block 0's attention logits over keys 0..k, mean over queries k >= 1, "
        "heads and sequences; 0 for uniform attention"
    )

    @property
    def mean_abs_error(self) -> float:
        """Mean |measured - predicted| over the pairs j < k."""
        return float(self.error.abs().nanmean())

    @property
    def entropy_ratio(self) -> float:
        """Mean over query positions k >= 1 of entropy / log(k+1): 1 is uniform attention,
        0 is every query attending to a single key."""
        return float((self.attention_entropy[1:] / self.uniform_entropy[1:]).mean())


def compare_first_layer(
    model: Any,
    tokens: TokenInput,
    *,
    site: str = "resid_post",
    position_free: bool | None = None,
) -> FirstLayerComparison:
    """Measure a NoPE model's first layer and compare it with the first-layer prediction.

    Sites, all in block 0:

    - ``"attn_out"``: the attention output alone; the prediction has no residual (rho = 0).
    - ``"resid_mid"``: embedding + attention output, exactly the h_k of the prediction
      (models with MLPs only; in an attention-only model it is ``"resid_post"``).
    - ``"resid_post"`` (default): layer 1 of the residual stream. In a model with MLPs this
      adds block 0's MLP output, which the prediction does not model.

    With a residual, rho is `estimate_residual_ratio` (each token's value vector read alone,
    so exactly the prediction's rho whatever the attention). The prediction assumes
    independent value vectors (draw a sequence's tokens without replacement) and is a ratio of
    expectations: at a finite width the mean cosine sits a little below it (by O(1/width)).
    `attention_entropy` beside `uniform_entropy`, and `attention_logit_var`, say how uniform
    the attention is (entropy is a blunt gauge: see docs/theory.md).

    Args:
        model: a position-free TransformerLens model (see `adjpos.is_position_free`).
        tokens: token ids [batch, pos] (or one sequence [pos]), pos >= 3.
        site: "resid_post" (default), "resid_mid" or "attn_out".
        position_free: None (default) asks `adjpos.is_position_free` (for a bridged model,
            whether `adjpos.layer_kinds` says block 0 is NoPE); True is the caller's word that
            no positional signal enters block 0; False refuses.

    Returns:
        A `FirstLayerComparison`, tensors on the CPU.
    """
    check_choice("site", site, THEORY_SITES)
    check_site(model, site)
    _check_position_free(model, position_free)
    tokens = check_tokens(model, tokens)
    check_scorable(torch.tensor([tokens.shape[1]]))
    name = hook_name(site, 1 if site == "resid_post" else 0)
    cache = _run_block_0(model, tokens, [name, _PATTERN, _SCORES])
    sim = cosine_matrix(cache[name].float())
    n = tokens.shape[1]
    rho = 0.0 if site == "attn_out" else estimate_residual_ratio(model, tokens)
    predicted = predicted_cosine(n, residual_ratio=rho).float()
    measured = sim.mean(dim=0)
    below = torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1)
    # per query, mean over heads and sequences (xlogy: 0 log 0 = 0 at the masked keys)
    pattern = cache[_PATTERN].double()
    entropy = -torch.special.xlogy(pattern, pattern).sum(dim=-1).mean(dim=(0, 1)).float()
    return FirstLayerComparison(
        site=site,
        residual_ratio=rho,
        measured=measured,
        measured_sem=sim.std(dim=0) / math.sqrt(sim.shape[0]),
        predicted=predicted,
        error=torch.where(below, measured - predicted, torch.nan),
        # as `adjpos.adjacency_score` gives it: the mean of the sequences' scores
        measured_adjacency=float(sequence_scores(cache[name], torch.full((len(sim),), n)).mean()),
        attention_entropy=entropy,
        uniform_entropy=torch.arange(1, n + 1, dtype=entropy.dtype).log(),
        attention_logit_var=_logit_variance(cache[_SCORES]),
    )


def _check_position_free(model: Any, position_free: bool | None) -> None:
    if position_free is False:
        raise UsageError(
            "the first-layer prediction assumes no positional signal, and position_free=False "
            "says the model has one"
        )
    if position_free is not None:  # True: the caller's word
        return
    # adjpos's NoPE models, and bridged models whose block 0 is NoPE (`adjpos.layer_kinds`)
    if not (layer_kinds(model)[0] == "nope" if is_bridge(model) else is_position_free(model)):
        raise UsageError(
            "the first-layer prediction assumes no positional signal in block 0; build the "
            "model with positional='none', or pass position_free=True if you know none enters "
            "it: adjpos.is_position_free(model) is False and adjpos.layer_kinds(model)[0] is "
            "not 'nope'"
        )


def estimate_residual_ratio(model: Any, tokens: TokenInput) -> float:
    """rho = mean |embedding|^2 / mean |value vector|^2 over every token occurrence in `tokens`
    (see `compare_first_layer`)."""
    alone = check_tokens(model, tokens).reshape(-1, 1)
    cache = _run_block_0(model, alone, [_EMBED, _ATTN_OUT])
    embed, value = cache[_EMBED].double(), cache[_ATTN_OUT].double()
    return float(embed.square().sum(-1).mean() / value.square().sum(-1).mean())


def effective_width(model: Any, tokens: TokenInput) -> float:
    """The effective width of block 0's value vectors over every token occurrence in
    `tokens`: (tr S)^2 / tr(S^2) of their covariance S (over occurrences), the number of
    equally strong directions that would give the same spread (d_model when the vectors are
    isotropic, 1 when they lie on a line). The first-layer prediction assumes isotropic value
    vectors in d_model dimensions; `predicted_adjacency(n, d_model=round(this))` is the same
    prediction at the width they really span.

    Example:
        >>> import adjpos
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=1, d_model=32))
        >>> 1 <= effective_width(model, torch.arange(40)[None]) <= 32
        True
    """
    alone = check_tokens(model, tokens).reshape(-1, 1)
    values = _run_block_0(model, alone, [_ATTN_OUT])[_ATTN_OUT].double().reshape(alone.shape[0], -1)
    centred = values - values.mean(dim=0)
    cov = centred.T @ centred / max(1, values.shape[0] - 1)
    return float(torch.trace(cov) ** 2 / torch.trace(cov @ cov))


def _run_block_0(model: Any, tokens: Tensor, names: list[str]) -> dict[str, Tensor]:
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter=names, stop_at_layer=1)
    return {name: cache[name].detach().cpu() for name in names}


def _logit_variance(scores: Float[Tensor, "batch head query key"]) -> float:
    # Unbiased variance over the visible keys 0..k of each query k >= 1; the masked (future)
    # entries hold -inf and are left out.
    n = scores.shape[-1]
    visible = torch.ones(n, n, dtype=torch.bool).tril()
    x = torch.where(visible, scores.double(), 0.0)
    count = visible.sum(-1).double()
    mean = x.sum(-1, keepdim=True) / count[:, None]
    var = torch.where(visible, x - mean, 0.0).square().sum(-1)[..., 1:] / (count[1:] - 1)
    return float(var.mean())
