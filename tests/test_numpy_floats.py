"""numpy's element-wise functions of floats on the code specialised for floats
(rules/numpy_floats.py): ``np.exp(x[i])`` in a loop is written as ``math.exp`` is, one
entry per call, and agrees with the general path (numpy's array rules), with finite
differences, with forward mode and with the Hessian, for every function the table has."""
import linecache
import math
import warnings

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen
from astad.registry import RECORDS, float_rules

# (name, a point inside each function's domain for the arguments of the loop below)
_UNARY = sorted(name[len("numpy_"):] for name, _, partials in float_rules()
                if len(partials) == 1)
_BINARY = sorted(name[len("numpy_"):] for name, _, partials in float_rules()
                 if len(partials) == 2)
_DOMAIN = {"arccosh": (1.2, 2.5), "arcsin": (-0.8, 0.8), "arccos": (-0.8, 0.8),
           "arctanh": (-0.8, 0.8), "log": (0.2, 2.0), "log2": (0.2, 2.0),
           "log10": (0.2, 2.0), "sqrt": (0.2, 2.0), "cbrt": (0.2, 2.0),
           "reciprocal": (0.5, 2.0), "log1p": (-0.5, 2.0)}


def _program(name: str, arity: int):
    """``name``'s function in a loop over a float array, with a float argument too, as a
    user writes it (its source in linecache: astad reads it)."""
    call = f"np.{name}(x[i] * c)" if arity == 1 else f"np.{name}(x[i], c * x[i] - 0.3)"
    source = (f"def loop_{name}(x, c):\n"
              f"    s = 0.0\n"
              f"    for i in range(len(x)):\n"
              f"        s += {call} * x[i]\n"
              f"    return s\n")
    filename = f"<astad-test numpy float {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"np": np}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (our own source)
    return namespace[f"loop_{name}"]


def _point(name):
    low, high = _DOMAIN.get(name, (-1.5, 1.5))
    return np.linspace(low, high, 5) + 0.01, 1.0


def _finite_differences(f, x, c, h=1e-6):
    gx = np.array([(f(x + h * e, c) - f(x - h * e, c)) / (2 * h) for e in np.eye(len(x))])
    return gx, (f(x, c + h) - f(x, c - h)) / (2 * h)


@pytest.mark.parametrize("name, arity", [(n, 1) for n in _UNARY] + [(n, 2) for n in _BINARY])
def test_every_numpy_function_of_a_float_is_written_for_floats(name, arity):
    fn = _program(name, arity)
    x, c = _point(name)
    entry = codegen.build(fn)
    if RECORDS[getattr(np, name)].float_rule is not None:  # (a test's own rule takes it
        assert f"np.{name}(" in entry.specialised_source  # away): written inline, not boxed
        assert entry.tapeless(x, c) is not None           # and it runs
    f = astad.reverse_diff(fn)
    value, (gx, gc) = astad.value_and_grad(fn, argnums=(0, 1))(x, c)
    want_value, (wx, wc) = f.value_and_grad.__self__._value_and_grad_taped((x, c), {})
    assert value == want_value == fn(x, c)
    np.testing.assert_allclose(gx, wx, rtol=1e-13, atol=1e-15)
    assert gc == pytest.approx(wc, rel=1e-13, abs=1e-15)
    fx, fc = _finite_differences(fn, x, c)
    np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-6)
    assert gc == pytest.approx(fc, rel=1e-6, abs=1e-6)
    # forward mode, from the same formula
    tx, tc = np.linspace(0.3, -0.7, len(x)), 0.5
    _, dot = astad.jvp(fn, (x, c), (tx, tc))
    assert dot == pytest.approx(gx @ tx + gc * tc, rel=1e-12, abs=1e-13)


@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "arctan", "sqrt", "log1p"])
def test_second_derivatives_of_numpy_functions_of_floats(name):
    """The Hessian differentiates the code written for floats again (np.cos in sin's
    partial, numpy's division): against central differences of the gradient."""
    fn = _program(name, 1)
    x, c = _point(name)
    hessian = astad.hessian(fn, argnums=1)(x, c)
    grad = astad.grad(fn, argnums=1)
    h = 1e-5
    assert hessian == pytest.approx((grad(x, c + h) - grad(x, c - h)) / (2 * h), rel=1e-6)


def singular(x, c):
    s = 0.0
    for i in range(len(x)):
        s += np.log(x[i] * c) + np.sqrt(x[i])
    return s


def test_a_singular_point_gives_what_numpy_gives():
    """At x == 0 the partials divide by zero: numpy's inf, as the general path gives it,
    not Python's ZeroDivisionError (the arguments Python floats: no numpy scalar)."""
    x = [0.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, (gx, gc) = astad.value_and_grad(singular, argnums=(0, 1))(x, 1.0)
        f = astad.reverse_diff(singular)
        want_value, (wx, wc) = f.value_and_grad.__self__._value_and_grad_taped((x, 1.0), {})
    assert value == want_value == -math.inf
    assert gx == list(wx) and gx[0] == math.inf and gx[1] == 1.5
    assert codegen.build(singular).tapeless is not None


def user_sin(x):
    s = 0.0
    for i in range(len(x)):
        s += np.sin(x[i])
    return s


def test_a_rule_registered_for_a_numpy_function_replaces_its_formula():
    """A user's rule for np.sin is the one the code for floats follows (the formula is
    taken away, and the code built before is built again)."""
    x = np.array([0.1, 0.2])
    before = astad.grad(user_sin)(x)
    np.testing.assert_allclose(before, np.cos(x), rtol=1e-15)
    saved = RECORDS[np.sin]
    try:
        astad.register_elementwise(np.sin, lambda x, r: 2.0 * np.cos(x))  # (a wrong rule,
        np.testing.assert_allclose(astad.grad(user_sin)(x), 2.0 * np.cos(x))  # to see it)
    finally:
        RECORDS[np.sin] = saved
    np.testing.assert_allclose(astad.grad(user_sin)(x), np.cos(x), rtol=1e-15)
