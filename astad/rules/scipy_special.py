"""scipy.special's most used functions: expit, logit, log_expit, gammaln, gamma, digamma,
polygamma, erf, erfc, erfcx, erfinv, ndtr, log_ndtr, xlogy, xlog1py, entr, betaln, and
the Python functions logsumexp, softmax, log_softmax.

scipy is optional (a test dependency, not a runtime one) and slow to import, so these
rules are registered the first time a scipy.special callable reaches astad (rules/scipy_loader.py
is the hook numpy's dispatch, the transform and ``ad.rev`` call). A rule the user
registered first for one of these functions is kept.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special as sc
from scipy.special import _ufuncs

from ..registry import RECORDS, renew
from .array import (NEW_ARRAYS, batched_vjps, differentiate_by_keyword, finite_partials,
                    register_elementwise, register_jvp, register_vjp, result_kinds)
from .array_axes import align_core, expand_reduced, negative_axes, sum_to_shape
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import dispatch
from ..runtime.duals import DUAL_TYPES

_zeta = _ufuncs._zeta  # the Hurwitz zeta function zeta(s, q) as a ufunc
_TWO_OVER_ROOT_PI = 2.0 / math.sqrt(math.pi)
_ONE_OVER_ROOT_TWO_PI = 1.0 / math.sqrt(2.0 * math.pi)


def _polygamma_partial(n, x):
    """d^(n+1)/dx^(n+1) log gamma(x) = polygamma(n, x), through ufuncs (differentiable)."""
    if n == 0:
        return _ufuncs.psi(x)
    return (-1.0) ** (n + 1) * math.factorial(n) * _zeta(n + 1.0, x)


ELEMENTWISE = {  # function: its partials, partials[k](*args, result)
    sc.expit: (lambda x, r: r * (1.0 - r),),
    sc.logit: (lambda x, r: 1.0 / (x * (1.0 - x)),),
    sc.log_expit: (lambda x, r: 1.0 - sc.expit(x),),
    sc.gammaln: (lambda x, r: _ufuncs.psi(x),),
    sc.gamma: (lambda x, r: r * _ufuncs.psi(x),),
    sc.psi: (lambda x, r: _polygamma_partial(1, x),),
    _zeta: (None, lambda s, q, r: -s * _zeta(s + 1.0, q)),
    sc.erf: (lambda x, r: _TWO_OVER_ROOT_PI * np.exp(-x * x),),
    sc.erfc: (lambda x, r: -_TWO_OVER_ROOT_PI * np.exp(-x * x),),
    sc.erfcx: (lambda x, r: 2.0 * x * r - _TWO_OVER_ROOT_PI,),
    sc.erfinv: (lambda x, r: 0.5 * math.sqrt(math.pi) * np.exp(r * r),),
    sc.ndtr: (lambda x, r: _ONE_OVER_ROOT_TWO_PI * np.exp(-0.5 * x * x),),
    sc.log_ndtr: (lambda x, r: _ONE_OVER_ROOT_TWO_PI * np.exp(-0.5 * x * x - r),),
    sc.xlogy: (lambda x, y, r: np.log(y), lambda x, y, r: x / y),
    sc.xlog1py: (lambda x, y, r: np.log1p(y), lambda x, y, r: x / (1.0 + y)),
    sc.entr: (lambda x, r: -(np.log(x) + 1.0),),
    sc.betaln: (lambda a, b, r: _ufuncs.psi(a) - _ufuncs.psi(a + b),
                lambda a, b, r: _ufuncs.psi(b) - _ufuncs.psi(a + b)),
}
_FINITE = (sc.expit, sc.log_expit, sc.erf, sc.erfc, sc.ndtr)


# -- polygamma(n, x): a Python function in scipy, differentiated in x ---------------------
def _polygamma_vjp(g, r, n, x):
    return g * _polygamma_partial(int(n) + 1, x)


def _polygamma_jvp(t, r, n, x):
    return t * _polygamma_partial(int(n) + 1, x)


# -- logsumexp, softmax, log_softmax -------------------------------------------------------
def _logsumexp_checks(kw):
    if kw.get("return_sign"):
        raise NotDifferentiableError("astad differentiates logsumexp(..., return_sign=False) "
                                     "only", *user_location())


def _logsumexp_weights(a, r, axis, b, keepdims):
    """d logsumexp / d a = b exp(a - result), shaped like a."""
    w = np.exp(a - expand_reduced(r, np.shape(a), axis, keepdims))
    return w if b is None else w * b


def _logsumexp_vjp_a(g, r, a, axis=None, b=None, keepdims=False, **kw):
    _logsumexp_checks(kw)
    return expand_reduced(g, np.shape(a), axis, keepdims) * _logsumexp_weights(a, r, axis, b,
                                                                                keepdims)


def _logsumexp_vjp_b(g, r, a, axis=None, b=None, keepdims=False, **kw):
    _logsumexp_checks(kw)
    full = expand_reduced(g, np.shape(a), axis, keepdims) * _logsumexp_weights(
        a, r, axis, None, keepdims)
    return sum_to_shape(full, np.shape(b), np.ndim(a))


def _logsumexp_jvp_a(t, r, a, axis=None, b=None, keepdims=False, **kw):
    _logsumexp_checks(kw)
    w = _logsumexp_weights(a, r, axis, b, keepdims)
    return np.sum(t * w, axis=negative_axes(axis, np.ndim(a)), keepdims=keepdims)


def _logsumexp_jvp_b(t, r, a, axis=None, b=None, keepdims=False, **kw):
    _logsumexp_checks(kw)
    w = _logsumexp_weights(a, r, axis, None, keepdims)
    return np.sum(align_core(t, np.ndim(b), np.ndim(a)) * w,
                  axis=negative_axes(axis, np.ndim(a)), keepdims=keepdims)


def _softmax_vjp(g, r, x, axis=None):
    axes = negative_axes(axis, np.ndim(x))
    return r * (g - np.sum(g * r, axis=axes, keepdims=True))


def _log_softmax_vjp(g, r, x, axis=None):
    axes = negative_axes(axis, np.ndim(x))
    return g - np.exp(r) * np.sum(g, axis=axes, keepdims=True)


def _log_softmax_jvp(t, r, x, axis=None):
    axes = negative_axes(axis, np.ndim(x))
    return t - np.sum(np.exp(r) * t, axis=axes, keepdims=True)


PYTHON_FUNCTIONS = {  # function: (vjps, jvps)
    sc.logsumexp: ((_logsumexp_vjp_a, None, _logsumexp_vjp_b),
                   (_logsumexp_jvp_a, None, _logsumexp_jvp_b)),
    sc.softmax: ((_softmax_vjp,), (_softmax_vjp,)),  # (its Jacobian is symmetric)
    sc.log_softmax: ((_log_softmax_vjp,), (_log_softmax_jvp,)),
    sc.polygamma: ((None, _polygamma_vjp), (None, _polygamma_jvp)),
}


def register_all() -> None:
    """Register every rule here (a rule the user registered first is kept)."""
    finite_partials(*_FINITE)
    for fn, partials in ELEMENTWISE.items():
        if RECORDS.get(fn) is None or RECORDS[fn].array is None:
            register_elementwise(fn, *partials)
    for fn, (vjps, jvps) in PYTHON_FUNCTIONS.items():
        if RECORDS.get(fn) is not None and (RECORDS[fn].array is not None or
                                            RECORDS[fn].call is not None):
            continue
        primitive = _dispatching(fn)
        register_vjp(primitive, *vjps)
        register_jvp(primitive, *jvps, batched=True)
        batched_vjps(primitive)
        if fn is not sc.polygamma:
            result_kinds(NEW_ARRAYS, primitive)
        # differentiated code calling scipy's function calls the primitive's rule, and
        # the catalogue reads its derivatives under scipy's name
        found, rule = renew(fn), RECORDS[primitive]
        found.name, found.call, found.primitive = rule.name, rule.call, primitive
        found.vjps, found.jvps = rule.vjps, rule.jvps
        found.batched_vjps = found.batched_jvps = True
    if primitive_of(sc.logsumexp) is not None:
        differentiate_by_keyword(primitive_of(sc.logsumexp), ("a", "axis", "b"),
                                 _logsumexp_checks_call)
    if primitive_of(sc.polygamma) is not None:
        differentiate_by_keyword(primitive_of(sc.polygamma), ("n", "x"))


def primitive_of(fn):
    """The primitive astad records for scipy's Python function ``fn``, or None."""
    found = RECORDS.get(fn)
    return None if found is None else found.primitive


def _dispatching(fn):
    """``fn`` as a primitive that goes through numpy's dispatch when given duals: the rules
    call it on the values under their level, which in nested derivatives are duals of an
    enclosing level (scipy's own code would read them as plain arrays)."""
    @functools.wraps(fn)
    def primitive(*args, **kwargs):
        if any(type(a) in DUAL_TYPES for a in args) or any(
                type(v) in DUAL_TYPES for v in kwargs.values()):
            return dispatch(primitive, args, kwargs)
        return fn(*args, **kwargs)
    return primitive


def _logsumexp_checks_call(**arguments):
    _logsumexp_checks(arguments)

