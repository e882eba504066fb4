"""The derivatives of numpy.linalg's slogdet, pinv, matrix_power, lstsq and norm (every
order, and numpy 2's vector_norm and matrix_norm).

pinv and lstsq are differentiated where the rank does not change (Golub and Pereyra's
formula); lstsq's residuals use that the residual is orthogonal to the columns of ``a``
(full column rank, as numpy returns residuals only then). A norm's derivative is
``D = d norm / d x``, shaped like ``x``: vjp ``expand(g) * D``, jvp ``sum(t * D)``.
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, differentiate_by_keyword, NEW_ARRAYS, register_jvp, register_vjp,
                    result_kinds)
from .array_reductions import extreme_share
from .array_axes import axes_of, expand_reduced, negative_axes, swap_last
from .linalg_decompositions import refuse, register_outputs


# -- slogdet: (sign, log |det a|); the sign is piecewise constant -------------------------------
def _slogdet_vjp(gs, results, a):
    g = gs[1]
    return np.expand_dims(g, (-2, -1)) * swap_last(np.linalg.inv(a))


def _slogdet_jvp(t, results, a):
    return None, np.sum(swap_last(np.linalg.inv(a)) * t, axis=(-2, -1))


register_outputs(np.linalg.slogdet, (_slogdet_vjp,), (_slogdet_jvp,), outputs=(1,))


# -- pinv ----------------------------------------------------------------------------------------
def _projectors(a, p):
    """(I - a p, I - p a): the projectors onto what a's range and row space leave out."""
    m, n = np.shape(a)[-2:]
    return np.eye(m) - a @ p, np.eye(n) - p @ a


def _pinv_vjp_from(g, a, p):
    left, right = _projectors(a, p)
    pt = swap_last(p)
    gt = swap_last(g)
    return -(pt @ g @ pt) + left @ gt @ (p @ pt) + (pt @ p) @ gt @ right


def _pinv_jvp_from(t, a, p):
    left, right = _projectors(a, p)
    pt = swap_last(p)
    tt = swap_last(t)
    return -(p @ t @ p) + (p @ pt) @ tt @ left + right @ tt @ (pt @ p)


def _pinv_checks(kw):
    refuse(kw.get("hermitian"), "astad does not differentiate pinv(..., hermitian=True)")


def _pinv_vjp(g, r, a, *args, **kw):
    _pinv_checks(kw)
    return _pinv_vjp_from(g, a, r)


def _pinv_jvp(t, r, a, *args, **kw):
    _pinv_checks(kw)
    return _pinv_jvp_from(t, a, r)


register_vjp(np.linalg.pinv, _pinv_vjp)
differentiate_by_keyword(np.linalg.pinv, ("a", "rcond", "hermitian"),
                         lambda a, rcond=None, hermitian=False, **kw: _pinv_checks(
                             dict(kw, hermitian=hermitian)))
register_jvp(np.linalg.pinv, _pinv_jvp, batched=True)


# -- matrix_power --------------------------------------------------------------------------------
def _powers(a, n):
    """[I, a, a^2, ..., a^(n-1)]."""
    powers = [np.broadcast_to(np.eye(np.shape(a)[-1]), np.shape(a))]
    for _ in range(n - 1):
        powers.append(powers[-1] @ a)
    return powers


def _power_vjp(g, a, n):
    powers = _powers(a, n)
    return sum(swap_last(powers[k]) @ g @ swap_last(powers[n - 1 - k]) for k in range(n))


def _power_jvp(t, a, n):
    powers = _powers(a, n)
    return sum(powers[k] @ t @ powers[n - 1 - k] for k in range(n))


def _matrix_power_vjp(g, r, a, n):
    if n == 0:
        return np.zeros(np.shape(g))
    if n > 0:
        return _power_vjp(g, a, n)
    inverse = np.linalg.inv(a)
    g_inverse = _power_vjp(g, inverse, -n)
    return -(swap_last(inverse) @ g_inverse @ swap_last(inverse))


def _matrix_power_jvp(t, r, a, n):
    if n == 0:
        return np.zeros(np.shape(t))
    if n > 0:
        return _power_jvp(t, a, n)
    inverse = np.linalg.inv(a)
    return _power_jvp(-(inverse @ t @ inverse), inverse, -n)


register_vjp(np.linalg.matrix_power, _matrix_power_vjp, None)
register_jvp(np.linalg.matrix_power, _matrix_power_jvp, None, batched=True)


# -- lstsq: (x, residuals, rank, s); x = pinv(a) b ------------------------------------------------
def _as_columns(v, like):
    """A 1-d right-hand side (or solution) as one column, like ``like`` is."""
    return v[:, None] if np.ndim(like) == 1 else v


def _residual(a, b, x):
    return _as_columns(b, b) - a @ _as_columns(x, b)


def _lstsq_vjps():
    def vjp_a(gs, results, a, b, rcond=None):
        gx, gres, _, gs_ = gs
        x, residuals = results[0], results[1]
        total = 0.0
        if gx is not None:
            total = _pinv_vjp_from(_as_columns(gx, b) @ swap_last(_as_columns(b, b)), a,
                                   np.linalg.pinv(a))
        if gres is not None and np.size(residuals):
            e = _residual(a, b, x)
            total = total - 2.0 * (e * gres) @ swap_last(_as_columns(x, b))
        if gs_ is not None:
            u, _, vh = np.linalg.svd(a, full_matrices=False)
            total = total + (u * gs_) @ vh
        return total

    def vjp_b(gs, results, a, b, rcond=None):
        gx, gres, _, _ = gs
        x, residuals = results[0], results[1]
        total = 0.0
        if gx is not None:
            total = swap_last(np.linalg.pinv(a)) @ gx
        if gres is not None and np.size(residuals):
            e = _residual(a, b, x)
            total = total + 2.0 * (e * gres if np.ndim(b) == 2 else e[:, 0] * gres[0])
        return total
    return vjp_a, vjp_b


def _lstsq_jvps():
    def jvp_a(t, results, a, b, rcond=None):
        x, residuals = results[0], results[1]
        p = np.linalg.pinv(a)
        dx = _pinv_jvp_from(t, a, p) @ b
        dres = None
        if np.size(residuals):
            e = _residual(a, b, x)
            dres = -2.0 * np.sum(e * (t @ _as_columns(x, b)), axis=0)
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        ds = np.sum(u * (t @ swap_last(vh)), axis=-2)
        return dx, dres, None, ds

    def jvp_b(t, results, a, b, rcond=None):
        x, residuals = results[0], results[1]
        dx = np.linalg.pinv(a) @ t
        dres = None
        if np.size(residuals):
            e = _residual(a, b, x)
            dres = 2.0 * np.sum(e * _as_columns(t, b), axis=0)
        return dx, dres, None, None
    return jvp_a, jvp_b


register_outputs(np.linalg.lstsq, _lstsq_vjps(), _lstsq_jvps(), outputs=(0, 1, 3),
                 batched=False)


# -- norm -----------------------------------------------------------------------------------------
def _matrix_axes(x, ord, axis):
    """The two axes of a matrix norm, or None for a vector norm."""
    if axis is None:
        if ord is None or np.ndim(x) == 1:
            return None
        return (0, 1) if np.ndim(x) == 2 else None
    if np.ndim(axis) == 1 and len(axis) == 2:
        return tuple(a % np.ndim(x) for a in axis)
    return None


def _vector_partial(x, r_full, ord):
    nonzero = r_full != 0
    if ord is None or ord == 2:
        return np.where(nonzero, x / np.where(nonzero, r_full, 1.0), 0.0)
    if ord == 0:
        return np.zeros(np.shape(x))
    if ord == 1:
        return np.sign(x)
    scale = np.where(nonzero, r_full, 1.0) ** (1.0 - ord)
    return np.where(nonzero, np.sign(x) * np.abs(x) ** (ord - 1.0) * scale, 0.0)


def _extreme_vector_partial(x, r_full, axes):
    """inf and -inf norms over ``axes``: the sign at the extreme |x|, ties shared."""
    hit = np.abs(x) == r_full
    ties = np.maximum(np.sum(hit, axis=axes, keepdims=True), 1)
    return hit * np.sign(x) / ties


def _matrix_partial(xm, r_full, ord):
    """d norm / d x for matrices on the last two axes of ``xm``."""
    if ord is None or ord == "fro":
        nonzero = r_full != 0
        return np.where(nonzero, xm / np.where(nonzero, r_full, 1.0), 0.0)
    if ord in ("nuc", 2, -2):
        u, _, vh = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            return u @ vh
        k = 0 if ord == 2 else -1
        return np.expand_dims(u[..., :, k], -1) * np.expand_dims(vh[..., k, :], -2)
    # 1 / -1: the largest / smallest column sum of |x|; inf / -inf: row sum
    along = -2 if ord in (1, -1) else -1
    sums = np.sum(np.abs(xm), axis=along, keepdims=True)
    if ord in (1, np.inf):
        share = extreme_share(sums, np.max(sums, axis=-1 if along == -2 else -2,
                                           keepdims=True), -1 if along == -2 else -2, True)
    else:
        share = extreme_share(sums, np.min(sums, axis=-1 if along == -2 else -2,
                                           keepdims=True), -1 if along == -2 else -2, True)
    return np.sign(xm) * share


_MATRIX_ORDS = (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


def norm_partial(x, r, ord=None, axis=None, keepdims=False):
    """d norm(x, ord, axis) / d x, shaped like x."""
    if axis is None and (ord is None or ord == 2 and np.ndim(x) == 1):  # the 2-norm of all
        return x / r if r != 0 else x * 0.0
    matrix = _matrix_axes(x, ord, axis)
    if matrix is None:
        if axis is None and (ord is None or np.ndim(x) == 1):
            axes = tuple(range(np.ndim(x)))
        else:
            axes = axes_of(axis, np.ndim(x))
        r_full = expand_reduced(r, np.shape(x), axes, keepdims)
        if ord in (np.inf, -np.inf):
            return _extreme_vector_partial(x, r_full, axes)
        return _vector_partial(x, r_full, ord)
    refuse(ord not in _MATRIX_ORDS, f"linalg.norm has no matrix norm of order {ord!r}")
    r_full = expand_reduced(r, np.shape(x), matrix, keepdims)
    xm = np.moveaxis(x, matrix, (-2, -1))
    rm = np.moveaxis(r_full, matrix, (-2, -1))
    return np.moveaxis(_matrix_partial(xm, rm, ord), (-2, -1), matrix)


def _reduced_axes(x, ord, axis):
    matrix = _matrix_axes(x, ord, axis)
    if matrix is not None:
        return matrix
    return None if axis is None else axis


def _norm_vjp(g, r, x, ord=None, axis=None, keepdims=False):
    axes = _reduced_axes(x, ord, axis)
    return expand_reduced(g, np.shape(x), axes, keepdims) * norm_partial(x, r, ord, axis,
                                                                          keepdims)


def _norm_jvp(t, r, x, ord=None, axis=None, keepdims=False):
    axes = _reduced_axes(x, ord, axis)
    partial = norm_partial(x, r, ord, axis, keepdims)
    return np.sum(t * partial, axis=negative_axes(axes, np.ndim(x)), keepdims=keepdims)


register_vjp(np.linalg.norm, _norm_vjp)
register_jvp(np.linalg.norm, _norm_jvp, batched=True)
result_kinds(NEW_ARRAYS, np.linalg.pinv, np.linalg.norm)
batched_vjps(np.linalg.pinv, np.linalg.matrix_power, np.linalg.norm)

if hasattr(np.linalg, "vector_norm"):  # numpy 2: the array API's two norms
    def _vector_norm_axes(x, axis):
        return tuple(range(np.ndim(x))) if axis is None else axis

    register_vjp(np.linalg.vector_norm, lambda g, r, x, axis=None, keepdims=False, ord=2:
                 expand_reduced(g, np.shape(x), _vector_norm_axes(x, axis), keepdims) *
                 _vector_norm_partial(x, r, axis, keepdims, ord))
    register_jvp(np.linalg.vector_norm, lambda t, r, x, axis=None, keepdims=False, ord=2:
                 np.sum(t * _vector_norm_partial(x, r, axis, keepdims, ord), axis=negative_axes(
                     _vector_norm_axes(x, axis), np.ndim(x)), keepdims=keepdims),
                 batched=True)
    register_vjp(np.linalg.matrix_norm, lambda g, r, x, keepdims=False, ord="fro":
                 _norm_vjp(g, r, x, ord, (-2, -1), keepdims))
    register_jvp(np.linalg.matrix_norm, lambda t, r, x, keepdims=False, ord="fro":
                 _norm_jvp(t, r, x, ord, (-2, -1), keepdims), batched=True)
    batched_vjps(np.linalg.vector_norm, np.linalg.matrix_norm)


def _vector_norm_partial(x, r, axis, keepdims, ord):
    axes = tuple(range(np.ndim(x))) if axis is None else axes_of(axis, np.ndim(x))
    r_full = expand_reduced(r, np.shape(x), axes, keepdims)
    if ord in (np.inf, -np.inf):
        return _extreme_vector_partial(x, r_full, axes)
    return _vector_partial(x, r_full, ord)
