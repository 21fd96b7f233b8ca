"""Which attention heads read similarity (the second half of the paper's hypothesis, that
attention can read the similarity of nearby states): per head, how its scores follow the cosine
of the states it attends over, and how much attention it puts on the few positions before the
query, both on the same prompts (`head_similarity`).

Block l's attention reads residual layer l through its first normalization. The states
compared are that normalization's output before its learned scale and bias
(`blocks.{l}.ln1.hook_normalized`; the residual itself without normalization): the scale and
bias act the same way on every position, so they belong to the head's linear read-out, and the
cosines are the same whether or not a model's normalization is folded.

Every measure is reduced inside the hooks of one forward pass per batch chunk: the cosine
matrix of block l is held only until block l's scores arrive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, no_type_check

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from adjpos.capture import check_tokens
from adjpos.capture.residuals import split_batches
from adjpos.metrics import cosine_matrix
from adjpos.tables import Table
from adjpos.types import TokenInput
from adjpos.validation import UsageError, check_positive_int, is_int

if TYPE_CHECKING:
    import pandas as pd

WINDOW = 3
# A query row enters the correlations when it has at least this many earlier keys: two points
# always correlate at +-1, so such rows would add sign agreements rather than correlations.
MIN_KEYS = 3
# Architectures whose first normalization acts on the attention output, not its input:
# attention reads the raw residual there.
POST_NORM = ("Olmo2ForCausalLM", "Olmo3ForCausalLM")
HEADS = Table(
    layer="int64",
    head="int64",
    logit_cosine_pearson="float64",
    logit_cosine_spearman="float64",
    logit_cosine_given_distance="float64",
    logit_cosine_given_token="float64",
    previous_mass="float64",
    self_mass="float64",
    n_queries="int64",
    n_correlated="int64",
    n_given_distance="int64",
    n_given_token="int64",
)
# A residual smaller than this share of what it was regressed from is rounding: no variation.
_RESIDUAL = 1e-10


def head_similarity(
    model: Any,
    tokens: TokenInput,
    *,
    window: int = WINDOW,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """One row per attention head: do its scores follow similarity, does it look back?

    For block l and head h, with s[i, j] the head's pre-softmax score of key j for query i
    (``blocks.{l}.attn.hook_attn_scores``: q_i . k_j / sqrt(d_head) in a plain model) and
    c[i, j] the cosine similarity of the block's input states at i and j (see the module
    docstring for which states):

    - ``logit_cosine_pearson``: the Pearson correlation between s[i, j] and c[i, j] over the
      earlier keys j < i of one query row, averaged over the query rows where it is defined
      (at least `MIN_KEYS` keys, scores and cosines both varying; NaN when none is). Within a
      row, because the softmax ignores a shift of a whole row; without j = i, because
      c[i, i] = 1 is every row's largest cosine (``self_mass`` reports the query's own share).
    - ``logit_cosine_spearman``: the same with ranks (ties share their mean rank).
    - ``logit_cosine_given_distance``: the partial correlation with the distance i - j
      partialled out (the residuals of s and c after a least-squares fit on (1, i - j) within
      the row; rows need `MIN_KEYS` + 1 keys): near 0 for a head whose scores follow the
      cosine only because both fall with distance (linearly: a curve leaves its bend).
    - ``logit_cosine_given_token``: the partial correlation with the key's token partialled
      out (s and c less their means over the row's keys holding the same token; rows need
      `MIN_KEYS` - 1 degrees of freedom left): near 0 for a head that scores a key by its
      token.
    - ``previous_mass``: the attention on keys i - window .. i - 1, and ``self_mass`` on key
      i, averaged over the queries with at least `window` earlier positions (i >= window).
    - ``n_queries``, ``n_correlated``, ``n_given_distance``, ``n_given_token``: how many
      queries or rows each of those means averages.

    Keys a head cannot see (masked to -inf) are left out of the correlations.

    Args:
        model: a HookedTransformer with causal attention, whatever its positions (the scores
            are those the head uses); a TransformerBridge is refused (its
            ``hook_attn_scores`` holds the softmax pattern).
        tokens: token ids [batch, pos] (or one sequence [pos]), one length, at least
            max(window, MIN_KEYS) + 1 tokens.
        window: how many positions before the query ``previous_mass`` sums.
        batch_size: sequences per forward pass (default: all at once).

    Returns:
        A frame with the columns of `HEADS`, ordered by layer, then head.

    Raises:
        UsageError: bad tokens, window or batch_size, or a model without the hooks, with
            per-head attention inputs, or whose scores are not causally masked.

    Example:
        >>> import adjpos, torch
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, d_model=16, n_heads=2))
        >>> table = head_similarity(model, torch.randint(0, 64, (4, 10)))
        >>> table[["layer", "head", "n_queries"]].values.tolist()
        [[0, 0, 28], [0, 1, 28], [1, 0, 28], [1, 1, 28]]
    """
    tokens = check_tokens(model, tokens)
    check_positive_int("window", window)
    n = tokens.shape[1]
    if n <= max(window, MIN_KEYS):
        raise UsageError(
            f"head_similarity needs sequences of at least {max(window, MIN_KEYS) + 1} tokens "
            f"(window={window} needs {window + 1}, the correlations {MIN_KEYS + 1}); got {n}"
        )
    names = _hook_names(model)
    totals: dict[int, dict[str, Tensor]] = {}
    for chunk in split_batches(tokens, batch_size):
        _run_one_pass(model, chunk, names, window, totals)
    return HEADS.frame(_records(totals, n_queries=tokens.shape[0] * (n - window)))


def uniform_mass(n_tokens: int, window: int = WINDOW) -> tuple[float, float]:
    """The ``previous_mass`` and ``self_mass`` of uniform causal attention on sequences of
    `n_tokens`: the baseline of a head that does not look back. Query i puts 1 / (i + 1) on
    each of its keys, and the masses average the queries i >= window.

    Example:
        >>> [round(mass, 3) for mass in uniform_mass(16, window=3)]
        [0.357, 0.119]
    """
    check_positive_int("window", window)
    if not (is_int(n_tokens) and n_tokens > window):
        raise UsageError(f"n_tokens must be an int above window={window}, got {n_tokens!r}")
    queries = range(window, n_tokens)
    previous = sum(window / (i + 1) for i in queries) / len(queries)
    return previous, sum(1 / (i + 1) for i in queries) / len(queries)


def _hook_names(model: Any) -> list[tuple[str, str, str]]:
    """(states, scores, pattern) hook names of each block; raises if the model lacks them."""
    cfg = model.cfg
    if getattr(cfg, "use_attn_in", False) or getattr(cfg, "use_split_qkv_input", False):
        raise UsageError(
            "head_similarity needs one attention input per block; this model has per-head "
            "inputs (use_attn_in or use_split_qkv_input): switch them off"
        )
    post_norm = getattr(cfg, "original_architecture", None) in POST_NORM
    names = []
    for layer in range(cfg.n_layers):
        normalized = f"blocks.{layer}.ln1.hook_normalized"
        use_norm = normalized in model.hook_dict and not post_norm
        states = normalized if use_norm else f"blocks.{layer}.hook_resid_pre"
        scores = f"blocks.{layer}.attn.hook_attn_scores"
        pattern = f"blocks.{layer}.attn.hook_pattern"
        missing = [name for name in (states, scores, pattern) if name not in model.hook_dict]
        if missing:
            raise UsageError(
                f"head_similarity reads the hook points {missing}, which this model lacks"
            )
        names.append((states, scores, pattern))
    return names


def _run_one_pass(model: Any, chunk: Tensor, names: list, window: int, totals: dict) -> None:
    """One forward pass of `chunk`, each block's measures added to `totals` in its hooks."""
    cosines: dict[int, Tensor] = {}
    fired = {layer: [0, 0, 0] for layer in range(len(names))}

    def on(layer: int, kind: int):  # kind: 0 states, 1 scores, 2 pattern
        @no_type_check  # made at every call: kept out of the tests' type checker
        def hook(acts: Tensor, hook: Any) -> None:
            # A HookedTransformer normalizes the same input three times (for the queries, keys
            # and values), so the states hook fires three times with one tensor: measure once.
            if kind == 0 and not fired[layer][0]:
                cosines[layer] = cosine_matrix(acts.detach().double())
            elif kind == 1:
                if layer not in cosines:
                    raise RuntimeError(f"block {layer}'s scores came before its input states")
                _check_masked(acts, hook.name)
                sums = score_similarity(acts.detach().double(), cosines.pop(layer), chunk)
                _add(totals, layer, sums)
            elif kind == 2:
                _add(totals, layer, window_mass(acts.detach().double(), window))
            fired[layer][kind] += 1

        return hook

    hooks = [
        (name, on(layer, kind))
        for layer, group in enumerate(names)
        for kind, name in enumerate(group)
    ]
    with torch.inference_mode(), model.hooks(fwd_hooks=hooks):
        model(chunk, stop_at_layer=model.cfg.n_layers)  # the unembedding is not needed
    wrong = {
        layer: counts for layer, counts in fired.items() if counts[0] < 1 or counts[1:] != [1, 1]
    }
    if wrong:
        raise RuntimeError(
            f"the hooks (states, scores, pattern) fired {wrong} times (block: counts) in one "
            "forward pass, not at least once, once and once: this model does not run them in "
            "the TransformerLens order"
        )


def score_similarity(
    scores: Float[Tensor, "batch head pos pos"],
    cosines: Float[Tensor, "batch pos pos"],
    tokens: Int[Tensor, "batch pos"] | None = None,
) -> dict[str, Tensor]:
    """Per head: the sums over query rows of the within-row Pearson and Spearman correlations
    of `scores` with `cosines` over the earlier visible keys, and how many rows are defined
    (see `head_similarity`); the same of the correlation with the distance partialled out,
    and, given the `tokens`, with the key's token partialled out."""
    n = scores.shape[-1]
    earlier = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril(-1)
    keys = earlier & scores.isfinite()
    cosines = cosines[:, None].expand_as(scores)
    defined = (keys.sum(-1) >= MIN_KEYS) & _varies(scores, keys) & _varies(cosines, keys)
    pearson = _row_pearson(scores, cosines, keys)
    spearman = _row_pearson(_row_ranks(scores, keys), _row_ranks(cosines, keys), keys)
    out = {
        "pearson": torch.where(defined, pearson, 0.0).sum((0, 2)),
        "spearman": torch.where(defined, spearman, 0.0).sum((0, 2)),
        "correlated": defined.sum((0, 2)),
    }
    rows = torch.arange(n, device=scores.device, dtype=scores.dtype)
    distance = (rows[:, None] - rows[None, :]).expand_as(scores)
    partial = {"distance": _given_distance(scores, cosines, keys, distance)}
    if tokens is not None:
        partial["token"] = _given_token(scores, cosines, keys, tokens.to(scores.device))
    for name, (r, ok) in partial.items():
        out[f"given_{name}"] = torch.where(ok, r, 0.0).sum((0, 2))
        out[f"n_given_{name}"] = ok.sum((0, 2))
    return out


def _given_distance(x: Tensor, y: Tensor, keys: Tensor, distance: Tensor) -> tuple[Tensor, Tensor]:
    """Within each row, the correlation of the residuals of x and y after a least-squares
    fit on (1, distance) over the keys, and where it is defined."""
    dz = _centred(distance, keys)
    scale = (dz * dz).sum(-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    residuals = []
    for v in (x, y):
        dv = _centred(v, keys)
        residuals.append((dv, dv - (dv * dz).sum(-1, keepdim=True) / scale * dz))
    enough = keys.sum(-1) >= MIN_KEYS + 1
    return _residual_pearson(residuals, enough)


def _given_token(x: Tensor, y: Tensor, keys: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """Within each row, the correlation of x and y less their means over the keys of each
    token (the residuals of a least-squares fit on the key's token), and where defined."""
    same = (tokens[:, :, None] == tokens[:, None, :]).to(x.dtype)[:, None]  # [b, 1, key, key]
    weight = keys.to(x.dtype)
    group = (weight @ same).clamp_min(1)  # keys of the row holding each key's token
    groups = torch.where(keys, 1 / group, 0.0).sum(-1)  # distinct tokens among the keys
    residuals = []
    for v in (x, y):
        kept = torch.where(keys, v, 0.0)
        residuals.append((_centred(v, keys), torch.where(keys, v - (kept @ same) / group, 0.0)))
    enough = keys.sum(-1) - groups.round() >= MIN_KEYS - 1
    return _residual_pearson(residuals, enough)


def _residual_pearson(residuals: list, enough: Tensor) -> tuple[Tensor, Tensor]:
    """The correlation of two rows of residuals (each beside the centred values they came
    from), defined where there are enough keys and both residuals are more than rounding."""
    (cx, rx), (cy, ry) = residuals
    nx, ny = rx.norm(dim=-1), ry.norm(dim=-1)
    varies = (nx > _RESIDUAL * cx.norm(dim=-1)) & (ny > _RESIDUAL * cy.norm(dim=-1))
    scale = (nx * ny).clamp_min(torch.finfo(rx.dtype).tiny)
    return ((rx * ry).sum(-1) / scale).clamp(-1.0, 1.0), enough & varies & (nx > 0) & (ny > 0)


def _centred(x: Tensor, keys: Tensor) -> Tensor:
    """x less its mean over the keys of each row, 0 off the keys."""
    count = keys.sum(-1, keepdim=True).clamp_min(1)
    return torch.where(keys, x - torch.where(keys, x, 0.0).sum(-1, keepdim=True) / count, 0.0)


def window_mass(pattern: Float[Tensor, "batch head pos pos"], window: int) -> dict[str, Tensor]:
    """Per head: the sums over queries i >= `window` of the attention on keys i - window ..
    i - 1 and on key i."""
    n = pattern.shape[-1]
    rows = torch.arange(n, device=pattern.device)
    back = rows[:, None] - rows[None, :]  # i - j
    band = (back >= 1) & (back <= window) & (rows[:, None] >= window)
    return {
        "previous": (pattern * band).sum((0, 2, 3)),
        "self": pattern.diagonal(dim1=-2, dim2=-1)[..., window:].sum((0, 2)),
    }


def _check_masked(scores: Tensor, name: str) -> None:
    """Raise unless `scores` are causally masked pre-softmax scores: query 0 sees only key 0,
    so every later key of its row must be -inf."""
    if not bool((scores[..., 0, 1:] == -torch.inf).all()):
        raise UsageError(
            f"{name} does not hold causally masked attention scores (query 0's later keys "
            "are not -inf): a TransformerBridge, for one, gives the softmax pattern there; "
            "head_similarity needs a HookedTransformer with causal attention"
        )


def _varies(x: Tensor, keys: Bool[Tensor, "*rows n"]) -> Bool[Tensor, "*rows"]:
    """Whether `x` takes two different values on the keys of each row (an exact test: a
    constant row has no correlation, however its rounding falls)."""
    high = torch.where(keys, x, -torch.inf).amax(-1)
    low = torch.where(keys, x, torch.inf).amin(-1)
    return high > low


def _row_pearson(x: Tensor, y: Tensor, keys: Tensor) -> Tensor:
    """Pearson correlation of x and y over the keys of each row (garbage where undefined)."""
    dx, dy = _centred(x, keys), _centred(y, keys)
    scale = ((dx * dx).sum(-1) * (dy * dy).sum(-1)).sqrt().clamp_min(torch.finfo(x.dtype).tiny)
    return ((dx * dy).sum(-1) / scale).clamp(-1.0, 1.0)


def _row_ranks(x: Tensor, keys: Tensor) -> Tensor:
    """Each key's rank among the keys of its row (1 = smallest; ties share their mean rank)."""
    filled = torch.where(keys, x, torch.inf).contiguous()
    ordered = filled.sort(dim=-1).values
    below = torch.searchsorted(ordered, filled, right=False)
    upto = torch.searchsorted(ordered, filled, right=True)
    return (below + upto + 1).to(x.dtype) / 2


def _add(totals: dict, layer: int, sums: dict[str, Tensor]) -> None:
    mine = totals.setdefault(layer, {})
    for name, value in sums.items():
        mine[name] = mine.get(name, 0) + value.cpu()


def _records(totals: dict, n_queries: int) -> list[dict[str, Any]]:
    # Each correlation is a mean over the rows where it is defined (NaN where none is).
    counts = {"pearson": "correlated", "spearman": "correlated"}
    counts |= {"given_distance": "n_given_distance", "given_token": "n_given_token"}
    records = []
    for layer in sorted(totals):
        sums = totals[layer]
        means = {
            name: torch.where(sums[n] > 0, sums[name] / sums[n].clamp_min(1).double(), torch.nan)
            for name, n in counts.items()
        }
        for head in range(len(sums["correlated"])):
            records.append(
                {"layer": layer, "head": head}
                | {f"logit_cosine_{name}": float(mean[head]) for name, mean in means.items()}
                | {f"{k}_mass": float(sums[k][head]) / n_queries for k in ("previous", "self")}
                | {"n_queries": n_queries, "n_correlated": int(sums["correlated"][head])}
                | {k: int(sums[k][head]) for k in ("n_given_distance", "n_given_token")}
            )
    return records
