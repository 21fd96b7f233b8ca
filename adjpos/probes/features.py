"""Per-position probe inputs computed from one layer's hidden states, without leaking position.

For one sequence X in R^(n x d) (rows = positions 0..n-1) and C = cosine_matrix(X), the feature
sets for the token at position k are:

===================  =======  ====================================================================
name                 size     features of position k
===================  =======  ====================================================================
``variance``         1        var_d(X_k), Chi et al.'s carrier
``norm``             1        |X_k|
``cosine_profile``   n - 1    C[k, j] for every j != k, in order of j; the diagonal is *deleted*
``cosine_sorted``    n - 1    the same n - 1 values sorted from largest to smallest
``cosine_mean``      1        mean_{j != k} C[k, j]
``cosine_first``     1        C[k, 0], for k >= 1 (the similarity to the first token)
``cosine_previous``  1        C[k, k - 1], for k >= 1 (the similarity to the previous token)
``resid``            d_model  X_k itself (Haviv et al.'s per-position linear probe)
``token_identity``   5 x V    one-hot ids of the tokens at k - 2 .. k + 2 (V = d_vocab), the
                              neighbours taken around the sequence (mod n); no hidden state
===================  =======  ====================================================================

``token_identity`` is the leak-aware baseline, what the prompt format alone gives away (the
same at every layer; its neighbours wrap around so that none is marked by a missing one).
*Backward-only* sets (variance, norm, cosine_first, cosine_previous, resid) use only the state
X_k and earlier ones (`backward_only`). No feature is the position in disguise: no padding
(the sets that relate a token to all others need one length), the same number of features at
every position, and the diagonal C[k, k] = 1 deleted, not set to a constant that would mark
column k. Position 0 has no ``cosine_first`` or ``cosine_previous`` (its row is NaN, left out
of those sets' samples). ``shuffled:NAME`` is the control for any set: each sequence's states
are permuted across positions first, and the probe is asked for the *slot*. docs/probing.md
says why each rule is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.metrics import cosine_matrix, position_variance
from adjpos.probes.fit import check_names
from adjpos.validation import UsageError

BASE_FEATURE_SETS = (
    "variance",
    "norm",
    "cosine_profile",
    "cosine_sorted",
    "cosine_mean",
    "cosine_first",
    "cosine_previous",
    "resid",
    "token_identity",
)
# The sets of one number per position: the ones the spline probe reads.
ONE_NUMBER_SETS = ("variance", "norm", "cosine_mean", "cosine_first", "cosine_previous")
BACKWARD_ONLY = ("variance", "norm", "cosine_first", "cosine_previous", "resid")
TOKEN_WINDOW = 2  # token_identity: neighbours on each side
SHUFFLED = "shuffled:"
FEATURE_SETS = BASE_FEATURE_SETS + tuple(SHUFFLED + name for name in BASE_FEATURE_SETS)
# Sets that relate a token to all the other tokens of its sequence: the set of "others" must
# be the same size for every sequence, so they need sequences of one length. (cosine_first and
# cosine_previous look only backwards, so right-padding never reaches them.)
ONE_LENGTH_SETS = ("cosine_profile", "cosine_sorted", "cosine_mean", "token_identity")


def check_feature_sets(names: str | Sequence[str]) -> list[str]:
    """Feature-set names (one or several) as a list, each one of `FEATURE_SETS` (else
    `UsageError`)."""
    control = "(the shuffled-position control)"
    listed = f"{list(BASE_FEATURE_SETS)}, each also as '{SHUFFLED}NAME' {control}"
    return check_names("feature sets", names, FEATURE_SETS, listed)


def base_name(name: str) -> str:
    """The feature set under a ``shuffled:`` prefix (the name itself otherwise)."""
    return name.removeprefix(SHUFFLED)


def backward_only(name: str) -> bool:
    """True when feature set `name` uses only position k's state and earlier ones."""
    return base_name(name) in BACKWARD_ONLY


def needs_one_length(name: str) -> bool:
    """True when feature set `name` needs all sequences to have the same length: the cosine
    sets, and every ``shuffled:`` set (a shuffle must not move padding into a real slot)."""
    return name.startswith(SHUFFLED) or base_name(name) in ONE_LENGTH_SETS


def position_features(
    acts: Float[Tensor, "batch pos d_model"],
    name: str,
    *,
    seed: int = 0,
    tokens: Int[Tensor, "batch pos"] | None = None,
    d_vocab: int | None = None,
) -> Float[Tensor, "batch pos feature"]:
    """Features of every position of every sequence, from one layer's hidden states.

    The sets (variance, norm, cosine_profile, cosine_sorted, cosine_mean, cosine_first,
    cosine_previous, resid, and ``shuffled:NAME`` for each) are defined in docs/probing.md.

    Args:
        acts: one layer's hidden states, sequences all `pos` tokens long (no padding).
        name: a feature set from `FEATURE_SETS`.
        seed: seed of the per-sequence permutations of a ``shuffled:`` set.
        tokens: the token ids behind `acts` (needed by ``token_identity`` only).
        d_vocab: the vocabulary size (``token_identity``; default: the largest id + 1).

    Returns:
        float tensor, one row of features per position (NaN where a position has none:
        position 0 of cosine_first and cosine_previous); for ``shuffled:`` sets row k is the
        features of the hidden state placed in slot k.

    Example:
        >>> x = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])
        >>> position_features(x, "cosine_profile").round(decimals=3)
        tensor([[[0.7070, 0.0000],
                 [0.7070, 0.7070],
                 [0.0000, 0.7070]]])
    """
    check_feature_sets(name)
    if base_name(name) == "token_identity":
        if tokens is None:
            raise UsageError("the token_identity feature set needs the tokens")
        if name.startswith(SHUFFLED):  # the same permutations as shuffle_positions
            order = random_orders(*tokens.shape, seed=seed).to(tokens.device)
            tokens = tokens.gather(1, order)
        return token_identity(tokens, d_vocab=d_vocab).to(acts.device)
    if name.startswith(SHUFFLED):
        acts = shuffle_positions(acts, seed=seed)
    return _FEATURES[base_name(name)](acts)


def token_identity(
    tokens: Int[Tensor, "batch pos"], *, d_vocab: int | None = None, window: int = TOKEN_WINDOW
) -> Float[Tensor, "batch pos feature"]:
    """One-hot ids of the tokens at k - window .. k + window (mod the length), side by side.

    Example:
        >>> token_identity(torch.tensor([[0, 1, 1]]), d_vocab=2, window=1)[0, 0]
        tensor([0., 1., 1., 0., 0., 1.])
    """
    d_vocab = int(tokens.max()) + 1 if d_vocab is None else d_vocab
    shifted = [tokens.roll(-offset, dims=1) for offset in range(-window, window + 1)]
    return torch.cat([torch.nn.functional.one_hot(t, d_vocab) for t in shifted], dim=-1).float()


def shuffle_positions(
    acts: Float[Tensor, "batch pos d_model"], *, seed: int
) -> Float[Tensor, "batch pos d_model"]:
    """Each sequence's hidden states in a random order of its own: slot s of sequence b holds
    position ``random_orders(batch, pos, seed=seed)[b, s]`` (the global RNG is untouched)."""
    batch, pos, _ = acts.shape
    order = random_orders(batch, pos, seed=seed).to(acts.device)
    return acts.gather(1, order[..., None].expand_as(acts))


def random_orders(batch: int, pos: int, *, seed: int) -> Int[Tensor, "batch pos"]:
    """One uniformly random permutation of range(pos) per row, from its own seeded generator."""
    keys = torch.rand(batch, pos, generator=torch.Generator().manual_seed(seed))
    return keys.argsort(dim=1)


def _profile(acts: Tensor) -> Tensor:
    sim = cosine_matrix(acts)
    batch, pos, _ = sim.shape
    off_diagonal = ~torch.eye(pos, dtype=torch.bool, device=sim.device)
    return sim[:, off_diagonal].reshape(batch, pos, pos - 1)


def _wide(acts: Tensor) -> Tensor:
    return acts.float() if acts.dtype in (torch.float16, torch.bfloat16) else acts


def _to_earlier(acts: Tensor, step_back: bool) -> Tensor:
    """cos(X_k, X_0) (or X_{k-1} when `step_back`) for k >= 1; NaN at k = 0."""
    k = torch.arange(acts.shape[1], device=acts.device)
    earlier = (k - 1).clamp_min(0) if step_back else torch.zeros_like(k)
    sim = cosine_matrix(acts)[:, k, earlier]
    sim[:, 0] = torch.nan
    return sim[..., None]


_FEATURES = {
    "variance": lambda acts: position_variance(_wide(acts))[..., None],
    "norm": lambda acts: torch.linalg.vector_norm(_wide(acts), dim=-1, keepdim=True),
    "cosine_profile": _profile,
    "cosine_sorted": lambda acts: _profile(acts).sort(dim=-1, descending=True).values,
    "cosine_mean": lambda acts: _profile(acts).mean(dim=-1, keepdim=True),
    "cosine_first": lambda acts: _to_earlier(acts, step_back=False),
    "cosine_previous": lambda acts: _to_earlier(acts, step_back=True),
    "resid": _wide,
}
