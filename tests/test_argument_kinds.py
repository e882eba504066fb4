"""Issue 12, class 4, and issue 13 item 3: every kind of argument holding floats is
differentiated (its gradient of the argument's own class) or refused with an InputError,
never taken as a constant.

Walked: subclasses of list, tuple and dict (a dict subclass keeps its class, and its
methods, inside the function), deque, UserList, UserDict, ChainMap, MappingProxyType,
SimpleNamespace, numpy.float64 and numpy.float32 scalars alone or in lists. Refused:
array.array of floats, numpy.matrix (its * is a matrix product), objects of the user's
classes holding floats anywhere (attributes, slots, nested objects). Gradients are
derived by hand; reverse mode (grad, vjp, unfused), forward mode and the arguments'
write-back are checked.
"""
from __future__ import annotations

import array
import collections
import types

import numpy as np
import pytest

import astad


def sum_of_squares(xs):
    return sum(x * x for x in xs)


def sum_of_squared_values(d):
    return sum(v * v for v in d.values())


def both_paths(f, arg, tangent):
    decorated = astad.reverse_diff(f)
    value, grad = decorated.value_and_grad(arg)
    assert decorated.vjp(arg)[1](1.0) == grad
    assert astad.reverse_diff(f, preaccumulate=False).grad(arg) == grad
    _, forward = astad.jvp(f, (arg,), (tangent,))
    return value, grad, forward


class Floats(list):
    unit = "m"


class Pair(tuple):
    pass


class Table(dict):
    def total(self):
        return self["a"] * 2.0 + self["b"]


@pytest.mark.parametrize("make", [Floats, Pair, collections.deque, collections.UserList],
                         ids=lambda c: c.__name__)
def test_sequences_of_every_kind_are_differentiated_with_their_class(make):
    arg = make([1.0, 2.0])
    # (a tangent mirrors the argument: a UserList's is walked as its attributes are)
    tangent = make([1.0, 0.0]) if make is collections.UserList else [1.0, 0.0]
    value, grad, forward = both_paths(sum_of_squares, arg, tangent)
    assert value == 5.0 and list(grad) == [2.0, 4.0] and type(grad) is type(arg)
    assert forward == 2.0


@pytest.mark.parametrize("make", [
    lambda d: Table(d), lambda d: collections.UserDict(d),
    lambda d: collections.ChainMap({"a": d["a"]}, {"b": d["b"]}),
    lambda d: types.MappingProxyType(dict(d)), lambda d: collections.OrderedDict(d)],
    ids=["dict subclass", "UserDict", "ChainMap", "MappingProxyType", "OrderedDict"])
def test_mappings_of_every_kind_are_differentiated_with_their_class(make):
    arg = make({"a": 1.0, "b": 2.0})
    tangent = None if isinstance(arg, collections.ChainMap) else {"a": 1.0, "b": 0.0}
    if isinstance(arg, collections.UserDict):
        tangent = make(tangent)
    value, grad, forward = both_paths(sum_of_squared_values, arg, tangent)
    assert value == 5.0 and dict(grad) == {"a": 2.0, "b": 4.0} and type(grad) is type(arg)
    assert forward == (2.0 if tangent else 0.0)


def test_a_dict_subclass_keeps_its_class_and_methods_inside_the_function():
    def f(t):
        return t.total() * t["a"]
    arg = Table(a=1.5, b=2.0)
    grad = astad.reverse_diff(f).grad(arg)
    # (2a + b) a: d/da = 4a + b, d/db = a
    assert grad == {"a": 8.0, "b": 1.5} and type(grad) is Table
    assert astad.jvp(f, (arg,), (Table(a=1.0, b=0.0),))[1] == 8.0


def test_a_simple_namespace_is_walked():
    def f(ns):
        return ns.x * ns.y
    grad = astad.reverse_diff(f).grad(types.SimpleNamespace(x=2.0, y=3.0))
    assert isinstance(grad, types.SimpleNamespace) and (grad.x, grad.y) == (3.0, 2.0)


def test_containers_of_every_kind_are_written_back_as_the_original_leaves_them():
    def grow(xs, d):
        xs.append(xs[0] * 2.0)
        d["c"] = d["a"] * 3.0
        return xs[0] + d["a"]
    xs, d = Floats([1.0]), Table(a=2.0, b=1.0)
    xs_plain, d_plain = Floats([1.0]), Table(a=2.0, b=1.0)
    grow(xs_plain, d_plain)
    assert astad.reverse_diff(grow).grad(xs, d) == ([1.0], {"a": 1.0, "b": 0.0})
    assert xs == xs_plain and type(xs) is Floats and all(type(x) is float for x in xs)
    assert d == d_plain and type(d) is Table and all(type(v) is float for v in d.values())
    queue = collections.deque([1.0], maxlen=3)
    astad.reverse_diff(lambda q: q.append(q[0] * 2.0) or q[0]).grad(queue)
    assert list(queue) == [1.0, 2.0] and queue.maxlen == 3


# -- numpy scalars --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [np.float64, np.float32])
def test_numpy_scalars_are_differentiated_with_their_type(kind):
    def f(x, ys):
        return x * ys[0] + ys[1] * ys[1]
    x, ys = kind(2.0), [kind(3.0), kind(0.5)]
    value, (gx, gys) = astad.reverse_diff(f).value_and_grad(x, ys)
    assert value == kind(6.25) and type(value) is kind
    assert gx == 3.0 and type(gx) is kind
    assert gys == [2.0, 1.0] and all(type(g) is kind for g in gys)
    assert astad.jvp(f, (x, ys), (1.0, [0.0, 0.0]))[1] == 3.0


def test_a_numpy_float32_alongside_a_float_is_not_a_constant():
    def f(x, c):
        return x * c
    assert astad.reverse_diff(f).grad(2.0, np.float32(3.0)) == (3.0, 2.0)


# -- refused ------------------------------------------------------------------------------------
class Slotted:
    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a


class Model:
    def __init__(self, weights):
        self.weights = weights


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # (numpy.matrix)
@pytest.mark.parametrize("make, says", [
    (lambda: array.array("d", [1.0, 2.0]), "array.array of floats"),
    (lambda: np.matrix([[1.0, 2.0]]), "subclass of numpy's ndarray"),
    (lambda: Slotted(1.0), "Slotted instance holding floats"),
    (lambda: Model([1.0, 2.0]), "Model instance holding floats"),
    (lambda: Model(Model(1.0)), "Model instance holding floats"),
], ids=["array.array", "numpy.matrix", "slots", "nested list", "nested object"])
def test_what_astad_cannot_walk_is_refused_never_a_constant(make, says):
    arg = make()

    def f(x, thing):
        return x * 2.0
    for run in (lambda: astad.reverse_diff(f).grad(1.0, arg),
                lambda: astad.reverse_diff(f).vjp(1.0, arg),
                lambda: astad.jvp(f, (1.0, arg), (1.0, None))):
        with pytest.raises(astad.InputError, match=says):
            run()
    # not differentiated, it is passed through as it is
    assert astad.reverse_diff(f, argnums=0).grad(1.0, arg) == 2.0
