"""The interventions and the one context manager that applies them (see the package doc)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from adjpos.validation import UsageError, is_int

_EPS = 1e-12  # a zero state keeps norm 0: no direction to rescale


@dataclass(frozen=True)
class NoIntervention:
    """The baseline: the states pass unchanged, through the same hook."""

    name = "none"
    site = "resid_pre"
    label = name

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        return resid


@dataclass(frozen=True)
class NormPermute:
    """Each state keeps its direction and takes the norm of another position of its sequence.

    Args:
        seed: seed of the permutation of positions (one per sequence; the same for every call
            with the same shape, so greedy decoding sees a fixed rule per length).
        mirrored: give position k the norm of position n - 1 - k instead.
    """

    seed: int = 0
    mirrored: bool = False
    name = "norm_permute"
    site = "resid_pre"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        order = _partners(resid, self.seed, mirrored=self.mirrored)
        norms = resid.norm(dim=-1, keepdim=True)
        return _with_norms(resid, norms.gather(1, order[..., None]))

    @property
    def label(self) -> str:
        return "norm_permute_mirrored" if self.mirrored else "norm_permute"


@dataclass(frozen=True)
class NormPermuteControl:
    """Each state keeps its direction and takes the norm of the same position in the next
    sequence of the batch (cyclically): norms change, position information does not move."""

    name = "norm_permute_control"
    site = "resid_pre"
    label = name

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        if resid.shape[0] < 2:
            raise UsageError("norm_permute_control needs at least 2 sequences in the batch")
        norms = resid.norm(dim=-1, keepdim=True)
        return _with_norms(resid, norms.roll(-1, dims=0))


@dataclass(frozen=True)
class UniformAttention:
    """Block l's attention pattern replaced by uniform causal attention: position k attends
    1 / (k + 1) to each of positions 0..k. `heads`: which heads (default: all)."""

    heads: tuple[int, ...] | None = None
    name = "uniform_attention"
    site = "pattern"
    label = name

    def __call__(
        self, pattern: Float[Tensor, "batch head query key"], readout: Any = None
    ) -> Tensor:
        q, k = pattern.shape[-2:]
        causal = torch.ones(q, k, device=pattern.device, dtype=pattern.dtype).tril()
        uniform = causal / causal.sum(dim=-1, keepdim=True)
        if self.heads is None:
            return uniform.expand_as(pattern).clone()
        out = pattern.clone()
        out[:, list(self.heads)] = uniform
        return out


@dataclass(frozen=True)
class NormScaleControl:
    """The size-matched control of `NormPermute`: each state keeps its direction and its norm
    is multiplied by a ratio drawn at random (without replacement) from the ratios
    ||x_pi(k)|| / ||x_k|| that `NormPermute` with the same seed and `mirrored` would apply to
    this batch. The log-norm changes are the permutation's, exactly as a set, but no state
    takes the norm another position had; they land at random places.

    Matched position by position at the read-out positions: where the hook is told which
    positions are read out (``readout``, see `intervene`), those keep the permutation's own
    ratio, and only the other ratios are shuffled, among the other states. So the control
    changes the read-out states exactly as the permutation does (or, with the read-out kept,
    neither changes them).

    Args:
        seed, mirrored: the permutation whose ratios are used (as `NormPermute`).
        draw: which random placement (one control distribution: draws 0, 1, ...).
    """

    seed: int = 0
    mirrored: bool = False
    draw: int = 0
    name = "norm_scale_control"
    site = "resid_pre"

    @property
    def label(self) -> str:
        return "norm_scale_control_mirrored" if self.mirrored else "norm_scale_control"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        batch, pos, _ = resid.shape
        norms, ratios = _permutation_ratios(resid, self.seed, self.mirrored)
        free = _free_mask(readout, batch, pos, resid.device)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + pos + 7 + 7_919 * self.draw)
        pool = ratios[free]
        shuffled = pool[torch.randperm(pool.numel(), generator=gen).to(resid.device)]
        ratios = ratios.masked_scatter(free, shuffled)
        return _with_norms(resid, (norms * ratios)[..., None])


@dataclass(frozen=True)
class NormCommonScale:
    """The common-rescaling control of `NormPermute`: every norm of a sequence multiplied by
    one factor, exp(mean |log ratio|) of the permutation's log-norm changes in that sequence (a
    change of the same mean size that keeps the norms' order over positions). Read-out
    positions, where given, keep the permutation's own ratio (as `NormScaleControl`)."""

    seed: int = 0
    mirrored: bool = False
    name = "norm_common_scale"
    site = "resid_pre"

    @property
    def label(self) -> str:
        return "norm_common_scale_mirrored" if self.mirrored else "norm_common_scale"

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        batch, pos, _ = resid.shape
        norms, ratios = _permutation_ratios(resid, self.seed, self.mirrored)
        free = _free_mask(readout, batch, pos, resid.device)
        logs = ratios.clamp_min(_EPS).log().abs() * free
        factor = (logs.sum(dim=1) / free.sum(dim=1).clamp_min(1)).exp()
        ratios = torch.where(free, factor[:, None].expand_as(ratios), ratios)
        return _with_norms(resid, (norms * ratios)[..., None])


@dataclass(frozen=True, eq=False)
class SubspaceSwap:
    """Each state's component in a rank-r subspace is replaced by that of another position of
    its sequence (the seeded permutation `NormPermute` uses), then the state's own norm is
    restored: the geometry moves along the subspace only, and no norm changes.

    Build it with `SubspaceSwap.fit` (the position subspace: linear discriminant analysis of
    position on held-out states) or `SubspaceSwap.random_subspace` (the control: a random
    subspace of the same rank; labelled ``subspace_swap_random``).

    Args:
        basis: [d_model, r] orthonormal columns spanning the subspace.
        seed: seed of the permutation of positions.
        random: the basis is a random subspace (sets the label only).
    """

    basis: Tensor
    seed: int = 0
    random: bool = False
    name = "subspace_swap"
    site = "resid_pre"

    @property
    def label(self) -> str:
        return "subspace_swap_random" if self.random else "subspace_swap"

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
        gen = torch.Generator().manual_seed(seed * 1_000_003 + draw)
        if states is None or share is None:
            basis, _ = torch.linalg.qr(
                torch.randn(d_model, rank, generator=gen, dtype=torch.float64)
            )
        else:
            basis = tilted_subspace(
                states, rank, lambda b: variance_share(b, states), share, generator=gen
            )
        return cls(basis=basis, seed=seed, random=True)

    def __call__(self, resid: Float[Tensor, "batch pos d_model"], readout: Any = None) -> Tensor:
        order = _partners(resid, self.seed)
        basis = self.basis.to(device=resid.device, dtype=resid.dtype)
        coords = resid @ basis
        moved = coords.gather(1, order[..., None].expand_as(coords))
        swapped = resid + (moved - coords) @ basis.T
        return _with_norms(swapped, resid.norm(dim=-1, keepdim=True))


@dataclass(frozen=True, eq=False)
class LeaceErase:
    """Linear erasure of position with LEACE (the `concept-erasure` package): after it, no
    linear classifier reads position from the states it was fitted on better than a constant.
    Build it with `LeaceErase.fit`; ``shuffled=True`` fits the same eraser to shuffled position
    labels (the control: an erasure of the same rank that removes no position information),
    labelled ``leace_random``.

    Args:
        eraser: a fitted ``concept_erasure.LeaceEraser``.
        shuffled: fitted on shuffled labels (sets the label only).
    """

    eraser: Any
    shuffled: bool = False
    name = "leace_position"
    site = "resid_pre"

    @property
    def label(self) -> str:
        return "leace_random" if self.shuffled else "leace_position"

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
            gen = torch.Generator().manual_seed(seed)
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
    eraser's. Build it with `SubspaceErase.matched`; labelled ``erase_random``.

    Args:
        basis: [d_model, r] orthonormal columns (the erased directions).
        mean: [d_model] the fitting states' mean.
    """

    basis: Tensor
    mean: Tensor
    name = "erase_random"
    site = "resid_pre"
    label = name

    @property
    def rank(self) -> int:
        return int(self.basis.shape[1])

    @classmethod
    def matched(
        cls, states: Float[Tensor, "n d_model"], eraser: LeaceErase, *, draw: int = 0
    ) -> SubspaceErase:
        """As many directions as `eraser` erases, changing `states` as much on average."""
        states = states.double().cpu()
        mean = states.mean(dim=0)
        target = float(relative_change(states, eraser(states[None])[0]))
        gen = torch.Generator().manual_seed(1_000_003 + draw)

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


def relative_change(before: Tensor, after: Tensor) -> Tensor:
    """Mean ||after - before|| / ||before|| over the states (zero states count 0)."""
    own = before.norm(dim=-1)
    return ((after - before).norm(dim=-1) / own.clamp_min(_EPS)).mean()


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
        if measure(basis(mid)) < target:
            low = mid
        else:
            high = mid
    return basis((low + high) / 2)


@dataclass(frozen=True, eq=False)
class Stacked:
    """Several interventions in one pass: the batch is cut into ``len(parts)`` equal chunks
    and chunk d goes through ``parts[d]`` alone (the draws of a random control, measured on
    copies of the same prompts). Each part sees only its own chunk, so it acts exactly as it
    would on that chunk by itself; only the batching is shared.

    Raises:
        ValueError: no parts, a part that is not an intervention, parts at different sites,
            or (when called) a batch that does not split into equal chunks.
    """

    parts: tuple[Any, ...]

    def __post_init__(self) -> None:
        kinds = tuple(INTERVENTIONS.values())
        if not self.parts or not all(type(p) in kinds for p in self.parts):
            raise UsageError(f"Stacked needs interventions from {list(INTERVENTIONS)}")
        if len({p.site for p in self.parts}) > 1:
            raise UsageError("Stacked parts must act at one site")

    @property
    def name(self) -> str:
        return self.parts[0].name

    @property
    def site(self) -> str:
        return self.parts[0].site

    @property
    def label(self) -> str:
        return self.parts[0].label

    def __call__(self, acts: Tensor, readout: Any = None) -> Tensor:
        n = len(self.parts)
        if acts.shape[0] % n:
            raise UsageError(f"a batch of {acts.shape[0]} does not split into {n} equal chunks")
        chunks = acts.split(acts.shape[0] // n)
        return torch.cat([p(c, readout=readout) for p, c in zip(self.parts, chunks, strict=True)])


INTERVENTIONS = {
    cls.name: cls
    for cls in (
        NoIntervention,
        NormPermute,
        NormPermuteControl,
        NormScaleControl,
        SubspaceSwap,
        LeaceErase,
        SubspaceErase,
        NormCommonScale,
        UniformAttention,
    )
}


@contextmanager
def intervene(
    model: Any,
    intervention: Any,
    *,
    layer: int,
    readout_from: int | None = None,
    keep_readout: bool = False,
    record: list | None = None,
    skip_first: int = 0,
) -> Iterator[Any]:
    """Apply `intervention` at `layer` of `model` for the duration of the block.

    Args:
        readout_from: the first read-out position: positions readout_from.. are where the
            model's output is read (the last prompt position and every answer position). The
            controls matched at the read-out positions use it (`NormScaleControl`).
        keep_readout: leave the read-out positions untouched (their states, or for an
            attention-pattern intervention their attention rows, pass unchanged), and apply the
            intervention to the prompt alone (positions 0 .. readout_from), so the change of
            the earlier positions does not depend on what is decoded after them: it is the
            same at every decoding step, and decoding can reuse a KV cache. Needs
            `readout_from`.
        record: a list; every call appends ``(sum of ||x' - x|| / ||x||, states)`` over the
            states the hook changed (read-out positions left out when kept), so the change
            size can be read from the calls a decoding actually made.
        skip_first: leave positions 0 .. skip_first - 1 untouched (e.g. an attention sink
            with a massive activation): the intervention sees the states from position
            skip_first on, as if the sequence began there (`readout_from` still counts from
            position 0); for an attention-pattern intervention, the query rows before
            skip_first keep their pattern.

    Example:
        >>> import adjpos
        >>> model = adjpos.build_model(adjpos.ModelConfig(n_layers=2, d_model=16, n_heads=2))
        >>> tokens = torch.randint(0, 64, (3, 8), generator=torch.Generator().manual_seed(0))
        >>> with intervene(model, NoIntervention(), layer=1):
        ...     same = model(tokens)
        >>> torch.equal(same, model(tokens))
        True

    Raises:
        ValueError: a layer outside 0 .. n_layers - 1, an unknown intervention, heads out of
            range, `keep_readout` without `readout_from`, `skip_first` not an int >= 0 or
            after `readout_from`, or an attention-pattern intervention
            on a model other than a HookedTransformer (a TransformerBridge's pattern hook is
            read-only).
    """
    n_layers = model.cfg.n_layers
    if not is_int(layer) or not 0 <= layer < n_layers:
        raise UsageError(f"layer must be an int in [0, {n_layers - 1}], got {layer!r}")
    if type(intervention) not in (*INTERVENTIONS.values(), Stacked):
        raise UsageError(
            f"unknown intervention {intervention!r}; choose from {list(INTERVENTIONS)}"
        )
    if readout_from is not None and (not is_int(readout_from) or readout_from < 0):
        raise UsageError(f"readout_from must be an int >= 0, got {readout_from!r}")
    if keep_readout and readout_from is None:
        raise UsageError("keep_readout needs readout_from (the first read-out position)")
    if not is_int(skip_first) or skip_first < 0:
        raise UsageError(f"skip_first must be an int >= 0, got {skip_first!r}")
    if readout_from is not None and readout_from < skip_first:
        raise UsageError(f"readout_from={readout_from} is before skip_first={skip_first}")
    name = f"blocks.{layer}.hook_resid_pre"
    if intervention.site == "pattern":
        from transformer_lens import HookedTransformer

        if not isinstance(model, HookedTransformer):
            raise UsageError(
                f"{intervention.name} needs a HookedTransformer: in {type(model).__name__} the "
                "attention pattern hook does not feed back into the attention output, so "
                "changing it would change nothing"
            )
        name = f"blocks.{layer}.attn.hook_pattern"
        for part in getattr(intervention, "parts", (intervention,)):
            _check_heads(part.heads or (), model.cfg.n_heads)

    def change(acts: Tensor, start: int | None) -> Tensor:
        pos = acts.shape[-2]  # [batch, pos, d] or, for the pattern, [batch, head, query, key]
        if keep_readout:
            return _prompt_only(acts, intervention, start, record)
        readout = None
        if start is not None:
            readout = torch.arange(pos, device=acts.device) >= start
        out = intervention(acts, readout=readout)
        if record is not None and acts.ndim == 3:
            sizes = (out - acts).norm(dim=-1) / acts.norm(dim=-1).clamp_min(_EPS)
            record.append((float(sizes.detach().sum()), int(sizes.numel())))
        return out

    def hook(acts: Tensor, hook: Any) -> Tensor:
        if not skip_first:
            return change(acts, readout_from)
        if acts.ndim == 4:  # the pattern: earlier query rows restored
            out = change(acts, readout_from)
            out[:, :, :skip_first] = acts[:, :, :skip_first]
            return out
        if acts.shape[1] <= skip_first:
            return acts
        start = None if readout_from is None else readout_from - skip_first
        later = change(acts[:, skip_first:], start)
        return torch.cat([acts[:, :skip_first], later], dim=1)

    with model.hooks(fwd_hooks=[(name, hook)]):
        yield model


def _prompt_only(acts: Tensor, intervention: Any, readout_from: int, record: list | None) -> Tensor:
    """`intervention` applied to positions 0 .. readout_from only (the prompt; for a pattern,
    its query-by-key block), the read-out position readout_from and every later one kept."""
    cut = min(readout_from + 1, acts.shape[-2])
    readout = torch.arange(cut, device=acts.device) >= readout_from
    head = acts[:, :cut] if acts.ndim == 3 else acts[:, :, :cut, :cut]
    shape = (1, cut, 1) if acts.ndim == 3 else (1, 1, cut, 1)
    changed = torch.where(readout.view(shape), head, intervention(head, readout=readout))
    if record is not None and acts.ndim == 3:
        before, after = head[:, ~readout], changed[:, ~readout]
        sizes = (after - before).norm(dim=-1) / before.norm(dim=-1).clamp_min(_EPS)
        record.append((float(sizes.detach().sum()), int(sizes.numel())))
    if acts.ndim == 3:
        return torch.cat([changed, acts[:, cut:]], dim=1)
    out = acts.clone()
    out[:, :, :cut, :cut] = changed
    return out


def _partners(resid: Tensor, seed: int, *, mirrored: bool = False) -> Tensor:
    """[batch, pos] partner position of each state: a seeded random permutation of each
    sequence's positions, fixed per (seed, length), or the mirror k -> n - 1 - k."""
    batch, pos, _ = resid.shape
    if mirrored:
        order = torch.arange(pos - 1, -1, -1).expand(batch, pos)
    else:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + pos)
        order = torch.rand(batch, pos, generator=gen).argsort(dim=1)
    return order.to(resid.device)


def _permutation_ratios(resid: Tensor, seed: int, mirrored: bool) -> tuple[Tensor, Tensor]:
    """Each state's norm [batch, pos] and the ratio ||x_pi(k)|| / ||x_k|| the permutation
    (`NormPermute` with this seed and `mirrored`) would apply to it."""
    norms = resid.norm(dim=-1)
    order = _partners(resid, seed, mirrored=mirrored)
    return norms, norms.gather(1, order) / norms.clamp_min(_EPS)


def _free_mask(readout: Tensor | None, batch: int, pos: int, device: Any) -> Tensor:
    """[batch, pos] True at the positions that are not read out (all, without `readout`)."""
    if readout is None:
        return torch.ones(batch, pos, dtype=torch.bool, device=device)
    return (~readout).expand(batch, pos)


def _check_rank(rank: Any, most: int, what: str) -> None:
    if not is_int(rank) or not 1 <= rank <= most:
        raise UsageError(f"rank must be an int in [1, {most}] ({what}), got {rank!r}")


def _with_norms(resid: Tensor, norms: Tensor) -> Tensor:
    own = resid.norm(dim=-1, keepdim=True)
    return resid * (norms / own.clamp_min(_EPS))


def _check_heads(heads: Sequence[int], n_heads: int) -> None:
    """Every head index in range (for `UniformAttention`)."""
    bad = [h for h in heads if not is_int(h) or not 0 <= h < n_heads]
    if bad:
        raise UsageError(f"heads {bad} are out of range; the model has {n_heads} heads")
