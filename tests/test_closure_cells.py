"""Closures on the specialised path (issue 27, items 1, 2 and 6): a function that reads
its closure's numbers, or calls a function held in a closure cell (a lambda over a
lambda, a nested ``def`` calling another), runs the code written for floats, its cells
read when it runs, so every function made again of the same code runs it with its own
cells. A cell of another kind (an array, a dual of an enclosing differentiation, a
function of other code or with a rule of its own) runs the ordinary code. Checked
against the ordinary transformed code, central differences, forward mode and values
derived by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

import astad
from astad.compile import calls


def scaled_sine(a):
    return lambda x: a * math.sin(x) * x


def power_sum(k, n):  # a float scale, an int bound
    def f(xs):
        s = 0.0
        for i in range(n):
            s = s + xs[i] ** 2 * k
        return s
    return f


def switched(flag, c):  # a bool tested, a float
    def f(x, y):
        if flag:
            return x * y + c * math.exp(x)
        return x - y * c
    return f


def saddle(p0, p1):  # (Siskind and Pearlmutter's saddle: a lambda over a lambda)
    inner = lambda q: (p0 * p0 + p1 * p1) - (q[0] * q[0] + q[1] * q[1])  # noqa: E731
    return lambda v: -inner(v) * p0


def chain_of_closures(a, b):
    def g(t):
        return math.exp(a * t) + b

    def h(t):
        return g(t) * g(-t) + b  # a closure calling a closure

    return lambda x, y: h(x) + h(y) * a


def generator_in_closure(w, shift):
    def loss(xs):
        return sum(math.tanh(w * x - shift) for x in xs)
    return loss


def magnitude(v):
    return math.sqrt(sum(vi * vi for vi in v))


def distance(u, v):
    return magnitude([a - b for a, b in zip(u, v)])  # a list comprehension as an argument


def potential(charges):  # (the particle problem's: a closure over a list of lists)
    def p(x):
        return sum(1.0 / distance(x, c) for c in charges)
    return p


def weighted_data(data, weights):  # a list and a tuple of data, read by index and zip
    def loss(w):
        s = 0.0
        for i in range(len(data)):
            s = s + weights[i] * (w[0] * data[i] + w[1] - data[-1 - i]) ** 2
        return s + sum(a * b for a, b in zip(w, weights))
    return loss


def comprehension_list(c):
    def f(xs):
        ys = [math.sin(c * x) for x in xs if x > -1.0]
        zs = [y * y for y in ys]
        return sum(zs) + ys[0] * len(ys) + magnitude([x * c for x in xs])
    return f


XS = [0.3, -1.2, 0.8, 1.5]
CASES = [  # (factory, two sets of its arguments, the made function's arguments)
    (scaled_sine, [(2.0,), (-0.5,)], (0.7,)),
    (power_sum, [(1.5, 3), (-2.0, 4)], (XS,)),
    (switched, [(True, 0.5), (False, 2.0)], (0.4, -1.1)),
    (saddle, [(1.0, 2.0), (0.5, -0.25)], ([0.3, 0.4],)),
    (chain_of_closures, [(0.5, 1.0), (-0.3, 2)], (0.4, -0.9)),
    (generator_in_closure, [(0.7, 0.1), (-1.3, 0.5)], (XS,)),
    (potential, [([[10.0, 9.7], [10.0, 0.0]],), ([(1.0, 2.0), [3, -1.5], [0.5, 0.5]],)],
     ([0.5, 7.0],)),
    (weighted_data, [([1.0, 2.0, 3.5], (0.5, 1.0, 2.0)), ((1, -2, 0.5, 4.0), [1.0] * 4)],
     ([0.3, -0.7],)),
    (comprehension_list, [(0.7,), (2,)], (XS,)),
]
IDS = [factory.__name__ for factory, _, _ in CASES]


def _taped(fn, args):
    """The ordinary transformed code's value and gradient."""
    return astad.reverse_diff(fn).value_and_grad.__self__._value_and_grad_taped(args, {})


def _differences(fn, args, h=1e-6):
    """Central differences of ``fn`` in each float of its arguments."""
    out = []
    for k, a in enumerate(args):
        if isinstance(a, list):
            row = []
            for i in range(len(a)):
                up, down = list(a), list(a)
                up[i] += h
                down[i] -= h
                row.append((fn(*args[:k], up, *args[k + 1:]) -
                            fn(*args[:k], down, *args[k + 1:])) / (2 * h))
            out.append(row)
        else:
            out.append((fn(*args[:k], a + h, *args[k + 1:]) -
                        fn(*args[:k], a - h, *args[k + 1:])) / (2 * h))
    return out


@pytest.mark.parametrize("factory, settings, args", CASES, ids=IDS)
def test_closures_run_the_specialised_code_with_their_own_cells(factory, settings, args):
    for setting in settings:
        fn = factory(*setting)
        entry = calls.transformed(fn)
        assert entry.tapeless is not None
        specialised = entry.tapeless(*args)
        assert specialised is not None  # the cells were of the kinds it was written for
        value, grads = astad.reverse_diff(fn).value_and_grad(*args)
        want_value, want = _taped(fn, args)
        assert value == want_value == fn(*args) == specialised[0]
        grads = grads if len(args) > 1 else (grads,)
        want = want if len(args) > 1 else (want,)
        for g, w, d in zip(grads, want, _differences(fn, args)):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(g, d, rtol=1e-6, atol=1e-8)


def test_functions_made_again_share_one_build_and_read_their_own_cells():
    builds = []
    original = calls.build

    def counting(fn, *rest):
        builds.append(fn)
        return original(fn, *rest)

    def saddle_again(p0, p1):  # (its code built here first)
        inner = lambda q: (p0 * p0 + p1 * p1) - (q[0] * q[0] + q[1] * q[1])  # noqa: E731
        return lambda v: -inner(v) * p0

    calls.build = counting
    try:
        for k in range(6):
            p0, p1 = 0.5 + k, 1.0 - 0.25 * k
            fn = saddle_again(p0, p1)
            entry = calls.transformed(fn)
            assert entry.tapeless([0.3, 0.4]) is not None
            g = astad.grad(fn)([0.3, 0.4])
            assert g == pytest.approx([2 * 0.3 * p0, 2 * 0.4 * p0], rel=1e-14)
    finally:
        calls.build = original
    assert len([fn for fn in builds if fn.__code__ is saddle_again(1.0, 1.0).__code__]) == 1


def test_data_holding_outer_values_runs_the_ordinary_code():
    """A closure's list that holds a dual of an enclosing differentiation (the particle
    problem's charges, moved by the outer variable) is not plain data: the derivative
    through it is kept."""
    def energy(w):
        p = potential([[10.0, 10.0 - w], [10.0, 0.0]])
        g = astad.grad(p)([0.5, 7.0])
        return g[0] * w + p([0.5, 7.0])

    h = 1e-6
    want = (energy(0.3 + h) - energy(0.3 - h)) / (2 * h)
    assert astad.grad(energy)(0.3) == pytest.approx(want, rel=1e-7)
    inner = potential([[10.0, 9.7], [10.0, 0.0]])
    assert calls.transformed(inner).tapeless([0.5, 7.0]) is not None
    for data in ([[10.0, astad.grad], [1.0, 0.0]], [[10.0, np.float64(9.7)], [10.0, 0.0]]):
        assert calls.transformed(potential(data)).tapeless([0.5, 7.0]) is None


def test_a_closures_list_is_read_as_it_is_when_the_code_runs():
    data = [1.0, 2.0]
    loss = lambda w: sum(w * d for d in data)  # noqa: E731
    assert astad.grad(loss)(0.5) == 3.0
    data.append(4.0)  # the same list, longer
    assert astad.grad(loss)(0.5) == 7.0
    data[0] = [1.0]  # not numbers any more: Python's error, from the ordinary code
    with pytest.raises(TypeError):
        astad.grad(loss)(0.5)


def test_a_rebound_cell_is_read_at_each_call():
    a = 1.0
    f = lambda x: a * x * x  # noqa: E731
    grad = astad.grad(f)
    assert grad(2.0) == 4.0
    a = 3.0
    assert grad(2.0) == 12.0
    a = np.float64(0.5)  # another kind: the ordinary code, still right
    assert grad(2.0) == 2.0
    a = 2
    assert grad(2.0) == 8.0


def test_cells_of_other_kinds_run_the_ordinary_code():
    fn = scaled_sine(2.0)
    assert calls.transformed(fn).tapeless(0.7) is not None
    for a in (np.float64(2.0), np.array(2.0), [2.0][0]):
        other = scaled_sine(a)
        value, g = astad.value_and_grad(other)(0.7)
        assert value == pytest.approx(other(0.7), rel=1e-15)
        assert g == pytest.approx(2.0 * (math.cos(0.7) * 0.7 + math.sin(0.7)), rel=1e-14)
    weights = np.array([1.0, -2.0])
    other = scaled_sine(weights)  # an array in the cell: an array result
    assert calls.transformed(other).tapeless(0.7) is None
    np.testing.assert_allclose(astad.jacobian(other)(0.7),
                               weights * (math.cos(0.7) * 0.7 + math.sin(0.7)), rtol=1e-14)


def test_a_function_of_other_code_in_the_cell_runs_its_own_code():
    def twice(g):
        return lambda x: g(x) * 2.0

    square = twice(lambda t: t * t)
    cube = twice(lambda t: t ** 3)  # the same outer code, another inner code
    builtin = twice(math.sin)  # not Python code: the ordinary code calls it
    assert calls.transformed(square).tapeless(2.0) is not None
    assert calls.transformed(cube).tapeless(2.0) is None
    assert astad.grad(square)(2.0) == 8.0
    assert astad.grad(cube)(2.0) == 24.0
    assert astad.grad(builtin)(2.0) == pytest.approx(2.0 * math.cos(2.0), rel=1e-15)


def test_a_function_with_a_rule_of_its_own_keeps_its_rule():
    def surrogate(t):
        return t * t

    def wrap(g):
        return lambda x: g(x) + x

    fn = wrap(surrogate)
    assert astad.grad(fn)(3.0) == 7.0  # written for surrogate's code, inlined
    astad.register_vjp(surrogate, lambda g, result, t: g * 100.0)
    try:
        assert astad.grad(fn)(3.0) == 101.0  # the rule, not the body
        assert astad.grad(wrap(surrogate))(3.0) == 101.0
    finally:
        from astad.registry import RECORDS, renew
        RECORDS.pop(surrogate, None)
        renew(surrogate)
    assert astad.grad(wrap(surrogate))(3.0) == 7.0


def test_a_closure_over_a_name_like_a_rules_function():
    def make(sin):  # a float named like the rule the written code calls
        return lambda x: math.sin(x) * sin
    value, g = astad.value_and_grad(make(2.0))(0.5)
    assert value == math.sin(0.5) * 2.0
    assert g == pytest.approx(2.0 * math.cos(0.5), rel=1e-15)


def test_an_empty_cell_raises_as_python_does_then_works():
    def late():
        f = lambda x: x * b  # noqa: E731 (b is assigned below)
        with pytest.raises(NameError):
            astad.grad(f)(3.0)
        b = 2.0
        return astad.grad(f)(3.0)
    assert late() == 2.0


def test_nested_differentiation_through_a_closure_over_an_outer_value():
    """The inner function's cell holds a dual of the outer differentiation: the inner
    gradient's derivative is a mixed second derivative, by hand."""
    def inner_slope(a):  # d/dx (a x^2 sin x) at x = 0.3
        return astad.grad(lambda x: a * x * x * math.sin(x))(0.3)

    x = 0.3
    slope = 2 * x * math.sin(x) + x * x * math.cos(x)
    assert inner_slope(1.7) == pytest.approx(1.7 * slope, rel=1e-14)
    assert astad.grad(inner_slope)(1.7) == pytest.approx(slope, rel=1e-14)
    assert astad.jvp(inner_slope, (1.7,), (2.0,))[1] == pytest.approx(2.0 * slope, rel=1e-14)

    def saddle_value(p):  # the saddle's inner gradient, differentiated in p
        g = astad.grad(saddle(p[0], p[1]))([0.3, 0.4])  # = [0.6 p0, 0.8 p0]
        return g[0] * g[1]

    assert astad.grad(saddle_value)([1.5, 2.0]) == pytest.approx([2 * 0.48 * 1.5, 0.0],
                                                                   abs=1e-14)


def test_a_lambda_made_per_call_runs_the_code_of_its_kind_and_keeps_nothing():
    from astad.compile import entry

    def model(a, x, y):
        return a * math.sin(x) * y + math.exp(-a * x)

    astad.grad(lambda x, y: model(0.1, x, y))(0.7, 1.5)  # (its code written once)
    held = len(entry.CACHE)
    for k in range(8):
        a = 0.5 + k
        dx = a * math.cos(0.7) * 1.5 - a * math.exp(-a * 0.7)
        dy = a * math.sin(0.7)
        f = lambda x, y: model(a, x, y)  # noqa: E731, B023 (called now)
        assert astad.grad(f)(0.7, 1.5) == pytest.approx(dx, rel=1e-14)
        value, g = astad.value_and_grad(lambda x, y: model(a, x, y), argnums=(0, 1))(0.7, 1.5)  # noqa: B023
        assert value == model(a, 0.7, 1.5) and g == pytest.approx((dx, dy), rel=1e-14)
        assert astad.grad(lambda x, y: model(a, x, y), argnums=1)(0.7, 1.5) == \
            pytest.approx(dy, rel=1e-14)  # noqa: B023
        with pytest.raises(TypeError):  # (Python's own error, from the ordinary code)
            astad.grad(lambda x, y: model(a, x, y))(0.7)  # noqa: B023
        assert astad.grad(lambda x, y: model(a, x, y))(np.float64(0.7), 1.5) == \
            pytest.approx(dx, rel=1e-14)  # noqa: B023 (another kind: the ordinary code)
    assert len(entry.CACHE) <= held + 8  # (only the calls of other kinds kept an entry)


class Scaled:
    def __init__(self, k):
        self.k = k

    @property
    def twice(self):
        return 2.0 * self.k


class Shifted:
    def __init__(self, k):
        self.k = k

    @property
    def twice(self):
        return self.k + 2.0


def test_functions_made_again_over_a_class_take_the_code_written_for_that_class():
    builds = []
    original = calls.build

    def counting(fn, *rest):
        builds.append(fn.__code__)
        return original(fn, *rest)

    def over(cls):
        return lambda x: cls(x * x).twice * x

    calls.build = counting
    try:
        for _ in range(3):
            assert astad.grad(over(Scaled))(1.5) == pytest.approx(6 * 1.5 ** 2, rel=1e-14)
        assert astad.grad(over(Shifted))(1.5) == pytest.approx(3 * 1.5 ** 2 + 2.0,
                                                               rel=1e-14)
        assert astad.grad(over(Scaled))(1.5) == pytest.approx(6 * 1.5 ** 2, rel=1e-14)
    finally:
        calls.build = original
    code = over(Scaled).__code__
    assert builds.count(code) == 3  # once per change of class, not once per function


@pytest.mark.parametrize("factory, settings, args", CASES, ids=IDS)
def test_forward_mode_of_closures_runs_the_code_written_for_floats(factory, settings, args):
    for setting in settings:
        fn = factory(*setting)
        entry = calls.transformed(fn)
        tangents = tuple([0.5] * len(a) if isinstance(a, list) else -1.5 for a in args)
        assert entry.forward is not None
        assert entry.forward(*args, *tangents) is not None  # (its cells' kinds checked)
        value, tangent = astad.jvp(fn, args, tangents)
        grads = astad.grad(fn, argnums=tuple(range(len(args))))(*args)
        want = sum(float(np.dot(g, t)) for g, t in zip(grads, tangents))
        assert value == fn(*args)
        assert tangent == pytest.approx(want, rel=1e-12, abs=1e-14)


def test_forward_mode_of_a_closure_over_other_kinds_runs_the_transformed_code():
    fn = scaled_sine(2.0)
    calls.transformed(fn)
    other = scaled_sine(np.float64(2.0))
    entry = calls.transformed(other)
    assert entry.forward_unchecked(0.7, 1.0) is None  # (the compiled jvp's fallback)
    assert astad.jvp(other, (0.7,), (1.0,))[1] == pytest.approx(
        2.0 * (math.cos(0.7) * 0.7 + math.sin(0.7)), rel=1e-14)

    def inner_slope(a):  # a dual of an enclosing reverse pass in the cell
        return astad.jvp(lambda x: a * x * x, (0.3,), (1.0,))[1]  # = 0.6 a
    assert astad.grad(inner_slope)(1.7) == pytest.approx(0.6, rel=1e-14)


@pytest.mark.parametrize("factory, settings, args", CASES, ids=IDS)
def test_hessians_of_closures_agree_with_the_general_path(factory, settings, args):
    import functools
    for setting in settings:
        fn = factory(*setting)
        argnums = tuple(range(len(args)))
        got = astad.hessian(fn, argnums=argnums)(*args)
        want = astad.hessian(functools.partial(fn), argnums=argnums)(*args)
        np.testing.assert_allclose(np.array(_flat(got)), np.array(_flat(want)),
                                   rtol=1e-11, atol=1e-13)
        direction = tuple([0.5] * len(a) if isinstance(a, list) else -1.5 for a in args)
        product = astad.jvp(astad.grad(fn, argnums=argnums), args, direction)[1]
        expected = astad.jvp(astad.grad(functools.partial(fn), argnums=argnums), args,
                             direction)[1]
        np.testing.assert_allclose(np.array(_flat(product)), np.array(_flat(expected)),
                                   rtol=1e-11, atol=1e-13)


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [float(value)]


def test_a_hessian_of_a_closure_runs_the_code_written_for_floats_and_checks_its_cells():
    from astad.api import hvp
    fn = scaled_sine(2.0)
    entry = calls.transformed(fn)
    code = hvp.floats_code(entry, fn, 1)
    assert code is not None and code.__code__.co_freevars == ("a",)
    x = 0.7
    second = 2.0 * (2 * math.cos(x) - x * math.sin(x))
    assert astad.hessian(fn)(x) == pytest.approx(second, rel=1e-14)
    other = scaled_sine(np.float64(2.0))  # (its own entry: written for its cell's kind)
    assert hvp.floats_code(calls.transformed(other), other, 1) is None
    assert astad.hessian(other)(x) == pytest.approx(second, rel=1e-14)

    def rebindable():
        a = 2.0

        def set_a(value):
            nonlocal a
            a = value
        return (lambda t: a * math.sin(t) * t), set_a

    fn, set_a = rebindable()
    entry = calls.transformed(fn)
    code = hvp.floats_code(entry, fn, 1)
    assert astad.hessian(fn)(x) == pytest.approx(second, rel=1e-14)
    set_a(np.float64(2.0))  # the cell, changed: the code written for a float says no
    assert code(x, 1.0) is None
    assert astad.hessian(fn)(x) == pytest.approx(second, rel=1e-14)
    set_a(3.0)
    assert astad.hessian(fn)(x) == pytest.approx(1.5 * second, rel=1e-14)

    def curvature(a):  # a dual of an enclosing differentiation in the cell
        return astad.hessian(scaled_sine(a))(x)
    assert astad.grad(curvature)(2.0) == pytest.approx(second / 2.0, rel=1e-13)
