"""scipy.stats' distributions: the log-density, density, CDF, log-CDF, survival and
log-survival functions of norm, t, gamma, beta, chi2, expon, laplace, cauchy, logistic,
lognorm, uniform; the log-pmf, pmf and CDF of poisson, binom, nbinom; the log-density and
density of multivariate_normal and dirichlet; the log-pmf and pmf of multinomial.

Each is written here as a plain function of numpy's and scipy.special's operations
(``-0.5 * z * z - log(scale) - log(sqrt(2 pi))``), which astad differentiates as it
differentiates any numpy code: by operator overloading and numpy's dispatch, in both
modes and at any depth of nesting, with no vjp of its own. A call of scipy's method
(``scipy.stats.norm.logpdf``: a bound method, found in the registry by equality) or of
the distribution itself (``scipy.stats.norm(loc, scale)``, frozen) is a call of the rule
registered for it here: scipy's own method when no differentiated value is among the
arguments (the same values, bit for bit), the function here otherwise; a frozen
distribution holding differentiated parameters is a ``Frozen`` of astad's.

The CDFs of t, gamma, beta and chi2 (and the discrete CDFs, in n) need the derivative of
an incomplete beta or gamma function in its shape parameters, which scipy.special has no
closed form for: they are differentiated in x, loc and scale (and mu, p) and refuse a
differentiated shape parameter with an error naming it.

Registered on first use (rules/scipy_loader.py), like scipy.special's rules: ``import
astad`` does not import scipy. A rule the user registered first for one of these
methods is kept.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sc
import scipy.stats as st

from ..core.boundary import contains_dual
from ..errors import NotDifferentiableError, user_location
from ..registry import ad, define, has_rule
from ..runtime.array_dual import ARRAY_DUALS, plain_array

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)
_LOG_PI = math.log(math.pi)
_INF = math.inf


# -- values ---------------------------------------------------------------------------------
def _array(value):
    """A float array (or number) of ``value``: lists holding duals become array duals."""
    if type(value) is list or type(value) is tuple:
        return ad.np_asarray(None, value) if contains_dual(value) else np.asarray(value, float)
    return value


def _plain(value):
    return np.asarray(plain_array(value))


def _select(inside, value, outside):
    """``value`` where ``inside`` (a plain mask), ``outside`` elsewhere."""
    if np.all(inside):
        return value
    return np.where(inside, value, outside)


def _scalar(value):
    """A 0-d array dual as a scalar, as scipy gives a float for scalar arguments."""
    if type(value) in ARRAY_DUALS and value.ndim == 0:
        return value[()]
    return value


# -- functions differentiated in their last argument only: scipy.special's rules -----------
gammainc, gammaincc, betainc, betaincc, stdtr = (sc.gammainc, sc.gammaincc, sc.betainc,
                                                  sc.betaincc, sc.stdtr)


# -- the continuous distributions, standardised: z = (x - loc) / scale -----------------
def _t_logpdf(z, df):
    return (sc.gammaln(0.5 * (df + 1.0)) - sc.gammaln(0.5 * df)
            - 0.5 * (np.log(df) + _LOG_PI) - 0.5 * (df + 1.0) * np.log1p(z * z / df))


def _lognorm_logpdf(z, s):
    y = np.log(z)
    return -(y * y) / (2.0 * s * s) - np.log(s * z) - _LOG_SQRT_2PI


def _laplace_cdf(z):
    half_tail = 0.5 * np.exp(-np.abs(z))
    return np.where(_plain(z) > 0, 1.0 - half_tail, half_tail)


def _logcdf_of(cdf):
    return lambda z, *shapes: np.log(cdf(z, *shapes))


class Continuous:
    """A continuous distribution of scipy.stats, by its standardised functions."""

    kind = "continuous"

    def __init__(self, name, shapes, logpdf, cdf, sf, logcdf=None, logsf=None,
                 support=(-_INF, _INF), open_support=False, valid=None, x_only=False,
                 moments=None):
        self.name, self.shapes = name, shapes
        self.std = {"logpdf": logpdf, "cdf": cdf, "sf": sf,
                    "logcdf": logcdf or _logcdf_of(cdf), "logsf": logsf or _logcdf_of(sf)}
        self.support, self.open_support = support, open_support
        self.valid = valid or (lambda *shapes: True)
        # the CDFs are differentiated in x, loc and scale only (not in a shape parameter)
        self.x_only = x_only
        self.moments = moments  # (mean, variance) of the standard form, or None
        self.parameters = shapes + ("loc", "scale")
        self.defaults = {"loc": 0.0, "scale": 1.0}
        self.methods = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
        self.argument = "x"

    def safe(self):
        lo, hi = self.support
        if lo == -_INF:
            return 0.0
        return lo + 0.5 if hi == _INF else 0.5 * (lo + hi)

    def evaluate(self, method, x, loc, scale, *shapes):
        if method in ("cdf", "logcdf", "sf", "logsf") and self.x_only:
            _refuse_shapes(self, method, shapes, self.shapes)
        shape_values = [_plain(a) for a in shapes]
        scale_value = _plain(scale)
        with np.errstate(invalid="ignore"):
            valid = (scale_value > 0) & np.asarray(self.valid(*shape_values), bool)
        shapes = [_select(valid, a, 1.0) for a in shapes]
        scale = _select(valid, scale, 1.0)
        z = (x - loc) / scale
        zp = _plain(z)
        lo, hi = self.support
        with np.errstate(invalid="ignore"):
            if self.open_support:
                inside = (zp > lo) & (zp < hi)
            else:
                inside = (zp >= lo) & (zp <= hi)
            inside &= valid
        function = self.std["logpdf" if method == "pdf" else method]
        value = function(_select(inside, z, self.safe()), *shapes)
        if method in ("logpdf", "pdf"):
            value = value - np.log(scale)
            outside = -_INF
        else:
            below = zp < lo if not self.open_support else zp <= lo
            low, high = _BELOW_ABOVE[method]
            outside = np.where(below, low, high)
        with np.errstate(invalid="ignore"):
            outside = np.where(np.isnan(zp) | ~valid, np.nan, outside)
        value = _select(inside, value, outside)
        if method == "pdf":
            value = np.exp(value)
        return _scalar(value)

    def mean_var(self, loc, scale, *shapes):
        mean, var = self.moments(*shapes)
        return loc + scale * mean, scale * scale * var


_BELOW_ABOVE = {"cdf": (0.0, 1.0), "logcdf": (-_INF, 0.0), "sf": (1.0, 0.0),
                "logsf": (0.0, -_INF)}


def _refuse_shapes(family, method, values, names):
    for name, value in zip(names, values):
        if contains_dual(value):
            raise NotDifferentiableError(
                f"scipy.stats.{family.name}.{method} is differentiated in "
                f"{family.differentiable_note}, not in {name}: its derivative in {name} has "
                "no closed form in scipy.special. Pass a value of "
                f"{name} that is not differentiated, or give the derivative with "
                f"astad.register_vjp(scipy.stats.{family.name}.{method}, ...)",
                *user_location())


CONTINUOUS = [
    Continuous("norm", (), lambda z: -0.5 * z * z - _LOG_SQRT_2PI, sc.ndtr,
               lambda z: sc.ndtr(-z), sc.log_ndtr, lambda z: sc.log_ndtr(-z),
               moments=lambda: (0.0, 1.0)),
    Continuous("t", ("df",), _t_logpdf, lambda z, df: stdtr(df, z),
               lambda z, df: stdtr(df, -z), valid=lambda df: df > 0, x_only=True,
               moments=lambda df: (0.0, df / (df - 2.0))),  # (df > 2)
    Continuous("gamma", ("a",), lambda z, a: sc.xlogy(a - 1.0, z) - z - sc.gammaln(a),
               lambda z, a: gammainc(a, z), lambda z, a: gammaincc(a, z),
               support=(0.0, _INF), valid=lambda a: a > 0, x_only=True,
               moments=lambda a: (a, a)),
    Continuous("beta", ("a", "b"),
               lambda z, a, b: sc.xlog1py(b - 1.0, -z) + sc.xlogy(a - 1.0, z)
               - sc.betaln(a, b),
               lambda z, a, b: betainc(a, b, z), lambda z, a, b: betaincc(a, b, z),
               support=(0.0, 1.0), valid=lambda a, b: (a > 0) & (b > 0), x_only=True,
               moments=lambda a, b: (a / (a + b),
                                     a * b / ((a + b) * (a + b) * (a + b + 1.0)))),
    Continuous("chi2", ("df",),
               lambda z, df: sc.xlogy(df / 2.0 - 1.0, z) - z / 2.0 - sc.gammaln(df / 2.0)
               - (_LOG_2 * df) / 2.0,
               lambda z, df: gammainc(df / 2.0, z / 2.0),
               lambda z, df: gammaincc(df / 2.0, z / 2.0),
               support=(0.0, _INF), valid=lambda df: df > 0, x_only=True,
               moments=lambda df: (df, 2.0 * df)),
    Continuous("expon", (), lambda z: -z, lambda z: -np.expm1(-z), lambda z: np.exp(-z),
               logsf=lambda z: -z, support=(0.0, _INF), moments=lambda: (1.0, 1.0)),
    Continuous("laplace", (), lambda z: -_LOG_2 - np.abs(z), _laplace_cdf,
               lambda z: _laplace_cdf(-z), moments=lambda: (0.0, 2.0)),
    Continuous("cauchy", (), lambda z: -_LOG_PI - np.log1p(z * z),
               lambda z: np.arctan2(1.0, -z) / np.pi, lambda z: np.arctan2(1.0, z) / np.pi,
               moments=lambda: (np.nan, np.nan)),
    Continuous("logistic", (),
               lambda z: -np.abs(z) - 2.0 * np.log1p(np.exp(-np.abs(z))), sc.expit,
               lambda z: sc.expit(-z), sc.log_expit, lambda z: sc.log_expit(-z),
               moments=lambda: (0.0, math.pi ** 2 / 3.0)),
    Continuous("lognorm", ("s",), _lognorm_logpdf, lambda z, s: sc.ndtr(np.log(z) / s),
               lambda z, s: sc.ndtr(-np.log(z) / s), lambda z, s: sc.log_ndtr(np.log(z) / s),
               lambda z, s: sc.log_ndtr(-np.log(z) / s), support=(0.0, _INF),
               open_support=True, valid=lambda s: s > 0,
               moments=lambda s: (np.exp(0.5 * s * s),
                                  np.expm1(s * s) * np.exp(s * s))),
    Continuous("uniform", (), lambda z: z * 0.0, lambda z: z * 1.0, lambda z: 1.0 - z,
               support=(0.0, 1.0), moments=lambda: (0.5, 1.0 / 12.0)),
]
for _family in CONTINUOUS:
    _family.differentiable_note = "x, loc and scale"


# -- the discrete distributions: k - loc counts ------------------------------------------
class Discrete:
    """A discrete distribution of scipy.stats: its log-pmf in the count k, and its CDF."""

    kind = "discrete"

    def __init__(self, name, shapes, logpmf, cdf, upper, valid, cdf_refused, moments):
        self.name, self.shapes = name, shapes
        self.logpmf, self.cdf = logpmf, cdf
        self.upper, self.valid = upper, valid
        self.cdf_refused = cdf_refused  # the shape parameters the CDF is not differentiated in
        self.moments = moments
        self.parameters = shapes + ("loc",)
        self.defaults = {"loc": 0}
        self.methods = ("logpmf", "pmf", "cdf")
        self.argument = "k"

    def evaluate(self, method, k, loc, *shapes):
        for name, value in (("k", k), ("loc", loc)):
            if contains_dual(value):
                raise NotDifferentiableError(
                    f"scipy.stats.{self.name}.{method} is not differentiable in {name}: "
                    f"{name} is a count (an integer); differentiate in the parameters "
                    f"({', '.join(self.shapes)}) instead", *user_location())
        if method == "cdf":
            _refuse_shapes(self, method, shapes, self.cdf_refused)
        shape_values = [_plain(a) for a in shapes]
        with np.errstate(invalid="ignore"):
            valid = np.asarray(self.valid(*shape_values), bool)
        shapes = [_select(valid, a, _SAFE_SHAPES[self.name][j]) for j, a in enumerate(shapes)]
        k = np.asarray(k, float) - np.asarray(loc, float)
        upper = self.upper(*[_plain(a) for a in shapes])
        with np.errstate(invalid="ignore"):
            if method == "cdf":
                k = np.floor(k)
                inside = (k >= 0) & (k < upper) & valid
                outside = np.where(k < 0, 0.0, 1.0)
            else:
                inside = (k >= 0) & (k <= upper) & (k == np.floor(k)) & valid
                outside = -_INF
            outside = np.where(np.isnan(k) | ~valid, np.nan, outside)
        k_inside = np.where(inside, k, 0.0)
        if k_inside.ndim == 0:
            k_inside = float(k_inside)
        value = (self.cdf if method == "cdf" else self.logpmf)(k_inside, *shapes)
        value = _select(inside, value, outside)
        if method == "pmf":
            value = np.exp(value)
        return _scalar(value)

    def mean_var(self, loc, *shapes):
        mean, var = self.moments(*shapes)
        return loc + mean, var


_SAFE_SHAPES = {"poisson": (1.0,), "binom": (1.0, 0.5), "nbinom": (1.0, 0.5)}


def _binom_logpmf(k, n, p):
    return (sc.gammaln(n + 1.0) - (sc.gammaln(k + 1.0) + sc.gammaln(n - k + 1.0))
            + sc.xlogy(k, p) + sc.xlog1py(n - k, -p))


def _nbinom_logpmf(k, n, p):
    return (sc.gammaln(n + k) - sc.gammaln(k + 1.0) - sc.gammaln(n) + sc.xlogy(n, p)
            + sc.xlog1py(k, -p))


def _binom_cdf(k, n, p):
    # bdtr(k, n, p) = betainc(n - k, k + 1, 1 - p) below n (above: 1, chosen by the caller)
    return betainc(np.maximum(_plain(n) - k, 1e-300), k + 1.0, 1.0 - p)


DISCRETE = [
    Discrete("poisson", ("mu",), lambda k, mu: sc.xlogy(k, mu) - sc.gammaln(k + 1.0) - mu,
             lambda k, mu: gammaincc(k + 1.0, mu), lambda mu: _INF, lambda mu: mu >= 0, (),
             lambda mu: (mu, mu)),
    Discrete("binom", ("n", "p"), _binom_logpmf, _binom_cdf, lambda n, p: n,
             lambda n, p: (n >= 0) & (n == np.floor(n)) & (p >= 0) & (p <= 1), ("n",),
             lambda n, p: (n * p, n * p * (1.0 - p))),
    Discrete("nbinom", ("n", "p"), _nbinom_logpmf, lambda k, n, p: betainc(n, k + 1.0, p),
             lambda n, p: _INF, lambda n, p: (n > 0) & (p > 0) & (p <= 1), ("n",),
             lambda n, p: (n * (1.0 - p) / p, n * (1.0 - p) / (p * p))),
]
for _family in DISCRETE:
    _family.differentiable_note = "its probability parameter"
DISCRETE[0].differentiable_note = "mu"
DISCRETE[1].differentiable_note = DISCRETE[2].differentiable_note = "p (and n in the pmf)"


# -- the multivariate distributions ---------------------------------------------------------
def _multivariate_normal_logpdf(x, mean=None, cov=1, allow_singular=False):
    if allow_singular:
        raise NotDifferentiableError(
            "scipy.stats.multivariate_normal.logpdf is differentiated with "
            "allow_singular=False only", *user_location())
    x, cov = _array(x), _array(cov)
    cov_shape = np.shape(cov)
    if mean is None:
        dim = cov_shape[0] if len(cov_shape) else 1
        mean = np.zeros(dim)
    mean = _array(mean)
    mean = mean if np.ndim(mean) else np.reshape(mean, (1,))
    dim = np.shape(mean)[0]
    if len(cov_shape) == 0:
        cov = cov * np.eye(dim)
    elif len(cov_shape) == 1:
        cov = np.diag(cov) if cov_shape[0] > 1 or dim == 1 else cov * np.eye(dim)
    if np.ndim(x) == 0:
        x = np.reshape(x, (1, 1))
    elif np.ndim(x) == 1:
        x = np.reshape(x, (-1, 1)) if dim == 1 else np.reshape(x, (1, dim))
    diff = x - mean
    sign, logdet = np.linalg.slogdet(cov)
    if _plain(sign) <= 0:
        return np.linalg.cholesky(plain_array(cov))  # (scipy's error: not positive definite)
    solved = np.linalg.solve(cov, np.swapaxes(diff, -1, -2))
    maha = np.sum(np.swapaxes(diff, -1, -2) * solved, axis=-2)
    out = -0.5 * (dim * math.log(2.0 * math.pi) + logdet + maha)
    out = np.reshape(out, np.shape(_plain(out).squeeze()))
    return _scalar(out)


def _dirichlet_logpdf(x, alpha):
    x, alpha = _array(x), _array(alpha)
    if np.shape(x)[0] == np.shape(alpha)[0] - 1:
        last = 1.0 - np.sum(x, axis=0, keepdims=True)
        x = np.concatenate([x, last], axis=0)
    log_b = np.sum(sc.gammaln(alpha)) - sc.gammaln(np.sum(alpha))
    terms = np.transpose(sc.xlogy(alpha - 1.0, np.transpose(x)))  # (x: K or K by N)
    return _scalar(-log_b + np.sum(terms, axis=0))


def _multinomial_logpmf(x, n, p):
    if contains_dual(x):
        raise NotDifferentiableError(
            "scipy.stats.multinomial.logpmf is not differentiable in x: x holds counts "
            "(integers); differentiate in p (or n) instead", *user_location())
    x, p = np.asarray(x, float), _array(p)
    value = sc.gammaln(n + 1.0) + np.sum(sc.xlogy(x, p) - sc.gammaln(x + 1.0), axis=-1)
    counts = np.sum(x, axis=-1)
    with np.errstate(invalid="ignore"):
        inside = (counts == _plain(n)) & np.all((x >= 0) & (x == np.floor(x)), axis=-1)
    return _scalar(_select(inside, value, -_INF))


class Multivariate:
    kind = "multivariate"

    def __init__(self, name, parameters, logpdf, methods):
        self.name, self.parameters, self.log_density = name, parameters, logpdf
        self.methods = methods
        self.shapes = parameters

    def evaluate(self, method, *args, **kwargs):
        value = self.log_density(*args, **kwargs)
        return _scalar(np.exp(value)) if method in ("pdf", "pmf") else value


MULTIVARIATE = [
    Multivariate("multivariate_normal", ("mean", "cov", "allow_singular"),
                 _multivariate_normal_logpdf, ("logpdf", "pdf")),
    Multivariate("dirichlet", ("alpha",), _dirichlet_logpdf, ("logpdf", "pdf")),
    Multivariate("multinomial", ("n", "p"), _multinomial_logpmf, ("logpmf", "pmf")),
]
FAMILIES = {family.name: family for family in CONTINUOUS + DISCRETE + MULTIVARIATE}


def differentiable_in(family) -> str:
    """What the catalogue (docs/numpy.md) says a family is differentiated in."""
    if family.kind == "continuous":
        return ", ".join(("x",) + family.shapes + ("loc", "scale"))
    if family.kind == "discrete":
        return ", ".join(family.shapes)
    return {"multivariate_normal": "x, mean, cov", "dirichlet": "x, alpha",
            "multinomial": "p, n"}[family.name]


def limits(family) -> str:
    """What the catalogue says a family's functions refuse."""
    if family.kind == "continuous":
        if family.x_only:
            return (f"cdf, logcdf, sf, logsf: not in {', '.join(family.shapes)} "
                    "(refused: no closed form in scipy.special)")
        return ""
    if family.kind == "discrete":
        refused = "; cdf: not in n (refused)" if family.cdf_refused else ""
        return "k and loc are counts (refused)" + refused
    return {"multivariate_normal": "allow_singular=True refused",
            "dirichlet": "", "multinomial": "x holds counts (refused)"}[family.name]


# -- scipy's signatures ---------------------------------------------------------------------
def _bind(family, method, args, kwargs):
    """(x, loc[, scale], *shapes) from scipy's ``method(x, *shapes, loc, scale)``."""
    names = (family.argument,) + family.parameters
    if len(args) > len(names):
        raise TypeError(f"scipy.stats.{family.name}.{method} takes at most {len(names)} "
                        f"arguments ({len(args)} given)")
    values = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in values:
            raise TypeError(f"scipy.stats.{family.name}.{method} got an unexpected or "
                            f"repeated argument {key!r}")
        values[key] = value
    for name in names:
        if name not in values:
            if name not in family.defaults:
                raise TypeError(f"scipy.stats.{family.name}.{method} is missing the "
                                f"argument {name!r}")
            values[name] = family.defaults[name]
    given = [_array(values[name]) for name in names]
    x, shapes, rest = given[0], given[1:1 + len(family.shapes)], given[1 + len(family.shapes):]
    return x, rest, shapes


def evaluate(family, method, *args, **kwargs):
    """scipy.stats.<family>.<method>(*args, **kwargs), by astad's function."""
    if family.kind == "multivariate":
        return family.evaluate(method, *args, **kwargs)
    x, rest, shapes = _bind(family, method, args, kwargs)
    return family.evaluate(method, x, *rest, *shapes)


def _method_rule(family, method):
    scipy_method = getattr(getattr(st, family.name), method)

    def rule(tape, *args, **kwargs):
        if not contains_dual(args) and not contains_dual(kwargs):
            return scipy_method(*args, **kwargs)  # (scipy's own values)
        return evaluate(family, method, *args, **kwargs)
    rule.__name__ = f"{family.name}_{method}"
    return rule


# -- frozen distributions -------------------------------------------------------------------
class Frozen:
    """A distribution of scipy.stats frozen with differentiated parameters:
    ``scipy.stats.norm(loc, scale)`` inside differentiated code. Its methods are astad's
    functions with the parameters it holds."""

    def __init__(self, family, args, kwargs):
        self.family = family
        self.dist = getattr(st, family.name)
        self.args, self.kwds = tuple(args), dict(kwargs)
        if family.kind != "multivariate":
            _bind(family, "freeze", (0.0,) + self.args, self.kwds)  # (scipy's errors)

    def __repr__(self):
        return f"<astad's frozen scipy.stats.{self.family.name}>"

    def __getattr__(self, name):  # (scipy's other methods: ppf, rvs, entropy...)
        if name.startswith("_") or not hasattr(self.dist, name):
            raise AttributeError(name)
        raise NotDifferentiableError(
            f"scipy.stats.{self.family.name}(...).{name}: astad does not differentiate it "
            f"(of {self.family.name} it differentiates {', '.join(self.family.methods)}); "
            "freeze the distribution with parameters that are not differentiated to call "
            "scipy's own", *user_location())

    def _call(self, method, x):
        if method not in self.family.methods:
            raise NotDifferentiableError(
                f"scipy.stats.{self.family.name}(...).{method} is not differentiated by "
                f"astad (it differentiates {', '.join(self.family.methods)})",
                *user_location())
        return evaluate(self.family, method, x, *self.args, **self.kwds)

    def logpdf(self, x):
        return self._call("logpdf", x)

    def pdf(self, x):
        return self._call("pdf", x)

    def logpmf(self, k):
        return self._call("logpmf", k)

    def pmf(self, k):
        return self._call("pmf", k)

    def cdf(self, x):
        return self._call("cdf", x)

    def logcdf(self, x):
        return self._call("logcdf", x)

    def sf(self, x):
        return self._call("sf", x)

    def logsf(self, x):
        return self._call("logsf", x)

    def _parameters(self):
        family = self.family
        if family.kind == "multivariate" or family.moments is None:
            raise NotDifferentiableError(
                f"astad's frozen scipy.stats.{family.name} has no mean or variance",
                *user_location())
        _, rest, shapes = _bind(family, "mean", (0.0,) + self.args, self.kwds)
        return family.mean_var(*rest, *shapes)

    def mean(self):
        return self._parameters()[0]

    def var(self):
        return self._parameters()[1]

    def std(self):
        return np.sqrt(self._parameters()[1])


def _frozen_rule(family):
    dist = getattr(st, family.name)

    def rule(tape, *args, **kwargs):
        if not contains_dual(args) and not contains_dual(kwargs):
            return dist(*args, **kwargs)  # (scipy's own frozen distribution)
        return Frozen(family, args, kwargs)
    rule.__name__ = family.name
    return rule


_FROZEN_PARAMETERS = {  # scipy's frozen multivariate distributions: their parameters
    "multivariate_normal": lambda d: ((), {"mean": d.mean, "cov": d.cov}),
    "dirichlet": lambda d: ((d.alpha,), {}),
    "multinomial": lambda d: ((d.n, d.p), {}),
}


def frozen_method(method):
    """``d.logpdf`` of scipy's own frozen distribution ``d`` of a family here: astad's
    function with ``d``'s parameters (a differentiated x), or None."""
    d, name = method.__self__, method.__name__
    dist = getattr(d, "dist", None) or getattr(d, "_dist", None)
    family = FAMILIES.get(getattr(dist, "name", None) or _multivariate_name(dist))
    # (a frozen distribution holds a new instance of the distribution's class)
    if family is None or type(dist) is not type(getattr(st, family.name)) or \
            name not in family.methods:
        return None
    if family.kind == "multivariate":
        args, kwargs = _FROZEN_PARAMETERS[family.name](d)
    else:
        args, kwargs = d.args, d.kwds

    def call(tape, x):
        if not contains_dual(x):
            return method(x)
        return evaluate(family, name, x, *args, **kwargs)
    return call


def _multivariate_name(dist):
    for family in MULTIVARIATE:
        if type(dist) is type(getattr(st, family.name)):
            return family.name
    return None


def stats_name(obj) -> str | None:
    """``scipy.stats.norm`` for scipy's distribution object ``obj`` (or a frozen one)."""
    dist = getattr(obj, "dist", None) or getattr(obj, "_dist", None) or obj
    name = getattr(dist, "name", None) or _multivariate_name(dist)
    if name is None:
        for candidate, value in vars(st).items():
            if value is dist:
                name = candidate
                break
    return None if name is None else f"scipy.stats.{name}"


# -- registration ---------------------------------------------------------------------------
REGISTERED: list = []  # the callables given astad's rules (not a user's own)


def register_all() -> None:
    """Register every rule here (a rule the user registered first is kept)."""
    for family in FAMILIES.values():
        dist = getattr(st, family.name)
        for method in family.methods:
            bound = getattr(dist, method)
            if not has_rule(bound):
                define(f"scipy_stats_{family.name}_{method}", _method_rule(family, method),
                       bound)
                REGISTERED.append(bound)
        if not has_rule(dist):
            define(f"scipy_stats_{family.name}", _frozen_rule(family), dist)
            REGISTERED.append(dist)
