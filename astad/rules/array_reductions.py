"""Reductions and clip: their vjps (which accept cotangents with leading direction axes)
and jvps: sum, mean, max, min, prod, var, std, trace, clip, cumprod.

A reduction with a partial derivative ``D`` (shaped like its input) has vjp
``expand(g) * D`` and jvp ``sum(t * D)`` over the reduced axes.
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, NEW_ARRAYS, refuse_keywords, register_jvp, register_vjp,
                    result_kinds, shapes_only)
from .array_axes import (align_core, axes_of, count, expand_reduced, lead_shape,
    negative_axes, negative_axis, sum_to_shape)
from ..runtime.array_dual import add_check, dispatch, plain_array
from ..runtime.duals import DUAL_TYPES


def _inside(a, lo, hi):
    mask = np.ones_like(a, dtype=float)
    if lo is not None:
        mask = mask * (a >= lo)
    if hi is not None:
        mask = mask * (a <= hi)
    return mask


def _clip_a(g, r, a, a_min=None, a_max=None, **kw):
    return sum_to_shape(g * _inside(a, a_min, a_max), np.shape(a), np.ndim(r))


register_vjp(np.clip, _clip_a,
             lambda g, r, a, a_min, a_max=None, **kw: sum_to_shape(
                 g * (a < a_min), np.shape(a_min), np.ndim(r)),
             lambda g, r, a, a_min, a_max, **kw: sum_to_shape(
                 g * (a > a_max), np.shape(a_max), np.ndim(r)))


def _clip_bounds_by_position(args, kwargs):
    """np.clip(x, min=lo, max=hi) (numpy 2.1's keywords; a_min=, a_max=) as
    np.clip(x, lo, hi): a differentiated bound given by keyword is differentiated like one
    given by position."""
    kwargs = dict(kwargs)
    a, *bounds = args
    bounds += [None] * (2 - len(bounds))
    for k, names in enumerate((("a_min", "min"), ("a_max", "max"))):
        for name in names:
            if name in kwargs:
                bounds[k] = kwargs.pop(name)
    return (a, *bounds), kwargs


add_check(np.clip, _clip_bounds_by_position)
# -- reductions ---------------------------------------------------------------------------
# Every vjp here accepts a cotangent with leading (direction) axes: it re-expands the
# cotangent behind them (array_axes.expand_reduced) and counts axes from the end.
def _sum_vjp(g, r, x, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return expand_reduced(g, np.shape(x), axis, keepdims)


def _mean_vjp(g, r, x, axis=None, dtype=None, out=None, keepdims=False, **kw):
    n = count(np.shape(x), axis)
    return expand_reduced(g if n == 1 else g / n, np.shape(x), axis, keepdims)


def extreme_share(x, r, axis, keepdims):
    """d max / d x (or min): 1 at the extreme element, shared evenly between ties (0
    everywhere when initial= was the extreme)."""
    hit = x == expand_reduced(r, np.shape(x), axis, keepdims)
    if np.ndim(x) == 0:
        return hit
    ties = np.sum(hit, axis=axis, keepdims=True)
    return hit / np.maximum(ties, 1) if np.any(ties > 1) else hit  # (bools: one pass less)


def _extreme_vjp(g, r, x, axis=None, out=None, keepdims=False, **kw):
    if axis is None and (type(g) is float or type(g) is np.float64):
        # plain values, one extreme (or a few tied): no pass over a float array
        where = np.flatnonzero(x == r)
        grad = np.zeros(np.shape(x), dtype=np.result_type(x, 1.0))
        if len(where):  # (none: initial= was the extreme)
            grad.flat[where] = g / len(where)
        return grad
    return expand_reduced(g, np.shape(x), axis, keepdims) * extreme_share(x, r, axis, keepdims)


def others_product(x, axis):
    """The product of the other elements along ``axis``, for each element of ``x``:
    prefix times suffix products along the reduced axes (moved last and flattened), so
    zeros need no special case. A primitive of its own (its derivative below), so that
    forward mode through np.prod's backward step, as in a Hessian, is one step."""
    if type(x) in DUAL_TYPES:
        return dispatch(others_product, (x, axis), {})
    ndim = np.ndim(x)
    axes = axes_of(axis, ndim)
    last = tuple(range(ndim - len(axes), ndim))
    moved = np.moveaxis(x, axes, last)
    shape = np.shape(moved)
    flat = np.reshape(moved, shape[:ndim - len(axes)] + (-1,))
    ones = np.ones(np.shape(flat)[:-1] + (1,), dtype=x.dtype)
    left = np.concatenate((ones, np.cumprod(flat[..., :-1], axis=-1)), axis=-1)
    right = np.concatenate((np.flip(np.cumprod(np.flip(flat[..., 1:], -1), axis=-1), -1),
                            ones), axis=-1)
    return np.moveaxis(np.reshape(left * right, shape), last, axes)


def pair_products(t, others, x, axis):
    """The derivative of ``others_product(x, axis)`` (``others``) along ``t``, which may
    have leading axes: for element i the sum over j != i of t_j times the product of the
    elements but i and j; its own transpose (the second derivative of a product is
    symmetric), so the vjp too. Where no element is zero or infinite, others_i times
    (S - t_i / x_i) with S the sum of t_j / x_j: exactly 0 from t_i alone (a Hessian's
    diagonal); else from the product of each pair, exactly."""
    ndim, lead = np.ndim(x), np.ndim(t) - np.ndim(x)
    axes = tuple(a - ndim for a in axes_of(axis, ndim))  # (from the end: t has more)
    plain = plain_array(x)
    if np.all(plain != 0) and np.all(np.isfinite(plain)):
        ratios = t / x
        return others * (np.sum(ratios, axis=axes, keepdims=True) - ratios)
    last = tuple(range(-len(axes), 0))
    moved = np.moveaxis(x, axes, last)
    n = int(np.prod(np.shape(moved)[ndim - len(axes):], dtype=np.int64))
    flat = np.reshape(moved, np.shape(moved)[:ndim - len(axes)] + (n,))
    eye = np.eye(n, dtype=bool)
    # [..., i, j]: the product of all but i and j (the others of j, x_i taken as 1)
    pairs = np.where(eye, 0.0, others_product(np.where(eye, 1.0, flat[..., None, :]), -1))
    moved_t = np.moveaxis(t, axes, last)
    flat_t = np.reshape(moved_t, np.shape(moved_t)[:lead + ndim - len(axes)] + (n,))
    out = np.sum(pairs * flat_t[..., None, :], axis=-1)
    return np.moveaxis(np.reshape(out, np.shape(moved_t)), last, axes)


def _prod_vjp(g, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None,
              **kw):
    if np.ndim(x) == 0:
        others = np.ones(np.shape(x))
    else:
        others = others_product(x, axis)
    if initial is not None:
        others = others * initial
    return expand_reduced(g, np.shape(x), axis, keepdims) * others


def _variance_ddof(ddof, correction):
    return ddof if correction is None else correction  # (numpy 2's name for ddof)


def _var_vjp(g, r, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             correction=None, **kw):
    n = count(np.shape(x), axis)
    centred = x - np.mean(x, axis=axis, keepdims=True)
    scale = 2.0 / (n - _variance_ddof(ddof, correction))
    return expand_reduced(g, np.shape(x), axis, keepdims) * (centred * scale)


def _std_vjp(g, r, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             correction=None, **kw):
    # where every element equals the mean (one element, or ties) std is at a kink like
    # abs at 0: the derivative taken there is 0 (for one element std is constant)
    r_full = expand_reduced(r, np.shape(x), axis, keepdims)
    nonzero = r_full != 0
    n = count(np.shape(x), axis)
    centred = x - np.mean(x, axis=axis, keepdims=True)
    partial = np.where(nonzero, centred / np.where(nonzero, r_full, 1.0), 0.0) / (
        n - _variance_ddof(ddof, correction))
    return expand_reduced(g, np.shape(x), axis, keepdims) * partial


register_vjp(np.sum, _sum_vjp)
register_vjp(np.mean, _mean_vjp)
register_vjp(np.max, _extreme_vjp)
register_vjp(np.min, _extreme_vjp)
register_vjp(np.amax, _extreme_vjp)
register_vjp(np.amin, _extreme_vjp)
register_vjp(np.prod, _prod_vjp)
register_vjp(np.var, _var_vjp)
register_vjp(np.std, _std_vjp)


refuse_keywords(np.var, ("mean",), "numpy uses the given mean as it is")
refuse_keywords(np.std, ("mean",), "numpy uses the given mean as it is")


def _trace_vjp(g, r, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    # g (one value per position on the other axes) spread on the diagonal of (axis1, axis2)
    shape, ndim = np.shape(a), np.ndim(a)
    axes = (negative_axis(axis1, ndim), negative_axis(axis2, ndim))
    diagonal = np.eye(shape[axes[0]], shape[axes[1]], k=offset)
    return np.moveaxis(np.expand_dims(g, (-2, -1)) * diagonal, (-2, -1), axes)


register_vjp(np.trace, _trace_vjp)
result_kinds(NEW_ARRAYS, np.clip, np.max, np.min, np.amax, np.amin, np.prod, np.var, np.std,
             np.trace)
shapes_only(np.sum, np.mean, np.trace)
batched_vjps(np.clip, np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod,
             np.var, np.std, np.trace)


def reduce_over(t, partial, x, axis, keepdims):
    """The jvp of a reduction of ``x`` over ``axis`` with partial ``partial``."""
    return np.sum(t * partial, axis=negative_axes(axis, np.ndim(x)), keepdims=keepdims)


# -- jvps of the reductions in array.py ----------------------------------------------------
def _clip_jvp_a(t, r, a, a_min=None, a_max=None, **kw):
    a_min, a_max = kw.get("min", a_min), kw.get("max", a_max)
    return align_core(t, np.ndim(a), np.ndim(r)) * _inside(a, a_min, a_max)


register_jvp(np.clip, _clip_jvp_a,
             lambda t, r, a, a_min, a_max=None, **kw: align_core(
                 t, np.ndim(a_min), np.ndim(r)) * (a < a_min),
             lambda t, r, a, a_min, a_max, **kw: align_core(
                 t, np.ndim(a_max), np.ndim(r)) * (a > a_max), batched=True)
register_jvp(np.sum, lambda t, r, x, axis=None, dtype=None, out=None, keepdims=False, **kw:
             np.sum(t, axis=negative_axes(axis, np.ndim(x)), dtype=dtype, keepdims=keepdims),
             batched=True)
register_jvp(np.mean, lambda t, r, x, axis=None, dtype=None, out=None, keepdims=False, **kw:
             np.mean(t, axis=negative_axes(axis, np.ndim(x)), dtype=dtype,
                     keepdims=keepdims), batched=True)


def _extreme_jvp(t, r, x, axis=None, out=None, keepdims=False, **kw):
    return reduce_over(t, extreme_share(x, r, axis, keepdims), x, axis, keepdims)


for _fn in (np.max, np.min, np.amax, np.amin):
    register_jvp(_fn, _extreme_jvp, batched=True)


def _prod_jvp(t, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, **kw):
    others = others_product(x, axis) if np.ndim(x) else np.ones(np.shape(x))
    if initial is not None:
        others = others * initial
    return reduce_over(t, others, x, axis, keepdims)


def _centred(x, axis):
    return x - np.mean(x, axis=axis, keepdims=True)


def _var_jvp(t, r, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             correction=None, **kw):
    scale = 2.0 / (count(np.shape(x), axis) - _variance_ddof(ddof, correction))
    return reduce_over(t, _centred(x, axis) * scale, x, axis, keepdims)


def _std_jvp(t, r, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             correction=None, **kw):
    r_full = expand_reduced(r, np.shape(x), axis, keepdims)
    nonzero = r_full != 0
    n = count(np.shape(x), axis) - _variance_ddof(ddof, correction)
    partial = np.where(nonzero, _centred(x, axis) / np.where(nonzero, r_full, 1.0), 0.0) / n
    return reduce_over(t, partial, x, axis, keepdims)


def _trace_jvp(t, r, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    ndim = np.ndim(a)
    return np.trace(t, offset, axis1=negative_axis(axis1, ndim),
                    axis2=negative_axis(axis2, ndim))


register_jvp(np.prod, _prod_jvp, batched=True)
register_vjp(others_product, lambda g, r, x, axis: pair_products(g, r, x, axis))
register_jvp(others_product, lambda t, r, x, axis: pair_products(t, r, x, axis), batched=True)
batched_vjps(others_product)
register_jvp(np.var, _var_jvp, batched=True)
register_jvp(np.std, _std_jvp, batched=True)
register_jvp(np.trace, _trace_jvp, batched=True)


# -- cumprod ---------------------------------------------------------------------------------
def _along_last(x, axis):
    """``x`` with the cumulative axis last (flattened first for axis=None)."""
    if axis is None:
        return np.ravel(x)
    return np.moveaxis(x, axis, -1)


def _cumprod_exact(x):
    """d out_i / d x_j along the last axis, as a (..., j, i) array, with no division:
    the product of x_k for k < j, times the product for j < k <= i (zero for i < j)."""
    n = np.shape(x)[-1]
    before = np.concatenate((np.ones(np.shape(x)[:-1] + (1,), dtype=x.dtype),
                             np.cumprod(x[..., :-1], axis=-1)), axis=-1)
    later = np.arange(n)[None, :] > np.arange(n)[:, None]  # [j, k]: k > j
    between = np.cumprod(np.where(later, np.expand_dims(x, -2), 1.0), axis=-1)
    return np.expand_dims(before, -1) * between * (later | np.eye(n, dtype=bool))


def _safe_to_divide(x, r) -> bool:
    x, r = plain_array(x), plain_array(r)
    return bool(np.all(x != 0) and np.all(np.isfinite(r)) and np.all(r != 0))


def _cumprod_core_vjp(g, r, x):
    """vjp of cumprod along the last axis of ``x`` (``g`` may have leading axes)."""
    if _safe_to_divide(x, r):
        return np.flip(np.cumsum(np.flip(g * r, -1), axis=-1), -1) / x
    return np.sum(_cumprod_exact(x) * np.expand_dims(g, -2), axis=-1)


def _cumprod_core_jvp(t, r, x):
    if _safe_to_divide(x, r):
        return r * np.cumsum(t / x, axis=-1)
    return np.sum(_cumprod_exact(x) * np.expand_dims(t, -1), axis=-2)


def cumprod_vjp(g, r, a, axis=None, dtype=None, out=None):
    x = _along_last(a, axis)
    if axis is None:
        lead = lead_shape(g, 1)
        return np.reshape(_cumprod_core_vjp(g, r, x), lead + np.shape(a))
    axis = negative_axis(axis, np.ndim(a))
    core = _cumprod_core_vjp(np.moveaxis(g, axis, -1), np.moveaxis(r, axis, -1), x)
    return np.moveaxis(core, -1, axis)


def cumprod_jvp(t, r, a, axis=None, dtype=None, out=None):
    x = _along_last(a, axis)
    if axis is None:
        flat = np.reshape(t, lead_shape(t, np.ndim(a)) + (-1,))
        return _cumprod_core_jvp(flat, r, x)
    axis = negative_axis(axis, np.ndim(a))
    core = _cumprod_core_jvp(np.moveaxis(t, axis, -1), np.moveaxis(r, axis, -1), x)
    return np.moveaxis(core, -1, axis)


register_vjp(np.cumprod, cumprod_vjp)
register_jvp(np.cumprod, cumprod_jvp, batched=True)


