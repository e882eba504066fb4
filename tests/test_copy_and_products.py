"""copy.copy and copy.deepcopy of differentiated values, numpy's products on every
combination of shapes numpy accepts, and ufuncs given out= by position (issue 26's small
ones): each against central differences, forward mode and second order."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

import astad


def _fd(f, args, k, h=1e-6):
    """Central differences of ``f`` in argument ``k`` (an array or a float)."""
    x = np.asarray(args[k], dtype=np.float64)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = h
        plus, minus = list(args), list(args)
        plus[k], minus[k] = x + e, x - e
        if x.ndim == 0:
            plus[k], minus[k] = float(plus[k]), float(minus[k])
        out[i] = (f(*plus) - f(*minus)) / (2 * h)
    return out


@dataclasses.dataclass
class Pair:
    a: float
    b: np.ndarray


COPIES = {
    "copy.copy of an array": lambda x: np.sum(copy.copy(x) * x),
    "copy.deepcopy of an array": lambda x: np.sum(copy.deepcopy(x) * np.sin(x)),
    "a write into copy.copy": lambda x: (lambda c: (c.__setitem__(0, 3.0 * x[1]), np.sum(c * x))
                                         [1])(copy.copy(x)),
    "copy.copy of a list": lambda x: sum(v * w for v, w in zip(copy.copy(list(x)), x)),
    "copy.deepcopy of a dict of arrays": lambda x: np.sum(
        copy.deepcopy({"u": x, "v": [x * 2.0, x[0]]})["v"][0] * x),
    "copy.deepcopy of a dataclass": lambda x: np.sum(
        (lambda p: p.b * p.a)(copy.deepcopy(Pair(x[0] * x[1], np.cos(x))))),
    "copy.deepcopy keeps one array met twice one": lambda x: (lambda d: (
        d[0].__setitem__(0, 5.0), np.sum(d[1] * x))[1])(copy.deepcopy([x * 1.0] * 2)),
}


@pytest.mark.parametrize("name", list(COPIES))
def test_copies_of_differentiated_values(name):
    f = COPIES[name]
    x = np.array([0.4, 1.3, -0.7])
    original = x.copy()
    value, gradient = astad.value_and_grad(f)(x)
    assert value == f(x.copy())
    np.testing.assert_allclose(gradient, _fd(f, (x,), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(x, original)
    t = np.array([1.0, -0.5, 0.25])
    assert astad.jvp(f, (x,), (t,))[1] == pytest.approx(gradient @ t, rel=1e-10)
    g = astad.grad(f)
    expected = (g(x + 1e-6 * t) - g(x - 1e-6 * t)) / 2e-6
    np.testing.assert_allclose(astad.jvp(g, (x,), (t,))[1], expected, rtol=1e-5, atol=1e-6)


def _shapes():
    """(function, a's shape, b's shape): every combination of 0- to 3-d operands numpy
    accepts for the product."""
    rng_shapes = [(), (4,), (3, 4), (2, 3, 4)]
    found = []
    for fn in (np.dot, np.matmul, np.inner, np.tensordot, np.outer, np.kron, np.vdot):
        for sa in rng_shapes:
            for sb in [(), (4,), (4, 2), (5, 4, 2), (3, 4), (2, 3, 4)]:
                try:
                    fn(np.ones(sa), np.ones(sb))
                except (ValueError, TypeError, RuntimeError, IndexError):
                    continue
                found.append((fn, sa, sb))
    return found


@pytest.mark.parametrize("fn, sa, sb", _shapes(),
                         ids=lambda v: getattr(v, "__name__", None) or str(v))
def test_products_on_every_shape_numpy_accepts(fn, sa, sb):
    rng = np.random.default_rng(len(sa) * 7 + len(sb))
    a, b = rng.normal(size=sa), rng.normal(size=sb)

    def f(a, b):
        return np.sum(np.sin(fn(a, b)))

    ga, gb = astad.grad(f, (0, 1))(a, b)
    np.testing.assert_allclose(ga, _fd(f, (a, b), 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gb, _fd(f, (a, b), 1), rtol=1e-6, atol=1e-7)
    ta, tb = rng.normal(size=sa), rng.normal(size=sb)
    tangent = astad.jvp(f, (a, b), (ta, tb))[1]
    assert tangent == pytest.approx(np.sum(ga * ta) + np.sum(gb * tb), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("call", [
    lambda a: np.arctan(a, np.empty_like(a)),
    lambda a: np.sin(a, out=np.empty_like(a)),
    lambda a: np.arctan2(a, 1.5, np.empty_like(a)),
    lambda a: np.multiply(a, a, np.empty_like(a)),
])
def test_a_ufunc_given_out_by_position_or_keyword(call):
    def f(a):
        return np.sum(call(a) * a)

    x = np.array([0.5, -1.2, 2.0])
    np.testing.assert_allclose(astad.grad(f)(x), _fd(f, (x,), 0), rtol=1e-6, atol=1e-8)
    assert astad.jvp(f, (x,), (np.ones(3),))[1] == pytest.approx(
        np.sum(_fd(f, (x,), 0)), rel=1e-6)
