"""Helpers, methods and generators on the specialised path (issue 27, item 1): a function
that calls a helper in a loop, sums a generator over it, calls a dataclass's method or a
helper that returns from a branch runs the same specialised code as the function with
the call written out by hand; checked against the ordinary transformed code, central
differences and forward mode, and what must still run the ordinary code does."""
import dataclasses
import math

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen
from test_specialised import _at, _float_paths, _leaves, _moved


@dataclasses.dataclass
class Body:
    x: float
    y: float
    mass: float

    def dist(self, q):
        return math.sqrt((self.x - q[0]) ** 2 + (self.y - q[1]) ** 2)

    def pull(self, q):  # a method calling another through self
        return self.mass / (1.0 + self.dist(q))

    def scaled(self, s):
        return Body(self.x * s, self.y * s, self.mass)


@dataclasses.dataclass
class Bead:  # a second dataclass: Body's methods stay Body's
    x: float

    def energy(self, k):
        return 0.5 * k * self.x * self.x


def dist(p, x):
    return math.sqrt((p[0] - x[0]) ** 2 + (p[1] - x[1]) ** 2)


def clipped(v):
    if v > 1.0:
        return 1.0
    elif v < -1.0:
        return -1.0 + 0.0 * v
    return v * v


def huber(r, delta=0.5):
    if abs(r) <= delta:
        return 0.5 * r * r
    return delta * (abs(r) - 0.5 * delta)


def total_of(xs):
    s = 0.0
    for v in xs:
        s = s + v * v
    return s


def helper_in_loop(x, pts):
    s = 0.0
    for p in pts:
        s = s + dist(p, x)
    return s


def helper_by_index(x, pts):
    s = 0.0
    for i in range(len(pts)):
        s = s + dist(pts[i], x)
    return s


def generator_over_helper(x, pts):
    return sum(dist(p, x) for p in pts)


def generator_with_filter(xs):
    return sum(v * v for v in xs if v > 0.5)


def nested_generators(xs, ys):
    return sum(a * b for a in xs for b in ys)


def list_comprehension_with_start(xs, c):
    return sum([math.sin(v) for v in xs], c * c)


def scaled_range_sum(x):  # (no list argument: once written as straight-line code, wrongly)
    return sum(x * k for k in range(3)) + sum([x * x for _ in "ab"])


def branching_helper(xs):
    return sum(clipped(v) for v in xs)


def helper_with_default(xs, c):
    return sum(huber(v - c) for v in xs)


def list_helpers(xs, ys):
    return total_of(xs) * total_of(ys)


def method_in_generator(b, pts):
    return sum(b.pull(q) for q in pts)


def annotated_method(b: Body, q):
    return b.dist(q) * b.mass


def method_of_a_made_record(b, q, s):
    c = b.scaled(s)
    return c.dist(q)


def two_classes(b, bead: Bead, q):  # (Bead's energy is Spring's name too: annotated)
    return b.dist(q) + bead.energy(2.0)


def local_def(x, pts):
    def distance(p):  # a closure over x
        return math.sqrt((p[0] - x[0]) ** 2 + (p[1] - x[1]) ** 2)
    s = 0.0
    for p in pts:
        s = s + distance(p)
    return s


def local_lambda(xs, c):
    sq = lambda u: u * u  # noqa: E731 (as users write it)
    return sum(sq(v - c) for v in xs)


def closure_reads_the_binding_at_the_call(x, y):
    k = x
    scaled = lambda u: u * k  # noqa: E731
    a = scaled(y)
    k = y * y  # the closure sees this binding from now on
    return a + scaled(x)


def local_def_with_branches_and_shadowing(xs, lo):
    s = 0.0

    def soft(v):
        s = v - lo  # its own s, not the caller's
        if s < 0.0:
            return 0.1 * s
        return s * s
    for v in xs:
        s = s + soft(v)
    return s


def local_def_in_a_loop(xs, c):
    total = 0.0
    for v in xs:
        def term(t):
            return t * v + c  # noqa: B023 (called at once: the v of this iteration)
        total = total + term(c * v)
    return total


def list_built_then_read(xs, w):  # lists the code makes (specialise/lists.py)
    ys = []
    for x in xs:
        ys.append(math.tanh(w * x))
    s = 0.0
    for i in range(len(ys)):
        s = s + ys[i] * ys[-1 - i]
    return s + sum(ys)


def list_preallocated(xs, c):
    n = len(xs)
    ys = [0.0] * n
    for i in range(1, n):
        ys[i] = ys[i - 1] * c + xs[i]
    ys[0] = xs[0] * 2.0
    return sum(y * y for y in ys)


def list_overwritten(xs):
    ys = [0.0] * 2
    for x in xs:
        ys[0] = ys[0] + x
        ys[1] = ys[0] * x  # (reads the value just written, with its own slot)
    return ys[0] * ys[1]


def list_display(x, y):
    v = [x * y, x + y, 2]
    v[2] = v[0] * v[1] + v[2]
    return sum(v) + v[-1]


def _push_square(ys, v):
    ys.append(v * v)
    return v


def list_filled_by_a_helper(xs, c):
    ys = []
    for x in xs:
        ys.append(_push_square(ys, x * c))
    return sum(ys, c)


def _gap(u, v):  # iterates its arguments: an element of a list of lists, zipped
    return math.sqrt(sum((a - b) ** 2 for a, b in zip(u, v)))


def potential_of(x, charges):
    return sum(1.0 / _gap(x, c) for c in charges) + _gap([a * a for a in x], charges[0])


XS = [-1.4, -0.3, 0.2, 0.7, 1.1, 1.6]
YS = [0.5, -0.25, 1.5]
PTS = [[0.1 * i, 0.2 * i + 1.0] for i in range(6)]
CASES = [
    (helper_in_loop, ([0.3, 0.4], PTS)),
    (helper_by_index, ([0.3, 0.4], PTS)),
    (generator_over_helper, ([0.3, 0.4], PTS)),
    (generator_with_filter, (XS,)),
    (nested_generators, (XS, YS)),
    (list_comprehension_with_start, (XS, 0.7)),
    (scaled_range_sum, (0.7,)),
    (branching_helper, (XS,)),
    (helper_with_default, (XS, 0.1)),
    (list_helpers, (XS, YS)),
    (method_in_generator, (Body(0.3, 0.4, 2.0), PTS)),
    (annotated_method, (Body(0.3, 0.4, 2.0), [1.0, -0.5])),
    (method_of_a_made_record, (Body(0.3, 0.4, 2.0), [1.0, -0.5], 1.5)),
    (two_classes, (Body(0.3, 0.4, 2.0), Bead(0.9), [1.0, -0.5])),
    (local_def, ([0.3, 0.4], PTS)),
    (local_lambda, (XS, 0.25)),
    (closure_reads_the_binding_at_the_call, (0.7, -1.3)),
    (local_def_with_branches_and_shadowing, (XS, -0.2)),
    (local_def_in_a_loop, (XS, 0.6)),
    (list_built_then_read, (XS, 0.7)),
    (list_preallocated, (XS, 0.5)),
    (list_overwritten, (XS,)),
    (list_filled_by_a_helper, (XS, 1.5)),
    (list_display, (0.7, -1.3)),
    (potential_of, ([0.5, 7.0], [[10.0, 9.7], [10.0, 0.0], [-3.0, 4.0]])),
]
IDS = [fn.__name__ for fn, _ in CASES]


def _by_hand(fn, args):
    """The ordinary transformed code's value and gradient."""
    return astad.reverse_diff(fn).value_and_grad.__self__._value_and_grad_taped(args, {})


@pytest.mark.parametrize("fn, args", CASES, ids=IDS)
def test_calls_run_the_specialised_code_and_agree(fn, args):
    entry = codegen.build(fn)
    assert entry.tapeless is not None and entry.tapeless(*args) is not None
    assert entry.forward is not None
    value, grads = astad.reverse_diff(fn).value_and_grad(*args)
    want_value, want = _by_hand(fn, args)
    assert value == want_value == fn(*args)
    grads = grads if len(args) > 1 else (grads,)
    want = want if len(args) > 1 else (want,)
    for g, w in zip(grads, want, strict=True):
        assert type(g) is type(w)
        for a, b in zip(_leaves(g), _leaves(w), strict=True):
            assert a == pytest.approx(b, rel=1e-13, abs=1e-15)
    for k, path in _float_paths(args):
        h = 1e-6 * max(1.0, abs(_at(args, k, path)))
        fd = (fn(*_moved(args, k, path, h)) - fn(*_moved(args, k, path, -h))) / (2 * h)
        assert _at(grads, k, path) == pytest.approx(fd, rel=1e-6, abs=1e-7)
    # forward mode, written by the same writer: the gradient along a direction
    rng = np.random.default_rng(7)
    direction = {p: float(rng.normal()) for p in _float_paths(args)}

    def tangent(k, a):
        if dataclasses.is_dataclass(a):
            return dataclasses.replace(a, **{f.name: direction[(k, (f.name,))]
                                             for f in dataclasses.fields(a)})
        if isinstance(a, list) and a and isinstance(a[0], list):
            return [[direction[(k, (i, j))] for j in range(len(r))] for i, r in enumerate(a)]
        if isinstance(a, list):
            return [direction[(k, (i,))] for i in range(len(a))]
        return direction[(k, ())]
    tangents = tuple(tangent(k, a) for k, a in enumerate(args))
    assert entry.forward(*args, *tangents) is not None
    _, dot = astad.jvp(fn, args, tangents)
    expected = math.fsum(_at(grads, k, p) * d for (k, p), d in direction.items())
    assert dot == pytest.approx(expected, rel=1e-12, abs=1e-14)


def test_a_generator_costs_what_its_loop_costs():
    """The generator and the helper are written out: the same entries as the loop by hand."""
    generated = codegen.build(generator_over_helper).specialised_source
    by_hand = codegen.build(helper_in_loop).specialised_source
    assert "# inlined: dist(p, x)" in generated and "for p, p_i in zip(pts" in generated
    assert generated.count("_record(") == by_hand.count("_record(") == 2
    assert "def " not in generated.split("\n", 2)[2]  # no nested function: all inlined


@dataclasses.dataclass
class HeavyBody(Body):
    def dist(self, q):
        return 2.0 * math.hypot(self.x - q[0], self.y - q[1])


def test_a_subclass_overriding_the_method_takes_the_ordinary_code():
    entry = codegen.build(annotated_method)
    heavy = HeavyBody(0.3, 0.4, 2.0)
    assert entry.tapeless(heavy, [1.0, -0.5]) is None  # written for Body's dist
    value, grads = astad.reverse_diff(annotated_method).value_and_grad(heavy, [1.0, -0.5])
    assert value == annotated_method(heavy, [1.0, -0.5])
    r = math.hypot(0.3 - 1.0, 0.4 + 0.5)
    assert grads[0].x == pytest.approx(2.0 * 2.0 * (0.3 - 1.0) / r, rel=1e-13)
    assert grads[0].mass == pytest.approx(2.0 * r, rel=1e-13)


def test_a_method_replaced_on_the_class_rebuilds_the_code(monkeypatch):
    f = astad.reverse_diff(annotated_method)
    b, q = Body(0.3, 0.4, 2.0), [1.0, -0.5]
    assert f.grad(b, q)[0].mass == pytest.approx(math.hypot(0.3 - 1.0, 0.4 + 0.5))
    monkeypatch.setattr(Body, "dist", lambda self, q: self.x * q[0])
    assert f.value_and_grad(b, q)[0] == 0.3 * 1.0 * 2.0
    assert f.grad(b, q)[0].x == 1.0 * 2.0


def test_a_changed_default_rebuilds_the_code(monkeypatch):
    f = astad.reverse_diff(helper_with_default)
    before = f.grad(XS, 0.1)
    monkeypatch.setattr(huber, "__defaults__", (10.0,))  # every residual quadratic now
    assert f.grad(XS, 0.1)[1] == pytest.approx(-sum(v - 0.1 for v in XS), rel=1e-13)
    assert f.grad(XS, 0.1) != before


def shadowed_name(xs, p):
    s = sum(p * p for p in xs)
    return s + p  # Python's p: the argument, not the generator's


def test_a_generator_variable_named_like_a_local_keeps_pythons_scope():
    value, grads = astad.reverse_diff(shadowed_name).value_and_grad(XS, 0.25)
    assert value == shadowed_name(XS, 0.25)
    assert grads[1] == 1.0
    assert grads[0] == pytest.approx([2.0 * v for v in XS], rel=1e-15)


@dataclasses.dataclass
class Spring:
    x: float

    def energy(self, k):
        return 0.5 * k * self.x * self.x


def ambiguous(b):  # Bead and Spring both have energy(): the class is not known here
    return b.energy(3.0)


def test_a_method_of_an_unknown_class_still_differentiates():
    for obj in (Bead(0.5), Spring(0.5)):
        value, grad = astad.reverse_diff(ambiguous).value_and_grad(obj)
        assert value == 0.375 and grad.x == 1.5


def passes_its_function(xs, c):
    sq = lambda u: u * u * c  # noqa: E731
    return sum(map(sq, xs))


def recursive_local(x, n):
    def power(k):
        return 1.0 if k == 0 else x * power(k - 1)
    return power(n)


def rebound_local(x):
    g = lambda u: u * u  # noqa: E731
    a = g(x)
    g = lambda u: u * u * u  # noqa: E731
    return a + g(x)


@pytest.mark.parametrize("fn, args, want", [
    (passes_its_function, (XS, 0.5), [v * 1.0 for v in XS]),
    (recursive_local, (1.1, 5), 5 * 1.1 ** 4),
    (rebound_local, (0.7,), 2 * 0.7 + 3 * 0.7 ** 2),
])
def test_local_functions_the_ordinary_code_keeps(fn, args, want):
    """A local function used as a value, recursive or rebound: the ordinary code, right."""
    grads = astad.reverse_diff(fn).grad(*args)
    got = grads[0] if len(args) > 1 else grads
    assert got == pytest.approx(want, rel=1e-13)


def list_returned(xs):
    ys = []
    for x in xs:
        ys.append(x * x)
    return ys


def list_aliased(xs):
    ys = [0.0] * 2
    zs = ys
    zs[0] = xs[0] * 3.0  # (writes ys too)
    return ys[0] + ys[1]


def list_popped(xs):
    ys = []
    for x in xs:
        ys.append(x * x)
    ys.pop()
    return sum(ys)


def test_what_a_made_list_leaves_to_the_ordinary_code():
    """A list returned, bound to a second name or changed by another method: the
    ordinary code, with Python's meaning."""
    assert codegen.build(list_aliased).tapeless is None
    assert astad.reverse_diff(list_aliased).grad(XS)[0] == 3.0
    assert astad.reverse_diff(list_popped).grad(XS) == pytest.approx(
        [2.0 * v for v in XS[:-1]] + [0.0])
    jac = astad.jacrev(list_returned)(XS)
    assert jac[1][1] == 2.0 * XS[1] and jac[1][0] == 0.0


@pytest.mark.parametrize("inner, x", [
    (lambda c: astad.grad(lambda d: local_lambda(XS, d))(c), 0.25),
    (lambda w: astad.grad(lambda v: list_built_then_read(XS, v))(w), 0.7),
    (lambda x: astad.grad(scaled_range_sum)(x), 0.7),
    (lambda y: astad.grad(list_display, argnums=1)(0.7, y), -1.3),
    (lambda c: astad.grad(method_of_a_made_record, argnums=2)(
        Body(0.3, 0.4, 2.0), [1.0, -0.5], c), 1.5),
], ids=["lambda", "list", "generator", "display", "method"])
def test_the_constructs_compose_in_a_gradient_of_a_gradient(inner, x):
    """A derivative of a gradient whose code inlines these constructs: by reverse mode
    over it and by forward mode over it, against central differences of the gradient."""
    h = 1e-5
    fd = (inner(x + h) - inner(x - h)) / (2 * h)
    second = astad.grad(inner)(x)
    assert second == pytest.approx(fd, rel=1e-6, abs=1e-8)
    assert astad.jvp(inner, (x,), (1.0,))[1] == pytest.approx(second, rel=1e-12, abs=1e-14)


# -- np.zeros(n) written by element: a list of numpy.float64 in the written code ----------
def array_written_then_summed(x, c):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = c * x[i] ** 2 + (y[i - 1] if i > 0 else 0.0)
    total = 0.0
    for v in y:
        total = total + v * y[0]
    return total + sum(y)


def array_written_then_numpy_summed(x, c):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = c * math.sin(x[i]) ** 2 + 0.1 * x[i]
    return np.sum(y) * y[1] + np.sum(y)


def array_compared(x):  # (y == 0 of an array is element-wise: not a list's answer)
    y = np.zeros(len(x))
    y[0] = x[0] * 2.0
    if np.all(y == 0):
        return x[1] * 100.0
    return x[1] + np.sum(y)


def array_appended(x):  # (an array has no append: numpy's error, from the ordinary code)
    y = np.zeros(2)
    y.append(x[0])
    return y[0]


def test_an_array_written_by_element_runs_the_specialised_code():
    x = np.linspace(0.2, 1.3, 5)
    entry = codegen.build(array_written_then_summed)
    assert entry.tapeless is not None and entry.tapeless(x, 0.7) is not None
    value, (gx, gc) = astad.value_and_grad(array_written_then_summed, argnums=(0, 1))(x, 0.7)
    want_value, (wx, wc) = _by_hand(array_written_then_summed, (x, 0.7))
    assert value == want_value == array_written_then_summed(x, 0.7)  # (bit for bit)
    assert type(value) is type(want_value) is np.float64
    np.testing.assert_allclose(gx, wx, rtol=1e-13)
    assert gc == pytest.approx(wc, rel=1e-13)
    for i in range(len(x)):
        up, down = x.copy(), x.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        fd = (array_written_then_summed(up, 0.7) - array_written_then_summed(down, 0.7)) / 2e-6
        assert gx[i] == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("n", [3, 8, 1000])
def test_np_sum_of_an_array_written_by_element(n):
    """np.sum of a new array written by element takes the code for floats: its value
    numpy's pairwise sum bit for bit (1000 elements: not a sequential sum's rounding),
    each element's partial 1; against the ordinary code and differences."""
    x = np.linspace(-1.3, 2.1, n)
    args = (x, 0.7)
    fn = array_written_then_numpy_summed
    entry = codegen.build(fn)
    assert entry.tapeless is not None and entry.tapeless(*args) is not None
    value, (gx, gc) = astad.value_and_grad(fn, argnums=(0, 1))(*args)
    want_value, (wx, wc) = _by_hand(fn, args)
    assert value == want_value == fn(*args)  # (bit for bit)
    assert type(value) is np.float64
    np.testing.assert_allclose(gx, wx, rtol=1e-13)
    assert gc == pytest.approx(wc, rel=1e-13)
    for i in (0, 1, n - 1):
        up, down = x.copy(), x.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        assert gx[i] == pytest.approx((fn(up, 0.7) - fn(down, 0.7)) / 2e-6, rel=1e-6)


def test_what_an_array_written_by_element_leaves_to_the_ordinary_code():
    x = np.array([0.5, 1.5])
    assert codegen.build(array_compared).tapeless is None
    assert astad.grad(array_compared)(x).tolist() == [2.0, 1.0]
    with pytest.raises(AttributeError, match="append"):
        astad.grad(array_appended)(x)

    def negative(x):
        y = np.zeros(-1)
        return x[0] + len(y)
    with pytest.raises(ValueError, match="negative dimensions"):
        astad.grad(negative)(x)
