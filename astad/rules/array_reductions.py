"""Reductions: the forward-mode rules (jvps) of the reductions whose vjps are in array.py
(sum, mean, max, prod, var, std, clip, trace), and the rules of cumprod, median,
percentile, quantile, average, ptp and numpy's nan* reductions.

A reduction with a partial derivative ``D`` (shaped like its input) has vjp
``expand(g) * D`` and jvp ``sum(t * D)`` over the reduced axes; both accept leading
direction axes. Order statistics (median, percentile, quantile) have a ``D`` of weights on
the elements the result interpolates between, found by sorting the primal values.
"""
from __future__ import annotations

import numpy as np

from .array import (BATCHED_VJPS, NEW_ARRAYS, RESULT_KIND, _inside, _variance_ddof,
    extreme_share, others_product, refuse_keywords, register_jvp, register_vjp)
from .array_axes import (align_core, axes_of, count, expand_reduced, lead_shape,
    negative_axes, negative_axis)
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import ARRAY_RULES, primal_of


def _reduce(t, partial, x, axis, keepdims):
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
    return _reduce(t, extreme_share(x, r, axis, keepdims), x, axis, keepdims)


for _fn in (np.max, np.min, np.amax, np.amin):
    register_jvp(_fn, _extreme_jvp, batched=True)


def _prod_jvp(t, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, **kw):
    others = others_product(x, axis) if np.ndim(x) else np.ones(np.shape(x))
    if initial is not None:
        others = others * initial
    return _reduce(t, others, x, axis, keepdims)


def _centred(x, axis):
    return x - np.mean(x, axis=axis, keepdims=True)


def _var_jvp(t, r, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             correction=None, **kw):
    scale = 2.0 / (count(np.shape(x), axis) - _variance_ddof(ddof, correction))
    return _reduce(t, _centred(x, axis) * scale, x, axis, keepdims)


def _std_jvp(t, r, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             correction=None, **kw):
    r_full = expand_reduced(r, np.shape(x), axis, keepdims)
    nonzero = r_full != 0
    n = count(np.shape(x), axis) - _variance_ddof(ddof, correction)
    partial = np.where(nonzero, _centred(x, axis) / np.where(nonzero, r_full, 1.0), 0.0) / n
    return _reduce(t, partial, x, axis, keepdims)


def _trace_jvp(t, r, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    ndim = np.ndim(a)
    return np.trace(t, offset, axis1=negative_axis(axis1, ndim),
                    axis2=negative_axis(axis2, ndim))


register_jvp(np.prod, _prod_jvp, batched=True)
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
    x, r = primal_of(x), primal_of(r)
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


def _cumprod_vjp(g, r, a, axis=None, dtype=None, out=None):
    x = _along_last(a, axis)
    if axis is None:
        lead = lead_shape(g, 1)
        return np.reshape(_cumprod_core_vjp(g, r, x), lead + np.shape(a))
    axis = negative_axis(axis, np.ndim(a))
    core = _cumprod_core_vjp(np.moveaxis(g, axis, -1), np.moveaxis(r, axis, -1), x)
    return np.moveaxis(core, -1, axis)


def _cumprod_jvp(t, r, a, axis=None, dtype=None, out=None):
    x = _along_last(a, axis)
    if axis is None:
        flat = np.reshape(t, lead_shape(t, np.ndim(a)) + (-1,))
        return _cumprod_core_jvp(flat, r, x)
    axis = negative_axis(axis, np.ndim(a))
    core = _cumprod_core_jvp(np.moveaxis(t, axis, -1), np.moveaxis(r, axis, -1), x)
    return np.moveaxis(core, -1, axis)


register_vjp(np.cumprod, _cumprod_vjp)
register_jvp(np.cumprod, _cumprod_jvp, batched=True)


# -- order statistics: median, percentile, quantile (and their nan* forms) -------------------
QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile_weights(x, q, axis, method, skip_nan):
    """d quantile / d x: for each q (leading axes, as q's shape), weights on the (at most
    two) elements the result interpolates between, shaped like ``x``."""
    if method not in QUANTILE_METHODS:
        raise NotDifferentiableError(f"astad differentiates quantiles with method in "
                                     f"{QUANTILE_METHODS}, not {method!r}", *user_location())
    x = primal_of(x)
    ndim = np.ndim(x)
    axes = axes_of(axis, ndim)
    last = tuple(range(ndim - len(axes), ndim))
    moved = np.moveaxis(x, axes, last)
    flat = moved.reshape(moved.shape[:ndim - len(axes)] + (-1,))
    n = flat.shape[-1]
    order = np.argsort(flat, axis=-1, kind="stable")  # (NaNs last)
    counts = np.sum(~np.isnan(flat), axis=-1) if skip_nan else np.full(flat.shape[:-1], n)
    qs = np.asarray(q, dtype=np.float64)
    where = np.arange(n)
    weights = []
    for qk in qs.ravel():
        index = qk * (counts - 1)
        lo = np.floor(index)
        frac = index - lo
        if method == "lower":
            frac = np.zeros_like(frac)
        elif method == "higher":
            lo, frac = np.ceil(index), np.zeros_like(frac)
        elif method == "nearest":
            lo, frac = np.around(index), np.zeros_like(frac)
        elif method == "midpoint":
            frac = np.where(frac > 0, 0.5, 0.0)
        lo = np.clip(lo, 0, np.maximum(counts - 1, 0)).astype(np.intp)
        hi = np.minimum(lo + 1, np.maximum(counts - 1, 0))
        at_lo = np.take_along_axis(order, lo[..., None], -1)
        at_hi = np.take_along_axis(order, hi[..., None], -1)
        w = (where == at_lo) * (1.0 - frac)[..., None] + (where == at_hi) * frac[..., None]
        weights.append(w * (counts > 0)[..., None])
    stacked = np.stack(weights).reshape(qs.shape + moved.shape)
    nq = qs.ndim
    return np.moveaxis(stacked, tuple(nq + a for a in last), tuple(nq + a for a in axes))


def _bound(names, args, kwargs):
    """The arguments after the array, by name (as the signature ``names`` orders them)."""
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


_QUANTILE_ARGS = ("q", "axis", "out", "overwrite_input", "method", "keepdims")
_MEDIAN_ARGS = ("axis", "out", "overwrite_input", "keepdims")


def _quantile_rules(q_scale, skip_nan, median):
    """vjp and jvp of a quantile function (q divided by ``q_scale``: 100 for percentiles;
    the median's q is 0.5)."""
    def weights(a, p):
        if p.get("overwrite_input"):
            raise NotDifferentiableError("astad does not differentiate overwrite_input=True "
                                         "(it reorders the array in place)", *user_location())
        q = 0.5 if median else np.asarray(p["q"]) / q_scale
        method = p.get("interpolation") or p.get("method", "linear")
        return _quantile_weights(a, q, p.get("axis"), method, skip_nan), np.ndim(q)

    def vjp(g, r, a, *args, **kwargs):
        p = _bound(_MEDIAN_ARGS if median else _QUANTILE_ARGS, args, kwargs)
        w, nq = weights(a, p)
        ndim = np.ndim(a)
        axes = tuple(nq + k for k in axes_of(p.get("axis"), ndim))
        product = expand_reduced(g, np.shape(w), axes, p.get("keepdims", False)) * w
        return np.sum(product, axis=tuple(range(-(nq + ndim), -ndim))) if nq else product

    def jvp(t, r, a, *args, **kwargs):
        p = _bound(_MEDIAN_ARGS if median else _QUANTILE_ARGS, args, kwargs)
        w, nq = weights(a, p)
        ndim = np.ndim(a)
        t_full = np.reshape(t, lead_shape(t, ndim) + (1,) * nq + np.shape(a))
        return np.sum(t_full * w, axis=negative_axes(p.get("axis"), ndim),
                      keepdims=p.get("keepdims", False))
    return vjp, jvp


for _fn, _scale, _skip, _median in ((np.quantile, 1.0, False, False),
                                    (np.percentile, 100.0, False, False),
                                    (np.nanquantile, 1.0, True, False),
                                    (np.nanpercentile, 100.0, True, False),
                                    (np.median, 1.0, False, True),
                                    (np.nanmedian, 1.0, True, True)):
    _vjp, _jvp = _quantile_rules(_scale, _skip, _median)
    register_vjp(_fn, _vjp, None)
    register_jvp(_fn, _jvp, None, batched=True)
    if not _median:
        refuse_keywords(_fn, ("weights",), "weighted quantiles are not differentiated")


# -- average, ptp ----------------------------------------------------------------------------
def _average_weights(a, axis, weights):
    """weights shaped to broadcast against a (numpy: 1-d weights lie along ``axis``)."""
    if np.ndim(weights) == np.ndim(a) or axis is None:
        return weights
    shape = [1] * np.ndim(a)
    shape[axis_of_weights(axis, np.ndim(a))] = np.shape(weights)[0]
    return np.reshape(weights, shape)


def axis_of_weights(axis, ndim):
    return (axis if np.ndim(axis) == 0 else axis[0]) % ndim


def _average_scale(a, axis, w):
    return np.sum(np.broadcast_to(w, np.shape(a)), axis=axis, keepdims=True)


def _average_vjp_a(g, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    g_full = expand_reduced(g, np.shape(a), axis, keepdims)
    if weights is None:
        return g_full / count(np.shape(a), axis)
    w = _average_weights(a, axis, weights)
    return g_full * (w / _average_scale(a, axis, w))


def _average_vjp_w(g, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    w = _average_weights(a, axis, weights)
    g_full = expand_reduced(g, np.shape(a), axis, keepdims)
    r_full = expand_reduced(r, np.shape(a), axis, keepdims)
    per_element = g_full * ((a - r_full) / _average_scale(a, axis, w))
    if np.ndim(weights) == np.ndim(a):
        return per_element
    ndim = np.ndim(a)
    keep = axis_of_weights(axis, ndim) - ndim
    return np.sum(per_element, axis=tuple(k for k in range(-ndim, 0) if k != keep))


def _average_jvp_a(t, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    if weights is None:
        return np.mean(t, axis=negative_axes(axis, np.ndim(a)), keepdims=keepdims)
    w = _average_weights(a, axis, weights)
    return _reduce(t, w / _average_scale(a, axis, w), a, axis, keepdims)


def _average_jvp_w(t, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    w = _average_weights(a, axis, weights)
    ndim = np.ndim(a)
    if np.ndim(weights) != ndim:
        t = np.reshape(t, lead_shape(t, np.ndim(weights)) + np.shape(w))
    r_full = expand_reduced(r, np.shape(a), axis, keepdims)
    return _reduce(t, (a - r_full) / _average_scale(a, axis, w), a, axis, keepdims)


register_vjp(np.average, _average_vjp_a, None, _average_vjp_w)
register_jvp(np.average, _average_jvp_a, None, _average_jvp_w, batched=True)
_average_rule = ARRAY_RULES[np.average]


def _average_checked(tape, a, axis=None, weights=None, returned=False, **kwargs):
    if returned:
        raise NotDifferentiableError("astad differentiates np.average(..., returned=False) "
                                     "only; compute the sum of weights with np.sum",
                                     *user_location())
    return _average_rule(tape, a, axis, weights, **kwargs)


ARRAY_RULES[np.average] = _average_checked


def _ptp_partial(x, axis):
    high = np.max(primal_of(x), axis=axis, keepdims=True)
    low = np.min(primal_of(x), axis=axis, keepdims=True)
    return 1.0 * extreme_share(x, high, axis, True) - extreme_share(x, low, axis, True)


register_vjp(np.ptp, lambda g, r, x, axis=None, out=None, keepdims=False: expand_reduced(
    g, np.shape(x), axis, keepdims) * _ptp_partial(x, axis))
register_jvp(np.ptp, lambda t, r, x, axis=None, out=None, keepdims=False: _reduce(
    t, _ptp_partial(x, axis), x, axis, keepdims), batched=True)


# -- nan* reductions: NaN elements are left out (their derivative is 0) ---------------------
def _present(x):
    return ~np.isnan(x)


def _nan_count(x, axis):
    return np.maximum(np.sum(_present(x), axis=axis, keepdims=True), 1)


def _nan_centred(x, axis):
    return np.where(_present(x), x - np.nanmean(x, axis=axis, keepdims=True), 0.0)


def _nan_partials():
    def sum_(x, r, axis, keepdims, **kw):
        return _present(x) * 1.0

    def mean(x, r, axis, keepdims, **kw):
        return _present(x) / _nan_count(x, axis)

    def extreme(x, r, axis, keepdims, **kw):
        return extreme_share(x, r, axis, keepdims)

    def prod(x, r, axis, keepdims, **kw):
        if np.ndim(x) == 0:
            return _present(x) * 1.0
        return others_product(np.where(_present(x), x, 1.0), axis) * _present(x)

    def var(x, r, axis, keepdims, ddof=0, **kw):
        return _nan_centred(x, axis) * (2.0 / np.maximum(_nan_count(x, axis) - ddof, 1))

    def std(x, r, axis, keepdims, ddof=0, **kw):
        r_full = expand_reduced(r, np.shape(x), axis, keepdims)
        nonzero = r_full != 0
        n = np.maximum(_nan_count(x, axis) - ddof, 1)
        return np.where(nonzero, _nan_centred(x, axis) / np.where(nonzero, r_full, 1.0),
                        0.0) / n
    return {np.nansum: sum_, np.nanmean: mean, np.nanmax: extreme, np.nanmin: extreme,
            np.nanprod: prod, np.nanvar: var, np.nanstd: std}


def _nan_rules(partial, names):
    def vjp(g, r, x, *args, **kwargs):
        p = _bound(names, args, kwargs)
        axis, keepdims = p.get("axis"), p.get("keepdims", False)
        ddof = p.get("ddof", 0) if p.get("correction") is None else p["correction"]
        return expand_reduced(g, np.shape(x), axis, keepdims) * partial(
            x, r, axis, keepdims, ddof=ddof)

    def jvp(t, r, x, *args, **kwargs):
        p = _bound(names, args, kwargs)
        axis, keepdims = p.get("axis"), p.get("keepdims", False)
        ddof = p.get("ddof", 0) if p.get("correction") is None else p["correction"]
        return _reduce(t, partial(x, r, axis, keepdims, ddof=ddof), x, axis, keepdims)
    return vjp, jvp


_NAN_SIGNATURES = {np.nansum: ("axis", "dtype", "out", "keepdims"),
                   np.nanmean: ("axis", "dtype", "out", "keepdims"),
                   np.nanmax: ("axis", "out", "keepdims"), np.nanmin: ("axis", "out", "keepdims"),
                   np.nanprod: ("axis", "dtype", "out", "keepdims"),
                   np.nanvar: ("axis", "dtype", "out", "ddof", "keepdims"),
                   np.nanstd: ("axis", "dtype", "out", "ddof", "keepdims")}
for _fn, _partial in _nan_partials().items():
    _vjp, _jvp = _nan_rules(_partial, _NAN_SIGNATURES[_fn])
    register_vjp(_fn, _vjp)
    register_jvp(_fn, _jvp, batched=True)
refuse_keywords(np.nanvar, ("mean",), "numpy uses the given mean as it is")
refuse_keywords(np.nanstd, ("mean",), "numpy uses the given mean as it is")


def _nancumsum_vjp(g, r, a, axis=None, dtype=None, out=None):
    if axis is None:
        flat = np.flip(np.cumsum(np.flip(g, -1), axis=-1), -1)
        return np.reshape(flat, lead_shape(g, 1) + np.shape(a)) * _present(a)
    axis = negative_axis(axis, np.ndim(a))
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis) * _present(a)


def _nancumsum_jvp(t, r, a, axis=None, dtype=None, out=None):
    masked = t * _present(a)
    if axis is None:
        return np.cumsum(np.reshape(masked, lead_shape(t, np.ndim(a)) + (-1,)), axis=-1)
    return np.cumsum(masked, axis=negative_axis(axis, np.ndim(a)))


def _nancumprod_vjp(g, r, a, axis=None, dtype=None, out=None):
    filled = np.where(_present(a), a, 1.0)
    return _cumprod_vjp(g, r, filled, axis) * _present(a)


def _nancumprod_jvp(t, r, a, axis=None, dtype=None, out=None):
    return _cumprod_jvp(t * _present(a), r, np.where(_present(a), a, 1.0), axis)


register_vjp(np.nancumsum, _nancumsum_vjp)
register_jvp(np.nancumsum, _nancumsum_jvp, batched=True)
register_vjp(np.nancumprod, _nancumprod_vjp)
register_jvp(np.nancumprod, _nancumprod_jvp, batched=True)

RESULT_KIND.update(dict.fromkeys((np.cumprod, np.ptp, np.nancumprod), NEW_ARRAYS))
BATCHED_VJPS.update((np.cumprod, np.quantile, np.percentile, np.nanquantile,
                     np.nanpercentile, np.median, np.nanmedian, np.average, np.ptp,
                     *_NAN_SIGNATURES, np.nancumsum, np.nancumprod))
