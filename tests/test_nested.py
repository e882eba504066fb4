"""Derivatives that compose: every dual knows its differentiation (its level).

A value differentiated by an enclosing call is, inside an inner call, a constant of the
inner level whose use the outer level still records (Siskind & Pearlmutter's perturbation
tags), whatever route it takes into the inner call; a dual of a call that has ended is an
error where it is used. Expected values are derived by hand, or central finite
differences of the plain Python function.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import astad
from astad.runtime import duals
from oracles import central_fd


@astad.reverse_diff(argnums=1)
def apply_times_x(fn, x):
    return fn(x) * x


@astad.reverse_diff(argnums=1)
def cubic_plus(fn, x):
    return x * x * x + fn(x)


# -- the example, by every route a value can take ----------------------------------
class Scale:
    def __init__(self, c):
        self.c = c

    def __call__(self, y):
        return self.c * y


class Holder:
    pass


GLOBAL = {}


def times_global(y):
    return GLOBAL["c"] * y


def scale(c, y):
    return c * y


def via_lambda(c):
    return apply_times_x.grad(lambda y: c * y, 3.0)


def via_partial(c):
    return apply_times_x.grad(functools.partial(scale, c), 3.0)


def via_callable_object(c):
    return apply_times_x.grad(Scale(c), 3.0)


def via_global_dict(c):
    GLOBAL["c"] = c
    try:
        return apply_times_x.grad(times_global, 3.0)
    finally:
        GLOBAL.clear()


def via_plain_object(c):
    holder = Holder()
    holder.c = c
    return apply_times_x.grad(lambda y: holder.c * y, 3.0)


def via_default_argument(c):
    def fn(y, k=c):
        return k * y
    return apply_times_x.grad(fn, 3.0)


def via_nested_def(c):
    def fn(y):
        return c * y
    return apply_times_x.grad(fn, 3.0)


def via_product(c):
    k = c * 2.0  # a value computed from c, not c itself
    return apply_times_x.grad(lambda y: k * y, 3.0) / 2.0


ROUTES = [via_lambda, via_partial, via_callable_object, via_global_dict, via_plain_object,
          via_default_argument, via_nested_def, via_product]


@pytest.mark.parametrize("route", ROUTES, ids=[r.__name__ for r in ROUTES])
def test_an_outer_value_reaching_an_inner_gradient_by_any_route(route):
    # d/dx (c x * x) at x = 3 is 6c: its derivative in c is 6, at any c
    outer = astad.reverse_diff(route)
    value, grad = outer.value_and_grad(2.0)
    assert value == pytest.approx(12.0) and grad == pytest.approx(6.0)
    assert outer.grad(-0.5) == pytest.approx(6.0)
    assert not duals.running.stack


def inner_value_and_outer_derivative(c):
    value, slope = cubic_plus.value_and_grad(lambda y: c * y * y, 2.0)
    return value + slope  # (8 + 4c) + (12 + 4c)


def test_the_inner_value_and_gradient_under_an_outer_call():
    outer = astad.reverse_diff(inner_value_and_outer_derivative)
    value, grad = outer.value_and_grad(0.5)
    assert value == pytest.approx(8.0 + 2.0 + 12.0 + 2.0)
    assert grad == pytest.approx(8.0)


def confusion(x):
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1, at any x (the classic perturbation
    # confusion: an untagged implementation gives 2)
    inner = astad.reverse_diff(lambda y: x + y)
    return x * inner.grad(1.0)


@pytest.mark.parametrize("x", [pytest.param(0.0, marks=pytest.mark.slow), 1.0,
                               pytest.param(-3.5, marks=pytest.mark.slow)])
def test_perturbation_confusion(x):
    assert astad.reverse_diff(confusion).grad(x) == 1.0


# -- higher derivatives ---------------------------------------------------------------------
def sin_exp(x):
    return math.sin(math.exp(x) * x)


D1 = astad.reverse_diff(sin_exp)


def first_derivative(x):
    return D1.grad(x)


D2 = astad.reverse_diff(first_derivative)


def second_derivative(x):
    return D2.grad(x)


def test_second_and_third_derivatives_of_a_composition():
    d1, d2, d3 = D1, D2, astad.reverse_diff(second_derivative)
    x = 0.4
    # by hand: u = x e^x, u' = (1 + x) e^x, u'' = (2 + x) e^x, u''' = (3 + x) e^x
    e = math.exp(x)
    u, u1, u2, u3 = x * e, (1 + x) * e, (2 + x) * e, (3 + x) * e
    first = math.cos(u) * u1
    second = -math.sin(u) * u1 ** 2 + math.cos(u) * u2
    third = -math.cos(u) * u1 ** 3 - 3 * math.sin(u) * u1 * u2 + math.cos(u) * u3
    assert d1.grad(x) == pytest.approx(first, rel=1e-13)
    assert d2.grad(x) == pytest.approx(second, rel=1e-12)
    assert d3.grad(x) == pytest.approx(third, rel=1e-12)


def rosenbrock(x, y):
    return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2


def test_gradient_of_a_gradient_component_matches_the_hand_derived_hessian_row():
    r = astad.reverse_diff(rosenbrock)

    def dx(x, y):
        return r.grad(x, y)[0]
    x, y = 0.7, 1.3
    # d/dx (-2(1 - x) - 400 x (y - x^2)) = 2 - 400 y + 1200 x^2; d/dy = -400 x
    assert astad.reverse_diff(dx).grad(x, y) == pytest.approx(
        (2.0 - 400.0 * y + 1200.0 * x * x, -400.0 * x), rel=1e-13)


def test_second_derivative_through_arrays_matches_finite_differences():
    f = astad.reverse_diff(lambda x: np.sum(np.sin(x) * x))

    def gradient_norm(x):
        return np.sum(f.grad(x) ** 2)

    def plain(x):
        return np.sum((np.cos(x) * x + np.sin(x)) ** 2)
    x = np.array([0.3, 0.7, 1.1])
    got = astad.reverse_diff(gradient_norm).grad(x)
    expected = [central_fd(lambda *v: plain(np.array(v)), tuple(x), k) for k in range(3)]
    np.testing.assert_allclose(got, expected, rtol=1e-7)


# -- a dual of a finished call ------------------------------------------------------------
KEPT: list = []


def keeps(x):
    KEPT.append(iter([x]))  # an iterator: astad cannot look inside it to clean it
    return x * 2.0


def uses_kept(x):
    return x * next(KEPT[-1])


def test_a_dual_kept_from_a_finished_call_raises_where_it_is_used():
    KEPT.clear()
    astad.reverse_diff(keeps).grad(1.0)
    with pytest.raises(duals.StaleDualError, match="has returned") as info:
        astad.reverse_diff(uses_kept).grad(2.0)
    assert info.value.filename == __file__
    KEPT.clear()


def keeps_array(x):
    KEPT.append(iter([x]))
    return np.sum(x)


def uses_kept_array(x):
    kept = next(KEPT[-1])
    return np.sum(np.sin(kept) * x + np.multiply(x, kept))  # (ufuncs called at once)


@pytest.mark.parametrize("use", ["np.sin", "operator"])
def test_a_kept_array_dual_raises_in_a_ufunc_as_anywhere(use):
    """A numpy ufunc on duals of one tape calls its rule at once (array_dual.ufunc_at_once):
    only for a tape that is running; an array kept from a finished call still raises."""
    KEPT.clear()
    astad.reverse_diff(keeps_array).grad(np.array([1.0, 2.0]))
    f = uses_kept_array if use == "np.sin" else (lambda x: np.sum(x * next(KEPT[-1])))
    with pytest.raises(duals.StaleDualError, match="has returned"):
        astad.reverse_diff(f).grad(np.array([2.0, 3.0]))
    KEPT.clear()


def ufuncs_of_two_levels(c, x):
    return np.sum(np.sin(x * c) * np.exp(x))


def test_ufuncs_mixing_two_levels_take_the_inner_level_and_the_outer_sees_it():
    """d/dc of (d/dx sum(sin(c x) exp(x))) by hand: the inner gradient's ufuncs hold a
    dual of the outer call (no single tape: the whole dispatch runs)."""
    x = np.array([0.3, -0.7, 1.1])

    def inner_gradient_sum(c):
        return np.sum(astad.grad(ufuncs_of_two_levels, argnums=1)(c, x))

    c = 0.8
    # d/dx = c cos(cx) e^x + sin(cx) e^x; d/dc of that = cos(cx) e^x - c x sin(cx) e^x
    #                                                    + x cos(cx) e^x
    expected = np.sum(np.exp(x) * (np.cos(c * x) * (1.0 + x) - c * x * np.sin(c * x)))
    assert astad.grad(inner_gradient_sum)(c) == pytest.approx(expected, rel=1e-12)
    assert astad.jvp(inner_gradient_sum, (c,), (1.0,))[1] == pytest.approx(expected,
                                                                           rel=1e-12)


def remembers(x, seen=[]):  # noqa: B006 (a mutable default keeping a value on purpose)
    seen.append(x)
    return x * seen[0]


def test_a_value_kept_in_a_mutable_default_is_the_primal_on_the_next_call():
    """What a call leaves in a mutable default is its plain value, as the original leaves
    it: the next call computes with that constant (tests/test_leftovers.py: every place)."""
    remembers.__defaults__[0].clear()
    f = astad.reverse_diff(remembers, argnums=0)
    assert f.grad(3.0) == 6.0  # x * x within the first call
    assert remembers.__defaults__[0] == [3.0] and type(remembers.__defaults__[0][0]) is float
    assert f.grad(4.0) == 3.0  # x * 3.0: the kept value is a constant now
    assert remembers(5.0) == 15.0  # the plain function runs on what the calls left


def test_every_name_in_the_rules_text_has_a_general_form():
    """The general rules (rules/scalar_general.py) compute primal and partials from the same text
    as the fast paths, on duals: every function the text calls must work on them."""
    import re

    from astad.registry import formulas
    from astad.rules.scalar_general import general_namespace
    namespace = general_namespace()
    for name, primal, partials in formulas():
        for expression in (primal, *partials):
            for word in re.findall(r"(?<![.\w])[A-Za-z_]\w*(?=\()", expression):
                assert word in namespace or word in ("abs", "float", "round"), (name, word)


# -- a cotangent an enclosing level recorded is never written into ---------------------
def scalar_times_array(a, b):  # a^2 b: d/da = 2ab, d2/dadb = 2a
    s = np.array([a])
    return (a * (s * b))[0]


def scalar_times_array_twice(a, b):  # a (a b t + a b t) = 2 a^2 b: d2/dadb = 4a
    t = np.array([1.0, 1.0])
    return np.sum(a * (a * t * b + a * b * t)) / 2.0


@pytest.mark.parametrize("f, factor", [(scalar_times_array, 2.0),
                                       (scalar_times_array_twice, 4.0)])
@pytest.mark.parametrize("a", [0.7, 2.0])
def test_a_gradient_of_a_gradient_through_a_scalar_times_an_array(f, factor, a):
    """The element-wise backward step reused the cotangent's buffer for its last operand
    after using it with a partial of an enclosing level (``g * partial`` records ``g``
    there), so the enclosing level differentiated the changed buffer: grad(grad) of
    a * (s * b) gave 3a for 2a, silently."""
    b = 1.3
    got = astad.grad(lambda bb: astad.grad(lambda aa: f(aa, bb))(a))(b)
    assert got == pytest.approx(factor * a, rel=1e-14)
    got = astad.grad(lambda aa: astad.grad(lambda bb: f(aa, bb))(b))(a)
    assert got == pytest.approx(factor * a, rel=1e-14)


def test_four_levels_forward_inside_reverse_inside_reverse():
    """grad(grad(H, 0), 1) with H(a, b) = jacfwd(u -> jvp(w -> (a w)^3)(u))(b) = 6 a^3 b:
    d2H/da db = 18 a^2, by every route (jacfwd's tangents are arrays, jvp's floats)."""
    def inner(a):
        return lambda u: astad.jvp(lambda w: (a * w) ** 3, (u,), (1.0,))[1]
    routes = {"jacfwd": lambda a, b: astad.jacfwd(inner(a))(b),
              "jacrev": lambda a, b: astad.jacrev(inner(a))(b),
              "jvp": lambda a, b: astad.jvp(inner(a), (b,), (1.0,))[1]}
    x, y = 0.7, 1.3
    for name, h in routes.items():
        got = astad.grad(lambda bb, h=h: astad.grad(lambda aa: h(aa, bb))(x))(y)
        assert got == pytest.approx(18.0 * x * x, rel=1e-13), name


# F(x, y) = d2/du2 g(x, u) at u = y, by astad.hessian; its mixed partial d2F/dxdy by hand
HESSIANS_INSIDE = {
    "sin(x u)": (lambda x, u: math.sin(x * u),
                 lambda x, y: -3 * x * x * math.cos(x * y) + x ** 3 * y * math.sin(x * y)),
    "x / (1 + u^2)": (lambda x, u: x / (1 + u * u),
                      lambda x, y: (24 * y - 24 * y ** 3) / (1 + y * y) ** 4),
}


@pytest.mark.parametrize("name", list(HESSIANS_INSIDE))
def test_a_hessian_inside_a_gradient_of_a_gradient(name):
    """Four levels: forward over reverse inside two reverse levels, in both orders of
    the outer gradients, and by forward mode outside."""
    g, mixed = HESSIANS_INSIDE[name]

    def F(x, y):
        return astad.hessian(lambda u: g(x, u))(y)

    x, y = 0.7, 1.3
    expected = mixed(x, y)
    assert astad.grad(astad.grad(F, 0), 1)(x, y) == pytest.approx(expected, rel=1e-10)
    assert astad.grad(astad.grad(F, 1), 0)(x, y) == pytest.approx(expected, rel=1e-10)
    assert astad.jvp(lambda b: astad.grad(F, 0)(x, b), (y,), (1.0,))[1] == \
        pytest.approx(expected, rel=1e-10)
    assert astad.hessian(F, argnums=(0, 1))(x, y)[0][1] == pytest.approx(expected, rel=1e-10)
