"""scipy.linalg's matrix functions and matrix equations differentiated (issue 26, item 3;
astad/rules/scipy_matrix_functions.py): expm, sqrtm, solve_sylvester and
solve_continuous_lyapunov against central finite differences in each argument, forward
mode against reverse, Jacobians both ways, second order against differences of the
gradient, values bit for bit against scipy's, against JAX's expm, and the refusals.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import astad
from oracles import array_differences

N = 3
RNG = np.random.default_rng(2026)
GENERAL = RNG.normal(size=(N, N)) * 0.6
SPD = GENERAL @ GENERAL.T + 2.0 * np.eye(N)
SHIFTED = GENERAL + 3.0 * np.eye(N)  # eigenvalues with positive real parts
OTHER = RNG.normal(size=(N, N)) + 3.0 * np.eye(N)
RIGHT = RNG.normal(size=(N, N))
WEIGHTS = RNG.normal(size=(N, N))

CASES = {  # name: (function of the differentiated arguments, their values)
    "expm": (lambda a: sl.expm(a), (GENERAL,)),
    "expm_large_norm": (lambda a: sl.expm(a), (4.0 * GENERAL,)),  # (scaling and squaring)
    "sqrtm": (lambda a: sl.sqrtm(a), (SPD,)),
    "sqrtm_nonsymmetric": (lambda a: sl.sqrtm(a), (SHIFTED,)),
    "solve_sylvester": (lambda a, b, q: sl.solve_sylvester(a, b, q), (SHIFTED, OTHER, RIGHT)),
    "solve_continuous_lyapunov": (lambda a, q: sl.solve_continuous_lyapunov(a, q),
                                  (SHIFTED, RIGHT)),
}
ARGUMENTS = [(name, k) for name, (_, args) in CASES.items() for k in range(len(args))]


def _as_astad_gives(value):
    """scipy's value as astad gives it: scipy before 1.16 returns sqrtm's real root of a
    matrix with complex eigenvalues as a complex array, astad its real part."""
    value = np.asarray(value)
    if np.iscomplexobj(value):
        assert np.max(np.abs(value.imag)) <= 1e-10 * max(1.0, np.max(np.abs(value.real)))
        return value.real
    return value


def _objective(name):
    fn = CASES[name][0]
    return lambda *args: np.sum(fn(*args) * WEIGHTS)


@pytest.mark.parametrize("name,position", ARGUMENTS)
def test_against_differences(name, position):
    f, args = _objective(name), CASES[name][1]
    got = astad.grad(f, argnums=position)(*args)
    np.testing.assert_allclose(got, array_differences(f, args, position), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name,position", ARGUMENTS)
def test_forward_against_reverse(name, position):
    f, args = _objective(name), CASES[name][1]
    direction = np.random.default_rng(position).normal(size=(N, N))
    tangents = [np.zeros((N, N)) for _ in args]
    tangents[position] = direction
    value, derivative = astad.jvp(f, list(args), tangents)
    assert value == np.sum(_as_astad_gives(CASES[name][0](*args)) * WEIGHTS)
    gradient = astad.grad(f, argnums=position)(*args)
    assert np.isclose(derivative, np.sum(gradient * direction), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,position", ARGUMENTS)
def test_jacobians_both_ways(name, position):
    """jacrev (every cotangent row at once: the rules' leading axes) against jacfwd
    (every tangent direction at once) and against central differences."""
    fn, args = CASES[name]

    def g(x):
        return fn(*args[:position], x, *args[position + 1:])
    backward = astad.jacrev(g)(args[position])
    forward = astad.jacfwd(g)(args[position])
    assert backward.shape == (N, N, N, N)
    np.testing.assert_allclose(backward, forward, rtol=1e-9, atol=1e-11)
    h, e = 1e-6, np.zeros((N, N))
    e[1, 2] = h
    expected = (g(args[position] + e) - g(args[position] - e)) / (2 * h)
    np.testing.assert_allclose(backward[:, :, 1, 2], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,position", ARGUMENTS)
def test_second_order(name, position):
    fn, args = CASES[name]

    def f(x):
        y = fn(*args[:position], x, *args[position + 1:])
        return np.sum(y * WEIGHTS) ** 2 / 10.0 + np.sum(y * y * WEIGHTS)
    x = args[position]
    hessian = astad.hessian(f)(x)
    direction = np.random.default_rng(7).normal(size=x.shape)
    gradient, h = astad.grad(f), 1e-5
    expected = (gradient(x + h * direction) - gradient(x - h * direction)) / (2 * h)
    np.testing.assert_allclose(np.tensordot(hessian, direction, axes=2), expected,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_values_are_scipys(name):
    fn, args = CASES[name]
    seen = {}

    def f(*xs):
        y = fn(*xs)
        seen["y"] = y
        return np.sum(y * WEIGHTS)
    astad.grad(f, argnums=tuple(range(len(args))))(*args)
    assert np.array_equal(np.asarray(getattr(seen["y"], "primal", seen["y"])),
                          _as_astad_gives(fn(*args)))


def test_a_third_derivative_of_expm():
    """A derivative of a derivative of a derivative: expm's rule calls expm again."""
    def f(t):
        return np.sum(sl.expm(t * GENERAL) * WEIGHTS)
    third = astad.grad(astad.grad(astad.grad(f)))(0.7)
    # d^3/dt^3 of <W, expm(t A)> = <W, A^3 expm(t A)>
    expected = np.sum(np.linalg.matrix_power(GENERAL, 3) @ sl.expm(0.7 * GENERAL) * WEIGHTS)
    assert np.isclose(third, expected, rtol=1e-10)


def test_expm_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    got = astad.grad(_objective("expm"))(GENERAL)
    expected = jax.grad(lambda a: jnp.sum(jsl.expm(a) * WEIGHTS))(jnp.asarray(GENERAL))
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-10, atol=1e-12)


def test_a_matrix_ode_by_expm():
    """y(t) = expm(t A) y0 solves y' = A y: the gradient in A of a loss on y(1) against
    the same loss on an accurate Runge-Kutta solution, differentiated by astad."""
    y0 = np.array([1.0, -0.5, 0.25])

    def by_expm(a):
        return np.sum((sl.expm(a) @ y0) ** 2)

    def by_steps(a):
        y, h = y0, 1.0 / 200
        for _ in range(200):
            k1 = a @ y
            k2 = a @ (y + h / 2 * k1)
            k3 = a @ (y + h / 2 * k2)
            k4 = a @ (y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return np.sum(y ** 2)
    np.testing.assert_allclose(astad.grad(by_expm)(GENERAL), astad.grad(by_steps)(GENERAL),
                               rtol=1e-8)


def test_a_users_python_primitive_under_nesting():
    """A Python function registered with register_vjp is called through its rule at the
    level of an enclosing differentiation (the Hessian's forward level), not with its
    duals: the same mechanism as expm's."""
    def cube_sum(x):
        return float(np.sum(np.asarray(x, dtype=float) ** 3))  # (plain numpy only)
    astad.register_vjp(cube_sum, lambda g, r, x: 3.0 * g * x * x)
    astad.register_jvp(cube_sum, lambda t, r, x: np.sum(3.0 * x * x * t))

    def f(x):
        return cube_sum(x) * 2.0
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(astad.hessian(f)(x), np.diag(12.0 * x), rtol=1e-12)


def test_forward_over_forward():
    """jacfwd of jacfwd: expm's jvp called with duals of the enclosing forward level goes
    through the rule again (as does the primal)."""
    def f(a):
        return np.sum(sl.expm(a) * WEIGHTS)
    by_forward = astad.jacfwd(astad.jacfwd(f))(GENERAL)
    np.testing.assert_allclose(by_forward, astad.hessian(f)(GENERAL), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_a_complex_square_root_is_refused_in_both_modes(mode):
    negative = np.diag([-1.0, 2.0, 3.0])

    def f(a):
        return np.sum(np.real(sl.sqrtm(a)))
    with pytest.raises(astad.NotDifferentiableError,
                       match=r"scipy\.linalg\.sqrtm returns a complex value here"):
        if mode == "grad":
            astad.grad(f)(negative)
        else:
            astad.jvp(f, (negative,), (np.eye(N),))
