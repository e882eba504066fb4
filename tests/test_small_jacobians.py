"""Jacobians, Hessians and vjp of a few floats at the cost of a gradient (issue 27,
item 5): ``jacfwd``, ``jacrev`` and ``jacobian`` of a float-valued function of floats
(or lists of floats) are its gradient, by the code ``grad`` runs; ``hessian`` of floats
is one Hessian-vector product per float (api/hvp.py); ``astad.vjp`` scales the
gradient, as ``f.vjp`` does. Checked against the general path (the same function behind
``functools.partial``, which no specialised code serves), against hand-derived values
and finite differences, and that the fast path runs."""
import dataclasses
import functools
import math

import numpy as np
import pytest

import astad
from astad.api import jacobians


def two(x, y):
    return x * math.sin(y) + y * y


def with_plain(x, n, mode, y):
    s = 0.0
    for k in range(n):
        s = s + x * x * k * y if mode == "power" else s + x
    return s


def of_lists(xs, c):
    return sum(v * v * c for v in xs) + math.exp(xs[0] * xs[-1])


def branches(x, y):
    if x > y:
        return x * x * y
    return math.log(1.0 + y * y) * x


CASES = [
    (two, (0.3, 0.7), 0), (two, (0.3, 0.7), (0, 1)), (two, (0.3, 0.7), (1, 0)),
    (two, (0.3, 0.7), 1),
    (with_plain, (0.9, 4, "power", 1.5), (0, 3)), (with_plain, (0.9, 4, "power", 1.5), 3),
    (of_lists, ([0.2, -0.4, 0.9], 1.3), 0), (of_lists, ([0.2, -0.4, 0.9], 1.3), (0, 1)),
    (of_lists, ([0.2, -0.4, 0.9], 1.3), (1, 0)),
    (branches, (0.8, 0.5), (0, 1)), (branches, (0.2, 0.5), (0, 1)),
]
IDS = [f"{fn.__name__}-{argnums}-{k}" for k, (fn, _, argnums) in enumerate(CASES)]


def _same(a, b, rel=1e-13):
    """Equal structure and types, floats to ``rel``."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y, rel)
    else:
        assert a == pytest.approx(b, rel=rel, abs=1e-15)


@pytest.mark.parametrize("fn, args, argnums", CASES, ids=IDS)
@pytest.mark.parametrize("transform", [astad.jacfwd, astad.jacrev, astad.jacobian,
                                       astad.hessian])
def test_a_few_floats_agree_with_the_general_path(transform, fn, args, argnums,
                                                  monkeypatch):
    want = transform(functools.partial(fn), argnums=argnums)(*args)

    def general_path(*_, **__):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(jacobians, "forward", general_path)  # (jacfwd's pass)
    monkeypatch.setattr(jacobians, "reverse", general_path)  # (jacrev's)
    fast = transform(fn, argnums=argnums)
    got = fast(*args)
    _same(got, want)
    _same(fast(*args), got, rel=0)  # (again: the kept code)
    _same(transform(fn, argnums=argnums)(*args), got, rel=0)  # (made inline)
    if transform is not astad.hessian:
        _same(got, astad.grad(fn, argnums=argnums)(*args), rel=0)  # the gradient itself


def test_the_hessian_of_two_floats_by_hand():
    x, y = 0.3, 0.7
    h = astad.hessian(two, argnums=(0, 1))(x, y)
    want = ((0.0, math.cos(y)), (math.cos(y), -x * math.sin(y) + 2.0))
    _same(h, want, rel=1e-15)
    assert astad.hessian(two, argnums=1)(x, y) == pytest.approx(want[1][1], rel=1e-15)


def test_the_hessian_of_a_list_by_differences():
    xs, c = [0.2, -0.4, 0.9], 1.3
    h = astad.hessian(of_lists)(xs, c)
    g = astad.grad(of_lists)
    for j in range(3):
        up, down = list(xs), list(xs)
        up[j] += 1e-6
        down[j] -= 1e-6
        column = [(a - b) / 2e-6 for a, b in zip(g(up, c), g(down, c))]
        assert [row[j] for row in h] == pytest.approx(column, rel=1e-6, abs=1e-8)


def test_a_non_finite_partial_takes_the_general_path():
    def root(x, y):
        return math.sqrt(x) * y

    fast = astad.hessian(root, argnums=(0, 1))
    general = astad.hessian(functools.partial(root), argnums=(0, 1))
    for args in ((0.0, 2.0), (4.0, 0.0)):
        got, want = fast(*args), general(*args)
        assert repr(got) == repr(want)  # (inf and nan where the general path has them)


@dataclasses.dataclass
class Point:
    x: float
    y: float


def on_record(p, s):
    return p.x * p.y * s


def test_what_the_fast_path_leaves_to_the_general_one():
    p = Point(0.5, 2.0)
    h = astad.hessian(on_record, argnums=(0, 1))(p, 3.0)  # a record: the general path
    assert h[0].x == (Point(0.0, 3.0), 2.0) and h[1] == (Point(2.0, 0.5), 0.0)
    jac, aux = astad.jacrev(two, has_aux=False, argnums=0)(0.3, 0.7), None
    with_aux = astad.jacfwd(lambda x, y: (two(x, y), x), has_aux=True)(0.3, 0.7)
    assert with_aux == (jac, 0.3) and aux is None
    vector = astad.jacrev(lambda x, y: [x * y, x + y], argnums=(0, 1))(0.3, 0.7)
    assert vector == [(0.7, 0.3), (1.0, 1.0)]  # (a list result: the general path)
    with pytest.raises(astad.AstadError):
        astad.jacrev(two)(1, 0.7)  # (an int: the general path's error)


@pytest.mark.parametrize("fn, args", [(two, (0.3, 0.7)), (of_lists, ([0.2, -0.4, 0.9], 1.3)),
                                      (branches, (0.8, 0.5)), (branches, (0.2, 0.5))])
def test_vjp_of_floats_scales_the_gradient_as_the_pass_gives_it(fn, args):
    """``astad.vjp`` of a float function of floats runs the code ``f.vjp`` runs (a
    scaled gradient); every cotangent gives what the pass of the general path gives."""
    value, pullback = astad.vjp(fn, *args)
    want_value, general = astad.vjp(functools.partial(fn), *args)
    assert value == want_value == fn(*args)
    assert type(pullback) is astad.api.diff.ScaledPullback
    for c in (1.0, -2.5, 0.0, 3, math.nan, math.inf):
        got, want = pullback(c), general(c)
        assert type(got) is tuple and len(got) == len(args)
        if math.isfinite(c):
            _same(got, want)
        else:
            assert repr(got) == repr(want)
    assert pullback.tape_length > 0


def test_vjp_leaves_ints_aux_and_structures_to_the_pass():
    value, pullback = astad.vjp(with_plain, 0.9, 4, "power", 1.5)
    assert type(pullback) is not astad.api.diff.ScaledPullback
    assert pullback(1.0)[0] == pytest.approx(astad.grad(with_plain)(0.9, 4, "power", 1.5))
    value, pullback, aux = astad.vjp(lambda x: (x * x, x), 1.5, has_aux=True)
    assert (value, pullback(1.0), aux) == (2.25, (3.0,), 1.5)


# -- a tuple (or list) of floats: each output's gradient, by the code for its rows --------
def residual(cam, pt, w):  # a small reprojection residual: 16 inputs, 2 outputs
    r = [cam[0] * pt[0] + cam[1] * pt[1] + cam[2] * pt[2] + cam[3],
         cam[4] * pt[0] + cam[5] * pt[1] + cam[6] * pt[2] + cam[7],
         cam[8] * pt[0] + cam[9] * pt[1] + cam[10] * pt[2] + cam[11]]
    u, v = r[0] / r[2], r[1] / r[2]
    d = 1.0 + w * (u * u + v * v)
    return (u * d - 0.3, v * d + 0.2)


def as_list(x, y):
    s = 0.0
    for k in range(3):
        s = s + math.sin(k * x) * y
    return [s, x * y, 2.0, y]  # (a constant output, an argument as an output)


def one_output(x):
    return (x * x,)


def springs(x, k):  # residuals appended to a list, returned as a tuple (a chain of springs)
    out = []
    for i in range(len(x)):
        left = x[i - 1] if i > 0 else 0.0
        out.append(k * (x[i] - left) + 0.1 * (x[i] - left) ** 3)
    return tuple(out)


def springs_list(x, k):
    out = []
    for v in x:
        out.append(k * math.sin(v))
    return list(out)


def springs_array(x, k):
    out = []
    for v in x:
        out.append(k * v * v)
    return np.array(out)


CAM = [1.0, 0.1, 0.2, 0.3, 0.05, 1.1, 0.1, -0.2, 0.01, 0.02, 1.0, 4.0]
ROWS = [
    (residual, (CAM, [0.5, -0.3, 1.2], 0.01), (0, 1, 2)),
    (residual, (CAM, [0.5, -0.3, 1.2], 0.01), 1),
    (residual, (CAM, [0.5, -0.3, 1.2], 0.01), (2, 0)),
    (as_list, (0.4, -1.3), (0, 1)), (as_list, (0.4, -1.3), 0),
    (one_output, (0.7,), 0),
    (springs, ([0.1, 0.4, -0.3], 2.0), (0, 1)), (springs, ([0.1, 0.4, -0.3], 2.0), 0),
    (springs_list, ([0.1, 0.4, -0.3], 2.0), (0, 1)),
    (springs_array, (np.array([0.1, 0.4, -0.3]), 2.0), 0),
]


@pytest.mark.parametrize("fn, args, argnums", ROWS,
                         ids=[f"{fn.__name__}-{argnums}" for fn, _, argnums in ROWS])
@pytest.mark.parametrize("transform", [astad.jacfwd, astad.jacrev, astad.jacobian])
def test_a_tuple_of_floats_agrees_with_the_general_path(transform, fn, args, argnums,
                                                        monkeypatch):
    want, fast = _general_then_fast(transform, fn, args, argnums, monkeypatch)
    got = fast(*args)
    _same(got, want)
    _same(fast(*args), got, rel=0)
    _same(transform(fn, argnums=argnums)(*args), got, rel=0)


def _general_then_fast(transform, fn, args, argnums, monkeypatch):
    """The general path's answer (``fn`` behind ``functools.partial``), and ``fn``'s
    transform with the general path made to raise: what it gives is the fast path's."""
    want = transform(functools.partial(fn), argnums=argnums)(*args)

    def general_path(*_, **__):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(jacobians, "forward", general_path)
    monkeypatch.setattr(jacobians, "reverse", general_path)
    return want, transform(fn, argnums=argnums)


def test_rows_against_differences():
    args = (CAM, [0.5, -0.3, 1.2], 0.01)
    jac = astad.jacrev(residual, argnums=(0, 1, 2))(*args)
    h = 1e-6
    for k, arg in enumerate(args):
        for i in range(len(arg) if isinstance(arg, list) else 1):
            def moved(step, k=k, i=i, arg=arg):
                changed = list(args)
                if isinstance(arg, list):
                    changed[k] = list(arg)
                    changed[k][i] += step
                else:
                    changed[k] = arg + step
                return residual(*changed)
            up, down = moved(h), moved(-h)
            for out in range(2):
                slope = (up[out] - down[out]) / (2 * h)
                got = jac[out][k][i] if isinstance(arg, list) else jac[out][k]
                assert got == pytest.approx(slope, rel=1e-6, abs=1e-8)


def test_rows_of_other_kinds_give_the_general_paths_answer():
    def nested_result(x):
        return ((x, x * x), x)
    assert astad.jacrev(nested_result)(2.0) == ((1.0, 4.0), 1.0)
    for transform in (astad.jacrev, astad.jacfwd):
        with pytest.raises(astad.InputError, match="no argument chosen"):
            transform(as_list)(2, -1.3)  # (an int: not differentiated)
        with pytest.raises(astad.InputError, match="no argument chosen"):
            transform(functools.partial(as_list))(2, -1.3)

    def with_text(x):  # (not floats only: the general path's answer)
        return (x * x, "a")
    assert astad.jacrev(with_text)(2.0) == astad.jacrev(functools.partial(with_text))(2.0) \
        == (4.0, "a")


def elementwise_and_sum(x, y):
    return np.sin(x) * 2.0, np.sum(x * x) * y


@pytest.mark.parametrize("transform", [astad.jacfwd, astad.jacrev, astad.jacobian])
@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0)])
def test_an_argument_of_no_elements_has_an_empty_jacobian(transform, shape):
    # JAX's answer: blocks of shape out_shape + in_shape, empty where either is
    x = np.zeros(shape)
    (sines, by_x), (total, by_y) = transform(elementwise_and_sum, argnums=(0, 1))(x, 1.5)
    assert sines.shape == shape + shape and by_x.shape == shape
    assert total.shape == shape and by_y == 0.0  # (d/dy of an empty sum times y)
    hessian = astad.hessian(lambda v: np.sum(np.sin(v)))(x)
    assert hessian.shape == shape + shape


@pytest.mark.parametrize("fn, args", [(residual, (CAM, [0.5, -0.3, 1.2], 0.01)),
                                      (as_list, (0.4, -1.3))],
                         ids=["residual", "as_list"])
def test_vjp_of_a_tuple_of_floats_sums_the_outputs_rows(fn, args, monkeypatch):
    general_value, general = astad.vjp(functools.partial(fn), *args)
    m = len(general_value)
    kind = type(general_value)
    cotangents = [kind([1.0] + [0.0] * (m - 1)), kind([0.5 * (k - 1) for k in range(m)]),
                  kind([None] * (m - 1) + [2]), kind([0.0] * m), kind([None] * m),
                  kind([math.nan] + [1.0] * (m - 1)), kind([1.0] * m)]
    value, pullback = astad.vjp(fn, *args)
    assert value == general_value == fn(*args) and type(value) is kind
    assert type(pullback).__name__ == "RowsPullback"  # (the rows' code ran)
    other = tuple(cotangents[1]) if kind is list else list(cotangents[1])
    for c in cotangents + [other]:  # (another container: the tape's answer)
        got, want = pullback(c), general(c)
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert type(g) is type(w)
            assert g == pytest.approx(w, rel=1e-13, abs=1e-15, nan_ok=True)
    # a zero (or None) cotangent: the tape's zeros, without the tape
    monkeypatch.setattr(pullback, "_tape", lambda: pytest.fail("the tape ran"))
    for c in (kind([0.0] * m), kind([None] * m)):
        assert pullback(c) == general(c)


@pytest.mark.parametrize("argnums", [(0, 1, 2), 1, (2, 0), None])
def test_a_decorated_functions_vjp_of_a_tuple_of_floats_sums_its_rows(argnums):
    args = (CAM, [0.5, -0.3, 1.2], 0.01)
    fast = astad.reverse_diff(residual, argnums=argnums)
    general = astad.reverse_diff(lambda *a: residual(*a), argnums=argnums)  # (*args: no
    value, pullback = fast.vjp(*args)                                     # code for floats)
    want_value, want_pullback = general.vjp(*args)
    assert value == want_value == residual(*args)
    assert type(pullback).__name__ == "RowsPullback"
    assert type(want_pullback).__name__ == "Pullback"
    for c in [(1.0, 0.0), (0.25, -2.0), (None, 1.5), (math.inf, 1.0)]:
        got, want = pullback(c), want_pullback(c)
        _close(got, want)


def _close(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
    else:
        assert got == pytest.approx(want, rel=1e-13, abs=1e-15, nan_ok=True)


# -- np.array of floats: an ODE's right-hand side, its Jacobian by the rows' code ----------
def robertson(y):  # a stiff ODE's right-hand side, read by element
    return np.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                     0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
                     3e7 * y[1] ** 2])


def forced(y, k):  # a float argument, a constant output, np.asarray of a tuple
    return np.asarray((y[0] * k, y[1] ** 2 - k * math.sin(y[0]), 2.0))


def lorenz(y):  # np.zeros, written by element
    d = np.zeros(3)
    d[0] = 10.0 * (y[1] - y[0])
    d[1] = y[0] * (28.0 - y[2]) - y[1]
    d[2] = y[0] * y[1] - 8.0 / 3.0 * y[2]
    return d


def diffusion(y, k):  # a loop writing np.zeros(len(y)), a write added to
    n = len(y)
    d = np.zeros(n)
    for i in range(n):
        left = y[i - 1] if i > 0 else 0.0
        d[i] = k * (left - 2.0 * y[i]) + math.sin(y[i])
    d[0] = d[0] + y[n - 1] ** 2
    return d


Y3 = np.array([1.0, 2e-5, 1e-2])
VECTORS = [(robertson, (Y3,), 0), (lorenz, (np.array([1.0, 2.0, 3.5]),), 0),
           (diffusion, (np.linspace(0.1, 1.0, 6), 0.7), (0, 1)),
           (diffusion, (np.linspace(0.1, 1.0, 6), 0.7), 1),
           (forced, (Y3[:2].copy(), 1.5), 0),
           (forced, (Y3[:2].copy(), 1.5), 1), (forced, (Y3[:2].copy(), 1.5), (0, 1)),
           (forced, (Y3[:2].copy(), 1.5), (1, 0))]


def _same_arrays(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same_arrays(x, y)
        return
    assert type(a) is type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)


@pytest.mark.parametrize("fn, args, argnums", VECTORS,
                         ids=[f"{fn.__name__}-{argnums}" for fn, _, argnums in VECTORS])
@pytest.mark.parametrize("transform", [astad.jacfwd, astad.jacrev, astad.jacobian])
def test_an_array_of_floats_agrees_with_the_general_path(transform, fn, args, argnums,
                                                         monkeypatch):
    want, fast = _general_then_fast(transform, fn, args, argnums, monkeypatch)
    got = fast(*args)
    _same_arrays(got, want)
    _same_arrays(fast(*args), got)


def test_an_array_of_floats_by_hand_and_what_stays_general():
    y = Y3
    want = np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                     [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                     [0.0, 6e7 * y[1], 0.0]])
    np.testing.assert_allclose(astad.jacrev(robertson)(y), want, rtol=1e-14)
    np.testing.assert_allclose(astad.jacfwd(robertson)(y), want, rtol=1e-14)

    def typed(y):  # (a dtype asked for, a list argument: the general path's answers)
        return np.array([y[0] * y[1], y[1]], dtype=np.float32)
    _same_arrays(astad.jacrev(typed)(Y3[:2].copy()),
                 astad.jacrev(functools.partial(typed))(Y3[:2].copy()))
    for transform in (astad.jacrev, astad.jacfwd):
        got = transform(robertson)([1.0, 2e-5, 1e-2])
        assert isinstance(got, type(transform(functools.partial(robertson))(
            [1.0, 2e-5, 1e-2])))
    value, pullback = astad.reverse_diff(robertson).vjp(y)  # (its pullback: the tape's)
    np.testing.assert_allclose(pullback(np.array([1.0, 2.0, -1.0])),
                               np.array([1.0, 2.0, -1.0]) @ want, rtol=1e-14)


def predator_prey(state, t, a, b, c, d):  # scipy's odeint form: a, b = state
    prey, predators = state
    return np.array([a * prey - b * prey * predators, c * prey * predators - d * predators])


def energy(y, k):
    return y[0] * y[1] * k + y[2] ** 2


PP_ARGS = (np.array([0.9, 1.1]), 0.3, np.float64(1.1), np.float64(0.4), np.float64(0.1),
           np.float64(0.4))


@pytest.mark.parametrize("fn, args, cotangents", [
    (predator_prey, PP_ARGS, [np.array([0.7, -1.3]), np.array([0.0, 2.0]),
                              np.array([0.0, 0.0]), np.array([np.inf, 1.0]),
                              np.array([[1.0, 2.0], [3.0, 4.0]])]),
    (lorenz, (np.array([1.0, 2.0, 3.5]),), [np.array([1.0, 0.0, -2.0])]),
    (energy, (np.array([1.0, 2.0, 0.5]), 1.5), [1.0, 0.5, 0.0, float("nan")]),
    (energy, (np.array([1.0, 2.0, 0.5]), np.float64(1.5)), [2.0]),
], ids=["predator_prey", "lorenz", "energy", "energy-float64"])
def test_vjp_of_arrays_read_by_element_agrees_with_the_pass(fn, args, cotangents):
    """``astad.vjp`` and ``f.vjp`` of a function of 1-d float arrays read by element (and
    floats): the value and each pullback as the pass gives them, types included; a
    cotangent that is not a finite vector of the output's shape takes the tape."""
    general = astad.vjp(functools.partial(fn), *args)
    decorated = astad.reverse_diff(fn, argnums=tuple(range(len(args))))
    for value, pullback in (astad.vjp(fn, *args), decorated.vjp(*args)):
        assert type(pullback).__name__ in ("RowsPullback", "ScaledPullback")
        assert type(value) is type(general[0])
        np.testing.assert_array_equal(value, general[0])
        for ct in cotangents:
            if np.ndim(ct) == 2:
                with pytest.raises(astad.InputError, match="shape"):
                    general[1](ct)
                with pytest.raises(astad.InputError, match="shape"):
                    pullback(ct)
                continue
            got, want = pullback(ct), general[1](ct)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert type(g) is type(w)
                np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def test_an_empty_output_has_an_empty_block():
    """A result of no elements (np.zeros(0), an empty slice beside another output): its
    block is (0, n) by either mode; jacrev raised numpy's reshape error on it."""
    def nothing(y):
        return np.zeros(0)

    def empty_and_square(y):
        return y[:0] * 2.0, y * y
    y = np.array([1.0, 2.0])
    for transform in (astad.jacrev, astad.jacfwd, astad.jacobian):
        for fn in (nothing, functools.partial(nothing)):
            got = transform(fn)(y)
            assert got.shape == (0, 2) and got.dtype == np.float64
        empty, square = transform(empty_and_square)(y)
        assert empty.shape == (0, 2)
        np.testing.assert_array_equal(square, np.diag(2.0 * y))


def _prod_others(x, skip):
    return math.prod(v for k, v in enumerate(x) if k not in skip)


@pytest.mark.parametrize("x", [[0.5, -1.5, 2.0, 1.25], [0.5, 0.0, 2.0, 1.25],
                               [0.0, 0.0, 2.0, 1.25], [0.0, 0.0, 0.0, 1.25]],
                         ids=["no zero", "a zero", "two zeros", "three zeros"])
@pytest.mark.parametrize("hessian", [astad.hessian, lambda f: astad.jacrev(astad.grad(f)),
                                     lambda f: astad.jacfwd(astad.jacfwd(f))],
                         ids=["hessian", "jacrev of grad", "jacfwd of jacfwd"])
def test_prod_gradient_and_hessian_by_hand(x, hessian):
    # np.prod's second derivative (others_product's derivative, pair_products): by a
    # division where no element is zero, its diagonal exactly 0; else pair by pair
    x = np.array(x)
    n = len(x)
    gradient = astad.grad(np.prod)(x)
    np.testing.assert_array_equal(gradient, [_prod_others(x, {i}) for i in range(n)])
    expected = [[0.0 if i == j else 2.0 * _prod_others(x, {i, j}) for j in range(n)]
                for i in range(n)]
    got = hessian(lambda v: np.prod(v) * 2.0)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)
    assert np.all(np.diag(got) == 0.0)


def test_prod_along_an_axis_second_derivatives_by_differences():
    # of each row's product: a Hessian of a (2, 3) input, with and without a zero
    def f(m):
        return np.sum(np.prod(m, axis=1) * np.array([1.0, -2.0]))
    for m in (np.array([[0.5, 1.5, -2.0], [1.1, 0.7, 0.9]]),
              np.array([[0.5, 0.0, -2.0], [1.1, 0.7, 0.9]])):
        got = astad.hessian(f)(m)
        step, expected = 1e-6, np.zeros((2, 3, 2, 3))
        for k in np.ndindex(2, 3):
            e = np.zeros((2, 3))
            e[k] = step
            expected[..., k[0], k[1]] = (astad.grad(f)(m + e) - astad.grad(f)(m - e)) / (2 * step)
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(got, astad.jacrev(astad.grad(f))(m), rtol=1e-15)
