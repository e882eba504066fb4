"""The function transforms, with JAX's names and conventions: grad, value_and_grad, vjp,
jvp, jacfwd, jacrev, jacobian, hessian; composed with each other and with
``reverse_diff``. Expected values are hand-derived or central finite differences."""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest

import astad
from oracles import central_fd


def rosenbrock(x, y):
    return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2


def rosenbrock_hessian(x, y):
    return ((2.0 - 400.0 * y + 1200.0 * x * x, -400.0 * x), (-400.0 * x, 200.0))


# -- grad and value_and_grad --------------------------------------------------------------
def test_grad_argnums_as_in_jax():
    x, y = 0.7, 1.3
    dx = -2.0 * (1 - x) - 400.0 * x * (y - x * x)
    dy = 200.0 * (y - x * x)
    assert astad.grad(rosenbrock)(x, y) == pytest.approx(dx)  # default: argument 0
    assert astad.grad(rosenbrock, argnums=1)(x, y) == pytest.approx(dy)
    assert astad.grad(rosenbrock, argnums=-1)(x, y) == pytest.approx(dy)  # from the end
    assert astad.grad(rosenbrock, argnums=(1, 0))(x, y) == pytest.approx((dy, dx))
    value, gradient = astad.value_and_grad(rosenbrock, (0, 1))(x, y)
    assert value == rosenbrock(x, y) and gradient == pytest.approx((dx, dy))
    with pytest.raises(astad.AstadError, match="more than once"):
        astad.grad(rosenbrock, argnums=(0, 0))
    with pytest.raises(astad.AstadError, match="more than once"):
        astad.grad(rosenbrock, argnums=(0, -2))(x, y)
    with pytest.raises(astad.InputError, match="positional argument 2"):
        astad.grad(rosenbrock, argnums=2)(x, y)


def with_aux(x, scale):
    return x * x * scale, {"x": x, "doubled": 2.0 * x}


def test_has_aux_returns_aux_without_duals():
    gradient, aux = astad.grad(with_aux, has_aux=True)(3.0, 2.0)
    assert gradient == 12.0 and aux == {"x": 3.0, "doubled": 6.0}
    assert type(aux["x"]) is float and type(aux["doubled"]) is float
    (value, aux), gradient = astad.value_and_grad(with_aux, has_aux=True)(3.0, 2.0)
    assert (value, gradient) == (18.0, 12.0) and aux["doubled"] == 6.0
    with pytest.raises(astad.InputError, match="pair"):
        astad.grad(lambda x: x, has_aux=True)(1.0)


class Scaled:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return self.k * x * x

    def energy(self, x):
        return self.k * math.sin(x)


def scaled_power(k, x):
    return k * x ** 3


@pytest.mark.parametrize("make, derivative", [
    (lambda: (lambda x: 1.5 * x * x), 3.0 * 2.0),
    (lambda: functools.partial(scaled_power, 1.5), 4.5 * 4.0),
    (lambda: Scaled(1.5), 3.0 * 2.0),
    (lambda: Scaled(1.5).energy, 1.5 * math.cos(2.0)),
    (lambda: astad.reverse_diff(lambda x: 1.5 * x * x), 3.0 * 2.0),
], ids=["lambda", "partial", "callable object", "bound method", "reverse_diff"])
def test_grad_of_any_callable(make, derivative):
    assert astad.grad(make())(2.0) == pytest.approx(derivative, rel=1e-14)


# -- vjp and jvp --------------------------------------------------------------------------
def polar(r, theta):
    return [r * math.cos(theta), r * math.sin(theta)]


def test_vjp_gives_one_cotangent_per_primal():
    out, vjp_fn = astad.vjp(polar, 2.0, 0.5)
    assert out == polar(2.0, 0.5)
    dr, dtheta = vjp_fn([1.0, 0.0])
    assert (dr, dtheta) == pytest.approx((math.cos(0.5), -2.0 * math.sin(0.5)))
    assert vjp_fn([0.0, 1.0]) == pytest.approx((math.sin(0.5), 2.0 * math.cos(0.5)))
    (x,) = astad.vjp(lambda x: x * x, 3.0)[1](1.0)  # one primal: still a tuple
    assert x == 6.0


def test_jvp_is_the_directional_derivative():
    out, tangent = astad.jvp(polar, (2.0, 0.5), (1.0, 0.0))
    assert out == polar(2.0, 0.5)
    assert tangent == pytest.approx([math.cos(0.5), math.sin(0.5)])
    out, tangent = astad.jvp(polar, (2.0, 0.5), (0.0, 1.0))
    assert tangent == pytest.approx([-2.0 * math.sin(0.5), 2.0 * math.cos(0.5)])
    _, tangent, aux = astad.jvp(with_aux, (3.0, 2.0), (1.0, 0.0), has_aux=True)
    assert tangent == 12.0 and aux == {"x": 3.0, "doubled": 6.0}
    with pytest.raises(astad.InputError, match="one tangent per primal"):
        astad.jvp(polar, (2.0, 0.5), (1.0,))


@dataclasses.dataclass
class Spring:
    k: float
    rest: float


def spring_energy(s, xs):
    total = 0.0
    for a, b in zip(xs, xs[1:]):
        stretch = b - a - s.rest
        total += 0.5 * s.k * stretch * stretch
    return total


def test_jvp_through_structures_matches_the_gradient():
    s, xs = Spring(3.0, 0.5), [0.0, 0.7, 1.9]
    ds, dxs = Spring(0.1, -0.2), [0.3, -0.4, 0.25]
    _, tangent = astad.jvp(spring_energy, (s, xs), (ds, dxs))
    gs, gxs = astad.grad(spring_energy, (0, 1))(s, xs)
    expected = gs.k * ds.k + gs.rest * ds.rest + sum(g * d for g, d in zip(gxs, dxs))
    assert tangent == pytest.approx(expected, rel=1e-13)


def test_reverse_diff_jvp_attribute():
    f = astad.reverse_diff(rosenbrock)
    value, tangent = f.jvp((0.7, 1.3), (1.0, 2.0))
    dx, dy = f.grad(0.7, 1.3)
    assert value == rosenbrock(0.7, 1.3) and tangent == pytest.approx(dx + 2.0 * dy)


# -- Jacobians -------------------------------------------------------------------------------
def sphere_to_cartesian(v):
    r, theta, phi = v
    return [r * math.sin(theta) * math.cos(phi), r * math.sin(theta) * math.sin(phi),
            r * math.cos(theta), r * r]


def test_jacfwd_and_jacrev_agree_with_finite_differences():
    v = [1.5, 0.4, 1.1]
    forward = astad.jacfwd(sphere_to_cartesian)(v)
    reverse = astad.jacrev(sphere_to_cartesian)(v)
    assert len(forward) == 4 and all(len(row) == 3 for row in forward)
    for k in range(4):
        expected = central_fd(lambda w, k=k: sphere_to_cartesian(w)[k], (v,), 0)
        assert forward[k] == pytest.approx(expected, rel=1e-7)
        assert reverse[k] == pytest.approx(forward[k], rel=1e-13, abs=1e-15)
    np.testing.assert_allclose(astad.jacobian(sphere_to_cartesian)(v), forward, rtol=1e-13)


def layer(w, x):
    return np.tanh(w @ x)


def test_array_jacobians_have_shape_out_plus_in():
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(5, 3)), rng.normal(size=3)
    jx_f = astad.jacfwd(layer, 1)(w, x)
    jx_r = astad.jacrev(layer, 1)(w, x)
    jw_f = astad.jacfwd(layer, 0)(w, x)
    jw_r = astad.jacrev(layer, 0)(w, x)
    assert jx_f.shape == (5, 3) and jw_f.shape == (5, 5, 3)
    s = 1.0 - np.tanh(w @ x) ** 2
    np.testing.assert_allclose(jx_f, s[:, None] * w, rtol=1e-13)
    np.testing.assert_allclose(jx_r, jx_f, rtol=1e-13)
    expected_w = np.zeros((5, 5, 3))
    for i in range(5):
        expected_w[i, i, :] = s[i] * x
    np.testing.assert_allclose(jw_f, expected_w, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jw_r, expected_w, rtol=1e-13, atol=1e-15)


def structured(p, xs):
    return {"sum": p[0] * xs[0] + p[1] * xs[1], "product": (p[0] * p[1], 2.0)}


def test_jacobian_follows_the_pytree_convention():
    # the output's structure outside, the differentiated arguments' structure inside
    p, xs = (2.0, 3.0), [0.5, -1.0]
    j = astad.jacrev(structured, argnums=(0, 1))(p, xs)
    assert j == astad.jacfwd(structured, argnums=(0, 1))(p, xs)
    assert j["sum"] == ((0.5, -1.0), [2.0, 3.0])
    assert j["product"][0] == ((3.0, 2.0), [0.0, 0.0])
    assert j["product"][1] == ((0.0, 0.0), [0.0, 0.0])  # a constant output: zeros


# -- Hessians and higher derivatives -------------------------------------------------------
def test_rosenbrock_hessian():
    h = astad.hessian(rosenbrock, argnums=(0, 1))(0.7, 1.3)
    assert type(h) is tuple and type(h[0]) is tuple  # nested as the argnums are
    np.testing.assert_allclose(h, rosenbrock_hessian(0.7, 1.3), rtol=1e-14)


def test_hessian_three_ways_agree():
    def f(v):
        return np.sum(np.sin(v) * v[0]) + v[1] ** 2 * v[2]
    v = np.array([0.3, -0.8, 1.2])
    h = astad.hessian(f)(v)
    np.testing.assert_allclose(astad.jacfwd(astad.jacrev(f))(v), h, rtol=1e-13)
    np.testing.assert_allclose(astad.jacrev(astad.jacfwd(f))(v), h, rtol=1e-12)
    np.testing.assert_allclose(astad.jacrev(astad.jacrev(f))(v), h, rtol=1e-12)
    np.testing.assert_allclose(h, h.T, rtol=1e-13)
    expected = np.empty((3, 3))
    g = astad.grad(f)
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-6
        expected[:, k] = (g(v + e) - g(v - e)) / 2e-6
    np.testing.assert_allclose(h, expected, rtol=1e-6, atol=1e-8)


def test_grad_of_grad_of_grad():
    f = lambda x: math.exp(math.sin(x))  # noqa: E731
    x = 0.3
    s, c = math.sin(x), math.cos(x)
    third = math.exp(s) * (c ** 3 - 3 * s * c - c)  # by hand
    assert astad.grad(astad.grad(astad.grad(f)))(x) == pytest.approx(third, rel=1e-13)


def test_hessian_vector_product_is_jvp_of_grad():
    x, v = (0.7, 1.3), (0.2, -0.5)
    g = astad.grad(rosenbrock, argnums=(0, 1))
    _, hvp = astad.jvp(g, x, v)
    h = rosenbrock_hessian(*x)
    assert hvp == pytest.approx((h[0][0] * v[0] + h[0][1] * v[1],
                                 h[1][0] * v[0] + h[1][1] * v[1]), rel=1e-14)


# a function with a loop, recursion, a dataclass and a match on a tagged union
@dataclasses.dataclass
class Circle:
    r: float


@dataclasses.dataclass
class Box:
    w: float
    h: float


def area(shape):
    match shape:
        case Circle(r=r):
            return math.pi * r * r
        case Box(w=w, h=h):
            return w * h


def power(x, n):
    return 1.0 if n == 0 else x * power(x, n - 1)


def mixed_program(v):
    total = 0.0
    for k in range(3):
        total += power(v[k], k + 1)
    total += area(Circle(v[0])) + area(Box(v[1], v[2])) * v[0]
    return total


def mixed_hessian(v):
    x, y, z = v
    # total = x + y^2 + z^3 + pi x^2 + x y z
    return [[2 * math.pi, z, y], [z, 2.0, x], [y, x, 6.0 * z]]


def test_hessian_of_loops_recursion_dataclasses_and_a_tagged_union():
    v = [0.4, -1.1, 0.9]
    h = astad.hessian(mixed_program)(v)
    np.testing.assert_allclose(h, mixed_hessian(v), rtol=1e-13)
    np.testing.assert_allclose(astad.jacrev(astad.jacfwd(mixed_program))(v), h, rtol=1e-13)


# -- custom rules in every mode -------------------------------------------------------------
@astad.custom_jvp
def softplus(x):
    return math.log1p(math.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1.0 + math.exp(-x))


def softplus_times_x(x):
    return softplus(x) * x


def test_custom_jvp_serves_forward_reverse_and_nested_derivatives():
    x = 0.7
    s = 1.0 / (1.0 + math.exp(-x))  # softplus' = sigmoid, sigmoid' = s (1 - s)
    first = softplus(x) + x * s
    second = 2.0 * s + x * s * (1.0 - s)
    third = 3.0 * s * (1.0 - s) + x * s * (1.0 - s) * (1.0 - 2.0 * s)
    assert astad.jvp(softplus_times_x, (x,), (1.0,))[1] == pytest.approx(first, rel=1e-14)
    assert astad.grad(softplus_times_x)(x) == pytest.approx(first, rel=1e-14)  # transposed
    assert astad.hessian(softplus_times_x)(x) == pytest.approx(second, rel=1e-13)
    assert astad.grad(astad.grad(softplus_times_x))(x) == pytest.approx(second, rel=1e-13)
    assert astad.grad(astad.grad(astad.grad(softplus_times_x)))(x) == pytest.approx(
        third, rel=1e-12)


@astad.custom_jvp
def norm2(v):
    return math.sqrt(v[0] * v[0] + v[1] * v[1])


norm2.defjvps(lambda t, r, v: (v[0] * t[0] + v[1] * t[1]) / r)


def test_custom_jvp_by_argument_with_a_structured_argument():
    v = [3.0, 4.0]
    assert astad.grad(norm2)(v) == pytest.approx([0.6, 0.8])
    assert astad.jvp(norm2, (v,), ([1.0, 1.0],))[1] == pytest.approx(1.4)


@astad.custom_vjp
def cube(x):
    return x * x * x


cube.defvjp(lambda x: (x * x * x, x), lambda x, g: (3.0 * x * x * g,))


def test_custom_vjp_in_forward_mode_asks_for_a_forward_rule():
    with pytest.raises(astad.NotDifferentiableError, match="defjvp") as info:
        astad.jvp(cube, (2.0,), (1.0,))
    assert info.value.filename == __file__
    # reverse over reverse differentiates the bwd rule itself: d/dx 3x^2 = 6x
    assert astad.grad(astad.grad(cube))(2.0) == pytest.approx(12.0)


def test_astad_own_custom_primitives_have_forward_rules():
    _, t = astad.jvp(lambda p: math.dist(p, [0.0, 0.0]), ([3.0, 4.0],), ([1.0, 0.0],))
    assert t == pytest.approx(0.6)
    _, t = astad.jvp(lambda x: math.frexp(x)[0] + math.modf(x)[0], (3.0,), (1.0,))
    assert t == pytest.approx(0.25 + 1.0)


# -- numpy functions given a sequence holding constants, at a vector of tangents ------------
CONSTANT = np.array([0.5, -1.5])
JOINS = {
    "concatenate": lambda x: np.concatenate([CONSTANT, x, CONSTANT]),
    "stack": lambda x: np.stack([x, CONSTANT, x * x]),
    "vstack": lambda x: np.vstack([CONSTANT, x]),
    "hstack": lambda x: np.hstack([x, CONSTANT]),
    "dstack": lambda x: np.dstack([CONSTANT, x]),
    "column_stack": lambda x: np.column_stack([CONSTANT, x]),
    "block": lambda x: np.block([[x, CONSTANT], [CONSTANT, x]]),
    "block-promoted": lambda x: np.block([[np.outer(x, x), np.ones((2, 1))], [x, 3.0]]),
    "append": lambda x: np.append(CONSTANT, x),
    "einsum": lambda x: np.einsum("i,i->i", CONSTANT, x),
}


@pytest.mark.parametrize("name", sorted(JOINS))
def test_jacobians_and_hessians_of_joins_with_constant_items(name):
    """jacfwd carries all directions at once: a constant item of the sequence gets zeros
    for every direction (the items' tangents must line up), whether or not the rule's jvp
    takes the directions in one call."""
    join = JOINS[name]

    def energy(x):
        y = join(x)
        return np.sum(np.sin(y) * y)

    x = np.array([0.3, 0.7])
    forward = astad.jacfwd(join)(x)
    reverse = astad.jacrev(join)(x)
    assert forward.shape == np.shape(join(x)) + x.shape
    np.testing.assert_allclose(forward, reverse, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(forward, _columns_by_fd(join, x), rtol=1e-6, atol=1e-8)
    hessian = astad.hessian(energy)(x)
    np.testing.assert_allclose(hessian, _columns_by_fd(astad.grad(energy), x), rtol=1e-6,
                               atol=1e-8)


def _columns_by_fd(f, x, h=1e-6):
    """The Jacobian of an array function by central differences, a column per input."""
    return np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)],
                    axis=-1)


def test_jacrev_of_every_kind_of_index_matches_jacfwd():
    """jacrev runs index entries on all rows at once (a leading ``:``), except where numpy
    would move the indexed axes (arrays mixed with other integers): each kind against
    forward mode."""
    x = np.arange(1.0, 25.0).reshape(2, 3, 4) / 7.0
    mask = x > 1.5
    indexes = [(1,), (slice(None), 2), (Ellipsis, 1), (None, 0), ([0, 0, 1],),
               (slice(None), [2, 0, 2]), (mask,), (0, [1, 2]), ([0, 1], slice(None), [3, 0]),
               (1, 2, 3), (np.array([1, 1]), np.array([0, 2]))]
    for index in indexes:
        def f(a, index=index):
            return np.sin(a)[index] * 2.0 + a[index] ** 2
        np.testing.assert_allclose(astad.jacrev(f)(x), astad.jacfwd(f)(x), rtol=1e-13,
                                   err_msg=repr(index))

    def scalars(a):  # elements read one at a time: scalar entries
        return np.array([a[0, 1, 2] * a[1, 0, 3], a[1, 2, 0] ** 3, a[0, 0, 0]])
    np.testing.assert_allclose(astad.jacrev(scalars)(x), astad.jacfwd(scalars)(x),
                               rtol=1e-13)
