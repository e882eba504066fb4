"""numpy's memory model, exactly: which results share memory with a differentiated array
(views, and the array itself) and which are copies is numpy's answer, for every function,
method and attribute (rules/array_views.py), so a write through any of them, or into the
array after them, changes what numpy changes and the derivative follows.

Each program makes ``a`` from ``x``, takes ``v = VIEW(a)``, then writes through ``v``
(``v *= 2``; only where numpy's result is writeable) or into ``a`` after it, and returns
sums of both. Checked on the value bit for bit against numpy, the gradient against
central differences, forward mode against the gradient, Hessian-vector products against
differences of the gradient, and the caller's array left as the original leaves it.
"""
from __future__ import annotations

import numpy as np
import pytest

import astad
from test_array_writes import fd_gradient  # (central differences, per element)

TRANSPOSE = getattr(np, "matrix_transpose", np.transpose)
PERMUTE = getattr(np, "permute_dims", np.transpose)

# numpy returns a view of its argument, or the argument itself: writes go through
VIEWS = {
    "np.flip": lambda a: np.flip(a),
    "np.flip axis": lambda a: np.flip(a, 1),
    "np.flipud": lambda a: np.flipud(a),
    "np.fliplr": lambda a: np.fliplr(a),
    "np.rot90": lambda a: np.rot90(a),
    "a.T": lambda a: a.T,
    "np.real": lambda a: np.real(a),
    "a.real": lambda a: a.real,
    "np.asarray": lambda a: np.asarray(a),
    "np.asanyarray": lambda a: np.asanyarray(a),
    "np.ascontiguousarray": lambda a: np.ascontiguousarray(a),
    "np.require": lambda a: np.require(a),
    "np.array copy=None": lambda a: np.array(a, copy=None),
    "a.view()": lambda a: a.view(),
    "np.atleast_2d": lambda a: np.atleast_2d(a),
    "np.atleast_3d": lambda a: np.atleast_3d(a),
    "np.split": lambda a: np.split(a, 3)[1],
    "np.hsplit": lambda a: np.hsplit(a, 3)[2],
    "a.reshape(-1)[::4]": lambda a: a.reshape(-1)[::4],
    "a[::-1, ::-2]": lambda a: a[::-1, ::-2],
    "matrix_transpose": lambda a: TRANSPOSE(a),
    "permute_dims": lambda a: PERMUTE(a, (1, 0)),
    "np.trim_zeros": lambda a: np.trim_zeros(a.reshape(-1)),
    "np.squeeze": lambda a: np.squeeze(a[None]),
    "np.moveaxis": lambda a: np.moveaxis(a, 0, 1),
    "a.ravel()": lambda a: a.ravel(),
    "np.swapaxes": lambda a: np.swapaxes(a, 0, 1),
    "np.expand_dims": lambda a: np.expand_dims(a, 1),
    "np.real_if_close": lambda a: np.real_if_close(a),
    "np.vsplit": lambda a: np.vsplit(a, 3)[1],
    "np.array_split": lambda a: np.array_split(a, 2, axis=1)[0],
    **({"np.unstack": lambda a: np.unstack(a, axis=1)[2]} if hasattr(np, "unstack") else {}),
}
# numpy's view is read-only: writes go into the array after it, which the view shows
READ_ONLY = {
    "np.diagonal": lambda a: np.diagonal(a),
    "a.diagonal(1)": lambda a: a.diagonal(1),
    "np.broadcast_to": lambda a: np.broadcast_to(a, (2, 3, 3)),
    "sliding_window_view": lambda a: np.lib.stride_tricks.sliding_window_view(a, (2, 2)),
    "as_strided": lambda a: np.lib.stride_tricks.as_strided(
        a, (2, 3), (a.strides[0], a.strides[1]), writeable=False),
}
# numpy copies: a write through one changes nothing else
COPIES = {
    "a.flatten()": lambda a: a.flatten(),
    "a.astype(a.dtype)": lambda a: a.astype(a.dtype),
    "np.copy": lambda a: np.copy(a),
    "np.array": lambda a: np.array(a),
    "a.copy()": lambda a: a.copy(),
    "np.ascontiguousarray of a.T": lambda a: np.ascontiguousarray(a.T),
    "np.asfortranarray": lambda a: np.asfortranarray(a),
}


def write_through(view):
    def f(x):
        a = x * 1.0 + 0.5
        v = view(a)
        v *= 2.0
        return np.sum(a * x) + np.sum(v * v)
    return f


def write_after(view):
    def f(x):
        a = x * 1.0 + 0.5
        v = view(a)
        a *= x
        return np.sum(v * v) + np.sum(a)
    return f


def write_through_the_argument(view):
    def f(x):
        v = view(x)
        v *= 2.0  # the caller's array changes, as in the original
        return np.sum(x * x)
    return f


CASES = ([(name, view, write_through) for name, view in {**VIEWS, **COPIES}.items()] +
         [(name, view, write_after) for name, view in {**VIEWS, **READ_ONLY,
                                                        **COPIES}.items()])


X = np.random.default_rng(0).uniform(0.1, 0.9, (3, 3))


@pytest.mark.parametrize("name, view, form", CASES,
                         ids=[f"{form.__name__}-{name}" for name, _, form in CASES])
def test_value_gradient_and_forward_mode_as_numpy(name, view, form):
    f = form(view)
    value, gradient = astad.value_and_grad(f)(X.copy())
    assert value == f(X.copy())  # numpy's semantics, bit for bit
    np.testing.assert_allclose(gradient, fd_gradient(f, X), rtol=1e-6, atol=1e-7)
    direction = np.random.default_rng(1).normal(size=X.shape)
    out, tangent = astad.jvp(f, (X.copy(),), (direction,))
    assert out == value
    assert tangent == pytest.approx(np.sum(gradient * direction), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("name", ["np.flip", "np.asarray", "a.view()", "np.real"])
def test_second_order_through_a_view(name):
    f = write_through(VIEWS[name])
    g = astad.grad(f)
    direction = np.random.default_rng(2).normal(size=X.shape)
    _, product = astad.jvp(g, (X.copy(),), (direction,))
    expected = (g(X + 1e-6 * direction) - g(X - 1e-6 * direction)) / 2e-6
    np.testing.assert_allclose(product, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(astad.hessian(f)(X.copy()).reshape(9, 9) @ direction.ravel(),
                               product.ravel(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["np.flip", "np.asarray", "np.fliplr", "a.view()",
                                  "a.T", "np.atleast_2d"])
def test_a_write_through_a_view_of_the_argument_reaches_the_caller(name):
    f = write_through_the_argument(VIEWS[name])
    x = X.copy()
    value, gradient = astad.value_and_grad(f)(x)
    expected = X.copy()
    assert value == f(expected)
    np.testing.assert_array_equal(x, expected)  # changed as the original changes it
    np.testing.assert_allclose(gradient, fd_gradient(f, X), rtol=1e-6, atol=1e-7)


def test_a_view_in_another_dtype_is_refused_not_wrong():
    def f(x):
        a = x * 1.0
        return np.sum(a.view(np.int64))

    with pytest.raises(astad.NotDifferentiableError, match="view"):
        astad.grad(f)(X.copy())


# -- a buffer an entry keeps, changed after it was recorded ---------------------------------
# Each program records y = x * c (the entry keeps c, a plain array), then changes c in
# place by an operation that is not a subscript write; the derivative is c as it was.
GLOBAL = np.array([1.0, 2.0, 0.5])


def changed_by_operator(x, c):
    y = x * c
    c *= 2.0
    return np.sum(y * y)


def changed_by_sort(x, c):
    y = x * c
    c.sort()
    return np.sum(y * y)


def changed_by_fill(x, c):
    y = x * c
    c.fill(3.0)
    return np.sum(y * y)


def changed_by_partition(x, c):
    y = x * c
    c.partition(0)
    return np.sum(y * y)


def changed_by_out(x, c):
    y = x * c
    np.multiply(c, 2.0, out=c)
    return np.sum(y * y)


def changed_by_positional_out(x, c):
    y = x * c
    np.add(c, 1.0, c)
    return np.sum(y * y)


def changed_by_put(x, c):
    y = x * c
    np.put(c, [0], [5.0])
    return np.sum(y * y)


def changed_by_copyto(x, c):
    y = x * c
    np.copyto(c, 7.0)
    return np.sum(y * y)


def changed_by_add_at(x, c):
    y = x * c
    np.add.at(c, [0, 0], 1.0)
    return np.sum(y * y)


def changed_global(x, c):
    g = GLOBAL
    y = x * g
    g *= 2.0
    return np.sum(y * y)


def scratch_buffer_reused(x, c):
    buffer = np.empty(3)
    total = 0.0
    for k in range(3):
        np.multiply(c, k + 1.0, out=buffer)
        y = x * buffer
        total = total + np.sum(np.sin(y))
    return total


BUFFERS = [changed_by_operator, changed_by_sort, changed_by_fill, changed_by_partition,
           changed_by_out, changed_by_positional_out, changed_by_put, changed_by_copyto,
           changed_by_add_at, changed_global, scratch_buffer_reused]
C = np.array([2.0, 1.0, 3.0])


def _fresh(f):
    """``f`` on fresh copies of its constants (the global restored before each call)."""
    def run(x):
        GLOBAL[:] = [1.0, 2.0, 0.5]
        return f(x, C.copy())
    return run


@pytest.mark.parametrize("f", BUFFERS, ids=lambda f: f.__name__)
def test_an_entry_sees_the_buffer_it_kept(f):
    x = np.array([0.3, 0.7, -0.4])
    GLOBAL[:] = [1.0, 2.0, 0.5]
    c, original_c = C.copy(), C.copy()
    value, gradient = astad.value_and_grad(f)(x.copy(), c)
    GLOBAL_after = GLOBAL.copy()
    GLOBAL[:] = [1.0, 2.0, 0.5]
    assert value == f(x.copy(), original_c)  # the same value
    np.testing.assert_array_equal(c, original_c)  # the caller's array as the original
    np.testing.assert_array_equal(GLOBAL_after, GLOBAL)  # leaves them
    np.testing.assert_allclose(gradient, fd_gradient(_fresh(f), x), rtol=1e-6, atol=1e-8)
    GLOBAL[:] = [1.0, 2.0, 0.5]
    _, tangent = astad.jvp(f, (x.copy(), C.copy()), (np.ones(3), None))
    assert tangent == pytest.approx(np.sum(gradient), rel=1e-10, abs=1e-12)
    GLOBAL[:] = [1.0, 2.0, 0.5]
    g = astad.grad(_fresh(f))
    hessian = astad.hessian(_fresh(f))(x.copy())
    expected = np.array([(g(x + e) - g(x - e)) / 2e-6 for e in 1e-6 * np.eye(3)])
    np.testing.assert_allclose(hessian, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(astad.jacrev(g)(x.copy()), hessian, rtol=1e-12, atol=1e-12)


def test_resize_in_place_is_refused():
    def f(x, c):
        y = x * c
        c.resize(4, refcheck=False)
        return np.sum(y)

    with pytest.raises(astad.NotDifferentiableError, match="resize"):
        astad.grad(f)(np.ones(3), C.copy())


# -- a plain array and numpy's answer about it ------------------------------------------
@pytest.mark.parametrize("name", ["np.asarray", "np.asanyarray", "np.ascontiguousarray",
                                  "np.asfortranarray", "np.require", "np.array copy=None"])
def test_numpys_answer_about_a_plain_argument_is_that_argument(name):
    """np.asarray(c) of an argument not differentiated is c: a write of a differentiated
    value through it is refused (it was made into a copy, so c and the value kept the old
    entries: a wrong value and gradient), and a plain write reaches the caller's c."""
    as_array = {**VIEWS, "np.asfortranarray": lambda a: np.asfortranarray(a)}[name]

    def writes_x(x, c):
        b = as_array(c)
        b[0] = x
        return np.sum(c * x)

    with pytest.raises(astad.NotDifferentiableError, match="written into a plain array"):
        astad.grad(writes_x)(0.5, np.ones(2))

    def writes_a_number(x, c):
        b = as_array(c)
        b[0] = 3.0
        return np.sum(c * x)

    c, expected = np.ones(2), np.ones(2)
    assert astad.value_and_grad(writes_a_number)(0.5, c) == (2.0, 4.0)
    writes_a_number(0.5, expected)
    np.testing.assert_array_equal(c, expected)


def test_a_constant_made_inside_may_be_written_into_a_plain_array():
    """A value computed only from arrays made inside (c.copy(), np.zeros) is a constant of
    every level: its value is written, with derivative 0, where a differentiated value is
    refused."""
    def f(x, c):
        d = c.copy()
        c[:] = d * 2.0 + np.zeros(2)
        return x * np.sum(c)

    c, expected = np.array([1.0, 2.0]), np.array([1.0, 2.0])
    assert astad.value_and_grad(f)(0.5, c) == (f(0.5, expected), 6.0)
    np.testing.assert_array_equal(c, expected)
    assert astad.jvp(f, (0.5, np.array([1.0, 2.0])), (1.0, None))[1] == 6.0
    assert astad.grad(astad.grad(lambda x: f(x, np.array([1.0, 2.0])) * x))(0.5) == 12.0


@pytest.mark.parametrize("dtype, kind", [(int, "integers"), (np.int32, "integers"),
                                         (bool, "bools"), (np.uint8, "integers")])
def test_a_differentiated_value_into_an_integer_array_is_refused_by_its_name(dtype, kind):
    def f(x):
        a = np.zeros(2, dtype=dtype)
        a[0] = x
        return x * a[0]

    for run in (lambda: astad.grad(f)(1.5), lambda: astad.jvp(f, (1.5,), (1.0,))):
        with pytest.raises(astad.NotDifferentiableError,
                           match=f"into an array of {kind} .*Make the array a float array"):
            run()


@pytest.mark.parametrize("runtime_size", [4, 100_000])  # the compiled path, numpy's
def test_the_users_error_state_holds_on_every_path(runtime_size):
    def f(x):
        with np.errstate(under="raise"):
            return np.sum(x * 1e-300 * 1e-300)

    x = np.ones(runtime_size)
    with pytest.raises(FloatingPointError):
        f(x)
    for run in (lambda: astad.grad(f)(x), lambda: astad.jvp(f, (x,), (x,)),
                lambda: astad.reverse_diff(f).grad(x)):
        with pytest.raises(FloatingPointError, match="underflow"):
            run()
    with np.errstate(under="ignore"):
        np.testing.assert_array_equal(astad.grad(lambda v: np.sum(v * 1e-300 * 1e-300))(x),
                                      np.full(runtime_size, 0.0))


@pytest.mark.parametrize("name, fn, at", [("sqrt", np.sqrt, 0.0), ("cbrt", np.cbrt, 0.0),
                                          ("arcsin", np.arcsin, 1.0),
                                          ("power", lambda v: v ** 0.5, 0.0)])
@pytest.mark.parametrize("size", [2, 40_000])
def test_a_derivative_raises_nowhere_the_original_does_not(name, fn, at, size):
    """Under the user's np.errstate(all="raise"), the primal is finite at the edge of the
    domain and does not raise: neither do its first and second derivatives (inf, or nan
    for an undefined second derivative, as numpy computes them)."""
    def f(x):
        with np.errstate(all="raise"):
            return np.sum(fn(x))

    x, t = np.full(size, at), np.ones(size)
    assert np.isfinite(f(x))
    assert np.all(np.isinf(astad.grad(f)(x)))
    assert np.isinf(astad.jvp(f, (x,), (t,))[1])
    astad.jvp(astad.grad(f), (x,), (t,))
    astad.grad(lambda v: astad.grad(f)(v)[0])(x)
