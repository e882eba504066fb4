"""The compiled element-wise rules (runtime/_elementwise.c) against the Python rule.

For every ufunc the compiled runtime takes and every kind of operand (a differentiated
array, a float, an int, np.float64, a constant array, the same array twice), the
gradient is the Python runtime's bit for bit (computed in a subprocess with
ASTAD_RUNTIME=python) and agrees with central differences. The cases the compiled path
leaves to the Python rule (broadcasting, views, large arrays, other dtypes, non-finite
values, a user's own rule, nested derivatives) give the documented results too. (An
array kept from a finished call raises: tests/test_nested.py.)
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import astad
from astad.runtime.tape import RUNTIME

HERE = os.path.dirname(os.path.abspath(__file__))
native_only = pytest.mark.skipif(RUNTIME != "native", reason="the compiled runtime's path")

UNARY = ["negative", "square", "sqrt", "exp", "log", "sin", "cos", "tanh"]
BINARY = ["add", "subtract", "multiply", "true_divide", "power"]
# the other operand of a binary ufunc, by kind
OTHERS = ["dual", "float", "int", "float64", "constant", "same"]


def _other(kind, y, c):
    return {"float": 1.75, "int": 3, "float64": np.float64(0.625), "constant": c}[kind]


def make(name, kind, reflected=False):
    """f(x, y): a chain through ``np.<name>`` with the operand kind given (the generated
    code calls the ufunc through numpy and through the operators both)."""
    ufunc = getattr(np, name)

    def f(x, y):
        c = np.array([0.5, 1.25, 2.0])
        if ufunc.nin == 1:
            z = ufunc(x * y + 1.5)  # (positive inputs: sqrt and log are defined)
        elif kind == "dual":
            z = ufunc(x, y)
        elif kind == "same":
            z = ufunc(x, x)
        else:
            other = _other(kind, y, c)
            z = ufunc(other, x) if reflected else ufunc(x, other)
        return np.sum(z * y)
    return f


def cases():
    out = [(name, "dual", False) for name in UNARY]
    for name in BINARY:
        for kind in OTHERS:
            out.append((name, kind, False))
            if kind in ("float", "int", "float64", "constant"):
                out.append((name, kind, True))
    return out


def operator_program(x, y):
    """The operators and numpy functions mixed, as users write them."""
    a = np.sin(x) * 0.5 + x
    b = np.cos(a) * y - x / y
    c = np.exp(-b) + np.log(y) + np.sqrt(y) + np.tanh(a) * np.square(x) - 2 / y
    d = -c * x + 3 * c - (a - 1)
    return np.sum(d * d / (1.0 + y))


def views_and_writes(x, y):
    """Views of arrays written into (a stencil step, as the heat benchmark's)."""
    u = x * 1.0
    for _ in range(3):
        u[1:-1] += 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2]) * y[1:-1]
        u[0] = u[1] * 0.5
    return np.sum(np.sin(u[1:]) * u[:-1])


X = np.array([[0.3, 0.7, 1.1], [0.2, 0.9, 1.4]])
Y = np.array([[1.5, 0.8, 1.2], [0.6, 1.1, 2.0]])


def gradients():
    """Every case's gradient (and the operator program's): what the subprocess returns."""
    out = {}
    for name, kind, reflected in cases():
        f = astad.reverse_diff(make(name, kind, reflected), argnums=(0, 1))
        x, y = (X[0], Y[0])
        out[(name, kind, reflected)] = f.value_and_grad(x, y)
    out["program"] = astad.reverse_diff(operator_program, argnums=(0, 1)).value_and_grad(X, Y)
    out["views"] = astad.reverse_diff(views_and_writes, argnums=(0, 1)).value_and_grad(
        X[0], Y[0])
    return out


@pytest.fixture(scope="module")
def python_runtime():
    """The same gradients from the pure-Python runtime, in a subprocess."""
    env = dict(os.environ, ASTAD_RUNTIME="python")
    code = (f"import pickle, sys; sys.path.insert(0, {HERE!r}); "
            "import test_compiled_elementwise as t; "
            "sys.stdout.buffer.write(pickle.dumps(t.gradients()))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          check=True, cwd=HERE)
    return pickle.loads(done.stdout)


def _central(f, args, k, h=1e-6):
    args = [np.array(a, dtype=float) for a in args]
    g = np.zeros_like(args[k])
    for i in np.ndindex(g.shape):
        up = [a.copy() for a in args]
        down = [a.copy() for a in args]
        up[k][i] += h
        down[k][i] -= h
        g[i] = (f(*up) - f(*down)) / (2 * h)
    return g


@pytest.mark.parametrize("name, kind, reflected", cases())
def test_each_ufunc_and_operand_kind(name, kind, reflected, python_runtime):
    f = make(name, kind, reflected)
    value, grads = astad.reverse_diff(f, argnums=(0, 1)).value_and_grad(X[0], Y[0])
    ref_value, ref_grads = python_runtime[(name, kind, reflected)]
    assert value == f(X[0], Y[0]) == ref_value
    for g, ref, k in zip(grads, ref_grads, (0, 1)):
        np.testing.assert_array_equal(g, ref)  # bit for bit
        np.testing.assert_allclose(g, _central(f, (X[0], Y[0]), k), rtol=1e-6, atol=1e-7)


def test_a_program_of_operators_and_functions(python_runtime):
    value, grads = astad.reverse_diff(operator_program, argnums=(0, 1)).value_and_grad(X, Y)
    ref_value, ref_grads = python_runtime["program"]
    assert value == ref_value == operator_program(X, Y)
    for g, ref, k in zip(grads, ref_grads, (0, 1)):
        np.testing.assert_array_equal(g, ref)
        np.testing.assert_allclose(g, _central(operator_program, (X, Y), k), rtol=1e-6)


def test_views_of_arrays_written_into(python_runtime):
    f = views_and_writes
    value, grads = astad.reverse_diff(f, argnums=(0, 1)).value_and_grad(X[0], Y[0])
    ref_value, ref_grads = python_runtime["views"]
    assert value == ref_value == f(X[0], Y[0])
    for g, ref, k in zip(grads, ref_grads, (0, 1)):
        np.testing.assert_array_equal(g, ref)
        np.testing.assert_allclose(g, _central(f, (X[0], Y[0]), k), rtol=1e-6, atol=1e-9)


@native_only
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_the_compiled_rules_run_these_cases(name):
    """The cases above are the compiled path's (not only the Python rule's)."""
    from astad.rules.array import COMPILED_ELEMENTWISE, _elementwise_backward
    from astad.runtime._native import elementwise
    from astad.runtime.array_dual import ArrayDual
    from astad.runtime.duals import level
    assert COMPILED_ELEMENTWISE
    ufunc = getattr(np, name)
    tape = [()]
    with level(tape):
        x = ArrayDual(np.array([0.5, 1.5]), 0, tape)
        if ufunc is np.power:  # (a number as exponent)
            cases = [(x, 2.0), (x, 3), (x, np.float64(0.5)), (x, -1.5), (x, 0)]
        elif ufunc.nin == 1:
            cases = [(x,)]
        else:
            cases = [(x, x), (x, 2.0), (3, x), (x, np.float64(0.5)), (x, np.ones(2))]
        for args in cases:
            d = elementwise(ufunc, args)
            assert type(d) is ArrayDual and d.i == len(tape) - 1 and d.t is tape
            assert tape[-1][0] is _elementwise_backward
            np.testing.assert_array_equal(
                d.v, ufunc(*[a.v if type(a) is ArrayDual else a for a in args]))
        view = x[1:]  # a view reading its root's current version
        view_args = (view, 2.0) if ufunc is np.power else (view,) * ufunc.nin
        assert type(elementwise(ufunc, view_args)) is ArrayDual
        # and what it leaves to the Python rule
        view.synced = -1  # (as after a write into its root: index_of records a new entry)
        assert elementwise(ufunc, view_args) is NotImplemented
        assert elementwise(ufunc, (np.ones((2, 2)),) * ufunc.nin) is NotImplemented
        if ufunc.nin == 2:
            assert elementwise(ufunc, (x, np.ones(3))) is NotImplemented
        if ufunc is np.power:  # a dual exponent; a domain where the rule's partial warns
            assert elementwise(ufunc, (x, x)) is NotImplemented
            assert elementwise(ufunc, (2.0, x)) is NotImplemented
            negative = ArrayDual(np.array([-0.5, 1.5]), 0, tape)
            assert elementwise(ufunc, (negative, 0.5)) is NotImplemented
            zero = ArrayDual(np.array([0.0, 1.5]), 0, tape)
            assert elementwise(ufunc, (zero, 0.5)) is NotImplemented


def test_cases_left_to_the_python_rule():
    """Broadcasting, a view, a large array, float32, a read-only input: the same
    derivatives, from the Python rule."""
    def f(x, m, big, single):
        a = np.sum(np.sin(m * x))          # (3,) against (2, 3): broadcast
        b = np.sum(np.exp(x[1:]) * x[:-1])  # views of x
        c = np.sum(np.tanh(big * x[0]))      # 20000 elements
        d = np.sum(single * single)          # float32
        return a + b + c + float(d)
    x = np.array([0.3, -0.4, 0.5])
    x.flags.writeable = False
    m = np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 0.125]])
    big = np.linspace(-1.0, 1.0, 20000)
    single = np.array([0.5, 1.5], dtype=np.float32)
    gx, gm = astad.reverse_diff(f, argnums=(0, 1)).grad(x, m, big, single)
    np.testing.assert_allclose(gx, _central(lambda x: f(x, m, big, single), (x,), 0),
                               rtol=1e-5)
    np.testing.assert_allclose(gm, _central(lambda m: f(x, m, big, single), (m,), 0),
                               rtol=1e-5)


def test_non_finite_partials_keep_their_rule():
    """sqrt at 0 and 1/y at y = 0 give infinite partials: where the cotangent is 0 the
    contribution is 0 (the rule's NonFinite), as on the Python path."""
    def f(x):
        return np.sum(np.where(x > 0, np.sqrt(x), 0.0))
    with warnings.catch_warnings():  # (0 * inf in the backward step is not the user's)
        warnings.filterwarnings("error", "invalid value encountered in multiply")
        g = astad.reverse_diff(f).grad(np.array([0.0, 4.0, 1.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25, 0.5])

    def h(x, y):
        with np.errstate(divide="ignore"):
            return np.sum(np.where(y != 0, x / y, 0.0))
    gx = astad.reverse_diff(h, argnums=0).grad(np.array([1.0, 2.0]), np.array([0.0, 4.0]))
    np.testing.assert_array_equal(gx, [0.0, 0.25])


@pytest.mark.parametrize("exponent", [2, 3.0, 0.5, -1.0, -2.5, 0, 1, np.float64(1.5)])
def test_powers_against_their_derivative(exponent):
    """x ** k: k x^(k - 1) (0 for k = 0), at x > 0 and, for integral k, x < 0 and 0."""
    def f(x):
        return np.sum(x ** exponent * 1.5)
    integral = float(exponent) == int(exponent)
    points = [np.array([0.5, 1.5, 2.0])]
    if integral:
        points.append(np.array([-0.5, 1.5, -2.0]))
    if integral and exponent >= 1:
        points.append(np.array([0.0, 1.5, -2.0]))
    for x in points:
        g = astad.reverse_diff(f).grad(x)
        expected = np.zeros(3) if exponent == 0 else 1.5 * exponent * x ** (exponent - 1.0)
        np.testing.assert_allclose(g, expected, rtol=1e-14, atol=0)


def test_dividing_by_a_zero_number_gives_numpys_infinity():
    """x / 0.0: numpy's inf (and its warning) in the value and the gradient, as for an
    array of zeros, not Python's ZeroDivisionError from the partial 1 / 0.0."""
    def f(x, c):
        return np.sum(x / c)
    for zero in (0.0, 0, -0.0):
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            value, g = astad.reverse_diff(f, argnums=0).value_and_grad(
                np.array([1.0, 2.0]), zero)
        sign = -1.0 if str(zero) == "-0.0" else 1.0
        assert value == sign * np.inf
        np.testing.assert_array_equal(g, [sign * np.inf, sign * np.inf])


def test_tanh_far_from_zero_uses_the_accurate_partial():
    """|x| > 4: sech^2 from exp (1 - tanh^2 cancels to 0 at |x| = 20)."""
    def f(x):
        return np.sum(np.tanh(x))
    x = np.array([0.5, 20.0, -30.0])
    g = astad.reverse_diff(f).grad(x)
    np.testing.assert_allclose(g, 1.0 / np.cosh(x) ** 2, rtol=1e-12)
    assert g[1] > 0.0


def test_numpy_warns_and_raises_as_the_user_asked():
    def f(x):
        return np.sum(np.log(x) + x / 0.5)
    x = np.array([-1.0, 2.0])
    with pytest.warns(RuntimeWarning):
        astad.reverse_diff(f).grad(x)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        astad.reverse_diff(f).grad(x)

    def g(x):
        return np.sum(x / np.zeros(2))
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        astad.reverse_diff(g).grad(np.array([1.0, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        astad.reverse_diff(f).grad(np.array([1.0, 2.0]))  # nothing to warn of


def test_a_users_own_rule_takes_precedence():
    """register_elementwise(np.sin, ...) replaces astad's rule: the compiled path steps
    aside for that ufunc (here a deliberately different partial, to see which ran)."""
    from astad.registry import RECORDS
    saved = RECORDS[np.sin]

    def f(x):
        return np.sum(np.sin(x))
    x = np.array([0.1, 0.2])
    try:
        astad.register_elementwise(np.sin, lambda x, r: 2.0 * np.ones_like(x))
        np.testing.assert_array_equal(astad.reverse_diff(f).grad(x), [2.0, 2.0])
    finally:
        RECORDS[np.sin] = saved
    np.testing.assert_array_equal(astad.reverse_diff(f).grad(x), np.cos(x))


def test_nested_derivatives_of_array_programs():
    """A Hessian through the element-wise rules: the outer level's arrays are duals, which
    the compiled path leaves to the Python rule."""
    def f(x):
        return np.sum(np.sin(x) * x + np.exp(x) / (1.0 + x * x))
    x = np.array([0.3, -0.2, 0.8])
    h = astad.hessian(f)(x)
    d2 = (-np.sin(x) * x + 2 * np.cos(x)
          + np.exp(x) * ((1 + x * x) ** 2 - 4 * x * (1 + x * x) - 2 * (1 + x * x)
                         + 8 * x * x) / (1 + x * x) ** 3)
    np.testing.assert_allclose(h, np.diag(d2), rtol=1e-10, atol=1e-12)


def test_repeated_calls_leave_no_references_behind():
    import gc
    import sys as _sys

    def f(x, y):
        return np.sum(np.sin(x) * y + x / y - np.square(x))
    d = astad.reverse_diff(f, argnums=(0, 1))
    x, y = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    d.grad(x, y)
    gc.collect()
    before = (_sys.getrefcount(x), _sys.getrefcount(y), len(gc.get_objects()))
    for _ in range(200):
        d.grad(x, y)
    gc.collect()
    assert (_sys.getrefcount(x), _sys.getrefcount(y)) == before[:2]
    assert len(gc.get_objects()) <= before[2] + 10


def test_threads_differentiating_at_once_get_the_serial_results():
    """Each thread's running differentiations are its own (the compiled rules read them
    per thread): gradients taken in four threads at once are the serial ones, bit for
    bit."""
    import threading

    def f(x, y):
        a = np.sin(x) * y + x / y
        for _ in range(10):
            a = np.tanh(a) * 0.9 + np.exp(-a * a) - x
        return np.sum(a * a)
    g = astad.reverse_diff(f, argnums=(0, 1))
    rng = np.random.default_rng(1)
    inputs = [(rng.normal(size=40), rng.uniform(0.5, 2.0, size=40)) for _ in range(6)]
    serial = [g.grad(*a) for a in inputs]
    mismatches, errors = [], []

    def work():
        try:
            for _ in range(10):
                for a, expected in zip(inputs, serial):
                    got = g.grad(*a)
                    if not all(np.array_equal(u, v) for u, v in zip(got, expected)):
                        mismatches.append(a)
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not mismatches
