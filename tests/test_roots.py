"""scipy.optimize's root finders differentiated by the implicit function theorem (issue
26, item 3; astad/api/roots.py): the root's derivative in ``args`` against the closed
form and central differences, in both modes, as Jacobians; the refusals.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize as so

import astad


def cubic(x, c, k):
    return x ** 3 + k * x - c


def by_hand(c, k):
    """r^3 + k r = c: dr/dc = 1 / (3 r^2 + k), dr/dk = -r / (3 r^2 + k)."""
    r = so.brentq(cubic, -10.0, 10.0, args=(c, k), xtol=1e-15)
    return r, 1.0 / (3 * r * r + k), -r / (3 * r * r + k)


FINDERS = {
    "brentq": lambda c, k: so.brentq(cubic, -10.0, 10.0, args=(c, k), xtol=1e-15),
    "brenth": lambda c, k: so.brenth(cubic, -10.0, 10.0, args=(c, k), xtol=1e-15),
    "ridder": lambda c, k: so.ridder(cubic, -10.0, 10.0, args=(c, k), xtol=1e-15),
    "bisect": lambda c, k: so.bisect(cubic, -10.0, 10.0, args=(c, k), xtol=1e-15),
    "toms748": lambda c, k: so.toms748(cubic, -10.0, 10.0, args=(c, k), xtol=1e-15),
    "newton": lambda c, k: so.newton(cubic, 1.0, args=(c, k), tol=1e-15),
    "newton_fprime": lambda c, k: so.newton(cubic, 1.0, fprime=lambda x, c, k: 3 * x * x + k,
                                            args=(c, k), tol=1e-15),
}


@pytest.mark.parametrize("name", list(FINDERS))
def test_scalar_finders_by_hand(name):
    root = FINDERS[name]
    c, k = 2.5, 1.5
    r, dr_dc, dr_dk = by_hand(c, k)
    assert math.isclose(root(c, k), r, rel_tol=1e-12)
    got = astad.grad(root, argnums=(0, 1))(c, k)
    assert math.isclose(got[0], dr_dc, rel_tol=1e-9)
    assert math.isclose(got[1], dr_dk, rel_tol=1e-9)
    value, tangent = astad.jvp(root, (c, k), (0.5, -2.0))
    assert math.isclose(tangent, 0.5 * dr_dc - 2.0 * dr_dk, rel_tol=1e-9)


def test_a_root_inside_a_larger_computation():
    def loss(c):
        r = so.brentq(cubic, -10.0, 10.0, args=(c, 1.0), xtol=1e-15)
        return math.sin(r) * c
    h = 1e-6
    assert math.isclose(astad.grad(loss)(1.3), (loss(1.3 + h) - loss(1.3 - h)) / (2 * h),
                        rel_tol=1e-7)


def test_newton_on_an_array_of_equations():
    """newton with an array start solves independent equations, element by element."""
    cs = np.array([0.5, 2.0, 7.0])

    def roots(cs):
        return so.newton(cubic, np.ones(3), args=(cs, 2.0), tol=1e-14)
    r = roots(cs)
    np.testing.assert_allclose(astad.jacrev(roots)(cs), np.diag(1 / (3 * r * r + 2.0)),
                               rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(astad.jacfwd(roots)(cs), np.diag(1 / (3 * r * r + 2.0)),
                               rtol=1e-9, atol=1e-14)


def system(x, a):
    return np.array([x[0] ** 2 + x[1] - a[0], x[0] - x[1] ** 3 - a[1], x[2] - a[0] * x[1]])


def solution(a):
    return so.fsolve(system, np.ones(3), args=(a,), xtol=1e-14)


def test_fsolve_jacobian_by_hand_and_both_ways():
    a = np.array([3.0, 0.5])
    x = solution(a)
    # F(x, a) = 0: dx/da = -F_x^-1 F_a
    f_x = np.array([[2 * x[0], 1.0, 0.0], [1.0, -3 * x[1] ** 2, 0.0], [0.0, -a[0], 1.0]])
    f_a = np.array([[-1.0, 0.0], [0.0, -1.0], [-x[1], 0.0]])
    expected = -np.linalg.solve(f_x, f_a)
    np.testing.assert_allclose(astad.jacrev(solution)(a), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(astad.jacfwd(solution)(a), expected, rtol=1e-9, atol=1e-12)

    def loss(a):
        return np.sum(solution(a) ** 2)
    h = 1e-6
    by_differences = [(loss(a + h * e) - loss(a - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(astad.grad(loss)(a), by_differences, rtol=1e-6)


def test_refusals():
    with pytest.raises(astad.NotDifferentiableError, match="full_output"):
        astad.grad(lambda c: so.brentq(cubic, -10.0, 10.0, args=(c, 1.0),
                                       full_output=True)[0])(2.0)
    with pytest.raises(astad.NotDifferentiableError, match="once"):
        astad.grad(astad.grad(FINDERS["brentq"]))(2.0, 1.0)


def test_a_parameter_in_the_closure_is_refused_naming_args():
    def root(c):
        return so.brentq(lambda x: x ** 3 + x - c, -10.0, 10.0)
    with pytest.raises(astad.NotDifferentiableError, match=r"scipy\.optimize\.brentq .*args="):
        astad.grad(root)(2.0)


# -- root_scalar and root: result objects whose root is differentiated ----------------------
def cubic_in_a(x, a):
    return x ** 3 + x - a


@pytest.mark.parametrize("method, keywords", [
    ("brentq", {"bracket": (0.0, 3.0)}), ("bisect", {"bracket": (0.0, 3.0)}),
    ("newton", {"x0": 1.0, "fprime": lambda x, a: 3 * x ** 2 + 1}),
    ("secant", {"x0": 1.0, "x1": 1.5}), ("halley", {"x0": 1.0, "fprime": lambda x, a:
                                                   3 * x ** 2 + 1, "fprime2": lambda x, a: 6 * x})])
def test_root_scalar_by_every_method(method, keywords):
    def f(a):
        found = so.root_scalar(cubic_in_a, args=(a,), method=method, xtol=1e-14,
                                           **keywords)
        return found.root ** 2 + found.iterations * 0.0
    a = 2.5
    r = so.brentq(cubic_in_a, 0.0, 3.0, args=(a,), xtol=1e-14)
    expected = 2 * r / (3 * r ** 2 + 1)  # dr/da = 1 / f_x
    assert astad.grad(f)(a) == pytest.approx(expected, rel=1e-9)
    assert astad.jvp(f, (a,), (2.0,))[1] == pytest.approx(2 * expected, rel=1e-9)


def two_equations(x, a, b):
    return np.array([x[0] ** 2 + x[1] - a, x[0] - x[1] ** 3 - b])


@pytest.mark.parametrize("method", ["hybr", "lm", "krylov"])
def test_root_of_a_system(method):
    def solution(a, b):
        return so.root(two_equations, np.array([1.0, 1.0]), args=(a, b), method=method,
                                   tol=1e-13).x

    def f(a, b):
        found = so.root(two_equations, np.array([1.0, 1.0]), args=(a, b),
                                    method=method, tol=1e-13)
        return np.sum(found.x * np.array([1.0, 2.0])) + np.sum(found.fun)
    a, b, h = 2.0, 0.5, 1e-6
    ga, gb = astad.grad(f, argnums=(0, 1))(a, b)
    assert ga == pytest.approx((f(a + h, b) - f(a - h, b)) / (2 * h), rel=1e-5)
    assert gb == pytest.approx((f(a, b + h) - f(a, b - h)) / (2 * h), rel=1e-5)
    rows = astad.jacrev(solution, argnums=(0, 1))(a, b)
    columns = astad.jacfwd(solution, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(rows[0], columns[0], rtol=1e-9)
    np.testing.assert_allclose(rows[1], columns[1], rtol=1e-9)


def test_root_finders_given_their_derivative_in_the_function_are_refused():
    def both(x, a):
        return x ** 3 + x - a, 3 * x ** 2 + 1

    with pytest.raises(astad.NotDifferentiableError, match="fprime=True"):
        astad.grad(lambda a: so.root_scalar(both, args=(a,), x0=1.0,
                                                        fprime=True).root)(2.5)
    with pytest.raises(astad.NotDifferentiableError, match="jac=True"):
        astad.grad(lambda a: so.root(
            lambda x, a: (x ** 3 - a, np.diag(3 * x ** 2)), np.ones(1), args=(a,),
            jac=True).x[0])(2.5)
