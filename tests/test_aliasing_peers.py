"""The same object at two places of the arguments, against JAX on the same inputs (x64):
each place gets its own partial derivative, in ``grad``, ``jvp``, ``vjp``, ``jacrev``,
``hessian`` and a decorated function's ``.grad``: arrays passed twice, lists passed twice,
a row shared by two rows of one argument, one array under two keys of a dict. (Writes
through one of two places are refused: tests/test_argnums.py.) Runs where JAX is
installed (the bench extra); the hand-derived partials of tests/test_argnums.py check the
same rule everywhere."""
import numpy as np
import pytest

import astad

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def make_products(xp):
    def products(a, b):
        return xp.sum(a * b) + xp.sum(xp.sin(a) * b ** 2) + a[0] * b[1] ** 3
    return products


def make_vector(xp):
    def vector(a, b):
        return a * b + xp.sin(a) * b[0]
    return vector


def make_lists(xp):
    def lists(p, q):
        total = p[0] * q[1] ** 2
        for u, v in zip(p, q):
            total = total + u * xp.cos(v)
        return total
    return lists


def make_rows(xp):
    def rows(m):
        total = 0.0
        for i, row in enumerate(m):
            for j, v in enumerate(row):
                total = total + (i + 1.0) * v * v * m[0][j]
        return total
    return rows


def make_keys(xp):
    def keys(d):
        return xp.sum(d["w"] * xp.exp(d["v"])) + xp.sum(d["w"] ** 2 * d["v"])
    return keys


RNG = np.random.default_rng(7)
X = RNG.normal(size=4)
T1, T2 = RNG.normal(size=4), RNG.normal(size=4)


def close(ours, theirs, path="result"):
    """Tuples, lists and dicts alike, leaves to 1e-12 relative."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), path
        for key in theirs:
            close(ours[key], theirs[key], f"{path}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), path
        for k, (a, b) in enumerate(zip(ours, theirs)):
            close(a, b, f"{path}[{k}]")
    else:
        np.testing.assert_allclose(np.asarray(ours, dtype=float), np.asarray(theirs),
                                   rtol=1e-12, atol=1e-12, err_msg=path)


def test_an_array_twice_in_grad_and_decorated_grad():
    ours_f, theirs_f = make_products(np), make_products(jnp)
    theirs = jax.grad(theirs_f, argnums=(0, 1))(jnp.asarray(X), jnp.asarray(X))
    close(astad.grad(ours_f, argnums=(0, 1))(X, X), theirs)
    close(astad.reverse_diff(ours_f).grad(X, X), theirs)
    close(astad.value_and_grad(ours_f, argnums=(0, 1))(X, X)[1], theirs)
    # the partials sum to the derivative of f(x, x) (the chain rule), JAX's too
    total = jax.grad(lambda x: theirs_f(x, x))(jnp.asarray(X))
    close(theirs[0] + theirs[1], total)


def test_an_array_twice_in_jvp_vjp_and_jacrev():
    ours_f, theirs_f = make_vector(np), make_vector(jnp)
    x = jnp.asarray(X)
    close(astad.jvp(ours_f, (X, X), (T1, T2)),
          jax.jvp(theirs_f, (x, x), (jnp.asarray(T1), jnp.asarray(T2))))
    value, pullback = astad.vjp(ours_f, X, X)
    their_value, their_pullback = jax.vjp(theirs_f, x, x)
    close(value, their_value)
    close(pullback(T1), their_pullback(jnp.asarray(T1)))
    close(astad.jacrev(ours_f, argnums=(0, 1))(X, X),
          jax.jacrev(theirs_f, argnums=(0, 1))(x, x))
    close(astad.jacfwd(ours_f, argnums=(0, 1))(X, X),
          jax.jacfwd(theirs_f, argnums=(0, 1))(x, x))


def test_an_array_twice_in_the_hessian():
    ours_f, theirs_f = make_products(np), make_products(jnp)
    x = jnp.asarray(X)
    close(astad.hessian(ours_f, argnums=(0, 1))(X, X),
          jax.hessian(theirs_f, argnums=(0, 1))(x, x))


def test_a_list_twice():
    ours_f, theirs_f = make_lists(np), make_lists(jnp)
    values = [float(v) for v in X]
    theirs = jax.grad(theirs_f, argnums=(0, 1))(values, values)
    close(astad.grad(ours_f, argnums=(0, 1))(values, values), theirs)
    close(astad.reverse_diff(ours_f).grad(values, values), theirs)
    tangents = [float(v) for v in T1], [float(v) for v in T2]
    close(astad.jvp(ours_f, (values, values), tangents),
          jax.jvp(theirs_f, (values, values), tangents))


def test_a_row_shared_by_two_rows():
    ours_f, theirs_f = make_rows(np), make_rows(jnp)
    row = [float(v) for v in X[:3]]
    matrix = [row, row, [0.5, -1.0, 2.0]]  # rows 0 and 1 are one list
    theirs = jax.grad(theirs_f)(matrix)
    close(astad.grad(ours_f)(matrix), theirs)
    close(astad.reverse_diff(ours_f).grad(matrix), theirs)
    close(astad.hessian(ours_f)(matrix), jax.hessian(theirs_f)(matrix))


def test_one_array_under_two_keys():
    ours_f, theirs_f = make_keys(np), make_keys(jnp)
    x = jnp.asarray(X)
    close(astad.grad(ours_f)({"w": X, "v": X}), jax.grad(theirs_f)({"w": x, "v": x}))
    close(astad.jvp(ours_f, ({"w": X, "v": X},), ({"w": T1, "v": T2},)),
          jax.jvp(theirs_f, ({"w": x, "v": x},),
                  ({"w": jnp.asarray(T1), "v": jnp.asarray(T2)},)))
