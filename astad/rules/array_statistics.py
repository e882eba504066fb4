"""Statistics: median, percentile, quantile (order statistics), average, ptp and numpy's
nan* reductions, with vjps and jvps that accept leading (direction) axes.

Order statistics have a derivative ``D`` of weights on the (at most two) elements the
result interpolates between, found by sorting the primal values; the nan* reductions
leave NaN elements out (their derivative is 0).
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, differentiate_by_keyword, NEW_ARRAYS, refuse_keywords,
                    register_jvp, register_vjp, result_kinds)
from .array_axes import axes_of, count, expand_reduced, lead_shape, move_core_axes, \
    negative_axes, negative_axis
from .array_reductions import (cumprod_jvp, cumprod_vjp, reduce_over, extreme_share,
    others_product)
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import add_check, plain_array


# -- order statistics: median, percentile, quantile (and their nan* forms) -------------------
QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile_weights(x, q, axis, method, skip_nan):
    """d quantile / d x: for each q (leading axes, as q's shape), weights on the (at most
    two) elements the result interpolates between, shaped like ``x``."""
    if method not in QUANTILE_METHODS:
        raise NotDifferentiableError(f"astad differentiates quantiles with method in "
                                     f"{QUANTILE_METHODS}, not {method!r}", *user_location())
    x = plain_array(x)
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


def _quantile_checks(median):
    """Refuse, when called, what the quantile rules do not differentiate."""
    def check(args, kwargs):
        p = _bound(_MEDIAN_ARGS if median else _QUANTILE_ARGS, args[1:], kwargs)
        if p.get("overwrite_input"):
            raise NotDifferentiableError("astad does not differentiate overwrite_input=True "
                                         "(it reorders the array in place)", *user_location())
        method = p.get("interpolation") or p.get("method", "linear")
        if method not in QUANTILE_METHODS:
            raise NotDifferentiableError(f"astad differentiates quantiles with method in "
                                         f"{QUANTILE_METHODS}, not {method!r}",
                                         *user_location())
        return args, kwargs
    return check
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
    add_check(_fn, _quantile_checks(_median))


# -- average, ptp ----------------------------------------------------------------------------
def _weights_axes(a, axis):
    """The axes of ``a`` that weights of fewer axes lie along (in the order given)."""
    return tuple(int(x) % np.ndim(a) for x in ((axis,) if np.ndim(axis) == 0 else axis))


def _spread(w, a, axis, core_ndim):
    """Weights (their last ``core_ndim`` axes, behind any leading axes) placed along
    ``axis`` of ``a`` so they broadcast against it, as numpy places them."""
    if core_ndim == np.ndim(a) or axis is None:
        return w
    axes = _weights_axes(a, axis)
    order = tuple(int(k) for k in np.argsort(axes))
    w = np.transpose(w, move_core_axes(w, core_ndim, order))
    shape = tuple(n if k in axes else 1 for k, n in enumerate(np.shape(a)))
    return np.reshape(w, lead_shape(w, core_ndim) + shape)


def _gather_weights(per_element, a, axis, weights):
    """The cotangent of the weights, from one per element of ``a``."""
    ndim = np.ndim(a)
    if np.ndim(weights) == ndim or axis is None:
        return per_element
    axes = _weights_axes(a, axis)
    summed = np.sum(per_element, axis=tuple(k - ndim for k in range(ndim) if k not in axes))
    back = tuple(int(k) for k in np.argsort(np.argsort(axes)))
    return np.transpose(summed, move_core_axes(summed, len(axes), back))


def _average_scale(a, axis, w):
    return np.sum(np.broadcast_to(w, np.shape(a)), axis=axis, keepdims=True)


def _average_vjp_a(g, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    g_full = expand_reduced(g, np.shape(a), axis, keepdims)
    if weights is None:
        return g_full / count(np.shape(a), axis)
    w = _spread(weights, a, axis, np.ndim(weights))
    return g_full * (w / _average_scale(a, axis, w))


def _average_vjp_w(g, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    w = _spread(weights, a, axis, np.ndim(weights))
    g_full = expand_reduced(g, np.shape(a), axis, keepdims)
    r_full = expand_reduced(r, np.shape(a), axis, keepdims)
    per_element = g_full * ((a - r_full) / _average_scale(a, axis, w))
    return _gather_weights(per_element, a, axis, weights)


def _average_jvp_a(t, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    if weights is None:
        return np.mean(t, axis=negative_axes(axis, np.ndim(a)), keepdims=keepdims)
    w = _spread(weights, a, axis, np.ndim(weights))
    return reduce_over(t, w / _average_scale(a, axis, w), a, axis, keepdims)


def _average_jvp_w(t, r, a, axis=None, weights=None, returned=False, *, keepdims=False):
    w = _spread(weights, a, axis, np.ndim(weights))
    t = _spread(t, a, axis, np.ndim(weights))
    r_full = expand_reduced(r, np.shape(a), axis, keepdims)
    return reduce_over(t, (a - r_full) / _average_scale(a, axis, w), a, axis, keepdims)


register_vjp(np.average, _average_vjp_a, None, _average_vjp_w)
register_jvp(np.average, _average_jvp_a, None, _average_jvp_w, batched=True)


def _average_checks(a, axis=None, weights=None, returned=False, **kwargs):
    if returned:
        raise NotDifferentiableError("astad differentiates np.average(..., returned=False) "
                                     "only; compute the sum of weights with np.sum",
                                     *user_location())


differentiate_by_keyword(np.average, ("a", "axis", "weights", "returned"), _average_checks)


def _ptp_partial(x, axis):
    high = np.max(plain_array(x), axis=axis, keepdims=True)
    low = np.min(plain_array(x), axis=axis, keepdims=True)
    return 1.0 * extreme_share(x, high, axis, True) - extreme_share(x, low, axis, True)


register_vjp(np.ptp, lambda g, r, x, axis=None, out=None, keepdims=False: expand_reduced(
    g, np.shape(x), axis, keepdims) * _ptp_partial(x, axis))
register_jvp(np.ptp, lambda t, r, x, axis=None, out=None, keepdims=False: reduce_over(
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
        return reduce_over(t, partial(x, r, axis, keepdims, ddof=ddof), x, axis, keepdims)
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
    return cumprod_vjp(g, r, filled, axis) * _present(a)


def _nancumprod_jvp(t, r, a, axis=None, dtype=None, out=None):
    return cumprod_jvp(t * _present(a), r, np.where(_present(a), a, 1.0), axis)


register_vjp(np.nancumsum, _nancumsum_vjp)
register_jvp(np.nancumsum, _nancumsum_jvp, batched=True)
register_vjp(np.nancumprod, _nancumprod_vjp)
register_jvp(np.nancumprod, _nancumprod_jvp, batched=True)

result_kinds(NEW_ARRAYS, np.cumprod, np.ptp, np.nancumprod)
batched_vjps(np.cumprod, np.quantile, np.percentile, np.nanquantile,
             np.nanpercentile, np.median, np.nanmedian, np.average, np.ptp,
             *_NAN_SIGNATURES, np.nancumsum, np.nancumprod)
