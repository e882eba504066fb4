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
