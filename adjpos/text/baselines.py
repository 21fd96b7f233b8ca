"""Next-token baselines for the text models: a unigram and a bigram fitted on token ids of the
train split, scored on exactly the tokens the models are scored on.

Both smooth their counts additively towards the level below (a Dirichlet prior):

    unigram  p(w)     = (c(w) + a / V) / (N + a)
    bigram   p(w | v) = (c(v, w) + b p(w)) / (c(v) + b)

where c(w) counts token w in the train split (N tokens, a vocabulary of V), c(v, w) the pairs
v then w, and c(v) the pairs that start with v. A strength of 0 gives the maximum-likelihood
estimate; a large b gives the unigram. Each strength is the one of `STRENGTHS` (0.01 to 1e6,
four a decade) with the lowest mean loss on the validation split (every token but its first),
the unigram's first, then the bigram's with that unigram; or a strength given.

`token_losses` has the shape and the NaN of `adjpos.text.evaluate.token_losses`, so that
`adjpos.text.evaluate.chunk_losses` scores a baseline and a model on the same tokens of the same
chunks: the bigram reads one token of context, which every scored token has (none is the first
of a window). Losses are in nats.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.validation import UsageError, check_positive_int

STRENGTHS = tuple(10.0 ** (k / 4) for k in range(-8, 25))


class UnigramModel:
    """Token frequencies of a stream, smoothed towards the uniform distribution.

    Args:
        d_vocab: the vocabulary size V (token ids in [0, V)).
        strength: the smoothing strength a; None chooses it on the validation split.

    Example:
        >>> model = UnigramModel(3, strength=0.0).fit(torch.tensor([0, 0, 1, 2]))
        >>> model.log_probs(torch.tensor([0]), torch.tensor([0])).exp().item()
        0.5
    """

    def __init__(self, d_vocab: int, *, strength: float | None = None) -> None:
        self.d_vocab = check_positive_int("d_vocab", d_vocab)
        if strength is not None and not strength >= 0:
            raise UsageError(f"strength must be >= 0 or None (chosen), got {strength!r}")
        self.strength = strength

    def fit(
        self, train: Int[Tensor, " tokens"], validation: Int[Tensor, " held"] | None = None
    ) -> UnigramModel:
        """Count `train`; choose the strength on `validation` unless one was given."""
        self.counts_ = self._count(self._check(train))
        self.totals_ = self.counts_.sum(-1)
        if self.strength is not None:
            self.strength_ = float(self.strength)
        elif validation is None:
            raise UsageError("choosing the strength needs a validation split (or give one)")
        else:
            held = self._check(validation)
            self.strength_ = min(STRENGTHS, key=lambda s: self._loss(held, s))
        return self

    def log_probs(
        self,
        previous: Int[Tensor, "*batch"],
        target: Int[Tensor, "*batch"],
        strength: float | None = None,
    ) -> Float[Tensor, "*batch"]:
        """log p(target | previous), elementwise (the unigram ignores `previous`), at the
        fitted strength or `strength`; NaN for a bigram at strength 0 after an unseen token."""
        s = self.strength_ if strength is None else strength
        row = self._row(previous)
        prior = s * self._prior(previous, target)
        return ((self.counts_[row, target] + prior) / (self.totals_[row] + s)).log()

    def token_losses(self, chunks: Int[Tensor, "chunk length"]) -> Float[Tensor, "chunk length"]:
        """Next-token loss (nats) of every token of every chunk, NaN for each chunk's first."""
        out = torch.full(chunks.shape, float("nan"), dtype=torch.float64)
        out[:, 1:] = -self.log_probs(chunks[:, :-1].long(), chunks[:, 1:].long())
        return out

    def _loss(self, ids: Tensor, strength: float) -> float:
        return -float(self.log_probs(ids[:-1], ids[1:], strength).mean())

    def _check(self, ids: Tensor) -> Tensor:
        if ids.ndim != 1 or ids.numel() < 2 or ids.is_floating_point():
            raise UsageError(f"a stream of at least 2 token ids is needed, got {ids.shape}")
        if int(ids.min()) < 0 or int(ids.max()) >= self.d_vocab:
            raise UsageError(f"token ids must lie in [0, {self.d_vocab})")
        return ids.long()

    def _count(self, ids: Tensor) -> Tensor:
        return torch.bincount(ids, minlength=self.d_vocab).double()[None]

    def _row(self, previous: Tensor) -> Tensor:
        return torch.zeros_like(previous)

    def _prior(self, previous: Tensor, target: Tensor) -> Tensor | float:
        return 1 / self.d_vocab


class BigramModel(UnigramModel):
    """Counts of token pairs, smoothed towards a `UnigramModel` fitted on the same split.

    Args:
        d_vocab: the vocabulary size V (the counts are a dense V x V table).
        strength: the smoothing strength b; None chooses it on the validation split.
        unigram_strength: the strength a of the unigram (``unigram_``); None chooses it.
    """

    def __init__(
        self, d_vocab: int, *, strength: float | None = None, unigram_strength: float | None = None
    ) -> None:
        super().__init__(d_vocab, strength=strength)
        self.unigram_strength = unigram_strength

    def fit(
        self, train: Int[Tensor, " tokens"], validation: Int[Tensor, " held"] | None = None
    ) -> BigramModel:
        """Fit ``unigram_`` on the same splits, then count `train`'s pairs."""
        unigram = UnigramModel(self.d_vocab, strength=self.unigram_strength)
        self.unigram_ = unigram.fit(train, validation)
        return super().fit(train, validation)

    def _count(self, ids: Tensor) -> Tensor:
        pairs = torch.bincount(ids[:-1] * self.d_vocab + ids[1:], minlength=self.d_vocab**2)
        return pairs.double().reshape(self.d_vocab, self.d_vocab)

    def _row(self, previous: Tensor) -> Tensor:
        return previous

    def _prior(self, previous: Tensor, target: Tensor) -> Tensor:
        return self.unigram_.log_probs(previous, target).exp()
