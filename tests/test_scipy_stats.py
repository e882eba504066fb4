"""scipy.stats' distributions differentiated (issue 26, items 1 and 5): every function of
every distribution astad covers (astad/rules/scipy_stats.py), in x and in each parameter,
against central finite differences; called as scipy's method (positional and keyword
parameters) and frozen (``scipy.stats.norm(loc, scale).logpdf(x)``, with differentiated
parameters or scipy's own frozen object); forward mode against reverse; second order;
values against scipy's; gradients against JAX's where jax.scipy.stats has the function;
the refusals and their messages; and an example program, a variational fit.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.special as sc
import scipy.stats as st

import astad

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = np.array([1.0, 0.7, 0.3])  # (a weighted sum: each point's derivative counts)

# name: (shape parameters, three points inside the support for loc=0.1, scale=1.3)
CONTINUOUS = {
    "norm": ((), [-1.3, 0.2, 2.1]),
    "t": ((4.5,), [-1.3, 0.2, 2.1]),
    "gamma": ((2.5,), [0.5, 1.5, 3.5]),
    "beta": ((2.3, 1.7), [0.3, 0.7, 1.2]),
    "chi2": ((3.5,), [0.5, 2.0, 4.0]),
    "expon": ((), [0.3, 1.0, 3.0]),
    "laplace": ((), [-1.3, 0.4, 2.1]),
    "cauchy": ((), [-1.3, 0.4, 2.1]),
    "logistic": ((), [-1.3, 0.4, 2.1]),
    "lognorm": ((0.7,), [0.4, 1.1, 2.5]),
    "uniform": ((), [0.3, 0.8, 1.3]),
}
LOC, SCALE = 0.1, 1.3
CONTINUOUS_METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
# the CDFs differentiated in x, loc and scale only (an incomplete beta or gamma function)
X_ONLY_CDFS = {"t", "gamma", "beta", "chi2"}

# name: (shape parameters, counts inside the support)
DISCRETE = {
    "poisson": ((3.2,), [0.0, 2.0, 5.0]),
    "binom": ((7.0, 0.35), [0.0, 3.0, 6.0]),
    "nbinom": ((4.5, 0.6), [0.0, 2.0, 7.0]),
}
DISCRETE_METHODS = ("logpmf", "pmf", "cdf")


def parameter_names(name):
    dist = getattr(st, name)
    shapes = [s.strip() for s in (dist.shapes or "").split(",") if s.strip()]
    if name in CONTINUOUS:
        return ["x"] + shapes + ["loc", "scale"]
    return ["k"] + shapes


def central(f, v, h=1e-6):
    """Central differences of the scalar function f at the float or array v."""
    v = np.asarray(v, float)
    out = np.zeros_like(v)
    for i in np.ndindex(v.shape):
        step = np.zeros_like(v)
        step[i] = h * max(1.0, abs(v[i]))
        out[i] = (f(v + step) - f(v - step)) / (2 * step[i])
    return out if v.ndim else float(out)


def close(actual, expected, rtol=2e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(actual, float), np.asarray(expected, float),
                               rtol=rtol, atol=atol)


def continuous_cases():
    for name in CONTINUOUS:
        for method in CONTINUOUS_METHODS:
            for k, parameter in enumerate(parameter_names(name)):
                yield pytest.param(name, method, k, id=f"{name}.{method}-{parameter}")


def _arguments(name):
    shapes, xs = CONTINUOUS[name] if name in CONTINUOUS else DISCRETE[name]
    extra = [LOC, SCALE] if name in CONTINUOUS else []
    return [np.array(xs)] + [float(p) for p in shapes] + extra


def _refused(name, method, k):
    if name in CONTINUOUS:
        return method in ("cdf", "logcdf", "sf", "logsf") and name in X_ONLY_CDFS and \
            0 < k <= len(CONTINUOUS[name][0])
    if k == 0:
        return True  # a count
    return method == "cdf" and parameter_names(name)[k] == "n"


# -- every function in every parameter, against finite differences ---------------------------
def _check_parameter(name, method, k, arguments):
    fn = getattr(getattr(st, name), method)

    def f(v):
        given = list(arguments)
        given[k] = v
        return np.sum(fn(*given) * WEIGHTS)

    point = arguments[k]
    if name == "binom" and k == 1 and method != "cdf":
        # n as a float: scipy's binom takes integers only (nan between them), so the
        # derivative of log C(n, k) (1 - p)^(n - k) in n is checked as a formula
        k_, n, p = arguments
        expected = sc.digamma(n + 1.0) - sc.digamma(n - k_ + 1.0) + np.log1p(-p)
        if method == "pmf":
            expected = expected * st.binom.pmf(k_, n, p)
        close(astad.grad(f)(point), np.sum(expected * WEIGHTS), rtol=1e-12)
        return
    if _refused(name, method, k):
        with pytest.raises(astad.NotDifferentiableError, match=parameter_names(name)[k]):
            astad.grad(f)(point)
        return
    value, gradient = astad.value_and_grad(f)(point)
    close(value, f(point), rtol=1e-12, atol=0)
    close(gradient, central(f, point))
    tangent = np.linspace(0.3, 1.1, np.size(point)).reshape(np.shape(point))
    _, forward = astad.jvp(f, (point,), (tangent,))
    close(forward, np.sum(gradient * tangent), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, method, k", list(continuous_cases()))
def test_continuous_gradients_in_each_parameter(name, method, k):
    """x an array of three points, the parameters scalars; forward mode agrees."""
    _check_parameter(name, method, k, _arguments(name))


@pytest.mark.parametrize("name, method, k", list(continuous_cases()))
def test_continuous_gradients_of_array_parameters(name, method, k):
    """x a scalar, each parameter an array of three values (broadcast by scipy)."""
    if k == 0:
        arguments = _arguments(name)
    else:
        arguments = _arguments(name)
        x = arguments[0][1]
        arguments[0] = x
        base = arguments[k]
        arguments[k] = np.array([base, base * 1.1, base * 0.9])
    _check_parameter(name, method, k, arguments)


def discrete_cases():
    for name in DISCRETE:
        for method in DISCRETE_METHODS:
            for k, parameter in enumerate(parameter_names(name)):
                yield pytest.param(name, method, k, id=f"{name}.{method}-{parameter}")


@pytest.mark.parametrize("name, method, k", list(discrete_cases()))
def test_discrete_gradients_in_each_parameter(name, method, k):
    _check_parameter(name, method, k, _arguments(name))


@pytest.mark.parametrize("name", list(CONTINUOUS))
@pytest.mark.parametrize("x_index", [0, 1, 2])
def test_scalar_points(name, x_index):
    """Scalars throughout: the gradient in x and in every parameter at once."""
    shapes, xs = CONTINUOUS[name]
    x = xs[x_index]

    dist = getattr(st, name)
    parameters = [*shapes, LOC, SCALE]
    cdf_shapes = shapes if name in X_ONLY_CDFS else ()  # (the CDF: in x, loc, scale only)

    def f(x, *parameters):
        cdf_parameters = parameters[len(shapes):] if cdf_shapes else parameters
        return dist.logpdf(x, *parameters) + 0.5 * dist.cdf(x, *cdf_shapes, *cdf_parameters)

    gradient = astad.grad(f, argnums=tuple(range(len(parameters) + 1)))(x, *parameters)
    for k, point in enumerate([x, *parameters]):
        def partial(v, k=k):
            given = [x, *parameters]
            given[k] = float(v)
            return f(*given)
        close(gradient[k], central(partial, point), rtol=1e-6)
    assert isinstance(astad.value_and_grad(f)(x, *parameters)[0], float)


# -- scipy's signature: keywords, defaults ---------------------------------------------------
def test_keyword_parameters_and_defaults():
    x = np.array([0.3, 1.2, 2.5])

    def f(loc, scale, a):
        return (np.sum(st.gamma.logpdf(x, a=a, loc=loc, scale=scale))
                + np.sum(st.norm.logcdf(x, scale=scale)) + np.sum(st.norm.pdf(x, loc))
                + np.sum(st.t.logpdf(x=x, df=a, scale=scale)))

    point = (0.05, 1.4, 2.2)
    gradient = astad.grad(f, argnums=(0, 1, 2))(*point)
    for k in range(3):
        def partial(v, k=k):
            given = list(point)
            given[k] = float(v)
            return f(*given)
        close(gradient[k], central(partial, point[k]))


def test_a_wrong_argument_is_scipys_type_error():
    def f(x):
        return st.norm.logpdf(x, 0.0, 1.0, 2.0, 3.0)

    with pytest.raises(TypeError):
        astad.grad(f)(0.5)

    def g(x):
        return st.gamma.logpdf(x)  # (a is missing)

    with pytest.raises(TypeError, match="'a'"):
        astad.grad(g)(0.5)


# -- frozen distributions -------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CONTINUOUS) + list(DISCRETE))
def test_frozen_with_differentiated_parameters(name):
    arguments = _arguments(name)
    x, parameters = arguments[0], arguments[1:]
    methods = CONTINUOUS_METHODS if name in CONTINUOUS else DISCRETE_METHODS
    methods = [m for m in methods if not any(_refused(name, m, k)
                                             for k in range(1, len(arguments)))]

    fixed = parameters[:1] if name == "binom" else []  # (n: scipy's binom is nan between
    parameters = parameters[len(fixed):]               # integers)

    def f(parameters):
        d = getattr(st, name)(*fixed, *parameters)
        total = 0.0
        for method in methods:
            total = total + np.sum(getattr(d, method)(x) * WEIGHTS)
        return total

    p = np.array(parameters)
    gradient = astad.grad(f)(p)
    close(gradient, central(f, p))
    plain = getattr(st, name)(*fixed, *parameters)
    assert type(plain).__module__.startswith("scipy.stats")  # (scipy's own, as it is)
    expected = sum(np.sum(getattr(plain, m)(x) * WEIGHTS) for m in methods)
    close(astad.value_and_grad(f)(p)[0], expected, rtol=1e-12, atol=0)
    _, forward = astad.jvp(f, (p,), (np.ones_like(p),))
    close(forward, np.sum(gradient), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_frozen_keyword_parameters_and_moments(name):
    shapes, xs = CONTINUOUS[name]
    names = parameter_names(name)[1:]

    def f(p):
        d = getattr(st, name)(**dict(zip(names, p)))
        total = np.sum(d.logpdf(np.array(xs)))
        if name != "cauchy":
            total = total + d.mean() + d.var() + d.std()
        return total

    p = np.array([*shapes, LOC, SCALE])
    close(astad.grad(f)(p), central(f, p))
    if name != "cauchy":
        d = getattr(st, name)(*p)
        expected = np.sum(d.logpdf(np.array(xs))) + d.mean() + d.var() + d.std()
        close(astad.value_and_grad(f)(p)[0], expected, rtol=1e-12)


def test_scipys_own_frozen_distribution_of_plain_parameters():
    """A frozen distribution made outside (scipy's object) meets a differentiated x."""
    normal, gamma, poisson = st.norm(0.3, 1.7), st.gamma(2.5, scale=0.8), st.poisson(2.5)
    mvn = st.multivariate_normal([0.1, -0.2], [[1.0, 0.3], [0.3, 0.8]])
    dirichlet = st.dirichlet([1.5, 2.0, 3.0])

    def f(x):
        return (np.sum(normal.logpdf(x)) + np.sum(normal.cdf(x)) + np.sum(gamma.logpdf(x))
                + np.sum(gamma.sf(x)) + mvn.logpdf(x[:2]) + mvn.pdf(x[1:])
                + dirichlet.logpdf(x / np.sum(x)))

    x = np.array([0.4, 1.1, 2.3])
    close(astad.grad(f)(x), central(f, x))
    _, forward = astad.jvp(f, (x,), (np.ones(3),))
    close(forward, np.sum(astad.grad(f)(x)), rtol=1e-12)

    def g(mu):  # a frozen discrete distribution: the count is not differentiated
        return poisson.logpmf(3) * mu

    assert astad.grad(g)(2.0) == poisson.logpmf(3)


# -- values: scipy's own when nothing is differentiated -------------------------------------
@pytest.mark.parametrize("name", list(CONTINUOUS) + list(DISCRETE))
def test_values_without_differentiated_arguments_are_scipys(name):
    from astad.registry import RECORDS
    arguments = _arguments(name)
    dist = getattr(st, name)
    methods = CONTINUOUS_METHODS if name in CONTINUOUS else DISCRETE_METHODS
    astad.grad(lambda y: y * dist.logpdf(1.0, *arguments[1:]) if name in CONTINUOUS
               else y * dist.logpmf(1, *arguments[1:]))(1.0)  # (rules registered)
    for method in methods:
        rule = RECORDS[getattr(dist, method)].call
        expected = getattr(dist, method)(*arguments)
        np.testing.assert_array_equal(rule(None, *arguments), expected)

        def f(y, method=method):  # differentiated in y, not in the distribution's values
            return y * np.sum(getattr(dist, method)(*arguments))

        assert astad.grad(f)(2.0) == np.sum(expected)


@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_outside_the_support_and_invalid_parameters(name):
    """Points outside the support give scipy's values (-inf, 0, 1) and gradient 0;
    an invalid scale gives nan, as scipy."""
    shapes, _ = CONTINUOUS[name]
    outside = {"gamma": -1.0, "beta": 2.0, "chi2": -1.0, "expon": -1.0, "lognorm": -0.5,
               "uniform": 3.0}.get(name)
    if outside is None:
        return

    for method in CONTINUOUS_METHODS:
        def f(x, method=method):
            return getattr(st, name).__getattribute__(method)(x, *shapes)

        value, gradient = astad.value_and_grad(f)(outside)
        assert value == getattr(getattr(st, name), method)(outside, *shapes), method
        assert gradient == 0.0, method

    def g(scale):
        return st.__dict__[name].logpdf(0.5, *shapes, scale=scale)

    value, gradient = astad.value_and_grad(g)(-1.0)
    assert np.isnan(value) and np.isnan(getattr(st, name).logpdf(0.5, *shapes, scale=-1.0))


# -- second order --------------------------------------------------------------------------
@pytest.mark.parametrize("name, method", [("norm", "logpdf"), ("t", "logpdf"),
                                          ("gamma", "logpdf"), ("beta", "logpdf"),
                                          ("logistic", "logcdf"), ("lognorm", "cdf"),
                                          ("gamma", "cdf"), ("t", "sf")])
def test_hessian_in_x_and_the_parameters(name, method):
    shapes, xs = CONTINUOUS[name]
    refuse_shapes = method != "logpdf" and name in X_ONLY_CDFS
    x = xs[1]

    def f(p):
        if refuse_shapes:
            return getattr(getattr(st, name), method)(p[0], *shapes, p[1], p[2])
        return getattr(getattr(st, name), method)(p[0], *p[1:])

    p = np.array([x, LOC, SCALE]) if refuse_shapes else np.array([x, *shapes, LOC, SCALE])
    hessian = astad.hessian(f)(p)
    expected = np.array([central(lambda q, j=j: astad.grad(f)(q)[j], p, h=1e-5)
                         for j in range(len(p))])
    close(hessian, expected, rtol=1e-5, atol=1e-7)
    close(hessian, hessian.T, rtol=1e-10, atol=1e-12)


def test_jvp_of_grad_of_discrete_and_multivariate():
    def f(p):
        return (st.poisson.logpmf(3, p[0]) + st.binom.logpmf(2, 6, p[1])
                + st.nbinom.cdf(3, 2.5, p[1])
                + st.multivariate_normal.logpdf([0.2, 0.1], mean=p[:2], cov=[[1.0, 0.2],
                                                                              [0.2, 0.7]]))

    p = np.array([2.1, 0.4])
    tangent = np.array([0.3, -0.8])
    _, hvp = astad.jvp(astad.grad(f), (p,), (tangent,))
    expected = (astad.grad(f)(p + 1e-5 * tangent) - astad.grad(f)(p - 1e-5 * tangent)) / 2e-5
    close(hvp, expected, rtol=1e-5, atol=1e-8)


# -- the multivariate distributions --------------------------------------------------------
COV_FACTOR = np.array([[1.0, 0.0, 0.0], [0.4, 0.8, 0.0], [-0.3, 0.2, 0.6]])


def _mvn(x, mean, factor, method="logpdf"):
    cov = factor @ factor.T + 0.2 * np.eye(3)
    return np.sum(getattr(st.multivariate_normal, method)(x, mean, cov) * np.ones(1))


@pytest.mark.parametrize("method", ["logpdf", "pdf"])
@pytest.mark.parametrize("points", [1, 4])
def test_multivariate_normal_in_x_mean_and_cov(method, points):
    rng = np.random.default_rng(points)
    x = rng.normal(size=(points, 3)) if points > 1 else rng.normal(size=3)
    mean, factor = np.array([0.1, -0.4, 0.3]), COV_FACTOR.copy()
    arguments = [x, mean, factor]
    gradient = astad.grad(lambda *a: _mvn(*a, method=method), argnums=(0, 1, 2))(*arguments)
    for k in range(3):
        def partial(v, k=k):
            given = list(arguments)
            given[k] = v
            return _mvn(*given, method=method)
        close(gradient[k], central(partial, arguments[k]))
    cov = factor @ factor.T + 0.2 * np.eye(3)
    value = astad.value_and_grad(lambda m: np.sum(getattr(st.multivariate_normal, method)(
        x, m, cov)))(mean)[0]
    close(value, np.sum(getattr(st.multivariate_normal, method)(x, mean, cov)), rtol=1e-12)


def test_multivariate_normal_forms_of_cov_and_frozen():
    x = np.array([[0.3, -0.2], [1.0, 0.5]])

    def f(p):
        d = st.multivariate_normal(mean=p[:2], cov=np.diag(p[2:]))
        return (np.sum(d.logpdf(x)) + np.sum(st.multivariate_normal.logpdf(x, p[:2], p[2:]))
                + np.sum(st.multivariate_normal.logpdf(x, p[:2], p[2])) +
                st.multivariate_normal.logpdf(p[0], cov=p[3]) +
                np.sum(st.multivariate_normal.logpdf(p[:2], cov=p[3])))

    p = np.array([0.2, -0.1, 0.8, 1.5])
    close(astad.grad(f)(p), central(f, p))
    d = st.multivariate_normal(mean=p[:2], cov=np.diag(p[2:]))
    expected = (np.sum(d.logpdf(x)) + np.sum(st.multivariate_normal.logpdf(x, p[:2], p[2:]))
                + np.sum(st.multivariate_normal.logpdf(x, p[:2], p[2]))
                + st.multivariate_normal.logpdf(p[0], cov=p[3])
                + np.sum(st.multivariate_normal.logpdf(p[:2], cov=p[3])))
    close(astad.value_and_grad(f)(p)[0], expected, rtol=1e-12)


@pytest.mark.parametrize("method", ["logpdf", "pdf"])
def test_dirichlet_in_x_and_alpha(method):
    alpha = np.array([1.5, 2.5, 3.2])

    def f(u, alpha):  # x on the simplex: a softmax of u
        x = sc.softmax(u, axis=0)
        return np.sum(getattr(st.dirichlet, method)(x, alpha))

    for u in (np.array([0.2, -0.5, 0.9]), np.array([[0.2, 1.0], [-0.5, 0.1], [0.9, -0.3]])):
        gradient = astad.grad(f, argnums=(0, 1))(u, alpha)
        close(gradient[0], central(lambda v: f(v, alpha), u))
        close(gradient[1], central(lambda v, u=u: f(u, v), alpha))
        value = astad.value_and_grad(f, argnums=1)(u, alpha)[0]
        close(value, f(u, alpha), rtol=1e-12)

    def frozen(alpha):
        return st.dirichlet(alpha).logpdf(np.array([0.2, 0.3]))  # (K - 1 entries)

    close(astad.grad(frozen)(alpha), central(frozen, alpha))


@pytest.mark.parametrize("method", ["logpmf", "pmf"])
def test_multinomial_in_p_and_n(method):
    counts = np.array([[2.0, 3.0, 1.0], [0.0, 4.0, 2.0]])

    def f(u):
        return np.sum(getattr(st.multinomial, method)(counts, 6, sc.softmax(u)))

    u = np.array([0.3, -0.2, 0.5])
    close(astad.grad(f)(u), central(f, u))
    close(astad.value_and_grad(f)(u)[0], f(u), rtol=1e-12)

    def in_n(n):  # n as a float: d/dn log n! = digamma(n + 1)
        return st.multinomial.logpmf(counts[0], n, [0.2, 0.5, 0.3])

    assert astad.grad(in_n)(6.0) == pytest.approx(sc.digamma(7.0), rel=1e-12)

    def frozen(u):
        return np.sum(st.multinomial(6, sc.softmax(u)).logpmf(counts))

    close(astad.grad(frozen)(u), central(frozen, u))


# -- JAX ------------------------------------------------------------------------------------
# (astad's name, jax.scipy.stats' name, method, arguments: x then the parameters)
def _jax_has(name, method) -> bool:
    try:
        import jax.scipy.stats as jstats
    except ImportError:  # (the fixture skips every case)
        return True
    return getattr(getattr(jstats, name, None), method, None) is not None


JAX_CASES = [(name, method) for name in ("norm", "t", "gamma", "beta", "chi2", "expon",
                                         "laplace", "cauchy", "logistic", "uniform")
             for method in CONTINUOUS_METHODS] + [
    (name, method) for name in DISCRETE for method in DISCRETE_METHODS]
JAX_CASES = [case for case in JAX_CASES if _jax_has(*case)]


@pytest.fixture(scope="module")
def jax_stats():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.stats as jstats
    return jax, jstats


@pytest.mark.parametrize("name, method", JAX_CASES)
def test_against_jax(jax_stats, name, method):
    jax, jstats = jax_stats
    theirs = getattr(getattr(jstats, name), method)
    arguments = _arguments(name)
    if name in DISCRETE:
        arguments[0] = arguments[0][1:]  # (JAX's pmf at k=0 with p in the formula)
    names = parameter_names(name)
    differentiated = [k for k in range(len(arguments)) if not _refused(name, method, k)]
    if name in ("gamma", "beta", "chi2", "t") and method not in ("logpdf", "pdf"):
        differentiated = [k for k in differentiated if names[k] in ("x", "loc", "scale")]

    def ours(*a):
        return np.sum(getattr(getattr(st, name), method)(*a) * WEIGHTS[:np.size(a[0])])

    def their_f(*a):
        return jax.numpy.sum(theirs(*a) * WEIGHTS[:np.size(a[0])])

    expected = jax.grad(their_f, argnums=tuple(differentiated))(
        *[jax.numpy.asarray(a) for a in arguments])
    found = astad.grad(ours, argnums=tuple(differentiated))(*arguments)
    for ours_k, theirs_k in zip(found, expected):
        close(ours_k, np.asarray(theirs_k), rtol=1e-9, atol=1e-12)


def test_multivariate_against_jax(jax_stats):
    jax, jstats = jax_stats
    x = np.array([[0.3, -0.2, 0.5], [1.0, 0.5, -0.7]])
    mean = np.array([0.1, -0.4, 0.3])
    cov = COV_FACTOR @ COV_FACTOR.T + 0.2 * np.eye(3)
    ours = astad.grad(lambda x, m, c: np.sum(st.multivariate_normal.logpdf(x, m, c)),
                      argnums=(0, 1, 2))(x, mean, cov)
    theirs = jax.grad(lambda x, m, c: jax.numpy.sum(jstats.multivariate_normal.logpdf(
        x, m, c)), argnums=(0, 1))(x, mean, cov)
    close(ours[0], theirs[0], rtol=1e-10)
    close(ours[1], theirs[1], rtol=1e-10)
    alpha, p = np.array([1.5, 2.5, 3.2]), np.array([0.2, 0.5, 0.3])
    point = np.array([0.2, 0.3, 0.5])
    ours = astad.grad(lambda x, a: st.dirichlet.logpdf(x, a), argnums=(0, 1))(point, alpha)
    theirs = jax.grad(jstats.dirichlet.logpdf, argnums=(0, 1))(point, alpha)
    close(ours[0], theirs[0], rtol=1e-10)
    close(ours[1], theirs[1], rtol=1e-10)
    counts = np.array([2, 3, 1])
    ours = astad.grad(lambda p: st.multinomial.logpmf(counts, 6, p))(p)
    theirs = jax.grad(lambda p: jstats.multinomial.logpmf(counts, 6, p))(p)
    close(ours, theirs, rtol=1e-10)


# -- refusals and messages ------------------------------------------------------------------
def test_a_cdf_refuses_its_shape_parameter_by_name():
    def f(df):
        return st.t.cdf(0.5, df)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"scipy\.stats\.t\.cdf is differentiated in x, loc and scale, "
                             r"not in df") as error:
        astad.grad(f)(3.0)
    assert "test_scipy_stats.py" in str(error.value)  # (at the user's line)

    def g(b):
        return st.beta(2.0, b).sf(0.3)

    with pytest.raises(astad.NotDifferentiableError, match=r"beta\.sf .*not in b"):
        astad.grad(g)(2.0)

    def h(n):
        return st.binom.cdf(3, n, 0.4)

    with pytest.raises(astad.NotDifferentiableError, match=r"binom\.cdf .*not in n"):
        astad.grad(h)(7.0)


def test_a_count_is_not_differentiated():
    def f(k):
        return st.poisson.logpmf(k, 2.0)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"scipy\.stats\.poisson\.logpmf is not differentiable in k"):
        astad.grad(f)(3.0)

    def g(x):
        return st.multinomial.logpmf(x, 6, [0.2, 0.5, 0.3])

    with pytest.raises(astad.NotDifferentiableError, match="multinomial.logpmf .*in x"):
        astad.grad(g)(np.array([2.0, 3.0, 1.0]))


def test_a_distribution_astad_does_not_cover_is_named_as_the_user_calls_it():
    """Issue 26 item 5: the message names scipy.stats.weibull_min.logpdf and the
    register_vjp line, not numpy.putmask inside scipy's code."""
    def f(x):
        return st.weibull_min.logpdf(x, 1.5)

    with pytest.raises(astad.NotDifferentiableError) as error:
        astad.grad(f)(0.5)
    message = str(error.value)
    assert "astad has no derivative for scipy.stats.weibull_min.logpdf" in message
    assert "astad.register_vjp(scipy.stats.weibull_min.logpdf, vjp_0" in message
    assert "putmask" not in message and "test_scipy_stats.py" in message

    def frozen(c):
        return st.weibull_min(c).logpdf(0.5)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"no derivative for scipy\.stats\.weibull_min of"):
        astad.grad(frozen)(1.5)

    plain = st.weibull_min(1.5)

    def frozen_x(x):
        return plain.cdf(x)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"no derivative for scipy\.stats\.weibull_min\.cdf of"):
        astad.grad(frozen_x)(0.5)

    def uncovered_method(x):
        return st.norm.entropy(x)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"no derivative for scipy\.stats\.norm\.entropy of"):
        astad.grad(uncovered_method)(0.5)

    def passed_in(fn):  # a method met at run time only
        return lambda x: fn(x, 2.0)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"no derivative for scipy\.stats\.gumbel_r\.logpdf of"):
        astad.grad(passed_in(st.gumbel_r.logpdf))(0.5)
    assert astad.grad(lambda x: x * st.weibull_min.logpdf(0.5, 1.5))(1.0) == \
        st.weibull_min.logpdf(0.5, 1.5)  # (no differentiated value: scipy's as it is)


_USER_RULE = """
import numpy as np
import scipy.stats as st
import astad
calls = []

def vjp_x(g, result, x, loc=0.0, scale=1.0):
    calls.append("x")
    return g * 100.0

astad.register_vjp(st.norm.logpdf, vjp_x)
print(astad.grad(lambda x: st.norm.logpdf(x, 0.5, 2.0))(0.3), calls)
print(astad.grad(lambda x: st.gamma.logpdf(x, 2.0))(0.3))  # (astad's rules, registered now)
print(astad.grad(lambda x: st.norm.logpdf(x, 0.5, 2.0))(0.3), calls)
astad.register_vjp(st.gamma.logpdf, lambda g, r, x, a: g * -7.0)
print(astad.grad(lambda x: st.gamma.logpdf(x, 2.0))(0.3))
"""


def test_a_users_rule_wins_before_and_after_astads_are_registered(tmp_path):
    script = tmp_path / "user_rule.py"
    script.write_text(_USER_RULE)
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                         "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "100.0 ['x']"
    assert float(lines[1]) == pytest.approx(1.0 / 0.3 - 1.0)
    assert lines[2] == "100.0 ['x', 'x']"
    assert lines[3] == "-7.0"


_FIRST_USE = """
import sys
import numpy as np
import astad
assert 'scipy' not in sys.modules, 'import astad imported scipy'
import scipy.stats as st
from astad.rules import scipy_loader
assert scipy_loader.stats_pending
print(astad.grad(lambda x: st.norm.logpdf(x, 1.0, 2.0))(0.5))
assert not scipy_loader.stats_pending
"""


def test_rules_are_registered_on_first_use(tmp_path):
    script = tmp_path / "first_use.py"
    script.write_text(textwrap.dedent(_FIRST_USE))
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                         "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == 0.125


# -- an example program ---------------------------------------------------------------------
def test_the_variational_example_fits_the_posterior():
    """examples/variational_gaussian.py: a 1-d Gaussian posterior fitted by stochastic
    variational inference with scipy.stats.norm.logpdf; its gradient is checked against
    finite differences and the fit against the exact posterior."""
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "variational_gaussian.py")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "OK: the ELBO's gradient matches finite differences" in result.stdout
    fitted = [line for line in result.stdout.splitlines() if line.startswith("fitted")]
    exact = [line for line in result.stdout.splitlines() if line.startswith("exact")]
    mean, sd = (float(v) for v in fitted[0].split()[-2:])
    true_mean, true_sd = (float(v) for v in exact[0].split()[-2:])
    assert abs(mean - true_mean) < 0.02 and abs(sd / true_sd - 1.0) < 0.05


def test_lists_holding_differentiated_values_as_parameters():
    def f(a):
        return (st.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), [a, 2.0, 3.0])
                + np.sum(st.norm.logpdf([0.1, 0.4], loc=[a, 2 * a], scale=(1.0, a))))

    gradient = astad.grad(f)(1.5)
    close(gradient, central(f, 1.5))
    _, forward = astad.jvp(f, (1.5,), (1.0,))
    close(forward, gradient, rtol=1e-12)


def test_a_frozen_distributions_other_methods_are_refused_by_name():
    def f(m):
        return st.norm(m, 1.0).ppf(0.3)

    with pytest.raises(astad.NotDifferentiableError,
                       match=r"scipy\.stats\.norm\(\.\.\.\)\.ppf: astad does not "):
        astad.grad(f)(1.0)
