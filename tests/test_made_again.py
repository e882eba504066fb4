"""A function made again (a lambda or nested ``def`` evaluated anew: a new function
object of the same code) is not transformed again: the code astad wrote for the first is
bound to the new one's closure cells and defaults (compile/entry.rebound), when its
globals are the same object and every binding the code was written for holds; otherwise
it is written anew. Each function's derivative is its own, its defaults included."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import astad
from astad.api import transforms
from astad.compile import calls, entry


def scale_of(k):
    return 0.5 + k


def test_a_lambda_made_in_a_loop_is_transformed_once_and_sees_its_own_closure():
    builds = []
    original = calls.build

    def counting(fn, *args):
        builds.append(fn)
        return original(fn, *args)

    calls.build = counting
    try:
        for k in range(5):
            a = scale_of(k)
            g = astad.grad(lambda x: a * math.sin(x) * x)(0.7)  # noqa: B023 (called now)
            assert g == pytest.approx(a * (math.cos(0.7) * 0.7 + math.sin(0.7)), rel=1e-14)
    finally:
        calls.build = original
    assert len(builds) == 1


def test_nested_defs_recursion_and_arrays_made_again():
    def model(w):
        def energy(x, depth):  # recursion through its own closure cell
            if depth == 0:
                return np.sum(w * x * x)
            return energy(x * 0.5, depth - 1) + np.sum(np.sin(w * x))
        return energy

    x = np.array([0.3, -0.2, 0.9])
    for w in (np.array([1.0, 2.0, 3.0]), np.array([-1.0, 0.5, 0.25])):
        f = model(w)
        got = astad.grad(f)(x, 2)
        h = 1e-6
        expected = [(f(x + h * e, 2) - f(x - h * e, 2)) / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)
        tangent = astad.jvp(lambda v: f(v, 2), (x,), (np.ones(3),))[1]  # noqa: B023
        assert tangent == pytest.approx(np.sum(got), rel=1e-10)


def _counting_builds(monkeypatch) -> list:
    builds: list = []
    original = calls.build

    def counting(fn, *args):
        builds.append(fn)
        return original(fn, *args)
    monkeypatch.setattr(calls, "build", counting)
    return builds


def test_a_lambda_with_defaults_made_in_a_loop_is_transformed_once(monkeypatch):
    """``lambda x, c=c: ...`` (the idiom that captures a loop's value) and a nested def
    with a default: written once, each function's defaults its own (taken as arguments
    by the specialised code, copied into the taped code made for it); by ``grad``,
    ``value_and_grad`` and forward mode, against the derivative by hand."""
    builds = _counting_builds(monkeypatch)

    def make(c):
        def inner(x, y=2.0 * c):
            return y * math.sin(x)
        return inner
    for k in range(5):
        c = scale_of(k)
        f = lambda x, c=c: c * x * x + math.sin(c * x)  # noqa: E731
        assert astad.grad(f)(1.5) == pytest.approx(2 * c * 1.5 + c * math.cos(c * 1.5),
                                                   rel=1e-14)
        assert astad.value_and_grad(make(c))(0.4) == pytest.approx(
            (2.0 * c * math.sin(0.4), 2.0 * c * math.cos(0.4)), rel=1e-14)
        assert astad.jvp(make(c), (0.4,), (1.0,))[1] == pytest.approx(
            2.0 * c * math.cos(0.4), rel=1e-14)
        assert astad.grad(make(c), argnums=(0, 1))(0.4, 3.0) == pytest.approx(
            (3.0 * math.cos(0.4), math.sin(0.4)), rel=1e-14)
    assert len(builds) == 2


def power(x, n=3, s=2.0):
    if n == 0:
        return s
    return x * power(x, n - 1)  # (the defaults of ``power``, the global, as constants)


def test_code_holding_its_own_defaults_is_not_shared():
    """A recursive call leaving defaults out reads them as constants in the code written
    for floats: that code is kept for no other function of its code (a copy with other
    defaults gets its own), and each answers with its defaults (the copy's recursion
    calls the global ``power``, as Python does)."""
    entry.BY_CODE.pop((power.__code__, True, False), None)
    assert astad.grad(power)(1.5) == pytest.approx(3 * 1.5 ** 2 * 2.0, rel=1e-14)
    assert calls.transformed(power).reads_defaults
    assert (power.__code__, True, False) not in entry.BY_CODE
    other = type(power)(power.__code__, globals(), "power", (2, 5.0))
    assert astad.grad(other)(1.5) == pytest.approx(2 * 1.5 * 2.0, rel=1e-14)  # x x power(x, 0)
    assert astad.grad(other)(1.5, 0, 5.0) == 0.0


def test_a_rebound_global_writes_it_anew():
    global scale_of
    saved = scale_of
    try:
        f = lambda x: scale_of(x) * x  # noqa: E731
        assert astad.grad(f)(1.0) == 2.5  # d/dx (0.5 + x) x
        scale_of = lambda k: 3.0 * k  # noqa: E731
        g = lambda x: scale_of(x) * x  # noqa: E731
        assert astad.grad(g)(1.0) == 6.0  # the global it was written for changed
    finally:
        scale_of = saved


def test_a_rebound_entry_is_the_functions_own():
    def make(a):
        return lambda x: a * x

    f, g = make(2.0), make(5.0)
    assert astad.grad(f)(1.0) == 2.0 and astad.grad(g)(1.0) == 5.0
    ef, eg = calls.transformed(f), calls.transformed(g)
    assert ef is not eg and ef.function() is f and eg.function() is g
    assert ef.taped.__code__ is eg.taped.__code__  # (written once)
    assert eg.is_current(g)
    del f
    assert astad.grad(g)(2.0) == 5.0
    assert any(key[0] is g.__code__ or key[0] == g.__code__ for key in entry.BY_CODE)


def test_a_dead_functions_entry_under_a_reused_id_is_not_taken():
    """An entry is cached by the function's id and leaves when the function dies (a
    finaliser); a finaliser that did not run (one run deep in a recursion fails) must not
    hand a new function that took the id the dead one's entry, bound to its closure."""
    from astad.compile import entry as entries

    def make(k):
        return lambda x: k * x * x

    first, second = make(3.0), make(5.0)
    astad.grad(first)(1.0)
    stale = next(e for key, e in entries.CACHE.items() if key[0] == id(first))
    for key in [key for key in entries.CACHE if key[0] == id(second)]:
        del entries.CACHE[key]
    entries.CACHE[(id(second), True, False)] = stale  # (as if second had taken the id)
    assert astad.grad(second)(1.0) == 10.0
    assert astad.reverse_diff(second).grad(2.0) == 20.0


def weighted_sum(a, x, y):
    return a * x * y + math.sin(x) * y * y


@pytest.mark.parametrize("argnums", [0, 1, -1, (0, 1)])
def test_a_partial_made_per_call_takes_the_code_for_floats(argnums, monkeypatch):
    """``functools.partial(f, a)`` (made per call or kept) of a plain function: ``f``'s code
    for floats with the argnums after the bound argument, never the pass through the
    partial; the derivative by hand, the bound argument a constant."""
    x, y = 0.7, -1.2
    dx, dy = lambda a: a * y + math.cos(x) * y * y, lambda a: a * x + 2 * math.sin(x) * y
    monkeypatch.setattr(transforms, "reverse", None)  # (the pass would raise TypeError)
    for a in (1.5, 2.5):
        want = {0: dx(a), 1: dy(a), -1: dy(a), (0, 1): (dx(a), dy(a))}[argnums]
        kept = astad.value_and_grad(functools.partial(weighted_sum, a), argnums=argnums)
        for got in (kept(x, y), astad.value_and_grad(
                functools.partial(weighted_sum, a), argnums=argnums)(x, y)):
            assert got[0] == weighted_sum(a, x, y)
            assert got[1] == pytest.approx(want, rel=1e-14)
