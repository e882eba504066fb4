"""Transforms composed over array functions to the third order, against hand-derived
tensors: Hessians of vector-valued functions (a transform over a vector sweep whose
cotangents are differentiated values) and third derivatives (a gradient's arrays that are
duals of two enclosing levels)."""
import numpy as np
import pytest

import astad

X = np.array([0.3, -0.7, 1.1])
V = np.array([1.0, 2.0, -0.5])


def scaled_sines(x):
    return np.sin(x) * x[0]  # g_i = sin(x_i) x_0


def scaled_sines_jacobian(x):
    j = np.diag(np.cos(x) * x[0])
    j[:, 0] += np.sin(x)
    return j


def scaled_sines_hessian(x):
    """d^2 g_i / dx_j dx_k = -sin(x_i) x_0 [i=j=k] + cos(x_i) ([i=j, k=0] + [i=k, j=0])."""
    n = len(x)
    h = np.zeros((n, n, n))
    for i in range(n):
        h[i, i, i] -= np.sin(x[i]) * x[0]
        h[i, i, 0] += np.cos(x[i])
        h[i, 0, i] += np.cos(x[i])
    return h


def sum_x_sin(x):
    return np.sum(np.sin(x) * x)  # f = sum_i x_i sin(x_i)


def sum_x_sin_hessian(x):
    return np.diag(2.0 * np.cos(x) - x * np.sin(x))


def sum_x_sin_third(x):
    t = np.zeros((len(x),) * 3)
    for i, xi in enumerate(x):
        t[i, i, i] = -3.0 * np.sin(xi) - xi * np.cos(xi)
    return t


HESSIANS = {
    "hessian": lambda g: astad.hessian(g),
    "jacfwd(jacrev)": lambda g: astad.jacfwd(astad.jacrev(g)),
    "jacrev(jacrev)": lambda g: astad.jacrev(astad.jacrev(g)),
    "jacrev(jacfwd)": lambda g: astad.jacrev(astad.jacfwd(g)),
    "jacfwd(jacfwd)": lambda g: astad.jacfwd(astad.jacfwd(g)),
}


@pytest.mark.parametrize("name", list(HESSIANS))
def test_second_derivatives_of_a_vector_valued_function(name):
    got = HESSIANS[name](scaled_sines)(X)
    assert got.shape == (3, 3, 3)
    np.testing.assert_allclose(got, scaled_sines_hessian(X), rtol=1e-13, atol=1e-15)


def test_products_with_the_jacobian_of_a_vector_valued_function():
    jac = astad.jacrev(scaled_sines)
    value, tangent = astad.jvp(jac, (X,), (V,))
    np.testing.assert_allclose(value, scaled_sines_jacobian(X), rtol=1e-14)
    np.testing.assert_allclose(tangent, np.einsum("ijk,k->ij", scaled_sines_hessian(X), V),
                               rtol=1e-13, atol=1e-15)
    w = np.arange(9.0).reshape(3, 3)
    (cotangent,) = astad.vjp(jac, X)[1](w)
    np.testing.assert_allclose(cotangent, np.einsum("ij,ijk->k", w, scaled_sines_hessian(X)),
                               rtol=1e-13)


def test_hessian_of_a_tuple_valued_function():
    def pair(x):
        return np.sin(x) * x[0], x[1] * x

    first, second = astad.hessian(pair)(X)
    np.testing.assert_allclose(first, scaled_sines_hessian(X), rtol=1e-13, atol=1e-15)
    want = np.zeros((3, 3, 3))  # (x_1 x_i)'' = [i=j, k=1] + [i=k, j=1]
    for i in range(3):
        want[i, i, 1] += 1.0
        want[i, 1, i] += 1.0
    np.testing.assert_array_equal(second, want)


THIRD = {
    "jacfwd(hessian)": lambda f: astad.jacfwd(astad.hessian(f)),
    "jacrev(hessian)": lambda f: astad.jacrev(astad.hessian(f)),
    "jacfwd^3": lambda f: astad.jacfwd(astad.jacfwd(astad.jacfwd(f))),
    "jacrev^3": lambda f: astad.jacrev(astad.jacrev(astad.jacrev(f))),
    "jacfwd(jacrev(jacrev))": lambda f: astad.jacfwd(astad.jacrev(astad.jacrev(f))),
    "jacrev(jacfwd(grad))": lambda f: astad.jacrev(astad.jacfwd(astad.grad(f))),
}


@pytest.mark.parametrize("name", list(THIRD))
def test_third_derivatives_of_an_array_function(name):
    got = THIRD[name](sum_x_sin)(X)
    np.testing.assert_allclose(got, sum_x_sin_third(X), rtol=1e-13, atol=1e-15)


def test_third_derivatives_through_products_and_a_zero_dimensional_array():
    _, tangent = astad.jvp(astad.hessian(sum_x_sin), (X,), (V,))
    np.testing.assert_allclose(tangent, np.einsum("ijk,k->ij", sum_x_sin_third(X), V),
                               rtol=1e-13, atol=1e-15)
    trace = astad.grad(lambda x: np.trace(astad.hessian(sum_x_sin)(x)))(X)
    np.testing.assert_allclose(trace, np.diagonal(sum_x_sin_third(X)).diagonal(), rtol=1e-13)
    x0 = np.array(0.4)
    got = astad.jacfwd(astad.jacfwd(astad.jacfwd(sum_x_sin)))(x0)
    assert np.shape(got) == ()
    assert float(got) == pytest.approx(-3.0 * np.sin(0.4) - 0.4 * np.cos(0.4), rel=1e-14)
    np.testing.assert_allclose(astad.hessian(sum_x_sin)(X), sum_x_sin_hessian(X), rtol=1e-14)
