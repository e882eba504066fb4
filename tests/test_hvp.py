"""Hessian-vector products written out (api/hvp.py): ``astad.jvp(astad.grad(f), ...)``
runs one reverse pass over forward mode's code for floats when ``f`` has it. Each case
is checked against the general path (forward duals through the reverse transform, as
``jvp`` of a wrapper of the gradient runs) and against hand-derived Hessians."""
import dataclasses
import math
import re

import numpy as np
import pytest

import astad


def rosenbrock(x, y):
    return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2


def rosenbrock_hessian(x, y):
    return [[2.0 - 400.0 * (y - x * x) + 800.0 * x * x, -400.0 * x], [-400.0 * x, 200.0]]


def general(fun, primals, tangents):
    return astad.jvp(lambda *a: fun(*a), primals, tangents)


def test_rosenbrock_against_its_hessian():
    grad = astad.grad(rosenbrock, argnums=(0, 1))
    x, y, v = 0.7, -0.4, (0.3, -1.1)
    assert grad.hessian_vector((x, y), v) is not None  # (the code written out runs)
    gradient, product = astad.jvp(grad, (x, y), v)
    h = rosenbrock_hessian(x, y)
    assert gradient == pytest.approx((-2.0 * (1.0 - x) - 400.0 * x * (y - x * x),
                                      200.0 * (y - x * x)), rel=1e-14)
    assert product == pytest.approx(tuple(h[i][0] * v[0] + h[i][1] * v[1] for i in range(2)),
                                    rel=1e-13)


def weighted_norm(xs, m, n):
    s = 0.0
    for row, x in zip(m, xs):
        for k in range(n):
            s += math.exp(row[k % len(row)] * x) / (1.0 + x * x)
    total = 0.0
    for x in reversed(xs):
        total += x
    return s + math.sqrt(1.0 + total ** 2)


def test_lists_and_matrices_and_an_int_against_the_general_path():
    xs, m = [0.3, -0.2, 0.5], [[0.1, 0.4], [-0.3, 0.2], [0.5, -0.6]]
    v = ([1.0, 0.0, -0.5], [[0.2, 0.0], [0.0, 0.0], [0.1, -0.3]], None)
    for argnums in (0, 1, (0, 1), (1, 0)):
        grad = astad.grad(weighted_norm, argnums=argnums)
        assert grad.hessian_vector((xs, m, 3), v) is not None
        fast = astad.jvp(grad, (xs, m, 3), v)
        slow = general(grad, (xs, m, 3), v)
        assert _flat(fast) == pytest.approx(_flat(slow), rel=1e-12, abs=1e-14)


@dataclasses.dataclass
class Spring:
    k: float
    rest: float
    label: str = "spring"


def energy(s, x):
    stretch = x - s.rest
    return 0.5 * s.k * stretch * stretch + 0.1 * stretch ** 4


def test_dataclass_arguments_give_dataclasses():
    s, ds = Spring(3.0, 1.5), Spring(0.5, -0.25)
    grad = astad.grad(energy, argnums=(0, 1))
    assert grad.hessian_vector((s, 2.0), (ds, 0.7)) is not None
    (gs, gx), (hs, hx) = astad.jvp(grad, (s, 2.0), (ds, 0.7))
    (gs2, gx2), (hs2, hx2) = general(grad, (s, 2.0), (ds, 0.7))
    assert type(gs) is type(hs) is Spring and gs.label == hs.label == "spring"
    for a, b in ((gs, gs2), (hs, hs2)):
        assert (a.k, a.rest) == pytest.approx((b.k, b.rest), rel=1e-14)
    assert (gx, hx) == pytest.approx((gx2, hx2), rel=1e-14)
    # by hand: e = k d^2 / 2 + d^4 / 10, d = x - rest
    d, dd = 2.0 - 1.5, 0.7 + 0.25
    assert hx == pytest.approx(ds.k * d + (s.k + 1.2 * d * d) * dd, rel=1e-14)


def test_a_zero_tangent_through_an_infinite_partial_is_the_general_paths_result():
    def f(x, y):
        return math.sqrt(x) * y
    grad = astad.grad(f, argnums=(0, 1))
    # d/dx sqrt at 0 is infinite: without the guards, 0 * inf is NaN, so the general path
    # runs and gives its documented result (a zero tangent passes nothing on)
    assert grad.hessian_vector((0.0, 2.0), (0.0, 1.0)) is None
    assert astad.jvp(grad, (0.0, 2.0), (0.0, 1.0)) == general(grad, (0.0, 2.0), (0.0, 1.0))


def test_other_arguments_take_the_general_path():
    grad = astad.grad(rosenbrock, argnums=(0, 1))
    assert grad.hessian_vector((1, 2.0), (0.5, 0.5)) is None  # an int primal
    assert grad.hessian_vector((1.0, 2.0), (1, 0.5)) is None  # an int tangent
    assert astad.jvp(grad, (1, 2.0), (0.5, 0.5)) == general(grad, (1, 2.0), (0.5, 0.5))
    list_grad = astad.grad(weighted_norm)
    assert list_grad.hessian_vector(([0.1, 0.2], [[0.1], [0.2]], 1),
                                    ([1.0], [[0.0], [0.0]], None)) is None  # lengths differ


def recursive_power(x, k):
    if k == 0:
        return 1.0
    return x * recursive_power(x, k - 1)


def test_recursion_is_reverse_mode_of_its_tangent_code():
    """Forward mode's code of a recursive function has a recursive helper returning value
    and tangent; the specialised writer has no code for it, so reverse mode's general
    transform differentiates it: one taped pass of floats, no forward duals."""
    grad = astad.grad(recursive_power)
    assert grad.hessian_vector((1.3, 4), (1.0, None)) is not None
    gradient, product = astad.jvp(grad, (1.3, 4), (1.0, None))
    assert (gradient, product) == pytest.approx((4 * 1.3 ** 3, 12 * 1.3 ** 2), rel=1e-14)
    assert (gradient, product) == pytest.approx(general(grad, (1.3, 4), (1.0, None)),
                                                rel=1e-14)


def damped_orbit(x, y, n):
    """Recursion with two floats, a branch and an early exit."""
    if n == 0:
        return x * y
    if x > 10.0:
        return x
    return damped_orbit(math.sin(x) * y + 0.5 * x, math.cos(y) * x, n - 1) + 0.1 * x * x


@pytest.mark.parametrize("depth", [0, pytest.param(1, marks=pytest.mark.slow), 7,
                                   pytest.param(40, marks=pytest.mark.slow)])
def test_a_recursive_hessian_vector_product_against_the_general_path_and_differences(depth):
    grad = astad.grad(damped_orbit, argnums=(0, 1))
    point, v = (0.7, -0.4, depth), (0.3, -1.1, None)
    assert grad.hessian_vector(point, v) is not None
    gradient, product = astad.jvp(grad, point, v)
    assert _flat((gradient, product)) == pytest.approx(_flat(general(grad, point, v)),
                                                       rel=1e-12)
    eps = 1e-6  # (H v is the directional derivative of the gradient)
    plus = grad(0.7 + eps * 0.3, -0.4 - eps * 1.1, depth)
    minus = grad(0.7 - eps * 0.3, -0.4 + eps * 1.1, depth)
    difference = [(a - b) / (2 * eps) for a, b in zip(plus, minus)]
    assert list(product) == pytest.approx(difference, rel=1e-6, abs=1e-8)
    hessian = astad.hessian(damped_orbit, argnums=(0, 1))(*point)
    columns = [astad.jvp(grad, point, e)[1] for e in ((1.0, 0.0, None), (0.0, 1.0, None))]
    assert _flat(hessian) == pytest.approx(_flat(list(zip(*columns))), rel=1e-12)


def relax(x, y):
    for _ in range(3):
        x = 0.5 * x + 0.1 * math.sin(x) * y - 0.2 * y * y
        y = y * 0.9 + 0.05 * x * x
    return x * y


def test_the_tangent_code_keeps_the_users_expressions_whole():
    """Forward mode's temporaries read once are written back into their reader, so the
    reverse pass over the tangent code records one entry per statement, not one per
    operation; a temporary read twice (a value shared by the primal and its tangent)
    stays. The result is the general path's (up to rounding) and the differences'."""
    grad = astad.grad(relax, argnums=(0, 1))
    source = grad.source
    tangent = source[source.index("def relax_tangent"):source.index("# and reverse mode")]
    loop = [line.strip() for line in tangent.splitlines()
            if line.startswith(" " * 8) and not line.strip().startswith("#")]
    assert len(loop) <= 8, loop  # (one operation a line would be more than twenty)
    assert any(line.startswith("x = 0.5 * x + ") for line in loop)
    for name in re.findall(r"(_v[tg]\d+) = ", tangent):
        assert len(re.findall(rf"\b{name}\b", tangent)) >= 3, name  # (read twice or more)
    point, v = (0.7, -0.4), (0.3, -1.1)
    assert grad.hessian_vector(point, v) is not None
    gradient, product = astad.jvp(grad, point, v)
    assert _flat((gradient, product)) == pytest.approx(_flat(general(grad, point, v)),
                                                       rel=1e-13)
    eps = 1e-6
    plus = grad(0.7 + eps * 0.3, -0.4 - eps * 1.1)
    minus = grad(0.7 - eps * 0.3, -0.4 + eps * 1.1)
    assert list(product) == pytest.approx([(a - b) / (2 * eps) for a, b in zip(plus, minus)],
                                          rel=1e-6)


SCALE = 2.0


def scaled(x):
    return SCALE * x ** 3


def test_a_rebound_global_rewrites_the_code(monkeypatch):
    grad = astad.grad(scaled)
    assert astad.jvp(grad, (1.5,), (1.0,)) == pytest.approx((2.0 * 3 * 2.25, 2.0 * 6 * 1.5))
    monkeypatch.setitem(globals(), "SCALE", 5.0)
    assert astad.jvp(grad, (1.5,), (1.0,)) == pytest.approx((5.0 * 3 * 2.25, 5.0 * 6 * 1.5))


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [x for item in value for x in _flat(item)]
    return [value]


def log_barrier(x, y):
    return x * y + math.log(x) + y / (x - 1.0)


def test_an_error_is_raised_by_the_general_path_at_the_users_line():
    grad = astad.grad(log_barrier, argnums=(0, 1))
    assert grad.hessian_vector((-1.0, 2.0), (1.0, 0.0)) is None
    with pytest.raises(ValueError) as raised:
        astad.jvp(grad, (-1.0, 2.0), (1.0, 0.0))
    assert any(entry.name == "log_barrier" for entry in raised.traceback)
    with pytest.raises(ZeroDivisionError):
        astad.jvp(grad, (1.0, 2.0), (1.0, 0.0))
    # away from them, the code written out, against the Hessian by hand
    x, y, vx, vy = 2.0, 3.0, 0.5, -1.0
    gradient, product = astad.jvp(grad, (x, y), (vx, vy))
    hxx = -1.0 / x ** 2 + 2.0 * y / (x - 1.0) ** 3
    hxy = 1.0 - 1.0 / (x - 1.0) ** 2
    assert product == pytest.approx((hxx * vx + hxy * vy, hxy * vx), rel=1e-14)


@astad.reverse_diff
def decorated_rosenbrock(x, y):
    return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2


def test_a_decorated_function_takes_the_code_written_out():
    grad = astad.grad(decorated_rosenbrock, argnums=(0, 1))
    assert grad.hessian_vector((0.7, -0.4), (0.3, -1.1)) is not None
    fast = _flat(astad.jvp(grad, (0.7, -0.4), (0.3, -1.1)))
    assert fast == _flat(astad.jvp(astad.grad(rosenbrock, argnums=(0, 1)), (0.7, -0.4),
                                   (0.3, -1.1)))
    assert fast == pytest.approx(_flat(general(grad, (0.7, -0.4), (0.3, -1.1))), rel=1e-14)


def test_the_source_of_a_gradient_shows_the_hessian_vector_code():
    grad = astad.grad(rosenbrock, argnums=(0, 1))
    source = grad.source
    assert source.startswith(astad.reverse_diff(rosenbrock).source.rstrip("\n"))
    nested = source[source.index("# a Hessian-vector product"):]
    # forward mode's tangent code, with the user's names, then reverse mode's code of it
    tangent = nested[nested.index("def rosenbrock_tangent(x, y, x_dot, y_dot):"):]
    assert "return (1.0 - x) ** 2 + 100.0 * (y - x * x) ** 2" in tangent  # (a comment)
    assert "def rosenbrock_tangent_floats(x, y, x_dot, y_dot):" in tangent
    # the code shown is the code that runs: its function gives H v and the gradient
    run = astad.compile.calls.transformed(rosenbrock).hvp[0]
    assert run.__name__ == "rosenbrock_tangent_floats"
    value, (dx, dy, gx, gy) = run(0.5, 1.5, 1.0, -2.0)
    (hxx, hxy), (hyx, hyy) = rosenbrock_hessian(0.5, 1.5)
    assert (dx, dy) == pytest.approx((hxx - 2.0 * hxy, hyx - 2.0 * hyy), rel=1e-14)
    assert (gx, gy) == pytest.approx(astad.grad(rosenbrock, argnums=(0, 1))(0.5, 1.5))
    assert grad.source == source  # written once, the same text every time


def numpy_sum_of_squares(x):
    return np.sum(x * x)


def test_the_source_of_a_gradient_without_hessian_vector_code_is_the_functions():
    source = astad.grad(numpy_sum_of_squares).source  # (arrays: the general path)
    assert "def numpy_sum_of_squares(_tape, x):" in source and "Hessian-vector" not in source
    with_aux = astad.grad(lambda x: (x * x, 1.0), has_aux=True)
    assert "Hessian-vector" not in with_aux.source
    with pytest.raises(AttributeError):
        astad.grad(math.sin).source


def test_show_prints_a_gradient_with_the_users_lines():
    import io
    out = io.StringIO()
    astad.show(astad.grad(rosenbrock), file=out, layout="stacked")
    text = out.getvalue()
    assert "def rosenbrock(x, y):" in text and "grad_rosenbrock" in text
    assert "rosenbrock_tangent_floats" in text


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), (1,)])
def test_repeated_products_of_floats_take_the_code_found_once(argnums):
    """After one product of floats the gradient keeps the code it ran (checked current at
    each call): every later call gives the hand-derived product, and an int, a non-finite
    result or another argument count goes back to the general path."""
    grad = astad.grad(rosenbrock, argnums=argnums)
    positions = (argnums,) if isinstance(argnums, int) else argnums

    def expected(x, y, v):
        h = rosenbrock_hessian(x, y)
        full = [h[i][0] * v[0] + h[i][1] * v[1] for i in range(2)]
        product = tuple(full[k] for k in positions)
        return product[0] if isinstance(argnums, int) else product

    for x, y, v in [(0.7, -0.4, (0.3, -1.1)), (1.5, 2.0, (1.0, 0.0)), (-0.2, 0.1, (0.5, 0.5))]:
        _, product = astad.jvp(grad, (x, y), v)
        assert product == pytest.approx(expected(x, y, v), rel=1e-12)
    assert grad.hvp_known[2] is not None
    ints = (1.0, 2) if positions == (0,) else (1, 2.0)  # (an int where a float remains)
    assert astad.jvp(grad, ints, (0.5, 0.5)) == general(grad, ints, (0.5, 0.5))
    _, product = astad.jvp(grad, (0.7, -0.4), (0.3, -1.1))
    assert product == pytest.approx(expected(0.7, -0.4, (0.3, -1.1)), rel=1e-12)


def test_the_code_found_once_follows_a_replaced_function_body():
    def f(x, y):
        return x * x * y
    grad = astad.grad(f, argnums=(0, 1))
    assert astad.jvp(grad, (2.0, 3.0), (1.0, 0.0))[1] == pytest.approx((6.0, 4.0))
    assert astad.jvp(grad, (2.0, 3.0), (1.0, 0.0))[1] == pytest.approx((6.0, 4.0))

    def g(x, y):
        return x * y * y
    f.__code__ = g.__code__
    assert astad.jvp(grad, (2.0, 3.0), (1.0, 0.0))[1] == pytest.approx((0.0, 6.0))


def test_a_non_finite_product_after_finite_ones_is_the_general_paths():
    def f(x, y):
        return math.sqrt(x) * y
    grad = astad.grad(f, argnums=(0, 1))
    assert astad.jvp(grad, (4.0, 2.0), (1.0, 1.0))[1] == pytest.approx((-2.0 / 32 + 0.25,
                                                                         0.25))
    assert grad.hvp_known[2] is not None
    assert astad.jvp(grad, (0.0, 2.0), (0.0, 1.0)) == general(grad, (0.0, 2.0), (0.0, 1.0))


def test_the_source_of_a_recursive_gradient_shows_its_tangent_code():
    # (its Hessian-vector code is reverse mode's general transform of the tangent code: the
    # text shown first is that tangent code, not the module that wraps the transform)
    source = astad.grad(recursive_power).source
    nested = source[source.index("# a Hessian-vector product"):]
    tangent = nested[:nested.index("# and reverse mode of it")]
    assert "def recursive_power_tangent(x, k, x_dot, k_dot):" in tangent
    assert "api/hvp.py" in tangent and "import" not in tangent
    assert "def recursive_power_tangent(_tape, x, k, x_dot, k_dot):" in nested
