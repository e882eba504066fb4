"""astad.fixed_point (issue 26, item 3; astad/api/implicit.py): the solution of
x = f(a)(x) differentiated by the implicit function theorem, in both modes, as Jacobians
and to second order, against hand-derived derivatives and central differences of the
converged solution; the loop differentiated instead gives the last iterate's derivative.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import astad

TIGHT = 1e-13


def newton_sqrt(a):
    return lambda x: 0.5 * (x + a / x)


def gap(x, y):
    return abs(x - y)


def root(a):
    return astad.fixed_point(newton_sqrt, a, 1.0, gap, TIGHT)


def test_value_and_derivatives_of_a_square_root():
    a = 2.0
    assert math.isclose(root(a), math.sqrt(a), rel_tol=1e-15)
    assert math.isclose(astad.grad(root)(a), 0.5 / math.sqrt(a), rel_tol=1e-12)
    value, tangent = astad.jvp(root, (a,), (3.0,))
    assert math.isclose(tangent, 1.5 / math.sqrt(a), rel_tol=1e-12)
    assert math.isclose(astad.grad(astad.grad(root))(a), -0.25 * a ** -1.5, rel_tol=1e-9)
    assert math.isclose(astad.hessian(root)(a), -0.25 * a ** -1.5, rel_tol=1e-9)


def test_inside_a_larger_computation():
    def loss(a, b):
        return math.log(root(a * b) + b) * a
    a, b = 1.7, 0.6
    h = 1e-6
    for k, expected in enumerate([(loss(a + h, b) - loss(a - h, b)) / (2 * h),
                                  (loss(a, b + h) - loss(a, b - h)) / (2 * h)]):
        assert math.isclose(astad.grad(loss, argnums=k)(a, b), expected, rel_tol=1e-7)


RNG = np.random.default_rng(26)
W = RNG.normal(size=(5, 5)) * 0.15  # a contraction: tanh' <= 1, |W| small
A = RNG.normal(size=5)


def layer(a):
    return lambda x: np.tanh(W @ x + a)


def largest(x, y):
    return np.max(np.abs(x - y))


def equilibrium(a):
    return astad.fixed_point(layer, a, np.zeros(5), largest, TIGHT)


def test_an_equilibrium_layers_jacobian_by_hand():
    """x = tanh(W x + a): dx = D (W dx + da), D = diag(1 - x^2), so
    dx/da = (I - D W)^-1 D."""
    x = equilibrium(A)
    d = np.diag(1 - x ** 2)
    expected = np.linalg.solve(np.eye(5) - d @ W, d)
    np.testing.assert_allclose(astad.jacfwd(equilibrium)(A), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(astad.jacrev(equilibrium)(A), expected, rtol=1e-10, atol=1e-12)


def test_a_loss_on_the_equilibrium_against_differences():
    target = RNG.normal(size=5)

    def loss(a):
        return np.sum((equilibrium(a) - target) ** 2)
    h = 1e-6
    expected = [(loss(A + h * e) - loss(A - h * e)) / (2 * h) for e in np.eye(5)]
    np.testing.assert_allclose(astad.grad(loss)(A), expected, rtol=1e-6, atol=1e-9)
    hessian = astad.hessian(loss)(A)
    gradient = astad.grad(loss)
    by_differences = np.array([(gradient(A + h * e) - gradient(A - h * e)) / (2 * h)
                               for e in np.eye(5)])
    np.testing.assert_allclose(hessian, by_differences, rtol=1e-5, atol=1e-7)


def test_parameters_in_a_structure():
    """``a`` may be any structure astad differentiates: here the weights and the bias."""
    def step(params):
        weights, bias = params
        return lambda x: np.tanh(weights @ x + bias)

    def loss(weights, bias):
        x = astad.fixed_point(step, (weights, bias), np.zeros(5), largest, TIGHT)
        return np.sum(x ** 3)
    g_weights, g_bias = astad.grad(loss, argnums=(0, 1))(W, A)
    h = 1e-6
    e = np.zeros((5, 5))
    e[2, 3] = h
    assert math.isclose(g_weights[2, 3], (loss(W + e, A) - loss(W - e, A)) / (2 * h),
                        rel_tol=1e-6)
    x = equilibrium(A)
    d = np.diag(1 - x ** 2)
    by_hand = 3 * x ** 2 @ np.linalg.solve(np.eye(5) - d @ W, d)
    np.testing.assert_allclose(g_bias, by_hand, rtol=1e-10)
    # forward mode on the structure: one direction, and every direction (jacfwd)
    direction = RNG.normal(size=(5, 5))
    _, tangent = astad.jvp(loss, (W, A), (direction, np.zeros(5)))
    assert math.isclose(tangent, np.sum(g_weights * direction), rel_tol=1e-9)
    np.testing.assert_allclose(astad.jacfwd(loss, argnums=(0, 1))(W, A)[1], g_bias,
                               rtol=1e-9)


def test_the_loop_differentiated_instead_is_the_last_iterates_derivative():
    """Stopping at a loose tolerance: fixed_point's derivative is the implicit one at the
    iterate it stopped at; the loop's is the derivative of that iterate, which differs."""
    def contraction(a):
        return lambda x: 0.5 * math.cos(x) + a

    def by_loop(a):
        x, previous = contraction(a)(0.0), 0.0
        while abs(x - previous) > 1e-3:
            x, previous = contraction(a)(x), x
        return x

    def by_fixed_point(a):
        return astad.fixed_point(contraction, a, 0.0, gap, 1e-3)
    a = 0.3
    x = by_fixed_point(a)
    implicit = 1.0 / (1.0 + 0.5 * math.sin(x))  # dx/da = 1 / (1 - F_x)
    assert math.isclose(astad.grad(by_fixed_point)(a), implicit, rel_tol=1e-3)
    assert abs(astad.grad(by_loop)(a) - implicit) > 1e-4


def test_divergence_is_reported():
    def doubling(a):
        return lambda x: 2.0 * x + a
    with pytest.raises(astad.InputError, match="fixed_point: the iteration did not converge"):
        astad.fixed_point(doubling, 1.0, 1.0, gap, 1e-12)


def test_a_closure_value_caught_by_the_rules_code_is_still_refused():
    """A custom rule's code that reads a differentiated value from its closure, inside a
    broad except, cannot turn the refusal into a number (it would drop that value's
    derivative)."""
    def outer(w):
        @astad.custom_vjp
        def scale(x):
            return x * 2.0

        def forward(x):
            try:
                return np.sum(x * w) * 2.0, None  # (w: a closure, not an argument)
            except Exception:  # noqa: BLE001
                return np.sum(x) * 2.0, None
        scale.defvjp(forward, lambda _, g: (g * 2.0,))
        return scale(np.array([1.0, 2.0]) * w)
    with pytest.raises(astad.NotDifferentiableError, match="not through the rule's arguments"):
        astad.grad(outer)(np.array([0.5, 1.5]))
