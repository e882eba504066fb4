"""scipy.linalg's solvers differentiated (issue 26, item 3; astad/rules/scipy_linalg.py):
each function against central finite differences in each matrix and vector argument,
forward mode against reverse, second order, values against scipy's (bit for bit when
nothing is differentiated), a zero gradient in the entries scipy does not read, gradients
against JAX's where jax.scipy.linalg has the function, and the refusals.
"""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg as sl

import astad
from oracles import array_differences

ROOT = Path(__file__).resolve().parent.parent
N = 4
RNG = np.random.default_rng(26)
GENERAL = RNG.normal(size=(N, N)) + N * np.eye(N)  # well-conditioned
SPD = GENERAL @ GENERAL.T
# a matrix whose triangles disagree: the one scipy does not read must not matter
LOPSIDED = SPD + np.triu(RNG.normal(size=(N, N)), 1)
B = RNG.normal(size=(N, 2))
V = RNG.normal(size=N)
W2 = RNG.normal(size=(N, 2))
WN = RNG.normal(size=(N, N))


def _weighted(y):
    return (y * (W2 if np.shape(y) == (N, 2) else WN if np.shape(y) == (N, N) else 1.0)).sum()


# name: (function of the differentiated arguments, their values)
CASES = {
    "solve": (lambda a, b: sl.solve(a, b), (GENERAL, B)),
    "solve_vector": (lambda a, b: sl.solve(a, b), (GENERAL, V)),
    "solve_transposed": (lambda a, b: sl.solve(a, b, transposed=True), (GENERAL, B)),
    "solve_pos": (lambda a, b: sl.solve(a, b, assume_a="pos"), (LOPSIDED, B)),
    "solve_sym_lower": (lambda a, b: sl.solve(a, b, assume_a="sym", lower=True),
                        (LOPSIDED.T, B)),
    "solve_her": (lambda a, b: sl.solve(a, b, assume_a="her", overwrite_a=False,
                                        check_finite=False), (LOPSIDED, B)),
    "solve_tridiagonal": (lambda a, b: sl.solve(a, b, assume_a="tridiagonal"), (GENERAL, B)),
    "solve_diagonal": (lambda a, b: sl.solve(a, b, assume_a="diagonal"), (GENERAL, B)),
    "solve_lower_triangular": (lambda a, b: sl.solve(a, b, assume_a="lower triangular"),
                               (GENERAL, B)),
    "solve_triangular": (lambda a, b: sl.solve_triangular(a, b), (GENERAL, B)),
    "solve_triangular_lower": (lambda a, b: sl.solve_triangular(a, b, lower=True),
                               (GENERAL, V)),
    "solve_triangular_T": (lambda a, b: sl.solve_triangular(a, b, trans=1), (GENERAL, B)),
    "solve_triangular_C_unit": (lambda a, b: sl.solve_triangular(
        a, b, trans="C", lower=True, unit_diagonal=True), (GENERAL, B)),
    "solve_triangular_N": (lambda a, b: sl.solve_triangular(a, b, trans="N"), (GENERAL, B)),
    "cholesky": (lambda a: sl.cholesky(a), (LOPSIDED,)),
    "cholesky_lower": (lambda a: sl.cholesky(a, lower=True), (LOPSIDED.T,)),
    "cho_factor": (lambda a: sl.cho_factor(a)[0], (LOPSIDED,)),
    "cho_factor_lower": (lambda a: sl.cho_factor(a, lower=True)[0], (LOPSIDED.T,)),
    "cho_solve": (lambda a, b: sl.cho_solve(sl.cho_factor(a), b), (LOPSIDED, B)),
    "cho_solve_lower": (lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=True), b),
                        (LOPSIDED.T, V)),
    "cho_solve_c": (lambda c, b: sl.cho_solve((c, True), b),
                    (np.linalg.cholesky(SPD) + np.triu(WN, 1), B)),
    "lu_factor": (lambda a: sl.lu_factor(a)[0], (RNG.normal(size=(N, N)),)),
    "lu_solve": (lambda a, b: sl.lu_solve(sl.lu_factor(a), b), (RNG.normal(size=(N, N)), B)),
    "lu_solve_T": (lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=1),
                   (RNG.normal(size=(N, N)), V)),
    "lu_solve_lu": (lambda lu, b: sl.lu_solve((lu, PIV), b), (None, B)),
    "inv": (lambda a: sl.inv(a), (GENERAL,)),
    "inv_pos": (lambda a: sl.inv(a, assume_a="pos"), (LOPSIDED,)),
    "det": (lambda a: sl.det(a), (GENERAL,)),
}
LU, PIV = sl.lu_factor(RNG.normal(size=(N, N)))
CASES["lu_solve_lu"] = (CASES["lu_solve_lu"][0], (LU, B))
# the scipy installed takes every case's keywords (inv's assume_a: scipy 1.15)
if "assume_a" not in inspect.signature(sl.inv).parameters:
    del CASES["inv_pos"]
for _name, (_fn, _args) in list(CASES.items()):
    try:
        _fn(*_args)
    except (TypeError, ValueError):  # (an assume_a this scipy does not know)
        del CASES[_name]


def _objective(name):
    fn = CASES[name][0]
    return lambda *args: _weighted(fn(*args))


ARGUMENTS = [(name, position) for name, (_, args) in CASES.items()
             for position in range(len(args))]


@pytest.mark.parametrize("name,position", ARGUMENTS)
def test_against_differences(name, position):
    f, args = _objective(name), CASES[name][1]
    got = astad.grad(f, argnums=position)(*args)
    np.testing.assert_allclose(got, array_differences(f, args, position), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,position", ARGUMENTS)
def test_forward_against_reverse(name, position):
    f, args = _objective(name), CASES[name][1]
    direction = np.random.default_rng(position).normal(size=np.shape(args[position]))
    tangents = [np.zeros_like(np.asarray(a, dtype=float)) for a in args]
    tangents[position] = direction
    value, derivative = astad.jvp(f, list(args), tangents)
    assert np.isclose(value, f(*args), rtol=1e-12)
    gradient = astad.grad(f, argnums=position)(*args)
    assert np.isclose(derivative, np.sum(gradient * direction), rtol=1e-9)


@pytest.mark.parametrize("name", ["solve", "cholesky", "lu_solve", "solve_triangular"])
def test_second_order(name):
    fn, args = CASES[name]
    a = args[0]

    def f(a):
        return _weighted(fn(a, *args[1:])) ** 2 / 10.0
    hessian = astad.hessian(f)(a)
    gradient = astad.grad(f)
    direction = np.random.default_rng(1).normal(size=a.shape)
    h = 1e-5
    expected = (gradient(a + h * direction) - gradient(a - h * direction)) / (2 * h)
    got = np.tensordot(hessian, direction, axes=2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_values(name):
    """scipy's own values with nothing differentiated; astad's, close to them, otherwise."""
    fn, args = CASES[name]
    plain = fn(*args)
    seen = {}

    def f(*xs):
        y = fn(*xs)
        seen["y"] = y
        return _weighted(y)
    astad.grad(f, argnums=tuple(range(len(args))))(*args)
    primal = np.asarray(getattr(seen["y"], "primal", seen["y"]))
    np.testing.assert_allclose(primal, plain, rtol=1e-10, atol=1e-12)


def test_exact_values_without_derivatives():
    def f(a, c):
        x = sl.solve(c, B)  # (c is not differentiated: scipy's own solve)
        return a * np.sum(x) + a * sl.det(c) + a * np.sum(sl.cho_factor(SPD)[0])
    expected = np.sum(sl.solve(GENERAL, B)) + sl.det(GENERAL) + np.sum(sl.cho_factor(SPD)[0])
    assert astad.grad(f)(2.0, GENERAL) == expected
    lu, piv = sl.lu_factor(GENERAL)
    from astad.core.boundary import contains_dual
    assert contains_dual((lu, piv)) is False


@pytest.mark.parametrize("name,zero", [(name, zero) for name, zero in [
    ("solve_pos", np.tril(np.ones((N, N)), -1)),
    ("solve_sym_lower", np.triu(np.ones((N, N)), 1)),
    ("solve_diagonal", 1 - np.eye(N)),
    ("solve_tridiagonal", (np.abs(np.subtract.outer(np.arange(N), np.arange(N))) > 1) * 1.0),
    ("solve_triangular", np.tril(np.ones((N, N)), -1)),
    ("solve_triangular_C_unit", np.triu(np.ones((N, N)))),
    ("cholesky", np.tril(np.ones((N, N)), -1)),
    ("cholesky_lower", np.triu(np.ones((N, N)), 1)),
    ("cho_solve", np.tril(np.ones((N, N)), -1)),
    ("cho_solve_c", np.triu(np.ones((N, N)), 1)),
    ("inv_pos", np.tril(np.ones((N, N)), -1)),
] if name in CASES])
def test_ignored_entries_get_zero_gradient(name, zero):
    f, args = _objective(name), CASES[name][1]
    gradient = astad.grad(f)(*args)
    assert np.all(gradient[zero == 1] == 0.0)
    assert np.any(gradient[zero == 0] != 0.0)


JAX_CASES = {  # name: the same function in jax.scipy.linalg
    "solve": lambda jsl, a, b: jsl.solve(a, b),
    "solve_pos": lambda jsl, a, b: jsl.solve(a, b, assume_a="pos"),
    "solve_triangular": lambda jsl, a, b: jsl.solve_triangular(a, b),
    "solve_triangular_C_unit": lambda jsl, a, b: jsl.solve_triangular(
        a, b, trans="C", lower=True, unit_diagonal=True),
    "cholesky": lambda jsl, a: jsl.cholesky(a),
    "cho_solve": lambda jsl, a, b: jsl.cho_solve(jsl.cho_factor(a), b),
    "lu_solve": lambda jsl, a, b: jsl.lu_solve(jsl.lu_factor(a), b),
    "lu_solve_T": lambda jsl, a, b: jsl.lu_solve(jsl.lu_factor(a), b, trans=1),
    "inv": lambda jsl, a: jsl.inv(a),
    "det": lambda jsl, a: jsl.det(a),
}


# JAX reads the whole of a symmetric matrix and gives a symmetric gradient; scipy reads
# the upper triangle: on a symmetric matrix astad's is JAX's folded onto that triangle
FOLDED = {"solve_pos", "cholesky", "cho_solve"}


@pytest.mark.parametrize("name", [name for name in JAX_CASES if name in CASES])
def test_against_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    args = CASES[name][1]
    if name in FOLDED:
        args = (SPD, *args[1:])
    ours = _objective(name)

    def theirs(*xs):
        y = JAX_CASES[name](jsl, *xs)
        weight = W2 if y.shape == (N, 2) else WN if y.shape == (N, N) else 1.0
        return jnp.sum(y * weight)
    positions = tuple(range(len(args)))
    got = astad.grad(ours, argnums=positions)(*args)
    expected = jax.grad(theirs, argnums=positions)(*[jnp.asarray(a) for a in args])
    for position, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        if name in FOLDED and position == 0:
            e = np.triu(e) + np.tril(e, -1).T
        np.testing.assert_allclose(g, e, rtol=1e-8, atol=1e-10)


def test_not_covered_refused_by_name():
    def f(a):
        return np.sum(sl.logm(a))
    with pytest.raises(astad.NotDifferentiableError, match=r"scipy\.linalg\.logm"):
        astad.grad(f)(GENERAL)

    def g(a):
        return np.sum(sl.qr(a)[1])
    with pytest.raises(astad.NotDifferentiableError, match=r"scipy\.linalg\.qr"):
        astad.grad(g)(GENERAL)

    def h(a):  # nothing differentiated reaches it: scipy's own
        return a * np.sum(sl.expm(GENERAL / 10))
    assert astad.grad(h)(1.0) == np.sum(sl.expm(GENERAL / 10))


def test_refused_arguments():
    def f(a):
        return np.sum(sl.solve_triangular(a, B, trans=5))
    with pytest.raises(astad.NotDifferentiableError, match="trans=5"):
        astad.grad(f)(GENERAL)

    def g(a):
        return np.sum(sl.lu_factor(a[:, :3])[0])
    with pytest.raises(astad.NotDifferentiableError, match="lu_factor"):
        astad.grad(g)(GENERAL)


def test_lists_and_a_loop():
    """A list of rows holding duals, and the solve inside a loop (Newton's method)."""
    def f(s):
        a = [[s, 1.0], [1.0, 3.0]]
        x = np.zeros(2)
        for _ in range(3):
            x = x + sl.solve(a, np.array([1.0, 2.0]) - np.array(a) @ x)
        return x[0] + 2 * x[1]
    h = 1e-6
    assert np.isclose(astad.grad(f)(2.0), (f(2.0 + h) - f(2.0 - h)) / (2 * h), rtol=1e-6)


def test_import_does_not_load_scipy_linalg():
    code = "import sys, astad; print('scipy.linalg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"
