"""scipy.integrate.solve_ivp differentiated (issue 26, item 3; astad/api/integrate.py):
the adjoint method (reverse) and forward sensitivities (forward) in the initial state and
the extra arguments, for the common methods, against a closed form, central differences
of the solver at tight tolerances, differentiating an explicit fine-step integrator
written in Python, and each other; the refusals.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import astad

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
T_EVAL = np.linspace(0.0, 3.0, 7)
WEIGHTS = np.random.default_rng(4).normal(size=(2, 7))


def predator_prey(t, y, a, b):
    return np.array([a * y[0] - b * y[0] * y[1], b * y[0] * y[1] - y[1]])


def weighted(y0, a, b, method="RK45", t_eval=T_EVAL):
    sol = solve_ivp(predator_prey, (0.0, 3.0), y0, method=method, t_eval=t_eval,
                    args=(a, b), **TIGHT)
    return np.sum(sol.y * WEIGHTS[:, :sol.y.shape[1]])


def differences(f, args, h=1e-6):
    out = []
    for k, x in enumerate(args):
        x = np.asarray(x, dtype=float)
        g = np.zeros(x.shape)
        for index in np.ndindex(x.shape):
            e = np.zeros(x.shape)
            e[index] = h
            up = [a if j != k else (x + e if x.shape else float(x + e))
                  for j, a in enumerate(args)]
            down = [a if j != k else (x - e if x.shape else float(x - e))
                    for j, a in enumerate(args)]
            g[index] = (f(*up) - f(*down)) / (2 * h)
        out.append(g if x.shape else float(g))
    return out


def test_exponential_decay_by_hand():
    """y(t) = y0 exp(-k t): the derivatives in closed form."""
    t = np.array([0.5, 1.0, 2.0])
    w = np.array([0.3, -1.0, 2.0])

    def loss(y0, k):
        sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 2.0), np.array([y0]), t_eval=t,
                        args=(k,), **TIGHT)
        return np.sum(sol.y[0] * w)
    g_y0, g_k = astad.grad(loss, argnums=(0, 1))(1.5, 0.8)
    e = np.exp(-0.8 * t)
    assert g_y0 == pytest.approx(np.sum(w * e), rel=1e-7)
    assert g_k == pytest.approx(np.sum(w * -t * 1.5 * e), rel=1e-7)


@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"])
def test_every_common_method_against_differences(method):
    args = (np.array([1.0, 0.5]), 1.1, 0.4)
    got = astad.grad(weighted, argnums=(0, 1, 2))(*args, method=method)
    expected = differences(lambda *a: weighted(*a, method=method), args)
    rtol = 2e-4 if method == "LSODA" else 1e-5  # (LSODA meets tolerances more loosely)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-6)


def test_the_solvers_own_times():
    """Without t_eval the solution is at the solver's steps: the derivative is that of
    the values at those times (as with t_eval set to them), and at the end, whose time
    is fixed, that of the end state."""
    args = (np.array([1.0, 0.5]), 1.1, 0.4)
    steps = solve_ivp(predator_prey, (0.0, 3.0), args[0], args=args[1:], **TIGHT).t
    weights = np.random.default_rng(5).normal(size=(2, len(steps)))

    def at_steps(y0, a, b, t_eval=None):
        sol = solve_ivp(predator_prey, (0.0, 3.0), y0, args=(a, b), t_eval=t_eval, **TIGHT)
        return np.sum(sol.y * weights)
    got = astad.grad(at_steps, argnums=(0, 1, 2))(*args)
    fixed = differences(lambda *a: at_steps(*a, t_eval=steps), args)
    for g, e in zip(got, fixed):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)

    def end(y0, a, b):
        return np.sum(solve_ivp(predator_prey, (0.0, 3.0), y0, args=(a, b),
                                **TIGHT).y[:, -1] ** 2)
    for g, e in zip(astad.grad(end, argnums=(0, 1, 2))(*args), differences(end, args)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_output_times_after_the_start():
    args = (np.array([1.0, 0.5]), 1.1, 0.4)
    got = astad.grad(weighted, argnums=(0, 1, 2))(*args, t_eval=T_EVAL[2:])
    expected = differences(lambda *a: weighted(*a, t_eval=T_EVAL[2:]), args)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def rk4(y0, a, b, steps=3000):
    """The same model by an explicit fine-step integrator, which astad differentiates
    step by step."""
    h = 3.0 / steps
    y, t, out = y0, 0.0, [y0]
    every = steps // 6
    for k in range(steps):
        k1 = predator_prey(t, y, a, b)
        k2 = predator_prey(t + h / 2, y + h / 2 * k1, a, b)
        k3 = predator_prey(t + h / 2, y + h / 2 * k2, a, b)
        k4 = predator_prey(t + h, y + h * k3, a, b)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += h
        if (k + 1) % every == 0:
            out.append(y)
    return np.sum(np.stack(out, axis=1) * WEIGHTS)


@pytest.mark.slow
def test_against_differentiating_a_fine_step_integrator():
    args = (np.array([1.0, 0.5]), 1.1, 0.4)
    by_adjoint = astad.grad(weighted, argnums=(0, 1, 2))(*args)
    by_steps = astad.grad(rk4, argnums=(0, 1, 2))(*args)
    for g, e in zip(by_adjoint, by_steps):
        np.testing.assert_allclose(g, e, rtol=1e-8, atol=1e-9)


def trajectory(y0, a):
    return solve_ivp(predator_prey, (0.0, 3.0), y0, t_eval=T_EVAL[1:], args=(a, 0.4),
                     **TIGHT).y


def test_forward_and_reverse_jacobians_agree_with_differences():
    y0, a = np.array([1.0, 0.5]), 1.1
    by_columns = astad.jacfwd(trajectory, argnums=(0, 1))(y0, a)
    by_rows = astad.jacrev(trajectory, argnums=(0, 1))(y0, a)
    np.testing.assert_allclose(by_columns[0], by_rows[0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(by_columns[1], by_rows[1], rtol=1e-7, atol=1e-9)
    h = 1e-6
    np.testing.assert_allclose(by_columns[1], (trajectory(y0, a + h) -
                                               trajectory(y0, a - h)) / (2 * h),
                               rtol=1e-5, atol=1e-6)
    value, tangent = astad.jvp(trajectory, (y0, a), (np.array([1.0, -1.0]), 0.5))
    np.testing.assert_allclose(value, trajectory(y0, a))
    np.testing.assert_allclose(tangent, by_columns[0] @ np.array([1.0, -1.0]) +
                               0.5 * by_columns[1], rtol=1e-7, atol=1e-9)


def test_values_are_scipys():
    y0 = np.array([1.0, 0.5])
    value, _ = astad.vjp(trajectory, y0, 1.1)
    np.testing.assert_array_equal(value, trajectory(y0, 1.1))


def test_refusals():
    y0 = np.array([1.0, 0.5])

    def dense(y0):
        return solve_ivp(predator_prey, (0.0, 1.0), y0, args=(1.1, 0.4),
                         dense_output=True).y.sum()
    with pytest.raises(astad.NotDifferentiableError, match="dense_output=True"):
        astad.grad(dense)(y0)

    def with_events(y0):
        return solve_ivp(predator_prey, (0.0, 1.0), y0, args=(1.1, 0.4),
                         events=lambda t, y, a, b: y[0] - 0.5).y.sum()
    with pytest.raises(astad.NotDifferentiableError, match="events"):
        astad.grad(with_events)(y0)

    def closure(a):
        return solve_ivp(lambda t, y: predator_prey(t, y, a, 0.4), (0.0, 1.0), y0).y.sum()
    with pytest.raises(astad.NotDifferentiableError, match="args="):
        astad.grad(closure)(1.1)

    def second(y0):
        return astad.grad(lambda y: solve_ivp(predator_prey, (0.0, 1.0), y,
                                              args=(1.1, 0.4)).y.sum())(y0).sum()
    with pytest.raises(astad.NotDifferentiableError, match="solve_ivp once"):
        astad.grad(second)(y0)
