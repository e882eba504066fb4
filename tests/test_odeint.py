"""scipy.integrate.odeint differentiated (issue 26, item 3; astad/api/integrate.py): the
adjoint method (reverse) and forward sensitivities (forward) in the initial state, the
times and the extra arguments, against closed-form solutions' derivatives, central
differences of the solver at tight tolerances, and each other; the refusals.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate as si

import astad

TIGHT = {"rtol": 1e-11, "atol": 1e-12}


def decay(y, t, k):
    return -k * y


def test_exponential_decay_by_hand():
    """y(t) = y0 exp(-k t): every derivative in closed form."""
    t = np.array([0.0, 0.5, 1.0, 2.0])
    w = np.array([0.3, -1.0, 2.0, 0.7])

    def loss(y0, k, t):
        return np.sum(si.odeint(decay, np.array([y0]), t, args=(k,), **TIGHT)[:, 0] * w)
    y0, k = 1.5, 0.8
    g_y0, g_k, g_t = astad.grad(loss, argnums=(0, 1, 2))(y0, k, t)
    e = np.exp(-k * t)
    assert math.isclose(g_y0, np.sum(w * e), rel_tol=1e-8)
    assert math.isclose(g_k, np.sum(w * -t * y0 * e), rel_tol=1e-8)
    # y(t_i) = y0 exp(-k (t_i - t_0)): d/dt_i for i > 0, d/dt_0 the sum of the rest
    expected_t = w * -k * y0 * e
    expected_t[0] = -np.sum(expected_t[1:])
    np.testing.assert_allclose(g_t, expected_t, rtol=1e-7, atol=1e-10)


def lotka_volterra(y, t, a, b, c, d):
    prey, predator = y
    return np.array([a * prey - b * prey * predator, c * prey * predator - d * predator])


Y0 = np.array([1.2, 0.8])
TIMES = np.linspace(0.0, 3.0, 7)
PARAMS = (1.1, 0.4, 0.3, 0.9)
WEIGHTS = np.random.default_rng(3).normal(size=(7, 2))


def predation(y0, params, times):
    return np.sum(si.odeint(lotka_volterra, y0, times, args=params, **TIGHT) * WEIGHTS)


def _differences(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[index] = h
        out[index] = (f(x + e) - f(x - e)) / (2 * h)
    return out


def test_a_nonlinear_system_against_differences():
    g_y0, g_params, g_t = astad.grad(predation, argnums=(0, 1, 2))(Y0, PARAMS, TIMES)
    np.testing.assert_allclose(g_y0, _differences(lambda y: predation(y, PARAMS, TIMES), Y0),
                               rtol=1e-6, atol=1e-8)
    by_differences = _differences(lambda p: predation(Y0, tuple(p), TIMES), PARAMS)
    np.testing.assert_allclose(g_params, by_differences, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_t, _differences(lambda t: predation(Y0, PARAMS, t), TIMES),
                               rtol=1e-6, atol=1e-8)


def test_forward_against_reverse():
    rng = np.random.default_rng(5)
    directions = (rng.normal(size=2), tuple(rng.normal(size=4)), rng.normal(size=7))
    value, tangent = astad.jvp(predation, (Y0, PARAMS, TIMES), directions)
    assert value == predation(Y0, PARAMS, TIMES)
    gradients = astad.grad(predation, argnums=(0, 1, 2))(Y0, PARAMS, TIMES)
    expected = sum(np.sum(np.asarray(g) * np.asarray(d)) for g, d in zip(gradients, directions))
    assert math.isclose(tangent, expected, rel_tol=1e-7)


def test_jacobians_both_ways():
    def states(y0):
        return si.odeint(lotka_volterra, y0, TIMES, args=PARAMS, **TIGHT)
    backward = astad.jacrev(states)(Y0)
    forward = astad.jacfwd(states)(Y0)
    assert backward.shape == forward.shape == (7, 2, 2)
    np.testing.assert_allclose(backward, forward, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(backward[:, :, 0],
                               (states(Y0 + [1e-6, 0]) - states(Y0 - [1e-6, 0])) / 2e-6,
                               rtol=1e-6, atol=1e-8)


def test_time_first_and_a_fitted_model():
    """tfirst=True, keyword arguments, and the gradient a least-squares fit takes."""
    def rate(t, y, k):
        return -k * y + np.sin(t)
    times = np.linspace(0.0, 2.0, 5)
    data = np.array([1.0, 0.9, 0.85, 0.9, 1.0])

    def misfit(k):
        ys = si.odeint(rate, np.array([1.0]), times, args=(k,), tfirst=True, **TIGHT)
        return np.sum((ys[:, 0] - data) ** 2)
    h = 1e-6
    assert math.isclose(astad.grad(misfit)(0.4), (misfit(0.4 + h) - misfit(0.4 - h)) / (2 * h),
                        rel_tol=1e-6)


def test_values_are_scipys():
    seen = {}

    def f(y0):
        ys = si.odeint(lotka_volterra, y0, TIMES, args=PARAMS)
        seen["ys"] = ys
        return np.sum(ys)
    astad.grad(f)(Y0)
    assert np.array_equal(np.asarray(getattr(seen["ys"], "primal", seen["ys"])),
                          si.odeint(lotka_volterra, Y0, TIMES, args=PARAMS))


def test_refusals():
    with pytest.raises(astad.NotDifferentiableError, match="full_output"):
        astad.grad(lambda y0: np.sum(si.odeint(decay, y0, TIMES, args=(0.5,),
                                               full_output=True)[0]))(Y0)
    with pytest.raises(astad.NotDifferentiableError, match="odeint once"):
        astad.hessian(lambda y0: np.sum(si.odeint(decay, y0, TIMES, args=(0.5,))))(Y0)


def test_a_parameter_in_the_closure_is_refused_naming_args():
    def final(k):
        return si.odeint(lambda y, t: -k * y, np.array([1.0]), TIMES)[-1, 0]
    with pytest.raises(astad.NotDifferentiableError, match=r"scipy\.integrate\.odeint .*args="):
        astad.grad(final)(0.5)


def test_arguments_without_a_derivative_among_args():
    """An int and a string among ``args`` pass through; the float beside them is
    differentiated."""
    def rate(y, t, k, power, kind):
        assert kind == "decay"
        return -k * y ** power

    def final(k):
        return si.odeint(rate, np.array([1.0]), TIMES, args=(k, 1, "decay"), **TIGHT)[-1, 0]
    k = 0.5
    expected = -TIMES[-1] * math.exp(-k * TIMES[-1])  # d/dk exp(-k t)
    assert math.isclose(astad.grad(final)(k), expected, rel_tol=1e-7)
    assert math.isclose(astad.jvp(final, (k,), (1.0,))[1], expected, rel_tol=1e-7)


def test_time_first_read_by_element_takes_the_code_for_floats(monkeypatch):
    """The adjoint pulls back the user's function itself, its time first here, so that a
    right-hand side of elements and floats runs the code written for them: every pullback
    by the rows' code, the gradient as differences give it."""
    def rate(t, y, k):
        return np.array([-k * y[0] + math.sin(t) * y[1], k * y[0] - y[1] * y[1]])
    times = np.linspace(0.0, 2.0, 5)

    def misfit(y0, k):
        ys = si.odeint(rate, y0, times, args=(k,), tfirst=True, **TIGHT)
        return np.sum(ys * np.arange(10.0).reshape(5, 2))
    from astad.core import reverse_pass
    pulled = []
    call = reverse_pass.RowsPullback.__call__
    monkeypatch.setattr(reverse_pass.RowsPullback, "__call__",
                        lambda self, c: pulled.append(1) or call(self, c))
    y0, k = np.array([1.0, 0.5]), 0.7
    g_y0, g_k = astad.grad(misfit, argnums=(0, 1))(y0, k)
    assert len(pulled) > 10
    np.testing.assert_allclose(g_y0, _differences(lambda y: misfit(y, k), y0), rtol=1e-6)
    h = 1e-6
    assert math.isclose(g_k, (misfit(y0, k + h) - misfit(y0, k - h)) / (2 * h), rel_tol=1e-6)
