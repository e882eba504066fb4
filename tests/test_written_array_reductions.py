"""numpy's reductions to a float of a new array written by element (``y = np.zeros(n)``,
then ``y[i] = ...``) take the code for floats: ``y @ w``, ``np.dot``, ``np.inner``,
``np.vdot``, ``np.mean``, ``y.sum()``, ``y.mean()``, ``y.dot(w)``, with ``w`` another
such array or a list argument. Their gradients against the ordinary code's and central
differences, their values numpy's bit for bit, lengths that differ numpy's error, an
empty array as the ordinary code answers; anything else the ordinary code."""
import math
import warnings

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen


# -- the forms: (x, w) -> float, w a list argument --------------------------------------
def dot_operator(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return y @ w


def dot_operator_reflected(x, w):  # (w a list: ndarray.__rmatmul__)
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return w @ y


def numpy_dot(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return np.dot(y, w)


def numpy_dot_reflected(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return np.dot(w, y)


def numpy_inner(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return np.inner(y, w)


def numpy_vdot(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return np.vdot(y, w)


def dot_method(x, w):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return y.dot(w)


def two_written_arrays(x, w):
    y = np.zeros(len(x))
    z = np.zeros(len(w))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
        z[i] = math.sin(w[i]) * x[i]
    return y @ z


def composed(x, w):  # (compared: the plain path; in an expression: a leaf of it)
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 0.3 * x[i] * x[i]
    if y @ w > -1e300:
        return np.dot(y, w) * y[1] + np.mean(y) - 0.5 * y.sum()
    return 0.0


# -- (x, c) -> float: one array --------------------------------------------------------
def squared_norm(x, c):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = c * math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return y @ y


def numpy_mean(x, c):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = c * math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return np.mean(y)


def sum_method(x, c):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = c * math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return y.sum()


def mean_method(x, c):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = c * math.tanh(x[i]) + 0.3 * x[i] * x[i]
    return y.mean()


PAIRS = [dot_operator, dot_operator_reflected, numpy_dot, numpy_dot_reflected, numpy_inner,
         numpy_vdot, dot_method, two_written_arrays, composed]
SINGLES = [squared_norm, numpy_mean, sum_method, mean_method]


def _by_hand(fn, args):
    """The ordinary transformed code's value and gradient."""
    return astad.reverse_diff(fn).value_and_grad.__self__._value_and_grad_taped(args, {})


def _arguments(fn, n, kind):
    x = np.linspace(-1.3, 2.1, n)
    if fn in SINGLES:
        return {"array": x, "list": x.tolist(), "tuple": tuple(x.tolist())}[kind], 0.7
    w = np.cos(np.linspace(0.2, 5.0, n)) * 1.7
    if kind == "array":
        return x, w
    if kind == "list":
        return x.tolist(), w.tolist()
    return x, tuple(w.tolist())  # (a tuple; numpy.float64 elements don't matter here)


def _moved(arg, i, h):
    if isinstance(arg, float):
        return arg + h
    moved = list(arg)
    moved[i] += h
    return np.array(moved) if isinstance(arg, np.ndarray) else type(arg)(moved)


def _check(fn, args):
    entry = codegen.build(fn)
    assert entry.tapeless is not None and entry.tapeless(*args) is not None  # (it runs)
    value, grads = astad.value_and_grad(fn, argnums=(0, 1))(*args)
    want_value, want = _by_hand(fn, args)
    assert value == want_value == fn(*args)  # (numpy's value, bit for bit)
    assert type(value) is type(want_value) is np.float64
    for g, w, arg in zip(grads, want, args, strict=True):
        assert type(g) is type(w)
        np.testing.assert_allclose(np.asarray(g, dtype=float), np.asarray(w, dtype=float),
                                   rtol=1e-13, atol=1e-15)
        for i in ((None,) if isinstance(arg, float) else (0, 1, len(arg) - 1)):
            h = 1e-6
            up = [_moved(a, i, h) if a is arg else a for a in args]
            down = [_moved(a, i, -h) if a is arg else a for a in args]
            fd = (fn(*up) - fn(*down)) / (2 * h)
            assert (g if i is None else g[i]) == pytest.approx(fd, rel=1e-6, abs=1e-7)
    return entry, grads


@pytest.mark.parametrize("kind", ["array", "list", "tuple"])
@pytest.mark.parametrize("fn", PAIRS + SINGLES, ids=lambda f: f.__name__)
def test_a_reduction_of_a_written_array_runs_the_code_for_floats(fn, kind):
    entry, grads = _check(fn, _arguments(fn, 6, kind))
    assert ".numpy_reduced(" in entry.specialised_source


@pytest.mark.parametrize("fn", PAIRS + SINGLES, ids=lambda f: f.__name__)
def test_a_thousand_elements_are_numpys_value_bit_for_bit(fn):
    """(A thousand elements: a sequential sum's rounding is not numpy's pairwise sum
    nor BLAS's dot.)"""
    _check(fn, _arguments(fn, 1000, "array"))
    _check(fn, _arguments(fn, 1000, "list"))


@pytest.mark.parametrize("fn", PAIRS + SINGLES, ids=lambda f: f.__name__)
def test_forward_mode_agrees(fn):
    args = _arguments(fn, 7, "list")
    entry = codegen.build(fn)
    rng = np.random.default_rng(3)
    tangents = tuple(float(rng.normal()) if isinstance(a, float) else
                     rng.normal(size=len(a)).tolist() for a in args)
    assert entry.forward is not None and entry.forward(*args, *tangents) is not None
    _, dot = astad.jvp(fn, args, tangents)
    _, grads = astad.value_and_grad(fn, argnums=(0, 1))(*args)
    expected = sum(float(np.dot(np.atleast_1d(g), np.atleast_1d(t)))
                   for g, t in zip(grads, tangents))
    assert dot == pytest.approx(expected, rel=1e-12, abs=1e-13)


@pytest.mark.parametrize("fn", [f for f in PAIRS if f is not two_written_arrays],
                         ids=lambda f: f.__name__)
def test_lengths_that_differ_raise_numpys_error(fn):
    """Never a fold over the shorter (zip): the code for floats stops at numpy's error
    and the ordinary code raises it, as numpy does."""
    args = (np.linspace(0.1, 0.9, 5), [0.5, 1.5, 2.5])
    with pytest.raises(ValueError) as numpy_error:
        fn(*args)
    with pytest.raises(ValueError):
        codegen.build(fn).tapeless(*args)
    with pytest.raises(ValueError) as error:
        astad.grad(fn, argnums=(0, 1))(*args)
    assert str(error.value) == str(numpy_error.value)


@pytest.mark.parametrize("fn", [f for f in PAIRS + SINGLES if f is not composed],
                         ids=lambda f: f.__name__)
def test_an_empty_array_is_what_the_ordinary_code_answers(fn):
    """np.dot of empty arrays is 0.0, as the ordinary code answers."""
    args = (np.zeros(0), 0.7) if fn in SINGLES else (np.zeros(0), np.zeros(0))
    if fn in (numpy_mean, mean_method):
        return  # (test_the_mean_of_an_empty_array_is_the_ordinary_codes)
    value, grads = astad.value_and_grad(fn, argnums=(0, 1))(*args)
    want = _by_hand(fn, args)
    assert codegen.build(fn).tapeless(*args) is not None
    assert value == want[0] == fn(*args) == 0.0 and type(value) is np.float64
    assert [type(g) for g in grads] == [type(g) for g in want[1]]
    assert [np.shape(g) for g in grads] == [np.shape(g) for g in want[1]]


@pytest.mark.parametrize("fn", [numpy_mean, mean_method], ids=lambda f: f.__name__)
def test_the_mean_of_an_empty_array_is_the_ordinary_codes(fn):
    """numpy's nan and warning, then the ordinary gradient's ZeroDivisionError: the code
    for floats refuses first, before numpy warns (no second warning)."""
    args = (np.zeros(0), 0.7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ZeroDivisionError):
            codegen.build(fn).tapeless(*args)
    for run in (lambda: _by_hand(fn, args),
                lambda: astad.value_and_grad(fn, argnums=(0, 1))(*args)):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            with pytest.raises(ZeroDivisionError):
                run()
        assert sum("Mean of empty slice" in str(w.message) for w in record) == 1


# -- what the ordinary code keeps ---------------------------------------------------------
def sum_on_an_axis(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return np.sum(y, axis=0)


def mean_method_on_an_axis(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return y.mean(axis=0)


def dot_of_a_scalar(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return np.sum(np.dot(y, 2.0))


def dot_with_a_matrix_row(x, m):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return np.dot(y, m[0]) + m[1][0]


def dot_with_a_made_list(x):
    y = np.zeros(len(x))
    zs = [2.0 * v for v in x]
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return np.dot(y, zs)


def other_numpy_function(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i])
    return np.sum(np.exp(y))


def product(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = math.tanh(x[i]) + 2.0
    return np.prod(y)


def dot_of_arguments(x, w):  # (no written array: as before)
    return np.dot(x, w)


@pytest.mark.parametrize("fn, args", [
    (sum_on_an_axis, (np.linspace(0.1, 0.9, 4),)),
    (mean_method_on_an_axis, (np.linspace(0.1, 0.9, 4),)),
    (dot_of_a_scalar, (np.linspace(0.1, 0.9, 4),)),
    (dot_with_a_matrix_row, (np.linspace(0.1, 0.9, 2), np.array([[0.3, 0.5], [0.7, 1.1]]))),
    (dot_with_a_made_list, (np.linspace(0.1, 0.9, 4),)),
    (other_numpy_function, (np.linspace(0.1, 0.9, 4),)),
    (product, (np.linspace(0.1, 0.9, 4),)),
    (dot_of_arguments, (np.linspace(0.1, 0.9, 4), np.linspace(1.0, 2.0, 4))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_what_the_ordinary_code_keeps(fn, args):
    assert codegen.build(fn).tapeless is None
    value, grads = astad.value_and_grad(fn, argnums=tuple(range(len(args))))(*args)
    want_value, want = _by_hand(fn, args)
    assert value == want_value
    want = want if len(args) > 1 else (want,)
    for g, w in zip(grads, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_the_example_of_the_issue_runs_the_code_for_floats():
    x, w = np.linspace(-2.0, 2.0, 1000), np.linspace(0.3, 2.0, 1000)

    def f(x, w):
        y = np.zeros(len(x))
        for i in range(len(x)):
            y[i] = math.tanh(x[i])
        return y @ w
    assert codegen.build(f).tapeless(x, w) is not None
    value, (gx, gw) = astad.value_and_grad(f, argnums=(0, 1))(x, w)
    assert value == f(x, w)
    np.testing.assert_allclose(gx, w / np.cosh(x) ** 2, rtol=1e-13)
    np.testing.assert_allclose(gw, np.tanh(x), rtol=1e-15)
