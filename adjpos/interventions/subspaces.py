"""Interventions on a subspace of the states: the position subspace's components swapped between
positions, position erased with LEACE, and their random controls of matched size."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.interventions.hooks import partner_positions
from adjpos.metrics.norms import relative_change, with_norms
from adjpos.seeds import derived_generator
from adjpos.validation import UsageError, is_int


@dataclass(frozen=True, eq=False)
class SubspaceSwap:
    """Each state's component in a rank-r subspace is replaced by that of another position of
    its sequence (the seeded permutation `NormPermute` uses), then the state's own norm is
    restored: the geometry moves along the subspace only, and no norm changes.

    Build it with `SubspaceSwap.fit` (the position subspace: linear discriminant analysis of
    position on held-out states) or `SubspaceSwap.random_subspace` (the control: a random
    subspace of the same rank).

    Args:
        basis: [d_model, r] orthonormal columns spanning the subspace.
        seed: seed of the permutation of positions.
        random: the basis is a random subspace (a record of how it was built).
    """

    basis: Tensor
    seed: int = 0
    random: bool = False
    site = "resid_pre"

    @property
    def rank(self) -> int:
        return int(self.basis.shape[1])

    @classmethod
    def fit(
        cls,
        states: Float[Tensor, "n d_model"],
        positions: Int[Tensor, " n"],
        *,
        rank: int,
        seed: int = 0,
    ) -> SubspaceSwap:
        """The span of the first `rank` discriminant directions of position (scikit-learn's
        LDA, eigen solver with Ledoit-Wolf shrinkage), orthonormalised.

        Raises:
            ValueError: `rank` is not in 1 .. min(positions - 1, d_model).
        """
        from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

        classes = int(positions.unique().numel())
        _check_rank(rank, min(classes - 1, states.shape[1]), "distinct positions - 1")
        lda = LinearDiscriminantAnalysis(solver="eigen", shrinkage="auto")
        with warnings.catch_warnings():
            # A position seen once (the end of the longest prompts) has no spread about its
            # mean: its within-class covariance is 0, which is right, but scikit-learn warns.
            warnings.filterwarnings("ignore", "Only one sample available", UserWarning)
            lda.fit(states.double().cpu().numpy(), positions.cpu().numpy())
        scalings = torch.from_numpy(lda.scalings_[:, :rank].copy())
        basis, _ = torch.linalg.qr(scalings)
        return cls(basis=basis, seed=seed)

    @classmethod
    def random_subspace(
        cls,
        d_model: int,
        *,
        rank: int,
        seed: int = 0,
        draw: int = 0,
        states: Tensor | None = None,
        share: float | None = None,
    ) -> SubspaceSwap:
        """A random rank-`rank` subspace of R^d_model (QR of a Gaussian matrix; `draw` picks
        which). With `states` and `share`, it is variance-matched: tilted towards the states'
        high- (or low-) variance directions until it holds `share` of their variance
        (`variance_share`), as the tested subspace does."""
        _check_rank(rank, d_model, "d_model")
        gen = derived_generator(seed, "random subspace", draw)
        if states is None or share is None:
            gauss = torch.randn(d_model, rank, generator=gen, dtype=torch.float64)
            basis = torch.linalg.qr(gauss)[0]
        else:
            basis = tilted_subspace(
                states, rank, lambda b: variance_share(b, states), share, generator=gen
            )
        return cls(basis=basis, seed=seed, random=True)

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        order = partner_positions(resid, self.seed)
        basis = self.basis.to(device=resid.device, dtype=resid.dtype)
        coords = resid @ basis
        moved = coords.gather(1, order[..., None].expand_as(coords))
        swapped = resid + (moved - coords) @ basis.T
        return with_norms(swapped, resid.norm(dim=-1, keepdim=True))


@dataclass(frozen=True, eq=False)
class LeaceErase:
    """Linear erasure of position with LEACE (the `concept-erasure` package): after it, no
    linear classifier reads position from the states it was fitted on better than a constant.
    Build it with `LeaceErase.fit`; ``shuffled=True`` fits the same eraser to shuffled position
    labels (the control: an erasure of the same rank that removes no position information).

    Args:
        eraser: a fitted ``concept_erasure.LeaceEraser``.
        shuffled: fitted on shuffled labels (a record of how it was built).
    """

    eraser: Any
    shuffled: bool = False
    site = "resid_pre"

    @property
    def rank(self) -> int:
        """Dimensions erased: the rank of the eraser's projection."""
        return int(torch.linalg.matrix_rank(self.eraser.proj_left @ self.eraser.proj_right))

    @classmethod
    def fit(
        cls,
        states: Float[Tensor, "n d_model"],
        positions: Int[Tensor, " n"],
        *,
        shuffled: bool = False,
        seed: int = 0,
    ) -> LeaceErase:
        """Fit LEACE to one-hot position labels (shuffled with `seed` for the control).

        Every singular direction of the whitened cross-covariance is erased (``svd_tol`` near 0), so
        the position eraser and its shuffled control erase the same number of dimensions.
        """
        from concept_erasure import LeaceEraser

        labels = positions.cpu().long()
        if shuffled:
            gen = derived_generator(seed, "shuffled positions")
            labels = labels[torch.randperm(labels.numel(), generator=gen)]
        onehot = torch.nn.functional.one_hot(labels).double()
        eraser = LeaceEraser.fit(states.double().cpu(), onehot, svd_tol=1e-12)
        return cls(eraser=eraser, shuffled=shuffled)

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        return self.eraser(resid.detach().double().cpu()).to(resid)


@dataclass(frozen=True, eq=False)
class SubspaceErase:
    """The size-matched control of `LeaceErase`: a random subspace of the same rank erased,
    x' = x - B B^T (x - mean), tilted towards the states' high- or low-variance directions
    until its mean relative change ||x' - x|| / ||x|| on the fitting states equals the
    eraser's. Build it with `SubspaceErase.matched`.

    Args:
        basis: [d_model, r] orthonormal columns (the erased directions).
        mean: [d_model] the fitting states' mean.
    """

    basis: Tensor
    mean: Tensor
    site = "resid_pre"

    @property
    def rank(self) -> int:
        return int(self.basis.shape[1])

    @classmethod
    def matched(
        cls,
        states: Float[Tensor, "n d_model"],
        eraser: LeaceErase,
        *,
        seed: int = 0,
        draw: int = 0,
    ) -> SubspaceErase:
        """As many directions as `eraser` erases, changing `states` as much on average (the
        random directions drawn from `seed` and `draw`)."""
        states = states.double().cpu()
        mean = states.mean(dim=0)
        target = float(relative_change(states, eraser(states[None])[0]))
        gen = derived_generator(seed, "random erasure", draw)

        def change(basis: Tensor) -> float:
            return float(relative_change(states, cls(basis=basis, mean=mean)(states[None])[0]))

        return cls(
            basis=tilted_subspace(states, eraser.rank, change, target, generator=gen), mean=mean
        )

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        basis = self.basis.to(device=resid.device, dtype=resid.dtype)
        return resid - ((resid - self.mean.to(resid)) @ basis) @ basis.T


def variance_share(basis: Tensor, states: Float[Tensor, "n d_model"]) -> float:
    """The share of the states' variance (about their mean) inside the span of `basis`'s
    orthonormal columns."""
    centred = states.double() - states.double().mean(dim=0)
    return float((centred @ basis.double()).square().sum() / centred.square().sum())


def tilted_subspace(
    states: Float[Tensor, "n d_model"],
    rank: int,
    measure: Any,
    target: float,
    *,
    generator: torch.Generator,
) -> Tensor:
    """A random rank-`rank` orthonormal basis Q(alpha) = qr(C^(alpha/2) G), with G Gaussian
    and C the states' covariance (scaled to largest eigenvalue 1), and alpha in [-8, 8] set by
    bisection so that `measure(Q)` equals `target` (alpha = 0: uniformly random; larger alpha:
    higher-variance directions). Where no alpha reaches `target`, the closer end."""
    states = states.double().cpu()
    values, vectors = torch.linalg.eigh(torch.cov(states.T))
    values = (values / values.max()).clamp_min(1e-12)
    gauss = torch.randn(states.shape[1], rank, generator=generator, dtype=torch.float64)

    def basis(alpha: float) -> Tensor:
        return torch.linalg.qr(vectors @ (values[:, None] ** (alpha / 2) * (vectors.T @ gauss)))[0]

    low, high = -8.0, 8.0
    m_low, m_high = measure(basis(low)), measure(basis(high))
    if not m_low < target < m_high:
        return basis(low if abs(m_low - target) <= abs(m_high - target) else high)
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if measure(basis(mid)) < target else (low, mid)
    return basis((low + high) / 2)


def _check_rank(rank: Any, most: int, what: str) -> None:
    if not is_int(rank) or not 1 <= rank <= most:
        raise UsageError(f"rank must be an int in [1, {most}] ({what}), got {rank!r}")
