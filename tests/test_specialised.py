"""The code specialised for its arguments' kinds (astad/specialise/: loops.py,
expressions.py, inline.py, straight_line.py; forward.py): every loop form, argument kind
and helper call it takes, checked against the ordinary transformed code, central finite
differences and forward mode; and what it leaves to the ordinary code."""
import dataclasses
import math
import traceback

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen
from test_memory_model import VIEWS, write_through


# -- programs: the same computations written the ways people write them -------------------
def dot_range(xs, ys):
    s = 0.0
    for i in range(len(xs)):
        s = s + xs[i] * ys[i]
    return s


def dot_zip(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s += x * y
    return s


def dot_counter(xs, ys):
    s = 0.0
    i = 0
    for x in xs:
        s += x * ys[i]
        i += 1
    return s


def dot_enumerate(xs, ys):
    s = 0.0
    for i, x in enumerate(xs):
        s += x * ys[i]
    return s


def dot_while(xs, ys):
    s = 0.0
    i = 0
    while i < len(xs):
        s += xs[i] * ys[i]
        i += 1
    return s


def dot_reversed(xs, ys):
    s = 0.0
    for x, y in zip(reversed(xs), reversed(ys)):
        s = s * 0.5 + x * y
    return s


def dot_negative_index(xs, ys):
    s = 0.0
    for i in range(1, len(xs) + 1):
        s += xs[-i] * ys[i - 1] + xs[i - 2]
    return s


def matvec_ij(m, v):
    s = 0.0
    for i in range(len(m)):
        for j in range(len(v)):
            s += m[i][j] * v[j]
    return s


def matvec_rows(m, v):
    s = 0.0
    for row in m:
        r = 0.0
        for a, b in zip(row, v):
            r += a * b
        s += math.tanh(r)
    return s


def matvec_enumerate_rows(m, v):
    s = 0.0
    for i, row in enumerate(m, 1):
        for j in range(len(row)):
            s += row[j] * v[j] * i
    return s


def series(x, n):  # an int argument: a plain value, its gradient itself
    s = 0.0
    term = 1.0
    for k in range(1, n):
        term = term * x / k
        s = s + term
    return s


def series_while(x, n):
    s = 0.0
    term = 1.0
    k = 1
    while k < n:
        term = term * x / k
        s += term
        k += 1
    return s


def mode_and_flag(x, mode, flag, nothing):
    y = x
    if mode == "double" and flag and nothing is None:
        y = 2.0 * x
    return y * x


def scale(x, k):  # k used as a number: a float argument (an int passed: ordinary code)
    return x * k + k


def _sq(a):
    return a * a


def _lerp(a, b, t=0.25):
    return a + (b - a) * t


def tiny(x, y):
    return _sq(_lerp(x, y)) + _sq(y)


def _polar(r, t):
    return r * math.cos(t), r * math.sin(t)


def uses_tuple(r, t):
    x, y = _polar(r, t)
    a, b = y, x  # a swap through a tuple
    return x * y + a - b


def tuple_argument(p, s):
    x, y = p
    return x * y * s + p[1]


@dataclasses.dataclass
class Pt:
    x: float
    y: float


@dataclasses.dataclass(frozen=True)
class Vec3:
    x: float
    y: float
    z: float


def _dot3(a, b):
    return a.x * b.x + a.y * b.y + a.z * b.z


def _cross3(a, b):
    return Vec3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x)


def _scale3(s, a):
    return Vec3(s * a.x, s * a.y, z=s * a.z)


def records(p, v, k):
    q = Pt(p.x * k, p.y)
    w = _cross3(v, Vec3(q.x, q.y, 1.0))
    w = _scale3(2.0, w)
    return _dot3(w, v) + q.x * q.y + p.y


def _norm(xs):
    total = 0.0
    for x in xs:
        total += x * x
    return math.sqrt(total)


def helper_with_loop(xs, c):
    return _norm(xs) * c + _norm(xs)


def early_exit(x, xs):
    for i, v in enumerate(xs):
        if v > x:
            return v * x + i
    return x * x


def branches(x, y):
    z = x if x > y else y
    w = min(x, y) + max(x, y) * 0.5
    if z > 1.0:
        z = z ** 0.5
    elif z < -1.0:
        z = -z ** 3
    else:
        z = abs(z) + float(z) * 2
    return z * w + x % 1.5


LIMIT = 4
RATE = 0.5


def globals_and_else(x):
    total = 0.0
    for k in range(LIMIT):
        total = total * RATE + math.exp(-x * k)
        if total > 100.0:
            break
    else:
        total += 1.0
    return total


def kepler(e, ms):
    total = 0.0
    for m in ms:
        E = m + e * math.sin(m)
        while True:
            delta = (E - e * math.sin(E) - m) / (1.0 - e * math.cos(E))
            E = E - delta
            if abs(delta) < 1e-12:
                break
        total += math.cos(E) - e
    return total


def chain(x, n):  # a recursion: a nested function written for its arguments' kinds
    return x if n == 0 else chain(math.sin(x) * 0.5 + x * 0.5, n - 1)


def power(x, n):
    if n == 0:
        return 1.0
    if n % 2 == 0:
        half = power(x, n // 2)
        return half * half
    return x * power(x, n - 1)


def _clamp(v, lo, hi):  # returns early: a nested function too
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def _is_even(k):  # a mutual recursion on plain values
    return True if k == 0 else _is_odd(k - 1)


def _is_odd(k):
    return False if k == 0 else _is_even(k - 1)


def clamped_sum(xs, lo):
    total = 0.0
    for k, x in enumerate(xs):
        total += _clamp(x * 2.0, lo, 1.25) * (2.0 if _is_even(k) else 1.0)
    return total


XS = [0.5, -1.25, 2.0, 0.75]
YS = [1.5, 0.25, -0.75, 0.125]
M = [[1.0, 2.0, -0.5], [3.0, -1.0, 0.25]]
V = [0.5, 1.5, -2.0]

CASES = [
    (dot_range, (XS, YS)),
    (dot_zip, (XS, YS)),
    (dot_counter, (XS, YS)),
    (dot_enumerate, (XS, YS)),
    (dot_while, (XS, YS)),
    (dot_reversed, (XS, YS)),
    (dot_negative_index, (XS, YS)),
    (matvec_ij, (M, V)),
    (matvec_rows, (M, V)),
    (matvec_enumerate_rows, (M, V)),
    (series, (0.7, 6)),
    (series_while, (0.7, 6)),
    (mode_and_flag, (1.5, "double", True, None)),
    (scale, (1.5, 2.5)),
    (tiny, (0.3, 1.7)),
    (uses_tuple, (1.3, 0.4)),
    (tuple_argument, ((1.5, -2.0), 0.5)),
    (records, (Pt(1.5, -0.5), Vec3(0.3, -0.7, 1.1), 2.0)),
    (helper_with_loop, (XS, 0.5)),
    (early_exit, (0.6, XS)),
    (early_exit, (5.0, XS)),
    (branches, (2.5, 0.5)),
    (branches, (-2.5, -3.0)),
    (branches, (0.25, -0.5)),
    (globals_and_else, (0.3,)),
    (kepler, (0.5, [0.1, 1.0, 2.5])),
    (chain, (0.7, 25)),
    (power, (1.1, 13)),
    (clamped_sum, (XS, -0.5)),
]
IDS = [f"{fn.__name__}-{k}" for k, (fn, _) in enumerate(CASES)]


def quick_sample(every):
    """CASES as parameters: every ``every``-th in the quick subset (``-m "not slow"``),
    the others marked slow (the check of the tape and differences takes them all)."""
    return [pytest.param(fn, args, id=name, marks=() if k % every == 0 else pytest.mark.slow)
            for k, ((fn, args), name) in enumerate(zip(CASES, IDS))]


def _leaves(value):
    if isinstance(value, (list, tuple)):
        return [y for x in value for y in _leaves(x)]
    if dataclasses.is_dataclass(value):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    return [value]


def _float_paths(args):
    """(argument, path) of every float leaf of the arguments."""
    out = []
    for k, a in enumerate(args):
        if type(a) is float:
            out.append((k, ()))
        elif isinstance(a, (list, tuple)):
            for i, x in enumerate(a):
                if type(x) is float:
                    out.append((k, (i,)))
                elif isinstance(x, (list, tuple)):
                    out += [(k, (i, j)) for j, y in enumerate(x) if type(y) is float]
        elif dataclasses.is_dataclass(a):
            out += [(k, (f.name,)) for f in dataclasses.fields(a)]
    return out


def _moved(args, k, path, h):
    args = list(args)

    def move(value, path):
        if not path:
            return value + h
        if dataclasses.is_dataclass(value):
            return dataclasses.replace(value, **{path[0]: move(getattr(value, path[0]),
                                                               path[1:])})
        items = list(value)
        items[path[0]] = move(items[path[0]], path[1:])
        return type(value)(items)
    args[k] = move(args[k], path)
    return args


def _at(grads, k, path):
    g = grads[k]
    for p in path:
        g = getattr(g, p) if isinstance(p, str) else g[p]
    return g


@pytest.mark.parametrize("fn, args", CASES, ids=IDS)
def test_specialised_code_agrees_with_the_tape_and_finite_differences(fn, args):
    entry = codegen.build(fn)
    assert entry.tapeless is not None and entry.tapeless(*args) is not None  # it runs
    f = astad.reverse_diff(fn)
    value, grads = f.value_and_grad(*args)
    want_value, want = f.value_and_grad.__self__._value_and_grad_taped(args, {})
    assert value == want_value == fn(*args)
    grads = grads if len(args) > 1 else (grads,)
    want = want if len(args) > 1 else (want,)
    assert type(grads) is type(want) and len(grads) == len(want)
    for g, w in zip(grads, want):
        assert type(g) is type(w)
        for a, b in zip(_leaves(g), _leaves(w)):
            assert type(a) is type(b)
            assert a == (pytest.approx(b, rel=1e-13, abs=1e-15) if type(b) is float else b)
    for k, path in _float_paths(args):
        h = 1e-6 * max(1.0, abs(_at(args, k, path)))
        fd = (fn(*_moved(args, k, path, h)) - fn(*_moved(args, k, path, -h))) / (2 * h)
        assert _at(grads, k, path) == pytest.approx(fd, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("fn, args", quick_sample(3))
def test_specialised_forward_mode_agrees_with_the_gradient(fn, args):
    entry = codegen.build(fn)
    paths = _float_paths(args)
    rng = np.random.default_rng(len(paths))
    direction = {p: float(rng.normal()) for p in paths}
    tangents = []
    for k, a in enumerate(args):
        if type(a) is float:
            tangents.append(direction[(k, ())])
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], (list, tuple)):
            tangents.append([[direction[(k, (i, j))] for j in range(len(r))]
                             for i, r in enumerate(a)])
        elif isinstance(a, (list, tuple)):
            tangents.append([direction[(k, (i,))] for i in range(len(a))])
        elif dataclasses.is_dataclass(a):
            tangents.append(dataclasses.replace(a, **{f.name: direction[(k, (f.name,))]
                                                      for f in dataclasses.fields(a)}))
        else:
            tangents.append(None)
    if all(not isinstance(a, tuple) for a in args):  # (tuples: the duals' path)
        assert entry.forward is not None
        assert entry.forward(*args, *tangents) is not None
    value, tangent = astad.jvp(fn, tuple(args), tuple(tangents))
    grads = astad.reverse_diff(fn).grad(*args)
    grads = grads if len(args) > 1 else (grads,)
    expected = math.fsum(_at(grads, k, path) * d for (k, path), d in direction.items())
    assert value == fn(*args)
    assert tangent == pytest.approx(expected, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("fn, args", quick_sample(3))
def test_a_pullback_of_the_specialised_code_agrees_with_the_tape(fn, args):
    """``.vjp`` of a float result the specialised code differentiates scales its gradient
    (api.ScaledPullback); a cotangent that is not a finite float or int sweeps a tape."""
    f = astad.reverse_diff(fn)
    value, pullback = f.vjp(*args)
    assert type(pullback) is astad.api.diff.ScaledPullback and value == fn(*args)
    taped = astad.Pullback(f.vjp.__self__._forward(args, {}))  # the general path's
    assert pullback.tape_length == taped.tape_length
    for c in (1.0, 2.5, -3, 0.0, math.nan, -math.inf, np.float64(0.75)):
        got, want = pullback(c), taped(c)
        assert type(got) is type(want)
        for a, b in zip(_leaves(got), _leaves(want), strict=True):
            assert type(a) is type(b)
            if type(b) is float and math.isnan(b):
                assert math.isnan(a)
            else:
                tolerance = 1e-15 * max(1.0, abs(c)) if math.isfinite(c) else 0.0
                assert a == (pytest.approx(b, rel=1e-13, abs=tolerance) if type(b) is float
                             else b)


def test_a_pullback_keeps_the_arguments_it_was_made_at():
    f = astad.reverse_diff(dot_zip)
    xs, ys = list(XS), list(YS)
    _, pullback = f.vjp(xs, ys)
    xs[0] = ys[0] = 100.0  # changed after the call: the pullback is of the call
    gx, gy = pullback(math.inf)  # (a tape, made now from the arguments as they were)
    assert gx == [math.copysign(math.inf, y) for y in YS]
    assert gy == [math.copysign(math.inf, x) for x in XS]
    assert pullback(2.0) == ([2.0 * y for y in YS], [2.0 * x for x in XS])
    assert pullback(2.0)[0] is not pullback(2.0)[0]  # a new gradient each call


def test_a_pullback_keeps_a_dataclass_as_it_was_at_the_call():
    f = astad.reverse_diff(records)
    args = (Pt(1.5, -0.5), Vec3(0.3, -0.7, 1.1), 2.0)
    _, pullback = f.vjp(*args)
    want = pullback(np.float64(2.0))  # (not a float: a tape, made now)
    _, pullback = f.vjp(*args)
    args[0].x = 100.0  # changed after the call
    got = pullback(np.float64(2.0))
    assert got == want
    assert f.vjp(*args)[1](np.float64(2.0)) != want  # (the change would have shown)


def test_a_pullback_of_one_list_passed_twice_has_the_partial_at_each_place():
    f = astad.reverse_diff(dot_zip)
    gx, gy = f.vjp(XS, XS)[1](0.5)
    assert gx == gy == pytest.approx([0.5 * x for x in XS])  # d/da = b, d/db = a (JAX's)


def test_a_pullback_called_inside_a_differentiation():
    f = astad.reverse_diff(scale)
    _, pullback = f.vjp(1.5, 2.5)

    def outer(c):
        gx, gy = pullback(c)  # c a dual of this differentiation: the tape's sweep
        return gx * gy

    gx, gy = pullback(1.0)
    assert astad.grad(outer)(0.5) == pytest.approx(2 * 0.5 * gx * gy)


# -- argument kinds ------------------------------------------------------------------------
def test_an_int_argument_keeps_the_specialised_code_and_gets_none():
    f = astad.reverse_diff(series)
    value, (gx, gn) = f.value_and_grad(0.7, 6)
    assert gn is None
    assert gx == pytest.approx(sum(0.7 ** k / math.factorial(k) for k in range(5)),
                               rel=1e-14)
    assert "def series_floats(x, n)" in f.source
    # a float where the code takes an int: the ordinary code (which raises here: range)
    with pytest.raises(TypeError):
        f.grad(0.7, 6.0)
    # argnums choosing only the int: the error that no float was chosen
    with pytest.raises(astad.InputError, match="holds a float"):
        astad.reverse_diff(series, argnums=1).grad(0.7, 6)
    assert astad.reverse_diff(series, argnums=0).grad(0.7, 6) == pytest.approx(gx, rel=1e-15)


def test_strings_bools_and_none_are_plain_arguments():
    f = astad.reverse_diff(mode_and_flag)
    assert f.grad(1.5, "double", True, None) == (6.0, None, None, None)
    assert f.grad(1.5, "single", True, None) == (3.0, None, None, None)


def test_a_float_argument_given_an_int_takes_the_ordinary_code():
    f = astad.reverse_diff(scale)
    assert f.grad(1.5, 2.5) == (2.5, 2.5)
    assert f.grad(1.5, 2) == (2.0, None)  # the int is a constant: not differentiated


def test_lists_of_numpy_floats_give_gradients_of_the_same_type():
    xs = [np.float64(v) for v in XS]
    f = astad.reverse_diff(dot_zip)
    entry = codegen.build(dot_zip)
    assert entry.tapeless(xs, YS) is not None  # the specialised code takes them
    value, (gx, gy) = f.value_and_grad(xs, YS)
    assert value == dot_zip(xs, YS)
    assert [type(g) for g in gx] == [np.float64] * len(xs)
    assert [type(g) for g in gy] == [float] * len(YS)
    assert gx == pytest.approx(YS) and gy == pytest.approx(XS)
    mixed = [np.float64(v) if k % 2 else v for k, v in enumerate(XS)]
    gm = f.grad(mixed, YS)[0]
    assert [type(g) for g in gm] == [type(v) for v in mixed] and gm == pytest.approx(YS)
    gt = f.grad(tuple(xs), YS)[0]
    assert type(gt) is tuple and [type(g) for g in gt] == [np.float64] * len(xs)
    assert gt == pytest.approx(tuple(YS))


def test_tuples_give_tuples():
    f = astad.reverse_diff(dot_zip)
    gx, gy = f.grad(tuple(XS), YS)
    assert type(gx) is tuple and type(gy) is list
    assert gx == pytest.approx(tuple(YS))
    (gx, gy), gs = astad.reverse_diff(tuple_argument).grad((1.5, -2.0), 0.5)
    assert (gx, gy, gs) == pytest.approx((-1.0, 1.75, -3.0))


def test_a_dataclass_argument_gives_a_dataclass_with_every_field():
    @dataclasses.dataclass
    class Labelled:
        x: float
        y: float
        unused: float
        label: str

    def f(p, k):
        return p.x * k + p.y

    g = astad.reverse_diff(f).grad(Labelled(1.5, 2.0, 3.0, "a"), 2.0)
    assert codegen.build(f).tapeless(Labelled(1.5, 2.0, 3.0, "a"), 2.0) is not None
    assert g == (Labelled(2.0, 1.0, 0.0, "a"), 1.5)
    # a field holding a list: the ordinary code (it knows how to rebuild it)
    g = astad.reverse_diff(f).grad(Labelled(1.5, 2.0, 3.0, [1.0]), 2.0)
    assert g[0].label == [0.0]


def test_the_same_list_twice_has_the_partial_at_each_place():
    f = astad.reverse_diff(dot_zip)
    gx, gy = f.grad(XS, XS)
    assert gx == gy == pytest.approx(XS)  # d/da = b, d/db = a, as in JAX


def test_arguments_of_other_kinds_take_the_ordinary_code():
    f = astad.reverse_diff(dot_zip)
    assert f.grad([1, 2.0], [3.0, 4.0]) == ([1, 4.0], [1.0, 2.0])  # an int element
    assert f.grad([], []) == ([], [])


# -- generated code, errors ------------------------------------------------------------------
def test_helpers_are_inlined_with_their_names():
    source = astad.reverse_diff(records).source
    # (up to the helpers' own code, which .source shows last: compile/helpers.py)
    text = source[source.index("def records_floats"):].split("\n# helper: ")[0]
    assert "# inlined: _cross3(a, b)" in text and "_cross3_a" not in text  # (aliases)
    code = [line for line in text.split("\n") if not line.strip().startswith("#")]
    assert not any("Vec3(" in line or "Pt(" in line for line in code)  # fields, no object


def test_an_error_in_a_helper_names_the_helpers_line():
    def divides(x):
        return _inverse(x - 1.0) * 2.0

    f = astad.reverse_diff(divides)
    assert codegen.build(divides).tapeless is not None
    with pytest.raises(ZeroDivisionError) as info:
        f.grad(1.0)
    lines = [fr.line for fr in traceback.extract_tb(info.tb) if fr.filename == __file__]
    assert lines[-2:] == ["return _inverse(x - 1.0) * 2.0", "return 1.0 / y"]


def _inverse(y):
    return 1.0 / y


def test_a_rebound_helper_rebuilds_the_code(monkeypatch):
    f = astad.reverse_diff(tiny)
    assert f.grad(0.3, 1.7) == pytest.approx(astad.reverse_diff(tiny).grad(0.3, 1.7))
    monkeypatch.setitem(globals(), "_sq", lambda a: a * a * a)
    cubed = ((0.75 * 0.3 + 0.25 * 1.7) ** 2 * 3 * 0.75, (0.75 * 0.3 + 0.25 * 1.7) ** 2 *
             3 * 0.25 + 3 * 1.7 ** 2)
    assert f.grad(0.3, 1.7) == pytest.approx(cubed, rel=1e-14)


def test_a_complex_power_is_left_to_the_ordinary_code():
    def root(x):
        return (x - 2.0) ** 0.5 * 1.0

    with pytest.raises(Exception) as info:
        astad.reverse_diff(root).grad(1.0)
    assert "complex" in str(info.value)


# -- found by tests/test_specialised_fuzz.py ------------------------------------------------
def _fuzz_pair(a, b):
    return a * b, a - b


def _fuzz_power(a, k):
    if k == 0:
        return 1.0
    return a * _fuzz_power(a, k - 1)


def operand_before_a_nested_call(y, xs, n):
    s = 0.0
    if y > s:
        s += _fuzz_power(y, 3)
    for v in reversed(xs):
        s += _fuzz_pair(xs[1], v)[1] + _fuzz_power(n, 3)
    return s


def test_an_operand_recorded_before_a_nested_function_call_keeps_its_entry():
    # the left operand's handle was the index of the last entry, read after the call to
    # _fuzz_power (a nested function, it recurses) had recorded entries of its own: the
    # gradient of xs came out 0.0 instead of (-1, 2, -1)
    args = (-0.4, [0.5, -1.2, 0.7], 2)
    assert codegen.build(operand_before_a_nested_call).tapeless(*args) is not None
    value, (dy, dxs, dn) = astad.reverse_diff(operand_before_a_nested_call).value_and_grad(
        *args)
    assert value == operand_before_a_nested_call(*args)
    assert dxs == [-1.0, 2.0, -1.0] and dy == 0.0 and dn is None
    args = (0.5, [0.5, -1.2, 0.7], 2.0)
    _, (dy, dxs, dn) = astad.reverse_diff(operand_before_a_nested_call).value_and_grad(*args)
    assert dy == pytest.approx(3 * 0.5 ** 2) and dxs == [-1.0, 2.0, -1.0]
    assert dn == pytest.approx(3 * 3 * 2.0 ** 2)


_through_a_call_it_cannot_read = write_through(VIEWS["np.asarray"])  # (v = view(a))


def test_the_writer_gives_up_without_recursing_to_pythons_limit():
    """An active value of a kind the specialised code does not read (a call of a closure
    returning an array) is refused at once: it was evaluated as a leaf of itself until
    RecursionError ended it, a thousand frames deep, where a finaliser run by the garbage
    collector then failed."""
    import sys
    deepest = [0]

    def profile(frame, event, arg):
        if event == "call":
            depth, f = 0, frame
            while f is not None:
                depth, f = depth + 1, f.f_back
            deepest[0] = max(deepest[0], depth)
    x = np.array([0.5, -1.0, 2.0])
    sys.setprofile(profile)
    try:  # (a Hessian's column: the gradient specialised, then run on forward duals)
        _, column = astad.jvp(astad.grad(_through_a_call_it_cannot_read), (x,),
                              (np.ones(3),))
    finally:
        sys.setprofile(None)
    # v is a (its memory): f = sum(2 (x + 0.5) x) + sum(4 (x + 0.5)^2), f'' = 4 + 8
    np.testing.assert_allclose(column, np.full(3, 12.0))
    assert deepest[0] < 300


# -- 1-d and 2-d float64 arrays read by element: the specialised code, as lists are ---------
def _dot_by_index(xs, ys):
    s = 0.0
    for i in range(len(xs)):
        s += xs[i] * ys[i] + 0.5 * xs[i] ** 2
    return s


def _matvec_by_rows(m, v):
    total = 0.0
    for i in range(len(m)):
        row = m[i]
        s = 0.0
        for j in range(len(v)):
            s += row[j] * v[j]
        total += s * s
    return total


def _concatenated(xs, ys):
    zs = xs + ys  # (lists: joined; arrays: added element by element)
    total = 0.0
    for z in zs:
        total += z * z
    return total


def test_arrays_read_by_element_run_the_specialised_code():
    xs, ys = np.array([0.5, -1.0, 2.0, 0.25]), np.array([1.5, 0.5, -0.75, 2.0])
    assert codegen.build(_dot_by_index).tapeless(xs, ys) is not None  # (not the general)
    value, (gx, gy) = astad.reverse_diff(_dot_by_index).value_and_grad(xs, ys)
    _, (lx, ly) = astad.reverse_diff(_dot_by_index).value_and_grad(xs.tolist(), ys.tolist())
    assert value == _dot_by_index(xs, ys)
    assert type(gx) is np.ndarray and gx.dtype == np.float64
    np.testing.assert_array_equal(gx, lx)
    np.testing.assert_array_equal(gy, ly)
    m = np.arange(12.0).reshape(4, 3) / 7.0
    v = np.array([0.3, -0.2, 0.9])
    gm, gv = astad.grad(_matvec_by_rows, argnums=(0, 1))(m, v)
    lm, lv = astad.grad(_matvec_by_rows, argnums=(0, 1))(m.tolist(), v.tolist())
    assert gm.shape == (4, 3) and type(gv) is np.ndarray
    np.testing.assert_allclose(gm, np.array(lm), rtol=1e-15)
    np.testing.assert_allclose(gv, np.array(lv), rtol=1e-15)


def test_arrays_keep_numpys_meaning_where_lists_differ():
    """``xs + ys`` adds arrays and joins lists: each is differentiated as it computes; a
    float32 array (elements of another type) takes the general code."""
    xs, ys = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.5, -0.75])
    gx, gy = astad.grad(_concatenated, argnums=(0, 1))(xs, ys)
    np.testing.assert_allclose(gx, 2 * (xs + ys))
    np.testing.assert_allclose(gy, 2 * (xs + ys))
    lx, ly = astad.grad(_concatenated, argnums=(0, 1))(xs.tolist(), ys.tolist())
    np.testing.assert_allclose(lx, 2 * xs)
    g32 = astad.grad(_dot_by_index)(xs.astype(np.float32), ys.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, ys + xs, rtol=1e-6)
    same = astad.grad(_dot_by_index, argnums=(0, 1))(xs, xs)  # (each place its own)
    np.testing.assert_allclose(same[0], 2 * xs)
    np.testing.assert_allclose(same[1], xs)


def named_like_math(rewards, gamma, min):
    exp = 1.0
    total = 0.0
    for id in range(len(rewards)):
        total += exp * math.exp(-rewards[id]) + math.gamma(1.5 + rewards[id]) * 0.01
        exp *= gamma
    return total if total > min else min


def test_locals_named_as_the_functions_the_code_calls_are_renamed():
    """``gamma``, ``exp``, ``min``, ``id`` as the user's names: the code for floats reads
    them under other names (it calls math's gamma and exp by theirs) and is written,
    in both modes, agreeing with the tape and finite differences."""
    args = ([0.1 * k for k in range(12)], 0.9, -1.0)
    entry = codegen.build(named_like_math)
    assert entry.tapeless is not None and entry.forward is not None
    assert "gamma_" in entry.specialised_source and "exp_ = 1.0" in entry.specialised_source
    f = astad.reverse_diff(named_like_math)
    value, grads = f.value_and_grad(*args)
    want_value, want = f.value_and_grad.__self__._value_and_grad_taped(args, {})
    assert value == want_value == named_like_math(*args)
    assert grads[0] == pytest.approx(want[0], rel=1e-13) and \
        grads[1] == pytest.approx(want[1], rel=1e-13)
    h = 1e-6
    moved = lambda g: named_like_math(args[0], g, args[2])  # noqa: E731
    assert grads[1] == pytest.approx((moved(0.9 + h) - moved(0.9 - h)) / (2 * h), rel=1e-6)
    _, dot = astad.jvp(named_like_math, args, ([0.0] * 12, 1.0, 0.0))
    assert dot == pytest.approx(grads[1], rel=1e-12)
