"""scipy.special's rules, one table of partial derivatives:

- gamma and beta functions: gamma, gammaln, rgamma, digamma (psi), polygamma,
  multigammaln, beta, betaln, gammainc and gammaincc (in x), betainc and betaincc (in
  x), Student's t distribution stdtr (in x), zeta (in q);
- error functions and friends: erf, erfc, erfcx, erfinv, erfcinv, ndtr, log_ndtr, expit,
  logit, log_expit, xlogy, xlog1py, entr;
- Bessel functions (in x): j0, j1, jv (jn), y0, y1, yn, yv, i0, i0e, i1, i1e, iv, ive, k0,
  k0e, k1, k1e, kn, kv, kve;
- the Python functions logsumexp, softmax, log_softmax; gammasgn has no derivative.

The partials compute with functions astad differentiates (these ufuncs among them), so
derivatives of any order work. An argument with no derivative in closed form (a Bessel
function's order, gammainc's shape a) is refused with an error naming it (``REFUSALS``).

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
                    primal_only, refuse_arguments, register_elementwise, register_jvp,
                    register_vjp, result_kinds)
from .array_axes import align_core, expand_reduced, negative_axes, sum_to_shape
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import dispatch
from ..runtime.duals import DUAL_TYPES

_zeta = _ufuncs._zeta  # the Hurwitz zeta function zeta(s, q) as a ufunc
_TWO_OVER_ROOT_PI = 2.0 / math.sqrt(math.pi)
_ONE_OVER_ROOT_TWO_PI = 1.0 / math.sqrt(2.0 * math.pi)
_HALF_ROOT_PI = 0.5 * math.sqrt(math.pi)


def _polygamma(m, x):
    """polygamma(m, x) for orders m >= 1 (an int or an array of them), through ufuncs
    differentiated in x: (-1)^(m+1) m! zeta(m + 1, x)."""
    return (-1.0) ** (m + 1) * _ufuncs.gamma(m + 1.0) * _zeta(m + 1.0, x)


def _rgamma_partial(x, r):
    """d/dx 1/gamma(x) = -psi(x) / gamma(x) for x > 0; for x <= 0, where gamma has its
    poles (psi infinite, 1/gamma 0), the same from the reflection 1/gamma(x) =
    gamma(1 - x) sin(pi x) / pi: gamma(1 - x) (cos(pi x) - psi(1 - x) sin(pi x) / pi),
    finite and smooth there (each branch computed on its own side only)."""
    left = x <= 0.0
    if not np.any(left):
        return -_ufuncs.psi(x) * r
    right, left_x = np.where(left, 1.0, x), np.where(left, x, 0.0)
    reflected = _ufuncs.gamma(1.0 - left_x) * (np.cos(math.pi * left_x) - _ufuncs.psi(
        1.0 - left_x) * np.sin(math.pi * left_x) / math.pi)
    return np.where(left, reflected, -_ufuncs.psi(right) * r)


def _gammainc_partial(a, x, r):
    """d/dx gammainc(a, x) = x^(a-1) exp(-x) / gamma(a), in log space (x^(a-1) and
    gamma(a) overflow for large a where their ratio does not)."""
    return np.exp(_ufuncs.xlogy(a - 1.0, x) - x - _ufuncs.gammaln(a))


def _stdtr_partial(df, x, r):
    """d/dx stdtr(df, x): Student's t density, in log space."""
    return np.exp(_ufuncs.gammaln(0.5 * (df + 1.0)) - _ufuncs.gammaln(0.5 * df)
                  - 0.5 * np.log(df * math.pi) - 0.5 * (df + 1.0) * np.log1p(x * x / df))


def _betainc_partial(a, b, x, r):
    """d/dx betainc(a, b, x) = x^(a-1) (1-x)^(b-1) / beta(a, b), in log space."""
    return np.exp(_ufuncs.xlogy(a - 1.0, x) + _ufuncs.xlog1py(b - 1.0, -x)
                  - _ufuncs.betaln(a, b))


GAMMA_AND_ERROR = {  # function: its partials, partials[k](*args, result)
    sc.expit: (lambda x, r: r * (1.0 - r),),
    sc.logit: (lambda x, r: 1.0 / (x * (1.0 - x)),),
    sc.log_expit: (lambda x, r: 1.0 - sc.expit(x),),
    sc.gammaln: (lambda x, r: _ufuncs.psi(x),),
    sc.gamma: (lambda x, r: r * _ufuncs.psi(x),),
    sc.rgamma: (_rgamma_partial,),
    sc.psi: (lambda x, r: _polygamma(1, x),),
    _zeta: (None, lambda s, q, r: -s * _zeta(s + 1.0, q)),
    sc.beta: (lambda a, b, r: r * (_ufuncs.psi(a) - _ufuncs.psi(a + b)),
              lambda a, b, r: r * (_ufuncs.psi(b) - _ufuncs.psi(a + b))),
    sc.betaln: (lambda a, b, r: _ufuncs.psi(a) - _ufuncs.psi(a + b),
                lambda a, b, r: _ufuncs.psi(b) - _ufuncs.psi(a + b)),
    sc.gammainc: (None, _gammainc_partial),
    sc.gammaincc: (None, lambda a, x, r: -_gammainc_partial(a, x, r)),
    sc.betainc: (None, None, _betainc_partial),
    sc.betaincc: (None, None, lambda a, b, x, r: -_betainc_partial(a, b, x, r)),
    sc.stdtr: (None, _stdtr_partial),
    sc.erf: (lambda x, r: _TWO_OVER_ROOT_PI * np.exp(-x * x),),
    sc.erfc: (lambda x, r: -_TWO_OVER_ROOT_PI * np.exp(-x * x),),
    sc.erfcx: (lambda x, r: 2.0 * x * r - _TWO_OVER_ROOT_PI,),
    sc.erfinv: (lambda y, r: _HALF_ROOT_PI * np.exp(r * r),),
    sc.erfcinv: (lambda y, r: -_HALF_ROOT_PI * np.exp(r * r),),
    sc.ndtr: (lambda x, r: _ONE_OVER_ROOT_TWO_PI * np.exp(-0.5 * x * x),),
    sc.log_ndtr: (lambda x, r: _ONE_OVER_ROOT_TWO_PI * np.exp(-0.5 * x * x - r),),
    sc.xlogy: (lambda x, y, r: np.log(y), lambda x, y, r: x / y),
    sc.xlog1py: (lambda x, y, r: np.log1p(y), lambda x, y, r: x / (1.0 + y)),
    sc.entr: (lambda x, r: -(np.log(x) + 1.0),),
}

# Bessel functions, in x (DLMF 10.6.2, 10.29.2): J_v' = (J_(v-1) - J_(v+1)) / 2, the same
# for Y; I_v' = (I_(v-1) + I_(v+1)) / 2; K_v' = -(K_(v-1) + K_(v+1)) / 2. The scaled ones:
# ive = exp(-|x|) iv, kve = exp(x) kv, so ive' = (ive_(v-1) + ive_(v+1)) / 2 - sign(x) ive.
BESSEL = {
    sc.j0: (lambda x, r: -sc.j1(x),),
    sc.j1: (lambda x, r: 0.5 * (sc.j0(x) - sc.jv(2.0, x)),),
    sc.jv: (None, lambda v, x, r: 0.5 * (sc.jv(v - 1.0, x) - sc.jv(v + 1.0, x))),
    sc.y0: (lambda x, r: -sc.y1(x),),
    sc.y1: (lambda x, r: 0.5 * (sc.y0(x) - sc.yv(2.0, x)),),
    sc.yn: (None, lambda n, x, r: 0.5 * (sc.yn(n - 1, x) - sc.yn(n + 1, x))),
    sc.yv: (None, lambda v, x, r: 0.5 * (sc.yv(v - 1.0, x) - sc.yv(v + 1.0, x))),
    sc.i0: (lambda x, r: sc.i1(x),),
    sc.i0e: (lambda x, r: sc.i1e(x) - np.sign(x) * r,),
    sc.i1: (lambda x, r: 0.5 * (sc.i0(x) + sc.iv(2.0, x)),),
    sc.i1e: (lambda x, r: 0.5 * (sc.i0e(x) + sc.ive(2.0, x)) - np.sign(x) * r,),
    sc.iv: (None, lambda v, x, r: 0.5 * (sc.iv(v - 1.0, x) + sc.iv(v + 1.0, x))),
    sc.ive: (None, lambda v, x, r: 0.5 * (sc.ive(v - 1.0, x) + sc.ive(v + 1.0, x))
             - np.sign(x) * r),
    sc.k0: (lambda x, r: -sc.k1(x),),
    sc.k0e: (lambda x, r: r - sc.k1e(x),),
    sc.k1: (lambda x, r: -0.5 * (sc.k0(x) + sc.kv(2.0, x)),),
    sc.k1e: (lambda x, r: r - 0.5 * (sc.k0e(x) + sc.kve(2.0, x)),),
    sc.kn: (None, lambda n, x, r: -0.5 * (sc.kn(n - 1, x) + sc.kn(n + 1, x))),
    sc.kv: (None, lambda v, x, r: -0.5 * (sc.kv(v - 1.0, x) + sc.kv(v + 1.0, x))),
    sc.kve: (None, lambda v, x, r: r - 0.5 * (sc.kve(v - 1.0, x) + sc.kve(v + 1.0, x))),
}
ELEMENTWISE = {**GAMMA_AND_ERROR, **BESSEL}
_FINITE = (sc.expit, sc.log_expit, sc.erf, sc.erfc, sc.ndtr, sc.j0, sc.j1, sc.i0e, sc.i1e)

# The arguments with no derivative in closed form, as errors name them: {function: {k:
# (what, why)}} ("scipy.special.jv is not differentiable in its order v (argument 0): ...")
_IN_X = "astad differentiates it in x"
_ORDER_V = {0: ("its order v", f"the derivative in the order has no closed form; {_IN_X}")}
_ORDER_N = {0: ("its order n", f"an integer; {_IN_X}")}
_SHAPE = "the derivative in {} has no closed form; " + _IN_X
REFUSALS = {
    sc.jv: _ORDER_V, sc.yv: _ORDER_V, sc.iv: _ORDER_V, sc.ive: _ORDER_V, sc.kv: _ORDER_V,
    sc.kve: _ORDER_V, sc.yn: _ORDER_N, sc.kn: _ORDER_N, sc.polygamma: _ORDER_N,
    sc.gammainc: {0: ("its shape a", _SHAPE.format("a"))},
    sc.gammaincc: {0: ("its shape a", _SHAPE.format("a"))},
    sc.betainc: {0: ("its parameter a", _SHAPE.format("a")),
                 1: ("its parameter b", _SHAPE.format("b"))},
    sc.betaincc: {0: ("its parameter a", _SHAPE.format("a")),
                  1: ("its parameter b", _SHAPE.format("b"))},
    sc.stdtr: {0: ("its degrees of freedom df", _SHAPE.format("df"))},
    sc.multigammaln: {1: ("its dimension d", "an integer; astad differentiates it in a")},
    _zeta: {0: ("its exponent x", "the derivative in the exponent has no closed form; "
                "astad differentiates it in q")},
}
_NAMES = {_zeta: "scipy.special.zeta"}  # (a private ufunc behind a public function)
NO_DERIVATIVE = (sc.gammasgn,)  # (piecewise constant: computed on primal values)


# -- polygamma(n, x) and multigammaln(a, d): Python functions in scipy ---------------------
def _polygamma_vjp(g, r, n, x):
    return sum_to_shape(g * _polygamma(np.add(n, 1), x), np.shape(x), np.ndim(r))


def _polygamma_jvp(t, r, n, x):
    return align_core(t, np.ndim(x), np.ndim(r)) * _polygamma(np.add(n, 1), x)


def _multigammaln_partial(a, d):
    """d/da log of the multivariate gamma function: the sum of psi(a - j/2), j < d."""
    return sum(_ufuncs.psi(a - 0.5 * j) for j in range(int(d)))


def _multigammaln_vjp(g, r, a, d):
    return g * _multigammaln_partial(a, d)


def _multigammaln_jvp(t, r, a, d):
    return t * _multigammaln_partial(a, d)


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
    sc.multigammaln: ((_multigammaln_vjp, None), (_multigammaln_jvp, None)),
}
_KEYWORDS = {sc.logsumexp: ("a", "axis", "b"), sc.polygamma: ("n", "x"),
             sc.multigammaln: ("a", "d")}  # (parameters a differentiated one may be among)


def register_all() -> None:
    """Register every rule here (a rule the user registered first is kept)."""
    finite_partials(*_FINITE)
    for fn, partials in ELEMENTWISE.items():
        if RECORDS.get(fn) is None or RECORDS[fn].array is None:
            register_elementwise(fn, *partials)
            if fn in REFUSALS:
                refuse_arguments(fn, REFUSALS[fn], _NAMES.get(fn))
    for fn, (vjps, jvps) in PYTHON_FUNCTIONS.items():
        if RECORDS.get(fn) is not None and (RECORDS[fn].array is not None or
                                            RECORDS[fn].call is not None):
            continue
        primitive = _dispatching(fn)
        register_vjp(primitive, *vjps)
        register_jvp(primitive, *jvps, batched=True)
        batched_vjps(primitive)
        if fn in (sc.logsumexp, sc.softmax, sc.log_softmax):
            result_kinds(NEW_ARRAYS, primitive)
        if fn in REFUSALS:
            refuse_arguments(primitive, REFUSALS[fn], f"scipy.special.{fn.__name__}")
        # differentiated code calling scipy's function calls the primitive's rule, and
        # the catalogue reads its derivatives under scipy's name
        found, rule = renew(fn), RECORDS[primitive]
        found.name, found.call, found.primitive = rule.name, rule.call, primitive
        found.vjps, found.jvps, found.refusals = rule.vjps, rule.jvps, rule.refusals
        found.batched_vjps = found.batched_jvps = True
    for fn in NO_DERIVATIVE:
        if RECORDS.get(fn) is None:
            primal_only(fn)
    for fn, names in _KEYWORDS.items():
        if primitive_of(fn) is not None:
            differentiate_by_keyword(primitive_of(fn), names,
                                     _logsumexp_checks_call if fn is sc.logsumexp else None)


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
