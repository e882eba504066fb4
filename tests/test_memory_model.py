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


def fd_gradient(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


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
