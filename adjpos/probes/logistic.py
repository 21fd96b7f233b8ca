"""The ``logistic`` probe fitted in torch: every fold and repeat of one feature set at once.

Each problem is scikit-learn's ``make_pipeline(StandardScaler(), LogisticRegression(C=C))`` on
one training fold: standardise with the fold's mean and (population) std, then minimise the
multinomial objective

    f(W, b) = C * sum_i CE(softmax(W^T x_i + b), y_i) + ||W||^2 / 2         (b unpenalised)

over the classes seen in that fold, and stop, as scikit-learn does, once the largest entry of
the gradient of f / (C n) falls below `tol` (1e-4). The problems are stacked into one batch
(padded with rows of weight 0) and solved in float64 by one of two methods, each step ending
with a backtracking (Armijo) line search:

- **Newton-CG** for up to `WIDE` features: conjugate gradients (in float32) preconditioned
  with the Hessian's per-class diagonal blocks; about 10 to 20 steps.
- for more features, in whitened coordinates (the inputs rotated onto the eigenvectors of
  their covariance S and rescaled by (S + 1/(C n))^(-1/2), which leaves f unchanged but puts a
  residual stream's correlated directions on one scale): **L-BFGS** in float32 to `ROUGH`
  times `tol` (its first steps are cheap, its tail is slow), then **Newton-CG** from there in
  float64, preconditioned with the Hessian's diagonal (its blocks would cost more than the
  steps they save at this width), to `tol`.

``tests/probes/test_logistic.py`` checks the result against scikit-learn.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import no_type_check

import torch
from torch import Tensor

from adjpos.validation import UsageError

LOGISTIC_C = 100.0
TOLERANCE = 1e-4  # scikit-learn's default `tol`, on the same scale of the gradient
WIDE = 32  # more features than this: the whitened solve
NEWTON_MAX_ITER = 100
LBFGS_MAX_ITER = 2000
ROUGH = 10  # the whitened solve's float32 L-BFGS stops at ROUGH * tol, Newton-CG finishes
_CG_MAX_ITER = 50
_HISTORY = 10  # L-BFGS memory (scikit-learn's, through scipy, is 10)


def fit_predict_logistic(
    train_x: Sequence[Tensor],
    train_y: Sequence[Tensor],
    test_x: Sequence[Tensor],
    *,
    n_classes: int,
    C: float = LOGISTIC_C,
    tol: float = TOLERANCE,
) -> list[Tensor]:
    """Fit one standardised multinomial logistic regression per problem; predict its tests.

    Args:
        train_x: per problem, [samples, features] training inputs (same feature count).
        train_y: per problem, [samples] classes in ``range(n_classes)``.
        test_x: per problem, [samples, features] inputs to predict.
        n_classes: number of classes; those absent from a problem's training labels are never
            predicted for it (as scikit-learn, which knows only the classes it saw).
        C: inverse strength of the L2 penalty, as in scikit-learn.
        tol: largest gradient entry (of f / (C n)) at which a problem counts as solved.

    Returns:
        Per problem, the predicted class of each test row (a long tensor).

    Example:
        >>> x = torch.tensor([[0.0], [0.1], [1.0], [1.1]], dtype=torch.float64)
        >>> y = torch.tensor([0, 0, 1, 1])
        >>> fit_predict_logistic([x], [y], [torch.tensor([[0.05], [1.05]])], n_classes=2)
        [tensor([0, 1])]
    """
    if not (len(train_x) == len(train_y) == len(test_x)) or not train_x:
        raise UsageError("give one training set, label set and test set per problem")
    x, yh, weight, mask, tests = _stack(train_x, train_y, test_x, n_classes)
    width = x.shape[-1] - 1
    solve = _newton_cg if width <= WIDE else _whitened
    w, converged = solve(x, yh, weight, mask, C=C, tol=tol)
    if not bool(converged.all()):
        warnings.warn(
            f"the logistic probe did not converge in {int((~converged).sum())} of "
            f"{len(converged)} folds (tol {tol}); their scores use the last iterate",
            RuntimeWarning,
            stacklevel=2,
        )
    return [(t @ w[b] + mask[b]).argmax(dim=-1) for b, t in enumerate(tests)]


def _stack(train_x, train_y, test_x, n_classes):
    """Standardised problems padded into one batch; a column of ones carries the bias."""
    size = max(len(t) for t in train_x)
    batch, width = len(train_x), train_x[0].shape[-1]
    device, f64 = train_x[0].device, torch.float64
    x = torch.zeros(batch, size, width + 1, dtype=f64, device=device)
    yh = torch.zeros(batch, size, n_classes, dtype=f64, device=device)
    weight = torch.zeros(batch, size, dtype=f64, device=device)
    mask = torch.full((batch, 1, n_classes), -torch.inf, dtype=f64, device=device)
    tests = []
    for b, (xb, yb, tb) in enumerate(zip(train_x, train_y, test_x, strict=True)):
        xb, n = xb.to(f64), len(xb)
        mean, std = xb.mean(dim=0), xb.std(dim=0, correction=0)
        # StandardScaler leaves a constant column unscaled rather than dividing by ~0.
        std = torch.where(std < 10 * torch.finfo(f64).eps * mean.abs().clamp_min(1), 1.0, std)
        x[b, :n, :width], x[b, :n, width] = (xb - mean) / std, 1.0
        yh[b, torch.arange(n, device=device), yb.to(device)] = 1.0
        weight[b, :n] = 1.0
        mask[b, 0, yb.unique()] = 0.0
        ones = torch.ones(len(tb), 1, dtype=f64, device=device)
        tests.append(torch.cat([(tb.to(device, f64) - mean) / std, ones], dim=1))
    return x, yh, weight, mask, tests


class _Objective:
    """f, its gradient and the class probabilities of every problem at once. `penalty` is the
    L2 weight of each input row (0 for the bias row); `scale` = C n per problem."""

    def __init__(self, x, yh, weight, mask, C, penalty):
        self.x, self.xt, self.yh, self.weight, self.mask = x, x.transpose(1, 2), yh, weight, mask
        self.C, self.penalty, self.scale = C, penalty, C * weight.sum(dim=1)

    @cached_property
    def x32(self) -> Tensor:
        """The inputs in float32, for Newton-CG's inner solve (`_newton_step`)."""
        return self.x.to(torch.float32)

    def __call__(self, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        z = self.x @ w
        masked = z + self.mask
        top = masked.amax(dim=-1, keepdim=True)
        e = torch.exp(masked - top)  # one exponential: the probabilities and the log-sum-exp
        total = e.sum(dim=-1, keepdim=True)
        p = e / total
        # each row's cross-entropy: its log-sum-exp minus its label's logit (padding weighs 0)
        entropy = (self.weight * (top + total.log())[..., 0]).sum(dim=1) - (z * self.yh).sum((1, 2))
        penalised = self.penalty * w
        f = self.C * entropy + 0.5 * (w * penalised).sum(dim=(1, 2))
        grad = self.C * (self.xt @ (p * self.weight[..., None] - self.yh)) + penalised
        return f / self.scale, grad / self.scale[:, None, None], p


def _newton_cg(x, yh, weight, mask, *, C, tol):
    width = x.shape[-1]
    penalty = torch.ones(width, 1, dtype=x.dtype, device=x.device)
    penalty[-1] = 0.0
    objective = _Objective(x, yh, weight, mask, C, penalty)
    w = torch.zeros(x.shape[0], width, yh.shape[-1], dtype=x.dtype, device=x.device)
    return _newton(objective, w, tol=tol, gradient_of=lambda g: g, blocks=True)


def _newton(objective: _Objective, w: Tensor, *, tol: float, gradient_of: Callable, blocks: bool):
    """Newton-CG from `w` (`_newton_step`) until the largest entry of `gradient_of` the
    gradient is at most `tol`."""
    f, g, p = objective(w)
    active = _largest(gradient_of(g)) > tol
    for _ in range(NEWTON_MAX_ITER):
        if not active.any():
            break
        step = _newton_step(objective, p, g * objective.scale[:, None, None], active, blocks)
        w, f, g, p, stalled = _line_search(objective, w, f, g, p, step, active)
        active &= (_largest(gradient_of(g)) > tol) & ~stalled
    return w, _largest(gradient_of(g)) <= tol


def _newton_step(
    objective: _Objective, p: Tensor, grad: Tensor, active: Tensor, blocks: bool
) -> Tensor:
    """Preconditioned conjugate gradients on H s = -grad, to a relative residual of
    min(0.5, sqrt(|grad| / (C n))) (inexact Newton: loose far from the optimum). The Hessian
    products and the preconditioner are in float32 (two to three times faster on a CPU): the
    target residual stays far above float32's rounding, and any positive definite
    preconditioner leaves the solution unchanged: the Hessian's per-class diagonal blocks
    with `blocks`, else its diagonal."""
    x, C, penalty = objective.x32, objective.C, objective.penalty
    xt = x.transpose(1, 2)
    f32, f64 = torch.float32, grad.dtype
    p32 = p.to(f32)
    pw = p32 * objective.weight.to(f32)[..., None]
    if blocks:
        inverse = _block_inverse(
            C * torch.einsum("bnk,bna,bnc->bkac", pw - p32 * pw, x, x), penalty
        )
    else:
        diagonal = C * torch.einsum("bnk,bna->bak", pw - p32 * pw, x * x).to(f64) + penalty
        inverse = 1 / diagonal.clamp_min(1e-12)
    penalty32 = penalty.to(f32)

    @no_type_check  # made at every call: kept out of the tests' type checker
    def precondition(r: Tensor) -> Tensor:
        if not blocks:
            return r * inverse
        return (inverse @ r.transpose(1, 2)[..., None])[..., 0].transpose(1, 2)

    @no_type_check
    def hessian_times(v: Tensor) -> Tensor:
        v = v.to(f32)
        z = x @ v
        hv = C * (xt @ (pw * (z - (p32 * z).sum(dim=-1, keepdim=True)))) + penalty32 * v
        return hv.to(f64)

    residual = -grad
    target = _norm(grad) * (_largest(grad) / objective.scale).sqrt().clamp(max=0.5)
    step, z = torch.zeros_like(grad), precondition(residual)
    direction, rz = z, _dot(residual, z)
    running = active.clone()
    for _ in range(_CG_MAX_ITER):
        h_dir = hessian_times(direction)
        curvature = _dot(direction, h_dir)
        alpha = torch.where(running & (curvature > 0), rz / curvature.clamp_min(1e-300), 0.0)
        step = step + alpha[:, None, None] * direction
        residual = residual - alpha[:, None, None] * h_dir
        running &= _norm(residual) > target
        if not running.any():
            break
        z = precondition(residual)
        rz, previous = _dot(residual, z), rz
        direction = z + (rz / previous.clamp_min(1e-300))[:, None, None] * direction
    return step * active[:, None, None]


def _block_inverse(blocks: Tensor, penalty: Tensor) -> Tensor:
    """The inverses of the Hessian's diagonal blocks (float32 rounding can leave a block a
    little indefinite: a jitter at its scale, and a diagonal preconditioner for any block that
    still has no Cholesky factor)."""
    blocks = blocks.to(penalty.dtype)
    eye = torch.eye(blocks.shape[-1], dtype=blocks.dtype, device=blocks.device)
    scale = blocks.diagonal(dim1=-2, dim2=-1).amax(dim=-1)[..., None, None]
    shifted = blocks + eye * (penalty + 1e-6 + 1e-5 * scale)
    factor, failed = torch.linalg.cholesky_ex(shifted)
    inverse = torch.cholesky_inverse(factor)
    if bool((failed != 0).any()):
        diagonal = torch.diag_embed(1 / shifted.diagonal(dim1=-2, dim2=-1))
        inverse = torch.where((failed != 0)[..., None, None], diagonal, inverse)
    return inverse


def _whitened(x, yh, weight, mask, *, C, tol):
    batch, width = x.shape[0], x.shape[-1] - 1
    features = x[..., :width]
    cov = features.transpose(1, 2) @ features / weight.sum(dim=1)[:, None, None]
    eigenvalues, rotation = torch.linalg.eigh(cov)
    shrink = (eigenvalues.clamp_min(0) + 1 / (C * weight.sum(dim=1, keepdim=True))).rsqrt()
    to_white = rotation * shrink[:, None, :]  # W = to_white @ V
    xw = torch.cat([features @ to_white, x[..., width:]], dim=-1)
    zero = torch.zeros(batch, 1, dtype=x.dtype, device=x.device)
    penalty = torch.cat([shrink**2, zero], dim=1)[..., None]
    objective = _Objective(xw, yh, weight, mask, C, penalty)

    def original_gradient(g: Tensor) -> Tensor:
        g = g.to(rotation.dtype)
        return torch.cat([rotation @ (g[:, :width] / shrink[..., None]), g[:, width:]], dim=1)

    f32 = torch.float32
    rough = _Objective(xw.to(f32), yh.to(f32), weight.to(f32), mask.to(f32), C, penalty.to(f32))
    v = torch.zeros(batch, width + 1, yh.shape[-1], dtype=f32, device=x.device)
    v, _ = _lbfgs(rough, v, tol=ROUGH * tol, gradient_of=original_gradient)
    v, converged = _newton(
        objective, v.to(x.dtype), tol=tol, gradient_of=original_gradient, blocks=False
    )
    return torch.cat([to_white @ v[:, :width], v[:, width:]], dim=1), converged


def _lbfgs(objective: _Objective, w: Tensor, *, tol: float, gradient_of: Callable):
    """L-BFGS, one history per problem (the two-loop recursion on batched dot products)."""
    f, g, p = objective(w)
    active = _largest(gradient_of(g)) > tol
    history: list[tuple[Tensor, Tensor, Tensor]] = []
    for _ in range(LBFGS_MAX_ITER):
        if not active.any():
            break
        q, alphas = -g, []
        for s, y, rho in reversed(history):
            alphas.append(rho * _dot(s, q))
            q = q - alphas[-1][:, None, None] * y
        if history:
            s, y, _ = history[-1]
            q = q * (_dot(s, y) / _dot(y, y).clamp_min(1e-300))[:, None, None]
        else:
            q = q / g.abs().sum(dim=(1, 2)).clamp_min(1.0)[:, None, None]
        for (s, y, rho), alpha in zip(history, reversed(alphas), strict=True):
            q = q + s * (alpha - rho * _dot(y, q))[:, None, None]
        q = torch.where((_dot(g, q) < 0)[:, None, None], q, -g) * active[:, None, None]
        w_new, f, g_new, p, stalled = _line_search(objective, w, f, g, p, q, active)
        s, y = w_new - w, g_new - g
        sy = _dot(s, y)
        history = [*history[-_HISTORY + 1 :], (s, y, torch.where(sy > 1e-300, 1 / sy, 0.0))]
        w, g = w_new, g_new
        active &= (_largest(gradient_of(g)) > tol) & ~stalled
    return w, _largest(gradient_of(g)) <= tol


def _line_search(objective, w, f, g, p, step, active):
    """Backtracking from the full step until f falls by the Armijo amount, per problem.
    Returns the new point and which active problems could not lower f (stalled)."""
    slope = _dot(g, step)
    t = torch.ones_like(f)
    todo = active.clone()
    start_w, start_f = w, f
    w, f, g, p = w.clone(), f.clone(), g.clone(), p.clone()
    for _ in range(40):
        trial = start_w + t[:, None, None] * step
        f_t, g_t, p_t = objective(trial)
        accept = todo & (f_t <= start_f + 1e-4 * t * slope)
        for old, new in ((w, trial), (f, f_t), (g, g_t), (p, p_t)):
            old[accept] = new[accept]
        todo &= ~accept
        if not todo.any():
            break
        t = torch.where(todo, t / 2, t)
    no_progress = (start_f - f).abs() <= 1e-14 * f.abs().clamp_min(1.0)
    return w, f, g, p, active & (todo | no_progress)


# The three reductions run in every solver step: kept out of the tests' runtime type checker.
@no_type_check
def _dot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(dim=(1, 2))


@no_type_check
def _norm(a: Tensor) -> Tensor:
    return a.flatten(1).norm(dim=1)


@no_type_check
def _largest(a: Tensor) -> Tensor:
    return a.abs().amax(dim=(1, 2))
