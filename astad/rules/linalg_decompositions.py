"""The derivatives of numpy.linalg's decompositions: cholesky, eigh, eigvalsh, svd (and
svdvals), qr; and ``register_outputs``, which records a function returning several arrays
(one tape entry per differentiable output).

numpy's cholesky and eigh read ONE triangle of their argument (the lower by default), so
their derivative with respect to the array is the symmetric derivative folded onto that
triangle: a perturbation of the other triangle changes nothing. Every formula computes
with numpy functions astad differentiates, on any leading (stack or direction) axes.
Eigenvalues and singular values are assumed distinct (the derivative of an eigenvector
of a repeated eigenvalue is not defined); singular values nonzero where U or V is used.
"""
from __future__ import annotations

import numpy as np

from .array import (require, vjp_backward, batched_vjp_backward, batched_vjps,
                    differentiate_by_keyword, recorder, register_jvp, register_vjp, set_rule,
                    set_vjps)
from .array_axes import swap_last
from ..errors import NotDifferentiableError, user_location
from ..registry import record
from ..runtime.array_dual import is_active, parent_of, primal_of


def _only(vjp, j, n):
    """``vjp`` (taking one cotangent per result) given the cotangent of result ``j`` only."""
    def one(g, results, *args, **kwargs):
        return vjp(tuple(g if i == j else None for i in range(n)), results, *args, **kwargs)
    return one


def register_outputs(fn, vjps, jvps, outputs, batched=True):
    """Register ``fn``, whose result is a tuple of arrays, by one vjp per argument taking a
    tuple of per-result cotangents (None where a result has none) and one jvp per
    argument giving a tuple of per-result tangents. ``outputs``: the results that carry a
    derivative (the others, such as a sign or a rank, are piecewise constant)."""
    set_vjps(fn, *vjps)
    record(fn).outputs = tuple(outputs)  # (which results carry a derivative)
    register_jvp(fn, *jvps, batched=batched)
    if batched:
        batched_vjps(fn)

    def rule(tape, *args, **kwargs):
        values = [primal_of(a, tape) for a in args]
        results = fn(*values, **kwargs)
        parents = []
        for k, a in enumerate(args):
            if is_active(a, tape):
                require(fn, vjps, k)
                parents.append((k, parent_of(a)))
        if not parents:
            return results
        if not isinstance(results, tuple):  # one array (svd(compute_uv=False), qr 'r')
            return _record(tape, results, tuple(parents), (vjps, results, values, kwargs,
                                                            None), batched)
        items = list(results)
        for j in outputs:
            per_result = tuple(None if v is None else _only(v, j, len(items)) for v in vjps)
            items[j] = _record(tape, items[j], tuple(parents),
                               (per_result, results, values, kwargs, None), batched)
        return type(results)._make(items) if hasattr(results, "_make") else tuple(items)
    set_rule(fn, rule)
    return fn


def _record(tape, value, parents, context, batched):
    return recorder(value)(tape, value, batched_vjp_backward if batched else vjp_backward,
                           parents, context)


def refuse(condition, message):
    if condition:
        raise NotDifferentiableError(message, *user_location())


def _eye_like(x):
    return np.eye(np.shape(x)[-1])


def _diagonal_matrix(v):
    """A stack of diagonal matrices with the vectors ``v`` (last axis) on the diagonal."""
    return np.expand_dims(v, -2) * _eye_like(v)


def _one_triangle(a_bar, lower):
    """The derivative with respect to an array of which only one triangle is read, from
    the derivative ``a_bar`` with respect to the symmetric matrix it stands for."""
    both = a_bar + swap_last(a_bar)
    folded = np.tril(both) if lower else np.triu(both)
    return folded - a_bar * _eye_like(a_bar)


def _symmetric_tangent(t, lower):
    """The symmetric matrix's tangent for tangent ``t`` of the array (one triangle read)."""
    if lower:
        return np.tril(t) + swap_last(np.tril(t, -1))
    return np.triu(t) + swap_last(np.triu(t, 1))


def eigen_gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    difference = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    off = ~np.eye(np.shape(w)[-1], dtype=bool)
    return np.where(off, 1.0 / np.where(off, difference, 1.0), 0.0)


# -- cholesky: a = L L^T, L lower (upper=True: U = L^T, read from the upper triangle) ------
def _phi(x):
    """The lower triangle with the diagonal halved."""
    return np.tril(x) - 0.5 * x * _eye_like(x)


def _cholesky_vjp(g, r, a, upper=False):
    if upper:
        return swap_last(_cholesky_vjp(swap_last(g), swap_last(r), swap_last(a)))
    inverse = np.linalg.inv(r)
    a_bar = swap_last(inverse) @ _phi(swap_last(r) @ g) @ inverse
    return _one_triangle(a_bar, lower=True)


def _cholesky_jvp(t, r, a, upper=False):
    if upper:
        return swap_last(_cholesky_jvp(swap_last(t), swap_last(r), swap_last(a)))
    inverse = np.linalg.inv(r)
    return r @ _phi(inverse @ _symmetric_tangent(t, True) @ swap_last(inverse))


register_vjp(np.linalg.cholesky, _cholesky_vjp)
register_jvp(np.linalg.cholesky, _cholesky_jvp, batched=True)


# -- eigh: a v = v diag(w), read from one triangle ---------------------------------------------
def _eigh_vjp(gs, results, a, UPLO="L"):
    gw, gv = gs
    w, v = results
    inner = 0.0
    if gw is not None:
        inner = _diagonal_matrix(gw)
    if gv is not None:
        inner = inner + eigen_gaps(w) * (swap_last(v) @ gv)
    return _one_triangle(v @ inner @ swap_last(v), lower=UPLO.upper() == "L")


def _eigh_jvp(t, results, a, UPLO="L"):
    w, v = results
    y = swap_last(v) @ _symmetric_tangent(t, UPLO.upper() == "L") @ v
    return np.diagonal(y, axis1=-2, axis2=-1), v @ (eigen_gaps(w) * y)


def _eigvalsh_vjp(g, r, a, UPLO="L"):
    _, v = np.linalg.eigh(a, UPLO)
    return _one_triangle(v @ _diagonal_matrix(g) @ swap_last(v), lower=UPLO.upper() == "L")


def _eigvalsh_jvp(t, r, a, UPLO="L"):
    _, v = np.linalg.eigh(a, UPLO)
    return np.sum(v * (_symmetric_tangent(t, UPLO.upper() == "L") @ v), axis=-2)


register_outputs(np.linalg.eigh, (_eigh_vjp,), (_eigh_jvp,), outputs=(0, 1))
register_vjp(np.linalg.eigvalsh, _eigvalsh_vjp)
register_jvp(np.linalg.eigvalsh, _eigvalsh_jvp, batched=True)


# -- svd: a = U diag(s) Vh ---------------------------------------------------------------------
def _svd_checks(a, full_matrices, hermitian, compute_uv=True):
    refuse(hermitian, "astad does not differentiate svd(..., hermitian=True); use eigh")
    m, n = np.shape(a)[-2:]
    refuse(compute_uv and full_matrices and m != n,
            "astad differentiates the svd of a non-square matrix with full_matrices=False "
            "only (the extra columns of U or V are not unique)")


def _svd_vjp(gs, results, a, full_matrices=True, compute_uv=True, hermitian=False):
    _svd_checks(a, full_matrices, hermitian, compute_uv)
    if not compute_uv:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        return (u * np.expand_dims(gs, -2)) @ vh
    gu, gs_, gvh = gs
    u, s, vh = results
    v = swap_last(vh)
    m, n, k = np.shape(u)[-2], np.shape(vh)[-1], np.shape(s)[-1]
    f = eigen_gaps(s * s)
    inner = 0.0
    if gs_ is not None:
        inner = _diagonal_matrix(gs_)
    if gu is not None:
        ut_gu = swap_last(u) @ gu
        inner = inner + (f * (ut_gu - swap_last(ut_gu))) * np.expand_dims(s, -2)
    if gvh is not None:
        gv = swap_last(gvh)
        vt_gv = swap_last(v) @ gv
        inner = inner + np.expand_dims(s, -1) * (f * (vt_gv - swap_last(vt_gv)))
    a_bar = u @ inner @ vh
    if gu is not None and m > k:
        a_bar = a_bar + ((gu - u @ (swap_last(u) @ gu)) / np.expand_dims(s, -2)) @ vh
    if gvh is not None and n > k:
        gv = swap_last(gvh)
        a_bar = a_bar + (u / np.expand_dims(s, -2)) @ swap_last(gv - v @ (swap_last(v) @ gv))
    return a_bar


def _svd_jvp(t, results, a, full_matrices=True, compute_uv=True, hermitian=False):
    _svd_checks(a, full_matrices, hermitian, compute_uv)
    if not compute_uv:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        return np.sum(u * (t @ swap_last(vh)), axis=-2)
    u, s, vh = results
    v = swap_last(vh)
    m, n, k = np.shape(u)[-2], np.shape(vh)[-1], np.shape(s)[-1]
    f = eigen_gaps(s * s)
    dp = swap_last(u) @ t @ v
    ds = np.diagonal(dp, axis1=-2, axis2=-1)
    row, col = np.expand_dims(s, -2), np.expand_dims(s, -1)
    du = u @ (f * (dp * row + col * swap_last(dp)))
    dv = v @ (f * (col * dp + swap_last(dp) * row))
    if m > k:
        du = du + ((t @ v) - u @ (swap_last(u) @ (t @ v))) / row
    if n > k:
        tu = swap_last(t) @ u
        dv = dv + (tu - v @ (swap_last(v) @ tu)) / row
    return du, ds, swap_last(dv)


register_outputs(np.linalg.svd, (_svd_vjp,), (_svd_jvp,), outputs=(0, 1, 2))
differentiate_by_keyword(np.linalg.svd, ("a", "full_matrices", "compute_uv", "hermitian"),
                         lambda a, full_matrices=True, compute_uv=True, hermitian=False:
                         _svd_checks(a, full_matrices, hermitian, compute_uv))
if hasattr(np.linalg, "svdvals"):  # (numpy 2)
    register_vjp(np.linalg.svdvals, lambda g, r, x: _svd_vjp(g, r, x, compute_uv=False))
    register_jvp(np.linalg.svdvals, lambda t, r, x: _svd_jvp(t, r, x, compute_uv=False),
                 batched=True)


# -- qr: a = Q R --------------------------------------------------------------------------------
def _copyltu(m):
    return np.tril(m) + swap_last(np.tril(m, -1))


def _r_inverse_right(x, r):
    """x R^-1 (R square, upper triangular)."""
    return swap_last(np.linalg.solve(swap_last(r), swap_last(x)))


def _qr_tall_vjp(gq, gr, q, r):
    """The cotangent of a (m >= n, reduced Q) from those of Q and R."""
    gq = np.zeros(np.shape(q)) if gq is None else gq
    gr = np.zeros(np.shape(r)) if gr is None else gr
    m = r @ swap_last(gr) - swap_last(gq) @ q
    return _r_inverse_right(gq + q @ _copyltu(m), swap_last(r))


def _qr_tall_jvp(t, q, r):
    c = swap_last(q) @ _r_inverse_right(t, r)
    lower = np.tril(c, -1)
    omega = lower - swap_last(lower)
    return q @ omega + _r_inverse_right(t, r) - q @ c, (c - omega) @ r


def _qr_mode(mode):
    refuse(mode not in ("reduced", "complete", "r"),
            f"astad differentiates qr in modes 'reduced', 'complete' and 'r', not {mode!r}")


def _qr_vjp(gs, results, a, mode="reduced"):
    _qr_mode(mode)
    m, n = np.shape(a)[-2:]
    refuse(mode == "complete" and m > n, "astad differentiates qr(mode='complete') of a "
            "tall matrix only with mode='reduced' (the extra columns of Q are not unique)")
    if mode == "r":
        gq, gr, (q, r) = None, gs, np.linalg.qr(a)
    else:
        (gq, gr), (q, r) = gs, results
    if m >= n:
        return _qr_tall_vjp(gq, gr, q, r)
    # wide: a = [X | Y] with X square; Q, U = qr(X), R = [U | Q^T Y]
    y = a[..., :, m:]
    if gr is None:  # (zeros behind gq's leading axes)
        gr = np.zeros(np.shape(gq)[:np.ndim(gq) - np.ndim(q)] + np.shape(r))
    gu, gv = gr[..., :, :m], gr[..., :, m:]
    gq = (0.0 if gq is None else gq) + y @ swap_last(gv)
    gx = _qr_tall_vjp(gq, gu, q, r[..., :, :m])
    return np.concatenate((gx, q @ gv), axis=-1)


def _qr_jvp(t, results, a, mode="reduced"):
    _qr_mode(mode)
    m, n = np.shape(a)[-2:]
    q, r = np.linalg.qr(a) if mode == "r" else results
    if m >= n:
        dq, dr = _qr_tall_jvp(t, q, r)
    else:
        dq, du = _qr_tall_jvp(t[..., :, :m], q, r[..., :, :m])
        dv = swap_last(dq) @ a[..., :, m:] + swap_last(q) @ t[..., :, m:]
        dr = np.concatenate((du, dv), axis=-1)
    return dr if mode == "r" else (dq, dr)


register_outputs(np.linalg.qr, (_qr_vjp,), (_qr_jvp,), outputs=(0, 1))


def _qr_checks(a, mode="reduced"):
    _qr_mode(mode)
    m, n = np.shape(a)[-2:]
    refuse(mode == "complete" and m > n, "astad differentiates qr(mode='complete') of a "
            "tall matrix only with mode='reduced' (the extra columns of Q are not unique)")


differentiate_by_keyword(np.linalg.qr, ("a", "mode"), _qr_checks)
batched_vjps(np.linalg.cholesky, np.linalg.eigvalsh,
             *([np.linalg.svdvals] if hasattr(np.linalg, "svdvals") else []))
