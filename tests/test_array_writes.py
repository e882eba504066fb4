"""Writing into arrays, with numpy's semantics: item and slice assignment (basic, fancy and
boolean indices, broadcast values), in-place operators, np.add.at, out=, np.copyto,
np.put_along_axis; into differentiated arrays and into arrays made inside (np.zeros,
np.empty, np.zeros_like, .copy(), np.array, np.eye); through aliases and views.

Every program is checked the same way: astad's value equals the original function's bit
for bit (numpy's own semantics), the gradient matches central finite differences, the
forward-mode derivative along a random direction matches the gradient, and the caller's
arrays end as the original leaves them.
"""
from __future__ import annotations

import numpy as np
import pytest

import astad


def fd_gradient(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# -- programs: one array argument x, a float result -------------------------------------------
def alias_then_inplace(x):
    w = x * 1.0
    v = w
    v += 1.0  # w sees it: the same array
    return np.sum(w * w)


def view_then_inplace(x):
    y = x * 1.0
    z = y[0:2]  # a view of y
    y *= 3.0  # z sees it
    return np.sum(z * z) + np.sum(y)


def write_through_a_view(x):
    y = x * 2.0
    z = y[1:]
    z[0] = x[0] * x[2]  # y[1] changes too
    return np.sum(y * y)


def transposed_view_write(x):
    m = np.outer(x, x)
    t = m.T
    t[0, :] = x  # m's first column
    return np.sum(m * np.arange(9.0).reshape(3, 3))


def reshaped_view_write(x):
    m = np.zeros((3, 3))
    flat = m.reshape(9)  # a view
    flat[::4] = x  # the diagonal
    return np.sum(m @ x)


def fill_elements(x):
    out = np.zeros(3)
    for i in range(3):
        out[i] = x[i] * x[(i + 1) % 3]
    return np.sum(out ** 2)


def fill_with_empty(x):
    out = np.empty(4)
    out[:3] = np.sin(x)
    out[3] = np.sum(x)
    return np.prod(out)


def fancy_and_repeated_indices(x):
    out = np.zeros(5)
    out[[0, 2, 4]] = x * 2.0
    out[[1, 1]] = x[:2]  # numpy: the last write wins
    return np.sum(out * np.arange(1.0, 6.0))


def boolean_mask_write(x):
    y = x.copy()
    y[y > 0.2] = 0.5 * y[y > 0.2] ** 2
    return np.sum(y * y)


def broadcast_value_write(x):
    p = np.eye(3)
    p[0, :] = x[0]  # a scalar broadcast over a row
    p[:, 2] = x  # a column
    return np.sum(p @ x)


def zeros_like_and_copy(x):
    y = np.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[i] ** 3
    z = x.copy()
    z[0] = y[1]
    return np.sum(y * z)


def in_place_operators(x):
    y = np.array([1.0, 2.0, 3.0])
    y += x
    y -= 0.5 * x
    y *= x
    y /= 2.0 + x * x
    y **= 2
    return np.sum(y)


def in_place_on_a_slice(x):
    u = x.copy()
    for _ in range(3):
        u[1:-1] += 0.1 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return np.sum(u * u)


def add_at_and_out(x):
    a = np.zeros(3)
    np.add.at(a, [0, 0, 2], x)  # repeated indices add each time
    b = np.empty(3)
    np.multiply(a, x, out=b)
    return np.sum(b)


def constant_mutated_after_a_product(x):
    c = np.array([1.0, 2.0, 3.0])
    y = x * c
    c[0] = 5.0  # the product's partial is the old c
    return np.sum(y * y) + np.sum(c * x)


def put_along_axis_and_copyto(x):
    a = np.zeros((3, 3))
    np.put_along_axis(a, np.array([[2], [0], [1]]), x[:, None], axis=1)
    b = np.empty(3)
    np.copyto(b, a @ x)
    return np.sum(b * b)


PROGRAMS = [alias_then_inplace, view_then_inplace, write_through_a_view,
            transposed_view_write, reshaped_view_write, fill_elements, fill_with_empty,
            fancy_and_repeated_indices, boolean_mask_write, broadcast_value_write,
            zeros_like_and_copy, in_place_operators, in_place_on_a_slice, add_at_and_out,
            constant_mutated_after_a_product, put_along_axis_and_copyto]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_writes_value_gradient_and_forward_mode(fn):
    rng = np.random.default_rng(abs(hash(fn.__name__)) % 2**32)
    x = rng.uniform(0.1, 0.9, size=3)
    kept = x.copy()
    value, gradient = astad.value_and_grad(fn)(x)
    assert value == fn(x)  # numpy's semantics, bit for bit
    np.testing.assert_array_equal(x, kept)  # the argument as the original leaves it
    np.testing.assert_allclose(gradient, fd_gradient(fn, x), rtol=1e-6, atol=1e-8)
    v = rng.normal(size=3)
    out, tangent = astad.jvp(fn, (x,), (v,))
    assert out == value
    assert tangent == pytest.approx(gradient @ v, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("fn", [view_then_inplace, fill_elements, in_place_on_a_slice],
                         ids=lambda f: f.__name__)
def test_writes_in_jacobians_and_hessians(fn):
    x = np.array([0.3, 0.6, 0.8])
    g = astad.grad(fn)
    h = astad.hessian(fn)(x)
    expected = np.array([(g(x + e) - g(x - e)) / 2e-6 for e in 1e-6 * np.eye(3)])
    np.testing.assert_allclose(h, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(astad.jacrev(g)(x), h, rtol=1e-12, atol=1e-14)


def test_an_argument_written_in_place_is_left_written_for_the_caller():
    def scale(v, k):
        v *= k  # as numpy: the caller's array changes
        return np.sum(v)

    v = np.array([1.0, 2.0])
    value, (gv, gk) = astad.value_and_grad(scale, (0, 1))(v, 3.0)
    np.testing.assert_array_equal(v, [3.0, 6.0])
    assert value == 9.0 and gk == 3.0  # d/dk sum(k v) with v as it was
    np.testing.assert_array_equal(gv, [3.0, 3.0])


def test_a_plain_array_from_outside_is_not_written_with_a_derivative():
    def f(x, buffer):
        buffer[0] = x[0]  # other names may share buffer
        return np.sum(buffer)

    with pytest.raises(astad.NotDifferentiableError, match="copy") as info:
        astad.grad(f)(np.ones(2), np.zeros(2))
    assert info.value.filename == __file__


# -- the programs ----------------------------------------------------------------------
def rnn(w, xs):
    steps, n = xs.shape
    h = np.zeros((steps + 1, n))
    for t in range(steps):
        h[t + 1] = np.tanh(w @ h[t] + xs[t])
    return np.sum(h[-1] ** 2)


def test_rnn_filling_its_states():
    rng = np.random.default_rng(1)
    w, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(4, 3))
    gw, gx = astad.grad(rnn, (0, 1))(w, xs)
    np.testing.assert_allclose(gw, fd_gradient(lambda a: rnn(a, xs), w), rtol=1e-6)
    np.testing.assert_allclose(gx, fd_gradient(lambda a: rnn(w, a), xs), rtol=1e-6)


def gmm_log_likelihood(l_entries, x):
    """A Gaussian log-likelihood whose precision's Cholesky factor is filled from its
    lower-triangular entries with ``L[rows, cols] = l``."""
    d = x.shape[1]
    rows, cols = np.tril_indices(d)
    factor = np.zeros((d, d))
    factor[rows, cols] = l_entries
    z = x @ factor
    return -0.5 * np.sum(z * z) + x.shape[0] * np.sum(np.log(np.abs(np.diag(factor))))


def test_gmm_writes_a_lower_triangular_matrix():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5, 3))
    entries = np.array([1.2, 0.1, 0.9, -0.2, 0.3, 1.1])
    g = astad.grad(gmm_log_likelihood)(entries, x)
    np.testing.assert_allclose(g, fd_gradient(lambda e: gmm_log_likelihood(e, x), entries),
                               rtol=1e-6, atol=1e-8)


def pose_chain(angles):
    """A planar kinematic chain: each link's 3x4 pose filled row by row; the end point."""
    pose = np.eye(4)
    for a in angles:
        link = np.zeros((3, 4))
        link[0, :] = [np.cos(a), -np.sin(a), 0.0, 1.0]
        link[1, :] = [np.sin(a), np.cos(a), 0.0, 0.0]
        link[2, 2] = 1.0
        step = np.eye(4)
        step[:3, :] = link
        pose = pose @ step
    return np.sum(pose[:2, 3] ** 2)


def test_kinematic_chain_filling_pose_matrices():
    angles = np.array([0.3, -0.5, 0.9])
    np.testing.assert_allclose(astad.grad(pose_chain)(angles),
                               fd_gradient(pose_chain, angles), rtol=1e-6)


def heat(u0, steps):
    u = u0.copy()
    for _ in range(steps):
        u[1:-1] = u[1:-1] + 0.2 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return np.sum(u ** 2)


def test_pde_stencil_1000_steps_in_linear_time():
    u0 = np.sin(np.linspace(0.0, np.pi, 12))
    g = astad.grad(heat)(u0, 1000)
    np.testing.assert_allclose(g, fd_gradient(lambda u: heat(u, 1000), u0), rtol=1e-5,
                               atol=1e-9)
    # the tape per step is constant (a write records the region it overwrites, not a
    # copy of the array): twice the steps, twice the entries
    short = astad.vjp(heat, u0, 500)[1].tape_length
    long = astad.vjp(heat, u0, 1000)[1].tape_length
    assert long - short == short - astad.vjp(heat, u0, 0)[1].tape_length
