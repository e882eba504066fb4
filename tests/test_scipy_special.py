"""scipy.special's rules (astad/rules/scipy_special.py) as programs call them.

For every function and each argument it is differentiable in, at several points inside
its domain, on arrays and on Python floats:

- the gradient (``astad.grad``) against central finite differences;
- forward mode (``astad.jvp``) against the gradient;
- second order: ``astad.hessian``, and ``astad.jvp`` of ``astad.grad`` (forward over
  reverse), against finite differences of the gradient; ``grad(grad)`` on floats;
- JAX's gradient and Hessian (``jax.scipy.special``, float64), where JAX has the
  function (a sample in the quick subset: JAX compiles each operation on first use,
  45 s for all of them).

And the arguments with no derivative in closed form (a Bessel function's order, the
shape of gammainc) are refused in both modes with an error naming the function and the
argument, while a constant order works. tests/test_systematic.py checks each rule alone
(vjp against jvp, batched rules, float32, derivatives of the rules themselves).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pytest
import scipy.special as sc

import astad
from astad.rules import catalogue

H = 1e-6  # the finite-difference step of the gradient
H2 = 1e-5  # the finite-difference step of the gradient's derivatives


@dataclass
class Spec:
    id: str
    fn: object
    args: tuple  # the arguments at the array point (constants where not differentiated)
    diff: tuple  # the differentiated positions
    floats: tuple = ()  # points with Python floats, as argument tuples
    kwargs: dict = field(default_factory=dict)
    jax: str | None = None  # its name in jax.scipy.special


def a(*values):
    return np.array(values, dtype=np.float64)


WIDE = a(-4.1, -1.3, 0.4, 2.2, 3.7)     # J: the whole line
POS = a(0.4, 1.1, 2.6, 4.9)             # Y, K: x > 0
MID = a(-2.3, -0.4, 0.6, 1.9)           # I: both sides of 0
UNIT = a(0.05, 0.3, 0.62, 0.95)         # (0, 1)
GAMMA = a(0.6, 1.7, 3.2, 5.5)

SPECS = [
    # -- Bessel functions, in x
    Spec("j0", sc.j0, (WIDE,), (0,), ((0.7,), (-4.1,))),
    Spec("j1", sc.j1, (WIDE,), (0,), ((0.7,), (-2.9,))),
    Spec("jv", sc.jv, (1.5, POS), (1,), ((1.5, 0.8), (0.0, 3.3), (-0.5, 2.0))),
    Spec("jv-orders", sc.jv, (a(0.0, 1.0, 2.5, -0.5)[:, None], POS), (1,)),
    Spec("jn", sc.jn, (3, WIDE), (1,), ((2, -1.7), (0, 4.4))),
    Spec("y0", sc.y0, (POS,), (0,), ((0.9,), (3.1,))),
    Spec("y1", sc.y1, (POS,), (0,), ((0.9,), (3.1,))),
    Spec("yv", sc.yv, (0.7, POS), (1,), ((0.7, 1.3), (2.5, 4.0))),
    Spec("yn", sc.yn, (2, POS), (1,), ((1, 0.9), (3, 4.0))),
    Spec("i0", sc.i0, (MID,), (0,), ((-1.2,), (2.5,)), jax="i0"),
    Spec("i0e", sc.i0e, (MID,), (0,), ((-1.2,), (2.5,)), jax="i0e"),
    Spec("i1", sc.i1, (MID,), (0,), ((-1.2,), (2.5,)), jax="i1"),
    Spec("i1e", sc.i1e, (MID,), (0,), ((-1.2,), (2.5,)), jax="i1e"),
    Spec("iv", sc.iv, (1.5, POS), (1,), ((1.5, 0.8), (0.25, 2.0))),
    Spec("iv-integer", sc.iv, (2.0, MID), (1,), ((3.0, -1.4),)),
    Spec("ive", sc.ive, (0.5, POS), (1,), ((0.5, 0.8), (2.0, -1.5))),
    Spec("ive-integer", sc.ive, (1.0, MID), (1,)),
    Spec("k0", sc.k0, (POS,), (0,), ((0.9,), (3.1,))),
    Spec("k0e", sc.k0e, (POS,), (0,), ((0.9,), (3.1,))),
    Spec("k1", sc.k1, (POS,), (0,), ((0.9,), (3.1,))),
    Spec("k1e", sc.k1e, (POS,), (0,), ((0.9,), (3.1,))),
    Spec("kn", sc.kn, (np.array([0, 1, 2, 4]), POS), (1,), ((2, 1.5),)),
    Spec("kv", sc.kv, (1.3, POS), (1,), ((1.3, 0.9), (0.0, 2.2))),
    Spec("kve", sc.kve, (0.5, POS), (1,), ((0.5, 0.9), (2.5, 2.2))),
    # -- gamma and beta functions
    Spec("gamma", sc.gamma, (a(0.6, 1.7, 3.2, -0.5, -1.6),), (0,), ((2.5,), (-0.5,))),
    Spec("gamma-jax", sc.gamma, (GAMMA,), (0,), jax="gamma"),
    Spec("gammaln", sc.gammaln, (a(0.6, 1.7, 3.2, 12.5),), (0,), ((2.5,), (0.3,)),
         jax="gammaln"),
    Spec("digamma", sc.digamma, (GAMMA,), (0,), ((2.5,), (0.3,)), jax="digamma"),
    Spec("digamma-negative", sc.psi, (a(-0.5, -1.3, -2.7),), (0,), ((-0.5,),)),
    Spec("polygamma", sc.polygamma, (1, GAMMA), (1,), ((1, 2.5), (3, 0.7)), jax="polygamma"),
    Spec("polygamma-orders", sc.polygamma, (np.array([0, 1, 2, 3]), GAMMA), (1,),
         jax="polygamma"),
    Spec("polygamma-broadcast", sc.polygamma, (np.array([[0], [2]]), GAMMA), (1,),
         jax="polygamma"),
    Spec("rgamma", sc.rgamma, (a(0.7, 2.4, -0.5, -1.3),), (0,), ((1.5,), (-0.5,))),
    Spec("rgamma-poles", sc.rgamma, (a(0.0, -1.0, -2.0, -3.0),), (0,),
         ((0.0,), (-1.0,), (-2.0,))),
    Spec("beta", sc.beta, (a(0.6, 1.7, 3.2), a(1.1, 0.8, 2.4)), (0, 1), ((2.5, 0.7),),
         jax="beta"),
    Spec("betaln", sc.betaln, (a(0.6, 1.7, 3.2), a(1.1, 0.8, 2.4)), (0, 1), ((2.5, 0.7),),
         jax="betaln"),
    Spec("gammainc", sc.gammainc, (a(0.5, 1.0, 2.5, 7.0), a(0.3, 1.2, 2.5, 6.0)), (1,),
         ((2.5, 1.1), (0.5, 0.2), (40.0, 38.0)), jax="gammainc"),
    Spec("gammaincc", sc.gammaincc, (a(0.5, 1.0, 2.5, 7.0), a(0.3, 1.2, 2.5, 6.0)), (1,),
         ((2.5, 1.1), (0.5, 0.2)), jax="gammaincc"),
    Spec("betainc", sc.betainc, (a(0.5, 2.0, 3.5, 1.0), a(1.5, 0.7, 2.0, 1.0), UNIT), (2,),
         ((2.0, 3.0, 0.4),), jax="betainc"),
    Spec("betaincc", sc.betaincc, (a(0.5, 2.0, 3.5, 1.0), a(1.5, 0.7, 2.0, 1.0), UNIT),
         (2,), ((2.0, 3.0, 0.4),)),
    Spec("stdtr", sc.stdtr, (a(1.5, 3.0, 9.0, 30.0), MID), (1,), ((4.0, 0.7), (1.0, -1.5))),
    Spec("multigammaln", sc.multigammaln, (a(2.1, 3.0, 4.5), 3), (0,), ((2.5, 2),),
         jax="multigammaln"),
    Spec("zeta", sc.zeta, (3.0, GAMMA), (1,), ((2.0, 1.5),), jax="zeta"),
    # -- error functions, logistic functions, logarithms
    Spec("erf", sc.erf, (MID,), (0,), ((0.3,), (-1.2,)), jax="erf"),
    Spec("erfc", sc.erfc, (MID,), (0,), ((0.3,), (-1.2,)), jax="erfc"),
    Spec("erfcx", sc.erfcx, (MID,), (0,), ((0.3,),), jax="erfcx"),
    Spec("erfinv", sc.erfinv, (a(-0.8, -0.1, 0.4, 0.9),), (0,), ((0.3,), (-0.7,)),
         jax="erfinv"),
    Spec("erfcinv", sc.erfcinv, (a(0.1, 0.7, 1.2, 1.9),), (0,), ((0.3,), (1.5,))),
    Spec("ndtr", sc.ndtr, (MID,), (0,), ((0.3,),), jax="ndtr"),
    Spec("log_ndtr", sc.log_ndtr, (a(-6.0, -0.4, 0.6, 3.0),), (0,), ((-3.0,),),
         jax="log_ndtr"),
    Spec("expit", sc.expit, (MID,), (0,), ((0.3,), (-1.2,)), jax="expit"),
    Spec("log_expit", sc.log_expit, (MID,), (0,), ((0.3,),)),
    Spec("logit", sc.logit, (UNIT,), (0,), ((0.3,), (0.9,)), jax="logit"),
    Spec("entr", sc.entr, (UNIT,), (0,), ((0.3,),), jax="entr"),
    Spec("xlogy", sc.xlogy, (MID, a(0.3, 1.5, 2.0, 0.7)), (0, 1), ((0.3, 1.7),),
         jax="xlogy"),
    Spec("xlog1py", sc.xlog1py, (MID, a(-0.3, 1.5, 2.0, 0.7)), (0, 1), ((0.3, 0.7),),
         jax="xlog1py"),
    Spec("logsumexp", sc.logsumexp, (np.outer(MID, a(1.0, -0.5, 2.0)),), (0,),
         jax="logsumexp"),
    Spec("logsumexp-b", sc.logsumexp, (np.outer(MID, a(1.0, -0.5, 2.0)), 1, a(0.5, 1.5, 0.8)),
         (0, 2), jax="logsumexp"),
    Spec("softmax", sc.softmax, (np.outer(MID, a(1.0, -0.5, 2.0)),), (0,),
         kwargs=dict(axis=1), jax="softmax"),
    Spec("log_softmax", sc.log_softmax, (np.outer(MID, a(1.0, -0.5, 2.0)),), (0,),
         kwargs=dict(axis=0), jax="log_softmax"),
]

# every function the brief of issue 26 names, and each argument differentiated: covered
_NAMED = ("j0 j1 jn jv y0 y1 yn yv i0 i0e i1 i1e iv ive kv kve k0 k1 k0e k1e gamma gammaln "
          "digamma polygamma beta betaln rgamma gammainc gammaincc erf erfc erfinv erfcinv "
          "logsumexp xlogy xlog1py expit logit softmax log_softmax").split()


def test_every_named_function_has_a_spec():
    covered = {spec.id.split("-")[0] for spec in SPECS}
    assert set(_NAMED) <= covered, sorted(set(_NAMED) - covered)


def params(select=lambda spec: True, quick_every=1):
    """(spec, k) for every differentiated argument of the specs ``select`` takes; with
    ``quick_every=n`` every n-th runs in the quick subset, the others are marked slow."""
    chosen = [(spec, k) for spec in SPECS if select(spec) for k in spec.diff]
    return [pytest.param(spec, k, id=f"{spec.id}-{k}",
                         marks=() if n % quick_every == 0 else pytest.mark.slow)
            for n, (spec, k) in enumerate(chosen)]


def skip_overridden(spec):
    """Another test module may have given the function a rule of its own (as a user may:
    tests/test_functions.py's custom_vjp of gammaln)."""
    if catalogue.overridden(spec.fn):
        pytest.skip("a rule registered by other code replaces astad's in this process")


def weights(spec):
    result = spec.fn(*spec.args, **spec.kwargs)
    return np.random.default_rng(len(spec.id)).uniform(0.5, 1.5, np.shape(result))


def objective(spec, w):
    """sum(w * fn(*args)): a float of every differentiated argument."""
    fn, kwargs = spec.fn, spec.kwargs

    def f(*args):
        return np.sum(w * fn(*args, **kwargs))
    return f


def replaced(args, k, value):
    return tuple(value if j == k else x for j, x in enumerate(args))


def finite_gradient(f, args, k, h=H):
    """The gradient of the float ``f`` in argument ``k`` (a float or an array) by central
    differences."""
    x = args[k]
    if np.ndim(x) == 0:
        return (f(*replaced(args, k, x + h)) - f(*replaced(args, k, x - h))) / (2 * h)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        grad[i] = (f(*replaced(args, k, x + step)) - f(*replaced(args, k, x - step))) / (2 * h)
    return grad


def assert_close(got, expected, rtol=1e-6, what=""):
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


# -- first order ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, k", params())
def test_gradient_against_finite_differences(spec, k):
    skip_overridden(spec)
    f = objective(spec, weights(spec))
    grad = astad.grad(f, argnums=k)(*spec.args)
    assert np.shape(grad) == np.shape(spec.args[k])
    assert_close(grad, finite_gradient(f, spec.args, k), what=spec.id)


@pytest.mark.parametrize("spec, k", params(lambda spec: spec.floats))
def test_gradient_of_python_floats(spec, k):
    skip_overridden(spec)
    fn = spec.fn

    def f(*args):
        return fn(*args)
    for point in spec.floats:
        grad = astad.grad(f, argnums=k)(*point)
        assert_close(grad, finite_gradient(f, point, k), what=f"{spec.id} at {point}")


@pytest.mark.parametrize("spec, k", params())
def test_forward_mode_against_the_gradient(spec, k):
    skip_overridden(spec)
    f = objective(spec, weights(spec))
    args = spec.args
    grad = astad.grad(f, argnums=k)(*args)
    t = np.random.default_rng(k).standard_normal(np.shape(args[k]))
    value, tangent = astad.jvp(lambda x: f(*replaced(args, k, x)), (args[k],), (t,))
    assert value == pytest.approx(f(*args), rel=1e-14)
    assert_close(tangent, np.sum(grad * t), rtol=1e-10, what=spec.id)
    for point in spec.floats:  # and on floats: the tangent of a float is the derivative
        def g(x, point=point):
            return spec.fn(*replaced(point, k, x))
        _, tangent = astad.jvp(g, (point[k],), (1.0,))
        assert_close(tangent, astad.grad(g)(point[k]), rtol=1e-10, what=f"{spec.id} {point}")


# -- second order ------------------------------------------------------------------------------
def finite_hessian(grad_of, x, h=H2):
    """Columns of the Jacobian of the gradient ``grad_of(x)`` by central differences."""
    if np.ndim(x) == 0:
        return (grad_of(x + h) - grad_of(x - h)) / (2 * h)
    columns = []
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        columns.append((grad_of(x + step) - grad_of(x - step)) / (2 * h))
    return np.stack(columns, axis=-1).reshape(x.shape + x.shape)


@pytest.mark.parametrize("spec, k", params())
def test_second_order(spec, k):
    skip_overridden(spec)
    f = objective(spec, weights(spec))
    args, x = spec.args, spec.args[k]
    grad = astad.grad(f, argnums=k)

    def grad_of(y):
        return grad(*replaced(args, k, y))
    expected = finite_hessian(grad_of, x)
    hessian = astad.hessian(f, argnums=k)(*args)
    assert_close(hessian, expected, rtol=1e-5, what=f"{spec.id}: hessian")
    # forward over reverse: a Hessian-vector product
    t = np.random.default_rng(7).standard_normal(np.shape(x))
    _, hvp = astad.jvp(grad_of, (x,), (t,))
    assert_close(hvp, np.tensordot(expected, t, axes=np.ndim(x)), rtol=1e-5,
                 what=f"{spec.id}: jvp of grad")


@pytest.mark.parametrize("spec, k", params(lambda spec: spec.floats))
def test_second_order_of_python_floats(spec, k):
    skip_overridden(spec)
    for point in spec.floats:
        def g(x, point=point):
            return spec.fn(*replaced(point, k, x))
        second = astad.grad(astad.grad(g))(point[k])
        assert_close(second, finite_hessian(astad.grad(g), point[k]), rtol=1e-5,
                     what=f"{spec.id} at {point}")


# -- against JAX -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jax_special():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.special
    return jax, jax.scipy.special


@pytest.mark.parametrize("spec, k", params(lambda spec: spec.jax, quick_every=12))
def test_against_jax(spec, k, jax_special):
    skip_overridden(spec)
    jax, special = jax_special
    if not hasattr(special, spec.jax):
        pytest.skip(f"this JAX has no jax.scipy.special.{spec.jax}")
    w = weights(spec)
    jfn = getattr(special, spec.jax)

    def jf(*args):
        return jax.numpy.sum(w * jfn(*args, **spec.kwargs))
    expected = np.asarray(jax.grad(jf, argnums=k)(*spec.args))
    got = astad.grad(objective(spec, w), argnums=k)(*spec.args)
    assert_close(got, expected, rtol=1e-8, what=f"{spec.id} vs JAX")
    expected = np.asarray(jax.hessian(jf, argnums=k)(*spec.args))
    got = astad.hessian(objective(spec, w), argnums=k)(*spec.args)
    assert_close(got, expected, rtol=1e-7, what=f"{spec.id}: hessian vs JAX")


# -- what has no derivative ------------------------------------------------------------------
REFUSED = [  # (id, call in (p, x) differentiated in p, the message)
    ("jv", lambda p, x: sc.jv(p, x), "scipy.special.jv is not differentiable in its order v "
     "(argument 0)"),
    ("jn", lambda p, x: sc.jn(p, x), "scipy.special.jv is not differentiable in its order v "
     "(argument 0)"),
    ("yv", lambda p, x: sc.yv(p, x), "scipy.special.yv is not differentiable in its order v "
     "(argument 0)"),
    ("yn", lambda p, x: sc.yn(p, x), "scipy.special.yn is not differentiable in its order n "
     "(argument 0)"),
    ("iv", lambda p, x: sc.iv(p, x), "scipy.special.iv is not differentiable in its order v "
     "(argument 0)"),
    ("ive", lambda p, x: sc.ive(p, x), "scipy.special.ive is not differentiable in its order "
     "v (argument 0)"),
    ("kv", lambda p, x: sc.kv(p, x), "scipy.special.kv is not differentiable in its order v "
     "(argument 0)"),
    ("kve", lambda p, x: sc.kve(p, x), "scipy.special.kve is not differentiable in its order "
     "v (argument 0)"),
    ("kn", lambda p, x: sc.kn(p, x), "scipy.special.kn is not differentiable in its order n "
     "(argument 0)"),
    ("gammainc", lambda p, x: sc.gammainc(p, x), "scipy.special.gammainc is not "
     "differentiable in its shape a (argument 0)"),
    ("gammaincc", lambda p, x: sc.gammaincc(p, x), "scipy.special.gammaincc is not "
     "differentiable in its shape a (argument 0)"),
    ("betainc-a", lambda p, x: sc.betainc(p, 2.0, x / 4.0), "scipy.special.betainc is not "
     "differentiable in its parameter a (argument 0)"),
    ("betainc-b", lambda p, x: sc.betainc(2.0, p, x / 4.0), "scipy.special.betainc is not "
     "differentiable in its parameter b (argument 1)"),
    ("betaincc-b", lambda p, x: sc.betaincc(2.0, p, x / 4.0), "scipy.special.betaincc is "
     "not differentiable in its parameter b (argument 1)"),
    ("stdtr", lambda p, x: sc.stdtr(p, x), "scipy.special.stdtr is not differentiable in "
     "its degrees of freedom df (argument 0)"),
    ("polygamma", lambda p, x: sc.polygamma(p, x), "scipy.special.polygamma is not "
     "differentiable in its order n (argument 0)"),
    ("multigammaln", lambda p, x: sc.multigammaln(x + 2.0, p if np.ndim(p) == 0 else p[1]),
     "scipy.special.multigammaln "
     "is not differentiable in its dimension d (argument 1)"),
    ("zeta", lambda p, x: sc.zeta(p + 1.0, x), "scipy.special.zeta is not differentiable in "
     "its exponent x (argument 0)"),
]


@pytest.mark.parametrize("call, message", [pytest.param(c, m, id=i) for i, c, m in REFUSED])
@pytest.mark.parametrize("mode", ["grad", "jvp", "float grad", "float jvp"])
def test_an_argument_with_no_derivative_is_refused_naming_it(call, message, mode):
    def f(p, x):
        return np.sum(call(p, x))
    p, x = (2.0, 1.5) if mode.startswith("float") else (a(1.0, 2.0), a(1.5, 2.5))
    with pytest.raises(astad.NotDifferentiableError, match=re.escape(message)):
        if mode.endswith("grad"):
            astad.grad(f, argnums=0)(p, x)
        else:
            astad.jvp(lambda q: f(q, x), (p,), (np.ones_like(p) if np.ndim(p) else 1.0,))


def test_a_constant_order_is_no_differentiated_argument():
    """The order given as an argument of the differentiated function, not differentiated
    (argnums), or computed from a constant: a plain value, as scipy takes it."""
    def f(v, x):
        return np.sum(sc.jv(v, x) * sc.kv(v + 1.0, x)) + sc.gammainc(v * 2.0, x[0])

    v, x = 1.5, a(0.7, 1.9, 3.3)
    grad = astad.grad(f, argnums=1)(v, x)
    assert_close(grad, finite_gradient(f, (v, x), 1), what="order as an argument")
    _, tangent = astad.jvp(lambda y: f(v, y), (x,), (np.ones(3),))
    assert_close(tangent, np.sum(grad), rtol=1e-10)


def test_a_rule_without_words_for_an_argument_names_it_by_its_derivatives():
    """The message for an argument with no derivative of a rule registered with no words
    for it: the function's name and the argument's, from the rule's derivatives."""
    def scaled(scale, x):
        return scale * x

    astad.register_vjp(scaled, None, lambda g, r, scale, x: g * scale)

    def f(s, x):
        return np.sum(scaled(s, x))
    with pytest.raises(astad.NotDifferentiableError,
                       match=re.escape("scaled is not differentiable in its argument scale "
                                       "(argument 0)")):
        astad.grad(f)(a(1.0, 2.0), a(3.0, 4.0))


def test_gammasgn_has_no_derivative():
    def f(x):
        return np.sum(sc.gammasgn(x) * x * x)

    x = a(-2.5, -0.5, 1.5)
    np.testing.assert_allclose(astad.grad(f)(x), 2.0 * x * sc.gammasgn(x))


def test_polygamma_with_an_array_of_orders():
    """polygamma's order may be an array (broadcast against x); the rule once read it
    as one int."""
    n, x = np.array([[0], [1], [3]]), a(0.5, 1.5, 2.5, 4.0)

    def f(x):
        return np.sum(sc.polygamma(n, x))
    np.testing.assert_allclose(astad.grad(f)(x), np.sum(sc.polygamma(n + 1, x), axis=0),
                               rtol=1e-13)
