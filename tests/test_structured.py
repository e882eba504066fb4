"""Structured data (issue 3): containers, named tuples, dataclasses, sum types, recursive types.

D maps every data type homomorphically (Smeding & Vakar, POPL 2023, section 9): floats
become duals, containers and objects simply hold duals. These tests check that values of
all those kinds work as arguments, as results and as intermediate values inside
differentiated code, and that a gradient mirrors its argument exactly (same container
types, same dataclass types, same union variants, tags and non-float leaves kept).

Every gradient is checked against central finite differences computed by a
structure-aware helper defined here (``fd_grad``: it walks lists, tuples, named tuples,
dicts and dataclasses, and perturbs a copy made without running user code), and where
easy against hand-derived values. Gradients are compared with ``assert_tree_close``,
which demands identical types at every container/dataclass node.

Functions are defined undecorated at module level and decorated inside each test (by
``ad``), so an unsupported construct fails its own test, not the whole module.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import enum
import functools
import math
import random
import sys
import threading
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, Optional, TypeVar, Union
from collections.abc import Callable

import pytest

import astad

# ==========================================================================================
# Helpers: structure-aware walking, finite differences, comparison


def _is_float(v) -> bool:
    return isinstance(v, float) and not isinstance(v, bool)


def _is_dc(v) -> bool:
    return dataclasses.is_dataclass(v) and not isinstance(v, type)


def _is_nt(v) -> bool:
    return isinstance(v, tuple) and hasattr(type(v), "_fields")


def _is_dual(v) -> bool:
    t = type(v)
    return t.__name__ == "Dual" and t.__module__.startswith("astad")


def _children(v):
    """[(step, child)] of a walked node (dataclass, list, tuple, named tuple, dict); None
    for a leaf. A step is ("attr", name) or ("item", key)."""
    if _is_dc(v):
        return [(("attr", f.name), getattr(v, f.name)) for f in dataclasses.fields(v)]
    if isinstance(v, (list, tuple)):
        return [(("item", k), x) for k, x in enumerate(v)]
    if isinstance(v, dict):
        return [(("item", k), x) for k, x in v.items()]
    return None


def _with_children(v, new):
    """A node of ``v``'s type holding ``new`` (in ``_children`` order); dataclasses are made
    without running ``__init__``/``__post_init__``."""
    if _is_dc(v):
        obj = object.__new__(type(v))
        for k, val in getattr(v, "__dict__", {}).items():
            object.__setattr__(obj, k, val)
        for f, val in zip(dataclasses.fields(v), new):
            object.__setattr__(obj, f.name, val)
        return obj
    if _is_nt(v):
        return type(v)._make(new)
    if isinstance(v, list):
        return list(new) if type(v) is list else type(v)(new)
    if isinstance(v, tuple):
        return tuple(new) if type(v) is tuple else type(v)(new)
    if isinstance(v, dict):
        out = copy.copy(v)
        out.clear()
        out.update(zip(v.keys(), new))
        return out
    raise TypeError(type(v))


def map_floats(v, fn, path=()):
    """``v`` with each float leaf replaced by ``fn(path, leaf)``; other leaves kept."""
    if _is_float(v):
        return fn(path, v)
    ch = _children(v)
    if ch is None:
        return v
    return _with_children(v, [map_floats(c, fn, path + (s,)) for s, c in ch])


def replace_at(v, path, new):
    if not path:
        return new
    step, rest = path[0], path[1:]
    return _with_children(v, [replace_at(c, rest, new) if s == step else c
                              for s, c in _children(v)])


def fd_grad(f, args, argnums=None, eps=1e-6):
    """Central finite-difference gradient of scalar ``f`` (astad's argnums convention,
    for a call passing every parameter positionally). Each call gets deep copies of the
    arguments, so functions that mutate their arguments are fine."""
    args = tuple(args)
    if argnums is None:
        nums, single = tuple(range(len(args))), len(args) == 1
    elif isinstance(argnums, int):
        nums, single = (argnums,), True
    else:
        nums, single = tuple(argnums), False

    def call(a):
        r = f(*copy.deepcopy(a))
        assert isinstance(r, (int, float)) and not isinstance(r, bool), r
        return float(r)

    grads = []
    for n in nums:
        def partial(path, v, n=n):
            h = eps * max(1.0, abs(v))
            vp, vm = v + h, v - h
            plus, minus = list(args), list(args)
            plus[n] = replace_at(args[n], path, vp)
            minus[n] = replace_at(args[n], path, vm)
            return (call(plus) - call(minus)) / (vp - vm)
        grads.append(map_floats(args[n], partial))
    return grads[0] if single else tuple(grads)


def inner(result, cot) -> float:
    """<result, cotangent>, None meaning zero (a leaf or a whole subtree)."""
    if cot is None:
        return 0.0
    if _is_float(result):
        return result * cot
    ch = _children(result)
    if ch is None:
        return 0.0
    cc = _children(cot)
    return sum(inner(r, c) for (_, r), (_, c) in zip(ch, cc))


def fd_vjp(f, args, cot, argnums=None):
    return fd_grad(lambda *a: inner(f(*a), cot), args, argnums)


def _fmt(step) -> str:
    kind, key = step
    return f".{key}" if kind == "attr" else f"[{key!r}]"


def tree_problems(actual, expected, rtol=1e-5, atol=1e-6, limit=20):
    """Mismatches between two gradients (iterative: works on 10^4-deep structures).
    Types must be identical at every node; float leaves close; other leaves equal."""
    problems = []
    stack = [(actual, expected, "g")]
    while stack and len(problems) < limit:
        a, e, p = stack.pop()
        if _is_float(e):
            if type(a) is not float:
                problems.append(f"{p}: expected a float, got {type(a).__name__} {a!r}")
            elif not (abs(a - e) <= atol + rtol * abs(e)):
                problems.append(f"{p}: expected {e!r}, got {a!r}")
            continue
        ech = _children(e)
        if ech is not None:
            if type(a) is not type(e):
                problems.append(f"{p}: expected type {type(e).__qualname__}, got "
                                f"{type(a).__qualname__}")
                continue
            if isinstance(e, dict) and list(a.keys()) != list(e.keys()):
                problems.append(f"{p}: keys {list(a.keys())!r} != {list(e.keys())!r}")
                continue
            ach = _children(a)
            if len(ach) != len(ech):
                problems.append(f"{p}: length {len(ach)} != {len(ech)}")
                continue
            for (s, ac), (_, ec) in zip(ach, ech):
                stack.append((ac, ec, p + _fmt(s)))
            continue
        if type(a) is not type(e) or not (a is e or a == e):
            problems.append(f"{p}: expected the leaf {type(e).__name__} {e!r}, got "
                            f"{type(a).__name__} {a!r}")
    return problems


def assert_tree_close(actual, expected, rtol=1e-5, atol=1e-6):
    problems = tree_problems(actual, expected, rtol, atol)
    assert not problems, "gradients differ:\n  " + "\n  ".join(problems)


def find_duals(value, limit=5):
    """Paths of duals anywhere in ``value`` (containers, dataclasses, sets, objects)."""
    found, stack, seen = [], [(value, "v")], set()
    while stack and len(found) < limit:
        v, p = stack.pop()
        if _is_dual(v):
            found.append(p)
            continue
        if isinstance(v, (int, float, str, bytes, type(None), enum.Enum)) or callable(v):
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (set, frozenset)):
            stack.extend((x, p + "{}") for x in v)
        elif isinstance(v, dict):
            stack.extend((x, p + f"[{k!r}]") for k, x in v.items())
            stack.extend((k, p + ".key") for k in v)
        elif isinstance(v, (list, tuple)):
            stack.extend((x, p + f"[{k}]") for k, x in enumerate(v))
        else:
            attrs = dict(getattr(v, "__dict__", {}))
            for cls in type(v).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if hasattr(v, name) and name not in ("__dict__", "__weakref__"):
                        attrs[name] = getattr(v, name)
            stack.extend((x, p + f".{k}") for k, x in attrs.items())
    return found


_DECORATED: dict = {}


def ad(fn, argnums=None):
    key = (fn, argnums)
    if key not in _DECORATED:
        _DECORATED[key] = astad.reverse_diff(fn, argnums=argnums)
    return _DECORATED[key]


def check(fn, *args, argnums=None, expected=None, rtol=1e-5, atol=1e-6):
    """Differentiate ``fn`` at ``args``; check the value, the gradient against finite
    differences (and ``expected`` if given), and that no dual leaks. Returns the gradient."""
    f = ad(fn, argnums)
    snapshot = copy.deepcopy(args)
    value, g = f.value_and_grad(*copy.deepcopy(snapshot))
    want = fn(*copy.deepcopy(snapshot))
    assert type(value) is float and value == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert_tree_close(g, fd_grad(fn, snapshot, argnums), rtol, atol)
    if expected is not None:
        assert_tree_close(g, expected, 1e-9, 1e-12)
    assert not find_duals(g), find_duals(g)
    assert f.grad(*copy.deepcopy(snapshot)) is not None
    return g


def check_vjp(fn, args, cot, argnums=None, rtol=1e-5, atol=1e-6):
    """vjp of ``fn`` at ``args`` with cotangent ``cot``: value equals the original's
    result (no duals), gradients match finite differences of <f(x), cot>."""
    f = ad(fn, argnums)
    value, pullback = f.vjp(*copy.deepcopy(args))
    assert not find_duals(value), find_duals(value)
    assert_tree_close(value, fn(*copy.deepcopy(args)), 1e-12, 1e-12)
    g = pullback(cot)
    assert_tree_close(g, fd_vjp(fn, args, cot, argnums), rtol, atol)
    assert not find_duals(g)
    return value, g


def run_deep(fn, frames_needed):
    """Run ``fn()`` in a thread with a large C stack and the recursion limit raised to
    ``frames_needed`` (plus a small margin for the thread's own frames); the limit is
    restored afterwards."""
    result = {}
    old_limit = sys.getrecursionlimit()

    def target():
        sys.setrecursionlimit(max(old_limit, frames_needed + 50))
        try:
            result["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            result["error"] = exc
        finally:
            sys.setrecursionlimit(old_limit)

    old_size = threading.stack_size(256 * 1024 * 1024)
    try:
        t = threading.Thread(target=target)
        t.start()
        t.join()
    finally:
        threading.stack_size(old_size)
    assert sys.getrecursionlimit() == old_limit
    if "error" in result:
        raise result["error"]
    return result["value"]


# ==========================================================================================
# Types used below (module level: astad reads function source with inspect)

Point = collections.namedtuple("Point", ["x", "y"])


class PointNT(NamedTuple):
    x: float
    y: float
    label: str = "p"


class Color(enum.Enum):
    RED = 1
    GREEN = 2


@dataclass
class Vec3:
    x: float
    y: float
    z: float


@dataclass
class Quaternion:
    x: float
    y: float
    z: float
    w: float   # the scalar part is the LAST component


@dataclass
class Params:
    w: float
    b: float


@dataclass(frozen=True)
class FrozenPair:
    a: float
    b: float


@dataclass(slots=True)
class SlotVec:
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class FrozenSlot:
    x: float
    n: int


@dataclass
class Config:
    scale: float
    offset: float = 1.0
    name: str = "cfg"
    weights: list = field(default_factory=lambda: [1.0, 2.0])
    steps: list = field(default_factory=list)


@dataclass
class Base:
    x: float
    label: str = "base"


@dataclass
class Derived(Base):
    y: float = 0.0
    n: int = 2


@dataclass
class Inner:
    a: float


@dataclass
class Middle:
    inner: Inner
    b: float
    items: list


@dataclass
class Outer:
    mid: Middle
    c: float
    table: dict


@dataclass
class Wrap:
    inner: Optional[Wrap]
    w: float


T = TypeVar("T")


@dataclass
class Box(Generic[T]):
    value: T


@dataclass
class Pair(Generic[T]):
    first: T
    second: T


def double(t):
    return 2.0 * t


def cube(t):
    return t * t * t


@dataclass
class Tagged:
    value: float
    name: str
    count: int
    color: Color
    fn: Callable
    nothing: None = None
    flag: bool = True


@dataclass
class Layer:
    w: float
    b: float
    activation: Callable


CALLS: collections.Counter = collections.Counter()


@dataclass
class NonNegative:
    value: float

    def __post_init__(self):
        CALLS["NonNegative"] += 1
        if self.value < 0:
            raise ValueError("NonNegative: negative value")


@dataclass
class Direction:
    """Normalised to unit length by __post_init__."""
    x: float
    y: float

    def __post_init__(self):
        CALLS["Direction"] += 1
        n = math.sqrt(self.x * self.x + self.y * self.y)
        self.x = self.x / n
        self.y = self.y / n


@dataclass(init=False)
class Celsius:
    degrees: float

    def __init__(self, fahrenheit):
        CALLS["Celsius"] += 1
        self.degrees = (fahrenheit - 32.0) * 5.0 / 9.0


@dataclass(frozen=True, slots=True)
class Interval:
    lo: float
    hi: float

    def __post_init__(self):
        CALLS["Interval"] += 1
        if self.lo > self.hi:
            raise ValueError("Interval: lo > hi")


# -- sum types

@dataclass
class Circle:
    r: float


@dataclass
class Rect:
    w: float
    h: float


@dataclass
class Triangle:
    a: float
    b: float
    c: float


Shape = Union[Circle, Rect, Triangle]


@dataclass
class P2:
    x: float
    y: float


@dataclass
class Segment:
    start: P2
    end: P2


@dataclass
class Token:
    kind: str
    value: float


class Op(enum.Enum):
    ADD = "add"
    MUL = "mul"
    SQUARE = "square"


@dataclass
class Instr:
    op: Op
    arg: float


# -- recursive types

@dataclass
class Cons:
    head: float
    tail: Optional[Cons] = None


@dataclass
class Leaf:
    value: float


@dataclass
class Node:
    left: Tree
    right: Tree
    weight: float


Tree = Union[Leaf, Node]


@dataclass
class Const:
    value: float


@dataclass
class Var:
    name: str


@dataclass
class Add:
    left: Expr
    right: Expr


@dataclass
class Mul:
    left: Expr
    right: Expr


Expr = Add | Mul | Const | Var


@dataclass
class Rose:
    value: float
    forest: Forest


@dataclass
class Forest:
    trees: list   # list[Rose]


# ==========================================================================================
# rotate_vec_by_quat with Vec3 and Quaternion dataclasses (the paper's program)

def vdot(a, b):
    return a.x * b.x + a.y * b.y + a.z * b.z


def vcross(a, b):
    return Vec3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x)


def vscale(k, a):
    return Vec3(k * a.x, k * a.y, k * a.z)


def vadd(a, b):
    return Vec3(a.x + b.x, a.y + b.y, a.z + b.z)


def rotate_vec_by_quat(v, q):
    u = Vec3(q.x, q.y, q.z)
    s = q.w
    return vadd(vadd(vscale(2.0 * vdot(u, v), u), vscale(s * s - vdot(u, u), v)),
                vscale(2.0 * s, vcross(u, v)))


def rotate_x(q, v):
    return rotate_vec_by_quat(v, q).x


Q0 = Quaternion(1.1, 2.2, 3.3, 4.4)
V0 = Vec3(5.5, 6.6, 7.7)


def test_rotate_vec_by_quat_hand_derived():
    # u = (1.1, 2.2, 3.3), s = 4.4, v = (5.5, 6.6, 7.7):
    # u.v = 45.98, u.u = 16.94, s^2 - u.u = 2.42, (u x v)_x = 2.2*7.7 - 3.3*6.6 = -4.84
    # x = 2*45.98*1.1 + 2.42*5.5 + 2*4.4*(-4.84) = 101.156 + 13.31 - 42.592 = 71.874
    # d/dqx = 2 u.v = 91.96;  d/dqy = 2 vy ux - 2 uy vx + 2 s vz = 58.08
    # d/dqz = 2 vz ux - 2 uz vx - 2 s vy = -77.44;  d/dqw = 2 s vx + 2 (u x v)_x = 38.72
    # d/dvx = 2 ux^2 + s^2 - u.u = 4.84;  d/dvy = 2 uy ux - 2 s uz = -24.2
    # d/dvz = 2 uz ux + 2 s uy = 26.62
    f = ad(rotate_x)
    value, (gq, gv) = f.value_and_grad(Q0, V0)
    assert value == pytest.approx(71.874, rel=1e-12)
    assert type(gq) is Quaternion and type(gv) is Vec3
    assert dataclasses.astuple(gq) == pytest.approx((91.96, 58.08, -77.44, 38.72), rel=1e-12)
    assert dataclasses.astuple(gv) == pytest.approx((4.84, -24.2, 26.62), rel=1e-12)
    assert Q0 == Quaternion(1.1, 2.2, 3.3, 4.4) and V0 == Vec3(5.5, 6.6, 7.7)


def test_rotate_vec_by_quat_matches_fd():
    g = check(rotate_x, Quaternion(0.3, -1.2, 0.7, 2.0), Vec3(1.5, -0.5, 2.5))
    assert type(g[0]) is Quaternion and type(g[1]) is Vec3


@pytest.mark.parametrize("cot", [Vec3(1.0, 0.0, 0.0), Vec3(0.0, 1.0, 0.0),
                                 Vec3(0.5, None, -2.0)])
def test_rotate_vec_by_quat_vjp_of_vector_result(cot):
    value, (gv, gq) = check_vjp(rotate_vec_by_quat, (V0, Q0), cot)
    assert type(value) is Vec3 and type(gv) is Vec3 and type(gq) is Quaternion
    assert value.x == pytest.approx(71.874, rel=1e-12)


# ==========================================================================================
# Tuples, lists, dicts, named tuples


def f_tuple_nested(t):
    a, xs, (b, name, n) = t
    return a * xs[0] + xs[1] * b * n + len(name) * a


def test_tuple_with_nested_list_and_tuple():
    arg = (1.5, [2.0, -3.0], (4.0, "ab", 3))
    g = check(f_tuple_nested, arg,
              expected=(2.0 + 2, [1.5, 12.0], (-9.0, "ab", 3)))
    assert type(g) is tuple and type(g[1]) is list and type(g[2]) is tuple


def f_list_of_lists(m, v):
    out = 0.0
    for row in m:
        acc = 0.0
        for a, b in zip(row, v):
            acc = acc + a * b
        out = out + acc * acc
    return out


def test_list_of_lists():
    g = check(f_list_of_lists, [[1.0, 2.0], [3.0, -1.0]], [0.5, 0.25])
    assert type(g[0]) is list and type(g[0][0]) is list


def f_dict_str(d):
    return d["a"] * d["b"] + sum(d["c"]) * d["a"]


def test_dict_argument():
    g = check(f_dict_str, {"a": 2.0, "b": 3.0, "c": [1.0, 4.0]},
              expected={"a": 3.0 + 5.0, "b": 2.0, "c": [2.0, 2.0]})
    assert list(g) == ["a", "b", "c"]


def f_dict_keys(d):
    total = 0.0
    for k, v in d.items():
        if k != "s":
            total = total + v * v
    return total * d[(2, "x")] + d[Color.RED] + d[None] * d[1] + d[frozenset({7})]


def test_dict_with_any_hashable_keys():
    arg = {1: 2.0, (2, "x"): 3.0, Color.RED: -1.0, None: 0.5, frozenset({7}): 4.0, "s": "str"}
    g = check(f_dict_keys, arg)
    assert list(g.keys()) == list(arg.keys())
    assert g["s"] == "str"


def f_dict_float_keys(d):
    return sum(k * v * v for k, v in d.items())


def test_dict_with_float_keys_keys_not_differentiated():
    g = check(f_dict_float_keys, {0.5: 2.0, 1.5: 3.0}, expected={0.5: 2.0, 1.5: 9.0})
    assert list(g.keys()) == [0.5, 1.5]


def f_namedtuple(p):
    return p.x * p.y + p[0] * p[0]


def test_collections_namedtuple_argument():
    g = check(f_namedtuple, Point(2.0, 3.0), expected=Point(3.0 + 4.0, 2.0))
    assert type(g) is Point


def f_typed_namedtuple(ps):
    total = 0.0
    for p in ps:
        x, y, label = p
        total = total + x * y * len(label)
    return total


def test_typing_namedtuple_argument_keeps_str_field():
    g = check(f_typed_namedtuple, [PointNT(1.0, 2.0, "ab"), PointNT(3.0, 4.0)],
              expected=[PointNT(4.0, 2.0, "ab"), PointNT(4.0, 3.0, "p")])
    assert all(type(p) is PointNT for p in g) and g[0].label == "ab"


def f_namedtuple_inside(x, y):
    p = Point(x * y, x + y)
    q = PointNT(p.y, p[0], "in")
    a, b = p
    return q.x * a + b * q[1] + len(q.label)


def test_namedtuples_constructed_and_unpacked_inside():
    check(f_namedtuple_inside, 1.5, -2.0)


def f_namedtuple_result(x, y):
    return PointNT(x * y, x + y, "r")


def test_typing_namedtuple_result_vjp():
    value, g = check_vjp(f_namedtuple_result, (2.0, 3.0), PointNT(1.0, 2.0, "r"))
    assert type(value) is PointNT and value == PointNT(6.0, 5.0, "r")
    assert g == (3.0 + 2.0, 2.0 + 2.0)


def f_collection_result(x, y):
    return (x * y, [x, y * y, 3.0], {"k": x - y, "j": (y,)})


def test_tuple_list_dict_result_vjp_with_none():
    cot = (2.0, [None, 1.0, 5.0], {"k": None, "j": (3.0,)})
    value, g = check_vjp(f_collection_result, (2.0, 3.0), cot)
    assert type(value) is tuple and type(value[1]) is list and type(value[2]) is dict
    assert g == (2.0 * 3.0, 2.0 * 2.0 + 1.0 * 6.0 + 3.0)
    _, pullback = ad(f_collection_result).vjp(2.0, 3.0)
    assert pullback((None, None, None)) == (0.0, 0.0)   # whole subtrees None: zero


def f_builtin_constructors(xs, y):
    a = list(xs)
    t = tuple(a)
    d = dict(zip(["p", "q"], t))
    e = dict(d, r=y)
    a.append(y)
    return sum(a) * t[0] + d["q"] * e["r"]


def test_builtin_container_constructors():
    check(f_builtin_constructors, [1.0, 2.0], 3.0)


# ==========================================================================================
# Dataclasses


def f_params(p, xs):
    return sum((p.w * x + p.b) ** 2 for x in xs)


def test_plain_dataclass_argument():
    g = check(f_params, Params(0.5, -0.1), [1.0, 2.0])
    assert type(g[0]) is Params


def f_frozen(p):
    return p.a * p.a * p.b


def test_frozen_dataclass_argument():
    g = check(f_frozen, FrozenPair(2.0, 3.0), expected=FrozenPair(12.0, 4.0))
    assert type(g) is FrozenPair
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.a = 1.0


def f_slots(v):
    return v.x * v.y - v.y


def test_slots_dataclass_argument():
    g = check(f_slots, SlotVec(2.0, 5.0), expected=SlotVec(5.0, 1.0))
    assert type(g) is SlotVec and not hasattr(g, "__dict__")


def f_frozen_slots(v):
    return v.x ** v.n


def test_frozen_slots_dataclass_with_int_field():
    g = check(f_frozen_slots, FrozenSlot(1.5, 3), expected=FrozenSlot(3 * 1.5 ** 2, 3))
    assert type(g) is FrozenSlot and g.n == 3 and type(g.n) is int


def f_config(c, x):
    return c.scale * x + c.offset + sum(w * x for w in c.weights) + len(c.steps) + len(c.name)


def test_dataclass_with_defaults_and_default_factory_argument():
    arg = Config(2.0)
    g = check(f_config, arg, 3.0,
              expected=(Config(3.0, 1.0, "cfg", [3.0, 3.0], []), 2.0 + 1.0 + 2.0))
    assert type(g[0]) is Config and g[0].weights is not arg.weights


def f_config_inside(x):
    c = Config(x)
    c2 = Config(x * x, offset=x, name="z")
    c2.weights.append(x)
    c.steps.append(c2.offset * 3.0)
    return c.scale * sum(c.weights) + c2.scale * sum(c2.weights) + c.steps[0] + c.offset


def test_dataclass_default_factory_constructed_inside():
    check(f_config_inside, 1.5)


def f_derived(d):
    return d.x * d.y * d.n + len(d.label)


def test_inherited_dataclass_argument():
    g = check(f_derived, Derived(2.0, "lbl", 3.0, 4), expected=Derived(12.0, "lbl", 8.0, 4))
    assert type(g) is Derived and g.label == "lbl" and g.n == 4


def f_derived_inside(x):
    d = Derived(x, y=x * x)
    b = Base(d.y)
    return d.x * d.y + b.x * d.n + (1.0 if isinstance(d, Base) else 0.0)


def test_inherited_dataclass_constructed_inside():
    check(f_derived_inside, 1.25, expected=3 * 1.25 ** 2 + 2 * 2 * 1.25)


def f_outer(o):
    total = o.mid.inner.a * o.mid.b + o.c
    for it in o.mid.items:
        total = total + it.a * o.c
    for k, inner in o.table.items():
        total = total + inner.a * len(k)
    return total


def test_nested_dataclasses():
    arg = Outer(Middle(Inner(2.0), 3.0, [Inner(1.0), Inner(-1.0)]), 0.5,
                {"ab": Inner(4.0), "c": Inner(5.0)})
    g = check(f_outer, arg)
    assert type(g) is Outer and type(g.mid) is Middle and type(g.mid.inner) is Inner
    assert type(g.mid.items) is list and all(type(i) is Inner for i in g.mid.items)
    assert type(g.table) is dict and all(type(i) is Inner for i in g.table.values())
    assert g.mid.inner.a == pytest.approx(3.0) and g.table["ab"].a == pytest.approx(2.0)


def f_wrap_chain(w):
    total = 0.0
    scale = 1.0
    while w is not None:
        total = total + scale * w.w
        scale = scale * 0.5
        w = w.inner
    return total


def test_dataclasses_nested_to_depth_60():
    arg = None
    for k in range(60):
        arg = Wrap(arg, 1.0 + k / 10)
    g = check(f_wrap_chain, arg)
    depth = 0
    while g is not None:
        assert type(g) is Wrap
        assert g.w == pytest.approx(0.5 ** depth, rel=1e-12, abs=0)
        g, depth = g.inner, depth + 1
    assert depth == 60


def f_generic(b, p):
    return b.value * p.first.x + p.second.y * b.value ** 2


def test_generic_dataclass_argument():
    g = check(f_generic, Box[float](2.0), Pair[Vec3](Vec3(1.0, 2.0, 3.0), Vec3(4.0, 5.0, 6.0)))
    assert type(g[0]) is Box and type(g[1]) is Pair and type(g[1].first) is Vec3


def f_generic_inside(x, y):
    b = Box(Pair(x, y))
    c = Box[Vec3](Vec3(x, y, x * y))
    return b.value.first * c.value.z + b.value.second


def test_generic_dataclass_constructed_inside():
    check(f_generic_inside, 2.0, 3.0, expected=(2 * 2.0 * 3.0, 2.0 * 2.0 + 1.0))


def f_tagged(t):
    red = 1.0 if t.color is Color.RED else 2.0
    extra = 0.0 if t.nothing is None else 1.0
    return t.value * t.count * red + extra + (t.value if t.flag else 0.0)


def test_non_float_fields_are_the_arguments_own_values():
    arg = Tagged(1.5, "name", 3, Color.GREEN, double)
    before = CALLS.copy()
    g = check(f_tagged, arg, expected=Tagged(7.0, "name", 3, Color.GREEN, double))
    assert type(g) is Tagged
    assert g.name == "name" and g.count == 3 and type(g.count) is int
    assert g.color is Color.GREEN and g.fn is double and g.nothing is None and g.flag is True
    assert CALLS == before


def f_layers(layers, x):
    for layer in layers:
        x = layer.activation(layer.w * x + layer.b)
    return x


def test_function_field_called_inside():
    arg = [Layer(0.5, 0.1, cube), Layer(-1.5, 0.2, math.tanh), Layer(2.0, 0.0, double)]
    g = check(f_layers, arg, 0.7)
    assert [type(layer) for layer in g[0]] == [Layer, Layer, Layer]
    assert [layer.activation for layer in g[0]] == [cube, math.tanh, double]


def f_vec_result(v, k):
    return Vec3(v.x * k, v.y + k, v.z * v.x)


def test_dataclass_result_vjp():
    value, g = check_vjp(f_vec_result, (Vec3(1.0, 2.0, 3.0), 2.0), Vec3(1.0, None, 0.5))
    assert type(value) is Vec3 and value == Vec3(2.0, 4.0, 3.0)
    assert type(g[0]) is Vec3
    assert g == (Vec3(2.0 + 1.5, 0.0, 0.5), 1.0)


def f_mixed_result(x):
    return Tagged(x * x, "out", 2, Color.RED, double)


def test_result_dataclass_with_non_float_fields_vjp():
    value, g = check_vjp(f_mixed_result, (3.0,), Tagged(1.0, "out", 2, Color.RED, double))
    assert type(value) is Tagged and value.name == "out" and value.fn is double
    assert g == 6.0


def f_two_structs(p, k, shapes):
    return p.w * k * sum(s.r for s in shapes)


def test_argnums_with_structures():
    args = (Params(2.0, 1.0), 3.0, [Circle(1.0), Circle(2.0)])
    g = check(f_two_structs, *args, argnums=(0, 2))
    assert len(g) == 2 and type(g[0]) is Params and [type(s) for s in g[1]] == [Circle, Circle]
    g1 = check(f_two_structs, *args, argnums=2)
    assert type(g1) is list


# ==========================================================================================
# Validating dataclasses: gradients are rebuilt without running user code


def f_nonneg(p):
    return -3.0 * p.value


def test_validating_dataclass_gradient_is_built_even_if_invalid():
    arg = NonNegative(2.0)
    before = CALLS["NonNegative"]
    g = ad(f_nonneg).grad(arg)
    assert CALLS["NonNegative"] == before        # __post_init__ not run for the gradient
    assert type(g) is NonNegative and g.value == -3.0   # a value the validator rejects
    _, pullback = ad(f_nonneg).vjp(arg)
    assert pullback(2.0).value == -6.0
    assert CALLS["NonNegative"] == before


def f_direction(d):
    return 2.0 * d.x + 5.0 * d.y


def test_normalising_dataclass_gradient_is_not_normalised():
    arg = Direction(3.0, 4.0)
    assert (arg.x, arg.y) == (0.6, 0.8)
    before = CALLS["Direction"]
    g = ad(f_direction).grad(arg)
    assert CALLS["Direction"] == before
    assert type(g) is Direction and (g.x, g.y) == (2.0, 5.0)   # not (0.371.., 0.928..)
    assert_tree_close(g, fd_grad(f_direction, (arg,)))


def f_celsius(c):
    return c.degrees * 2.0


def test_custom_init_not_called_for_gradient():
    arg = Celsius(212.0)
    before = CALLS["Celsius"]
    g = ad(f_celsius).grad(arg)
    assert CALLS["Celsius"] == before
    assert type(g) is Celsius and g.degrees == 2.0


def f_interval(iv):
    return iv.lo - 2.0 * iv.hi


def test_frozen_slotted_validated_gradient():
    arg = Interval(1.0, 2.0)
    before = CALLS["Interval"]
    g = ad(f_interval).grad(arg)
    assert CALLS["Interval"] == before
    assert type(g) is Interval and (g.lo, g.hi) == (1.0, -2.0)   # lo > hi: invalid, built anyway


def f_validated_inside(x, y):
    d = Direction(x, y)
    n = NonNegative(x * x)
    return 3.0 * d.x + d.y * n.value


def test_validating_dataclasses_constructed_inside_run_post_init():
    before = CALLS.copy()
    check(f_validated_inside, 3.0, 4.0)
    assert CALLS["Direction"] > before["Direction"] and CALLS["NonNegative"] > before["NonNegative"]


def f_raises_in_post_init(x):
    return NonNegative(x - 10.0).value


def test_post_init_exception_propagates():
    with pytest.raises(ValueError, match="negative"):
        ad(f_raises_in_post_init).grad(1.0)


# ==========================================================================================
# Sum types


def area(s):
    match s:
        case Circle(r=r):
            return math.pi * r * r
        case Rect(w, h) if w > h:
            return w * h
        case Rect(w=w, h=h):
            return 2.0 * w * h
        case _:
            p = (s.a + s.b + s.c) / 2.0
            return math.sqrt(p * (p - s.a) * (p - s.b) * (p - s.c))


@pytest.mark.parametrize("shape, expected", [
    (Circle(1.5), Circle(2 * math.pi * 1.5)),
    (Rect(3.0, 2.0), Rect(2.0, 3.0)),                  # guard taken
    (Rect(2.0, 3.0), Rect(6.0, 4.0)),                  # guard not taken
    (Triangle(3.0, 4.0, 5.0), None),
])
def test_match_class_patterns_guards_wildcard(shape, expected):
    g = check(area, shape, expected=expected)
    assert type(g) is type(shape)


def total_area(shapes):
    return sum(area(s) for s in shapes)


def test_list_of_union_gradient_keeps_each_variant():
    shapes = [Rect(1.0, 2.0), Circle(0.5), Triangle(2.0, 2.5, 3.0), Rect(4.0, 1.0)]
    g = check(total_area, shapes)
    assert [type(s) for s in g] == [Rect, Circle, Triangle, Rect]


def seg_length(seg):
    match seg:
        case Segment(P2(x0, y0), P2(x=x1, y=y1)):
            return math.sqrt((x1 - x0) ** 2 + (y1 - y0) ** 2)
        case _:
            return 0.0


def test_match_nested_positional_and_keyword_subpatterns():
    g = check(seg_length, Segment(P2(0.0, 0.0), P2(3.0, 4.0)),
              expected=Segment(P2(-0.6, -0.8), P2(0.6, 0.8)))
    assert type(g) is Segment and type(g.start) is P2 and type(g.end) is P2


def perimeter_isinstance(s):
    if isinstance(s, Circle):
        return 2.0 * math.pi * s.r
    elif isinstance(s, Rect):
        return 2.0 * (s.w + s.h)
    return s.a + s.b + s.c


@pytest.mark.parametrize("shape", [Circle(2.0), Rect(1.0, 3.0), Triangle(1.0, 1.5, 2.0)])
def test_isinstance_dispatch(shape):
    g = check(perimeter_isinstance, shape)
    assert type(g) is type(shape)


def shifted(v, offset):
    if offset is None:
        return vdot(v, v)
    return vdot(vadd(v, offset), v)


def test_optional_none():
    g = check(shifted, Vec3(1.0, 2.0, 3.0), None, expected=(Vec3(2.0, 4.0, 6.0), None))
    assert type(g[0]) is Vec3 and g[1] is None


def test_optional_present():
    g = check(shifted, Vec3(1.0, 2.0, 3.0), Vec3(0.5, 0.5, 0.5))
    assert type(g[0]) is Vec3 and type(g[1]) is Vec3


def run_tokens(tokens, x):
    acc = x
    for t in tokens:
        if t.kind == "add":
            acc = acc + t.value
        elif t.kind == "mul":
            acc = acc * t.value
        elif t.kind == "neg":
            acc = -acc
    return acc


def test_tag_field_compared_with_eq():
    tokens = [Token("mul", 2.0), Token("add", 1.5), Token("neg", 0.0), Token("mul", 3.0)]
    g = check(run_tokens, tokens, 0.5)
    assert [t.kind for t in g[0]] == ["mul", "add", "neg", "mul"]
    assert all(type(t) is Token for t in g[0])
    # acc = -(0.5*a + b)*c: d/da = -0.5 c, d/db = -c, d/dc = -(0.5 a + b), d/dx = -a c
    assert [t.value for t in g[0]] == pytest.approx([-1.5, -3.0, 0.0, -2.5])
    assert g[1] == pytest.approx(-6.0)


def run_program(program, x):
    i = 0
    while i < len(program):
        ins = program[i]
        if ins.op is Op.ADD:
            x = x + ins.arg
        elif ins.op == Op.MUL:
            x = x * ins.arg
        elif ins.op is Op.SQUARE:
            x = x * x
        i += 1
    return x


def test_enum_tags():
    program = [Instr(Op.MUL, 2.0), Instr(Op.SQUARE, 0.0), Instr(Op.ADD, 1.0)]
    g = check(run_program, program, 1.5)
    assert [ins.op for ins in g[0]] == [Op.MUL, Op.SQUARE, Op.ADD]
    assert all(type(ins) is Instr for ins in g[0])
    assert g[0][0].op is Op.MUL
    # (2x)^2 + b: d/da = 2 a x^2 = 9, d/dx = 2 a^2 x = 12, d/db = 1
    assert [ins.arg for ins in g[0]] == pytest.approx([9.0, 0.0, 1.0])
    assert g[1] == pytest.approx(12.0)


def scale_shape(s, k):
    match s:
        case Circle(r):
            return Circle(r * k)
        case Rect(w, h):
            return Rect(w * k, h * h)
        case _:
            return s


@pytest.mark.parametrize("shape, cot", [(Circle(2.0), Circle(1.0)),
                                        (Rect(1.0, 3.0), Rect(2.0, 1.0)),
                                        (Rect(1.0, 3.0), Rect(None, 1.0)),
                                        (Triangle(1.0, 2.0, 2.5), Triangle(1.0, 0.0, 2.0))])
def test_union_valued_result_vjp(shape, cot):
    value, (gs, gk) = check_vjp(scale_shape, (shape, 1.5), cot)
    assert type(value) is type(shape) and type(gs) is type(shape)


def test_union_result_wrong_variant_cotangent():
    _, pullback = ad(scale_shape).vjp(Circle(2.0), 1.5)
    with pytest.raises(astad.InputError, match="result"):
        pullback(Rect(1.0, 1.0))


# ==========================================================================================
# Recursive and mutually recursive types


def list_sum_rec(cell):
    if cell is None:
        return 0.0
    return cell.head * cell.head * 0.5 + list_sum_rec(cell.tail)


def list_horner_loop(cell):
    acc = 0.0
    while cell is not None:
        acc = acc * 0.9 + cell.head
        cell = cell.tail
    return acc


def make_list(values):
    cell = None
    for v in reversed(values):
        cell = Cons(v, cell)
    return cell


def list_values(cell):
    out = []
    while cell is not None:
        assert type(cell) is Cons, type(cell)
        out.append(cell.head)
        cell = cell.tail
    return out


def test_linked_list_recursion():
    g = check(list_sum_rec, make_list([1.0, -2.0, 3.5]), expected=make_list([1.0, -2.0, 3.5]))
    assert list_values(g) == [1.0, -2.0, 3.5]


def test_linked_list_while_loop():
    g = check(list_horner_loop, make_list([1.0, -2.0, 3.5, 0.25]))
    assert list_values(g) == pytest.approx([0.9 ** 3, 0.9 ** 2, 0.9, 1.0])


def build_and_walk(xs):
    cell = None
    for x in xs:
        cell = Cons(x * x, cell)
    total = 0.0
    k = 1.0
    while cell is not None:
        total = total + k * cell.head
        k = k + 1.0
        cell = cell.tail
    return total


def test_linked_list_built_inside():
    # cells hold x2^2, x1^2, x0^2 (reversed): total = 1*x2^2 + 2*x1^2 + 3*x0^2
    check(build_and_walk, [1.0, 2.0, 3.0], expected=[6.0, 8.0, 6.0])


def tree_eval(t):
    if isinstance(t, Leaf):
        return t.value * t.value
    return t.weight * (tree_eval(t.left) + tree_eval(t.right))


def tree_eval_match(t):
    match t:
        case Leaf(value=v):
            return v * v
        case Node(left, right, weight=w):
            return w * (tree_eval_match(left) + tree_eval_match(right))


def tree_eval_loop(t):
    total = 0.0
    stack = [(t, 1.0)]
    while stack:
        node, scale = stack.pop()
        if isinstance(node, Leaf):
            total = total + scale * node.value * node.value
        else:
            stack.append((node.left, scale * node.weight))
            stack.append((node.right, scale * node.weight))
    return total


SMALL_TREE = Node(Node(Leaf(1.0), Leaf(-2.0), 0.5), Node(Leaf(1.5), Node(Leaf(0.25), Leaf(3.0),
                                                                         -1.0), 2.0), 1.5)


@pytest.mark.parametrize("fn", [tree_eval, tree_eval_match, tree_eval_loop])
def test_binary_tree_small(fn):
    g = check(fn, SMALL_TREE)
    assert type(g) is Node and type(g.left.left) is Leaf and type(g.right.right) is Node
    assert g.left.left.value == pytest.approx(1.5 * 0.5 * 2.0)   # weights 1.5, 0.5 times 2 v


def evaluate(e, env):
    match e:
        case Const(value=v):
            return v
        case Var(name):
            return env[name]
        case Add(l, r):
            return evaluate(l, env) + evaluate(r, env)
        case Mul(left=l, right=r):
            return evaluate(l, env) * evaluate(r, env)
        case _:
            raise TypeError(f"not an expression: {e!r}")


def evaluate_loop(e, env):
    todo = [e]
    order = []
    while todo:
        n = todo.pop()
        order.append(n)
        if isinstance(n, (Add, Mul)):
            todo.append(n.left)
            todo.append(n.right)
    values = []
    for n in reversed(order):
        if isinstance(n, Const):
            values.append(n.value)
        elif isinstance(n, Var):
            values.append(env[n.name])
        else:
            right = values.pop()
            left = values.pop()
            values.append(left + right if isinstance(n, Add) else left * right)
    return values[0]


# (x * 3) + (y * (x + 0.5))
EXPR = Add(Mul(Var("x"), Const(3.0)), Mul(Var("y"), Add(Var("x"), Const(0.5))))
ENV = {"x": 2.0, "y": -1.5}


@pytest.mark.parametrize("fn", [evaluate, evaluate_loop])
def test_expression_tree(fn):
    g_expr, g_env = check(fn, EXPR, ENV)
    assert type(g_expr) is Add and type(g_expr.left) is Mul and type(g_expr.left.left) is Var
    assert g_expr.left.left.name == "x" and g_expr.right.left.name == "y"
    assert type(g_expr.left.right) is Const and g_expr.left.right.value == pytest.approx(2.0)
    assert g_expr.right.right.right.value == pytest.approx(-1.5)
    assert g_env == pytest.approx({"x": 3.0 - 1.5, "y": 2.5}) and list(g_env) == ["x", "y"]


def simplify(e):
    match e:
        case Mul(Const(value=a), Const(value=b)):
            return Const(a * b)
        case Add(l, r):
            return Add(simplify(l), simplify(r))
        case Mul(l, r):
            return Mul(simplify(l), simplify(r))
        case _:
            return e


def test_expression_result_built_inside_vjp():
    e = Add(Mul(Const(2.0), Const(3.0)), Mul(Var("x"), Const(4.0)))
    cot = Add(Const(1.0), Mul(Var("x"), Const(0.5)))
    value, g = check_vjp(simplify, (e,), cot)
    assert type(value) is Add and type(value.left) is Const and value.left.value == 6.0
    assert type(g) is Add and type(g.left) is Mul and type(g.left.left) is Const
    assert g.left.left.value == pytest.approx(3.0) and g.left.right.value == pytest.approx(2.0)
    assert g.right.right.value == pytest.approx(0.5) and g.right.left.name == "x"


def simplify_then_eval(e, env):
    return evaluate(simplify(e), env)


def test_expression_simplified_then_evaluated():
    check(simplify_then_eval, Add(Mul(Const(2.0), Const(3.0)), Mul(Var("x"), Var("x"))),
          {"x": 1.5})


def rose_total(t):
    return t.value * (1.0 + forest_total(t.forest))


def forest_total(f):
    total = 0.0
    for t in f.trees:
        total = total + rose_total(t)
    return total


def test_mutually_recursive_types_and_functions():
    arg = Rose(2.0, Forest([Rose(0.5, Forest([])),
                            Rose(-1.0, Forest([Rose(3.0, Forest([]))]))]))
    g = check(rose_total, arg)
    assert type(g) is Rose and type(g.forest) is Forest and type(g.forest.trees) is list
    assert type(g.forest.trees[1].forest.trees[0]) is Rose
    assert g.forest.trees[0].forest.trees == []


# -- large: a tree of 1001 nodes and a linked list of 10000 cells

def make_tree(n_leaves, rng):
    """A random tree of n_leaves leaves and n_leaves - 1 nodes, deep (a spine of ~250)."""
    if n_leaves == 1:
        return Leaf(rng.uniform(-1.0, 1.0))
    k = rng.randint(1, min(3, n_leaves - 1))   # small left subtrees: a deep spine
    left = make_tree(k, rng)
    right = make_tree(n_leaves - k, rng)
    return Node(left, right, 1.0 + rng.uniform(-0.01, 0.01))


def tree_expected(t, scale=1.0):
    """Hand-derived gradient of tree_eval: a leaf gets 2 v * (product of ancestor weights);
    a node's weight gets (value of its children) * (product of ancestor weights).
    Returns (gradient, value of t without the ancestors' scale)."""
    if isinstance(t, Leaf):
        return Leaf(2.0 * t.value * scale), t.value * t.value
    gl, vl = tree_expected(t.left, scale * t.weight)
    gr, vr = tree_expected(t.right, scale * t.weight)
    return Node(gl, gr, (vl + vr) * scale), t.weight * (vl + vr)


def tree_size_depth(t):
    size, depth, stack = 0, 0, [(t, 1)]
    while stack:
        n, d = stack.pop()
        size, depth = size + 1, max(depth, d)
        if isinstance(n, Node):
            stack.extend([(n.left, d + 1), (n.right, d + 1)])
    return size, depth


@pytest.mark.parametrize("fn", [tree_eval, tree_eval_match, tree_eval_loop])
def test_tree_of_1001_nodes(fn):
    rng = random.Random(1234)

    def work():
        t = make_tree(501, rng)
        size, depth = tree_size_depth(t)
        want = fn(t)                                 # the original, at this recursion limit
        value, g = ad(fn).value_and_grad(t)
        expected, v = tree_expected(t)
        return t, size, depth, want, value, g, expected, v

    t, size, depth, want, value, g, expected, v = run_deep(work, 2 * 501 + 100)
    assert size == 1001 and depth > 100
    assert value == pytest.approx(want, rel=1e-12) and v == pytest.approx(want, rel=1e-12)
    assert_tree_close(g, expected, 1e-10, 1e-12)
    assert not find_duals(g)
    # spot check a few leaves and weights against finite differences of the original
    nodes, stack = [], [t]
    while stack:
        n = stack.pop()
        nodes.append(n)
        if isinstance(n, Node):
            stack.extend([n.left, n.right])
    gnodes, stack = [], [g]
    while stack:
        n = stack.pop()
        gnodes.append(n)
        if isinstance(n, Node):
            stack.extend([n.left, n.right])
    for k in range(0, len(nodes), 97):
        n, gn = nodes[k], gnodes[k]
        attr = "value" if isinstance(n, Leaf) else "weight"
        old = getattr(n, attr)
        h = 1e-6
        setattr(n, attr, old + h)
        plus = run_deep(lambda: fn(t), 2 * 501 + 100)
        setattr(n, attr, old - h)
        minus = run_deep(lambda: fn(t), 2 * 501 + 100)
        setattr(n, attr, old)
        assert getattr(gn, attr) == pytest.approx((plus - minus) / (2 * h), rel=1e-5, abs=1e-7)


N_CELLS = 10000


def test_linked_list_10000_cells_recursion():
    rng = random.Random(7)
    values = [rng.uniform(-2.0, 2.0) for _ in range(N_CELLS)]
    cells = make_list(values)
    old_limit = sys.getrecursionlimit()

    def work():
        want = list_sum_rec(cells)   # the original needs N_CELLS + 1 frames
        return want, ad(list_sum_rec).value_and_grad(cells)

    want, (value, g) = run_deep(work, N_CELLS + 100)
    assert sys.getrecursionlimit() == old_limit
    assert value == pytest.approx(want, rel=1e-12)
    assert list_values(g) == values            # d/dhead of head^2 / 2 is head
    assert list_values(cells) == values and not find_duals(g)


def test_linked_list_10000_cells_while_loop():
    rng = random.Random(8)
    values = [rng.uniform(-2.0, 2.0) for _ in range(N_CELLS)]
    cells = make_list(values)
    value, g = ad(list_horner_loop).value_and_grad(cells)
    assert value == pytest.approx(list_horner_loop(cells), rel=1e-12)
    got = list_values(g)
    assert len(got) == N_CELLS
    # acc = sum_i head_i 0.9^(n-1-i)
    for i in (0, 1, N_CELLS // 2, N_CELLS - 2, N_CELLS - 1):
        assert got[i] == pytest.approx(0.9 ** (N_CELLS - 1 - i), rel=1e-9, abs=1e-300)
    assert not find_duals(g)


# ==========================================================================================
# Operations inside differentiated code


def f_replace(p, k):
    q = dataclasses.replace(p, y=p.y * k)
    r = dataclasses.replace(q, z=k)
    return r.x * r.y + r.z * q.z + p.y


def test_dataclasses_replace_inside():
    check(f_replace, Vec3(1.0, 2.0, 3.0), 1.5,
          expected=(Vec3(3.0, 1.5 + 1.0, 1.5), 2.0 + 3.0))


def f_replace_frozen(p, x):
    q = dataclasses.replace(p, b=x)
    s = dataclasses.replace(FrozenSlot(x, 2), x=p.a)
    return q.a * q.b + s.x ** s.n


def test_dataclasses_replace_frozen_and_slots_inside():
    g = check(f_replace_frozen, FrozenPair(2.0, 9.0), 3.0,
              expected=(FrozenPair(3.0 + 4.0, 0.0), 2.0))
    assert type(g[0]) is FrozenPair


def f_slicing(xs, t):
    a = xs[1:4]
    b = xs[::-2]
    c = t[-1]
    d = t[:2]
    return sum(a) * b[0] + c * d[0] + xs[-1] * sum(xs[2:]) + sum(t[1:][::2])


def test_indexing_and_slicing():
    g = check(f_slicing, [1.0, 2.0, 3.0, 4.0, 5.0], (0.5, 1.5, 2.5))
    assert type(g[0]) is list and type(g[1]) is tuple


def f_list_methods(x, y):
    xs = [x]
    xs.append(y * 2.0)
    xs.extend([x * y, 3.0])
    xs.insert(1, y)
    last = xs.pop()
    first = xs.pop(0)
    xs.extend(v * v for v in [x, y])
    return sum(xs) * last + first * xs[0]


def test_append_extend_insert_pop_inside():
    # xs: [x, y, 2y, xy, 3] -> pop 3, pop x -> [y, 2y, xy, x^2, y^2]
    # value = 3 (3y + xy + x^2 + y^2) + x y ; d/dx = 3(y + 2x) + y, d/dy = 3(3 + x + 2y) + x
    check(f_list_methods, 2.0, 0.5, expected=(3 * (0.5 + 4.0) + 0.5, 3 * (3 + 2.0 + 1.0) + 2.0))


def f_assign_inside(x, y):
    v = Vec3(0.0, 0.0, 0.0)
    v.x = x * y
    v.y = v.x + y
    v.z += x
    d = {"a": x}
    d["b"] = y * y
    d["a"] = d["a"] * 3.0
    xs = [0.0, 0.0]
    xs[1] = x
    xs[0] += y
    b = Base(x)
    b.x = b.x * b.x
    return v.x + v.y * d["a"] + d["b"] * xs[1] + xs[0] + v.z * b.x


def test_item_and_attribute_assignment_on_objects_created_inside():
    check(f_assign_inside, 1.5, -0.5)


def f_dict_methods(d, extra):
    total = 0.0
    for k, v in d.items():
        total = total + v * len(k)
    for k in d.keys():
        total = total + d[k]
    for v in d.values():
        total = total + v * v
    e = {}
    e.update(d)
    e.update({"z": extra})
    e.update(w=extra * extra)
    total = total + e.get("z", 0.0) * e.get("missing", 2.0) + e.get("a") + e["w"]
    if d.get("nope") is None:
        total = total + sum(e.values())
    return total


def test_dict_methods():
    g = check(f_dict_methods, {"a": 1.0, "bb": 2.0}, 0.5)
    assert type(g[0]) is dict and list(g[0]) == ["a", "bb"]


def f_comprehensions(xs, d):
    sq = [x * x for x in xs if x > 0.0]
    dd = {k: v * 2.0 for k, v in d.items()}
    ss = {x * 3.0 for x in xs}
    nested = [[x * y for y in xs] for x in xs]
    vs = [Vec3(x, x * x, 1.0) for x in xs]
    return sum(sq) + sum(dd.values()) + sum(ss) + sum(sum(r) for r in nested) + \
        sum(v.y * v.z for v in vs)


def test_list_dict_set_comprehensions_and_generators():
    check(f_comprehensions, [1.0, -2.0, 3.0], {"p": 1.5, "q": 2.5})


def f_reductions(xs):
    m = max(x * x for x in xs)
    n = min(abs(x) for x in xs)
    if any(x > 2.0 for x in xs):
        bonus = sum(x for x in xs if x > 2.0)
    else:
        bonus = 0.0
    if all(x != 0.0 for x in xs):
        bonus = bonus + 1.0 * xs[0]
    return m + n * 2.0 + bonus + max([x + 1.0 for x in xs]) + min(xs[0], xs[1])


def test_generators_in_sum_any_all_min_max():
    # xs = [1.0, -3.0, 2.5]: m = 9 (from -3), n = 1 (from 1.0), bonus = 2.5 + 1.0,
    # max(x+1) = 3.5 (2.5), min(1, -3) = -3
    check(f_reductions, [1.0, -3.0, 2.5], expected=[2.0 + 1.0, -6.0 + 1.0, 1.0 + 1.0])


def f_dataclass_reductions(points):
    if any(p.x > 5.0 for p in points) or not all(p.y > -10.0 for p in points):
        return 0.0
    return max(p.x * p.y for p in points) + min(p.y for p in points) + sum(p.x for p in points)


def test_generators_over_dataclasses():
    g = check(f_dataclass_reductions, [P2(1.0, 2.0), P2(3.0, -1.0), P2(0.5, 5.0)])
    assert all(type(p) is P2 for p in g)


def f_starred(xs):
    a, *rest = xs
    *init, last = xs
    first, *mid, final = xs
    return a * sum(rest) + last * len(init) + first * final * sum(mid)


def test_starred_unpacking():
    # xs = [1, 2, 3, 4]: a*9 + 4*3 + 1*4*5
    check(f_starred, [1.0, 2.0, 3.0, 4.0],
          expected=[9.0 + 20.0, 1.0 + 4.0, 1.0 + 4.0, 1.0 + 3.0 + 5.0])


def f_starred_structs(points):
    head, *tail = points
    return head.x * sum(p.y for p in tail)


def test_starred_unpacking_of_dataclasses():
    g = check(f_starred_structs, [P2(2.0, 0.0), P2(1.0, 3.0), P2(1.0, 4.0)],
              expected=[P2(7.0, 0.0), P2(0.0, 2.0), P2(0.0, 2.0)])
    assert all(type(p) is P2 for p in g)


def f_iterate(xs, ys):
    total = 0.0
    for i, (x, y) in enumerate(zip(xs, ys)):
        total = total + i * x * y
    for k, x in enumerate(reversed(xs)):
        total = total + k * x
    for k, p in enumerate(reversed(list(zip(xs, ys))), start=1):
        total = total + k * p[0] * p[1]
    return total / len(xs)


def test_zip_enumerate_reversed_len():
    check(f_iterate, [1.0, 2.0, 3.0], (0.5, -1.0, 2.0))


def f_sorted(points, xs):
    by_x = sorted(points, key=lambda p: p.x)
    vals = sorted([p.y for p in points], reverse=True)
    s = sorted(xs)
    return by_x[0].y * 2.0 + by_x[-1].x + vals[0] * vals[1] + s[0] * 3.0 + s[-1]


def test_sorted():
    g = check(f_sorted, [P2(3.0, 1.0), P2(1.0, 5.0), P2(2.0, -2.0)], [2.0, -1.0, 0.5])
    # by_x[0] is P2(1, 5): 2 to its y; by_x[-1] is P2(3, 1): 1 to its x;
    # vals = [5, 1, -2]: 1 to y of P2(1, 5), 5 to y of P2(3, 1)
    assert g[0] == [P2(1.0, 5.0), P2(0.0, 2.0 + 1.0), P2(0.0, 0.0)]
    assert g[1] == [1.0, 3.0, 0.0]


def f_len_and_containers_of_structs(shapes):
    n = len(shapes)
    d = {i: s for i, s in enumerate(shapes)}
    return sum(area(d[i]) for i in range(n)) / n


def test_dict_of_union_values_built_inside():
    check(f_len_and_containers_of_structs, [Circle(1.0), Rect(2.0, 1.0)])


# ==========================================================================================
# The caller's objects


def f_reads_only(p, xs, d):
    return p.x * sum(xs) + d["k"][0].a


def test_arguments_unchanged_and_hold_no_dual():
    p, xs, d = Vec3(1.0, 2.0, 3.0), [1.0, 2.0], {"k": [Inner(2.0)]}
    snapshot = copy.deepcopy((p, xs, d))
    f = ad(f_reads_only)
    f.grad(p, xs, d)
    _, pullback = f.vjp(p, xs, d)
    pullback(1.0)
    assert (p, xs, d) == snapshot and not find_duals((p, xs, d))


def f_mutates_list(xs, y):
    xs.append(y * 2.0)
    xs[0] = xs[0] * y
    return sum(xs)


@pytest.mark.parametrize("how", ["grad", "vjp"])
def test_mutated_argument_list_looks_as_after_original(how):
    caller = [1.0, 2.0]
    reference = [1.0, 2.0]
    f_mutates_list(reference, 3.0)                      # [3.0, 2.0, 6.0]
    f = ad(f_mutates_list)
    if how == "grad":
        g = f.grad(caller, 3.0)
    else:
        _, pullback = f.vjp(caller, 3.0)
        g = pullback(1.0)
    assert caller == reference and all(type(x) is float for x in caller)
    assert not find_duals(caller)
    # the gradient is shaped like the argument as passed (two elements)
    assert_tree_close(g, ([3.0, 1.0], 2.0 + 1.0))


def f_mutates_dict(d):
    d["new"] = d["a"] * 2.0
    d.pop("b")
    d["a"] = d["a"] * d["a"]
    return d["a"] + d["new"]


def test_mutated_argument_dict_looks_as_after_original():
    caller, reference = {"a": 3.0, "b": 1.0}, {"a": 3.0, "b": 1.0}
    f_mutates_dict(reference)
    g = ad(f_mutates_dict).grad(caller)
    assert caller == reference and list(caller) == list(reference) and not find_duals(caller)
    assert_tree_close(g, {"a": 6.0 + 2.0, "b": 0.0})


def f_mutates_dataclass(p, items):
    p.x = p.x * p.y
    items[0].a = items[0].a + p.x
    items.pop()
    return p.x + items[0].a


def test_mutated_argument_dataclass_looks_as_after_original():
    caller = (Vec3(2.0, 3.0, 4.0), [Inner(1.0), Inner(5.0)])
    reference = copy.deepcopy(caller)
    item0 = caller[1][0]
    f_mutates_dataclass(*reference)
    g = ad(f_mutates_dataclass).grad(*caller)
    assert caller == reference and not find_duals(caller)
    assert caller[1][0] is item0        # the same objects, updated in place
    assert_tree_close(g, (Vec3(6.0, 4.0, 0.0), [Inner(1.0), Inner(0.0)]))


def test_mutating_function_gradient_matches_fd():
    check(f_mutates_list, [1.5, -2.0, 0.5], 3.0)
    check(f_mutates_dataclass, Vec3(2.0, 3.0, 4.0), [Inner(1.0), Inner(5.0)])


# ==========================================================================================
# Cotangents shaped like the result; mismatches say where


def f_pair_result(x, y):
    return (x * y, {"k": [x, y], "j": x + y})


def test_cotangent_wrong_length_names_path():
    _, pullback = ad(f_pair_result).vjp(2.0, 3.0)
    assert pullback((1.0, {"k": [1.0, None], "j": 1.0})) == (3.0 + 1.0 + 1.0, 2.0 + 1.0)
    with pytest.raises(astad.InputError) as info:
        pullback((1.0, {"k": [1.0], "j": 1.0}))
    assert "result[1]['k']" in str(info.value)


def test_cotangent_missing_key_names_path():
    _, pullback = ad(f_pair_result).vjp(2.0, 3.0)
    with pytest.raises(astad.InputError) as info:
        pullback((1.0, {"k": [1.0, 1.0]}))
    assert "result[1]" in str(info.value) and "'j'" in str(info.value)
    with pytest.raises(astad.InputError, match="result"):
        pullback((1.0,))
    assert issubclass(astad.InputError, astad.AstadError)


def grow(x, y):
    return Node(Leaf(x * y), Node(Leaf(x), Leaf(y * y), x + y), 2.0 * x)


def test_cotangent_wrong_variant_names_path():
    _, pullback = ad(grow).vjp(2.0, 3.0)
    with pytest.raises(astad.InputError) as info:
        pullback(Node(Node(Leaf(1.0), Leaf(1.0), 1.0), Node(Leaf(1.0), Leaf(1.0), 1.0), 1.0))
    assert "result.left" in str(info.value)
    with pytest.raises(astad.InputError) as info:
        pullback(Node(Leaf(1.0), Leaf(1.0), 1.0))
    assert "result.right" in str(info.value)


def test_cotangent_bad_leaf_names_path():
    _, pullback = ad(grow).vjp(2.0, 3.0)
    with pytest.raises(astad.InputError) as info:
        pullback(Node(Leaf("oops"), Node(Leaf(1.0), Leaf(1.0), 1.0), 1.0))
    assert "result.left.value" in str(info.value)


def test_cotangent_wrong_dataclass_type_at_top():
    _, pullback = ad(f_vec_result).vjp(Vec3(1.0, 2.0, 3.0), 2.0)
    with pytest.raises(astad.InputError, match="result"):
        pullback(Quaternion(1.0, 1.0, 1.0, 1.0))
    with pytest.raises(astad.InputError, match="result"):
        pullback((1.0, 1.0, 1.0))


def test_cotangent_none_subtrees_are_zero():
    cot = Node(None, Node(Leaf(1.0), None, 0.5), None)
    value, g = check_vjp(grow, (2.0, 3.0), cot)
    assert type(value) is Node and type(value.right.left) is Leaf
    assert g == pytest.approx((1.0 + 0.5, 0.5))
    full = Node(Leaf(1.0), Node(Leaf(1.0), Leaf(1.0), 1.0), 1.0)
    check_vjp(grow, (2.0, 3.0), full)


# ==========================================================================================
# More shapes: dict subclasses, namedtuples holding dataclasses, slotted inheritance,
# keyword-only dataclasses, methods and properties, match on named tuples and enum values


def f_ordered(d):
    return d["b"] * d["a"] ** 2


def test_ordered_dict_argument_keeps_type_and_order():
    arg = collections.OrderedDict([("b", 3.0), ("a", 2.0)])
    g = check(f_ordered, arg, expected=collections.OrderedDict([("b", 4.0), ("a", 12.0)]))
    assert type(g) is collections.OrderedDict and list(g) == ["b", "a"]


def f_defaultdict(d):
    return d["a"] * 2.0 + d["b"]


def test_defaultdict_argument_keeps_type():
    arg = collections.defaultdict(float, {"a": 1.0, "b": 4.0})
    g = ad(f_defaultdict).grad(arg)
    assert type(g) is collections.defaultdict and g.default_factory is float
    assert dict(g) == {"a": 2.0, "b": 1.0}


class Particle(NamedTuple):
    pos: Vec3
    mass: float
    tags: tuple = ()


def f_particles(ps):
    total = 0.0
    for p in ps:
        total = total + p.mass * vdot(p.pos, p.pos) + len(p.tags)
    return total


def test_named_tuples_holding_dataclasses():
    arg = [Particle(Vec3(1.0, 2.0, 0.5), 2.0, ("a",)), Particle(Vec3(-1.0, 0.0, 3.0), 0.5)]
    g = check(f_particles, arg)
    assert all(type(p) is Particle and type(p.pos) is Vec3 for p in g)
    assert g[0].tags == ("a",) and g[1].tags == ()


@dataclass(slots=True)
class SlotBase:
    x: float


@dataclass(slots=True)
class SlotChild(SlotBase):
    y: float
    name: str = "c"


def f_slot_child(c):
    return c.x * c.y * len(c.name)


def test_slotted_dataclass_inheritance():
    g = check(f_slot_child, SlotChild(2.0, 3.0, "ab"), expected=SlotChild(6.0, 4.0, "ab"))
    assert type(g) is SlotChild and not hasattr(g, "__dict__")


@dataclass(kw_only=True)
class KW:
    a: float
    b: float = 0.5


def f_kw_only(x, y):
    k = KW(b=y, a=x * x)
    j = KW(a=y)
    return k.a * k.b + j.b * j.a


def test_keyword_only_dataclass_constructed_inside():
    check(f_kw_only, 1.5, 2.0, expected=(2 * 1.5 * 2.0, 1.5 ** 2 + 0.5))


@dataclass
class Spring:
    k: float
    rest: float

    def energy(self, length):
        d = length - self.rest
        return 0.5 * self.k * d * d

    @property
    def stiffness2(self):
        return self.k * self.k


def f_methods(s, length):
    return s.energy(length) + s.stiffness2


def test_methods_and_properties_of_dataclasses():
    # 0.5 k (L - r)^2 + k^2 at k = 2, r = 1, L = 3
    g = check(f_methods, Spring(2.0, 1.0), 3.0, expected=(Spring(2.0 + 4.0, -4.0), 4.0))
    assert type(g[0]) is Spring


def f_isinstance_float(d):
    total = 0.0
    for v in d.values():
        if isinstance(v, float):
            total = total + v * v
    return total


def test_isinstance_float_on_differentiated_values():
    check(f_isinstance_float, {"a": 2.0, "b": "s", "c": 3, "d": -1.0},
          expected={"a": 4.0, "b": "s", "c": 3, "d": -2.0})


def f_match_namedtuple(p):
    match p:
        case Point(x, y=y) if x > 0.0:
            return x * y
        case Point(x=x):
            return -x


def test_match_class_pattern_on_named_tuple():
    g = check(f_match_namedtuple, Point(2.0, 3.0), expected=Point(3.0, 2.0))
    assert type(g) is Point
    g = check(f_match_namedtuple, Point(-2.0, 3.0), expected=Point(-1.0, 0.0))
    assert type(g) is Point


def run_program_match(program, x):
    for ins in program:
        match ins:
            case Instr(op=Op.ADD, arg=a):
                x = x + a
            case Instr(Op.MUL, a):
                x = x * a
            case Instr(op=Op.SQUARE):
                x = x * x
    return x


def test_match_on_enum_value_patterns():
    program = [Instr(Op.MUL, 2.0), Instr(Op.SQUARE, 0.0), Instr(Op.ADD, 1.0)]
    g = check(run_program_match, program, 1.5)
    assert [ins.op for ins in g[0]] == [Op.MUL, Op.SQUARE, Op.ADD]
    assert [ins.arg for ins in g[0]] == pytest.approx([9.0, 0.0, 1.0])


def run_tokens_match(tokens, x):
    for t in tokens:
        match t:
            case Token(kind="add", value=v):
                x = x + v
            case Token("mul", v):
                x = x * v
            case _:
                x = -x
    return x


def test_match_on_string_tag_literals():
    tokens = [Token("mul", 2.0), Token("add", 1.5), Token("neg", 0.0), Token("mul", 3.0)]
    g = check(run_tokens_match, tokens, 0.5)
    assert [t.kind for t in g[0]] == ["mul", "add", "neg", "mul"]
    assert [t.value for t in g[0]] == pytest.approx([-1.5, -3.0, 0.0, -2.5])


def f_nested_generic(b):
    return b.value.value * b.value.value


def test_nested_generic_dataclass():
    g = check(f_nested_generic, Box(Box(3.0)), expected=Box(Box(6.0)))
    assert type(g) is Box and type(g.value) is Box


def f_max_key(points):
    best = max(points, key=lambda p: p.x * p.y)
    worst = min(points, key=lambda p: p.y)
    return best.x + 10.0 * worst.x * worst.y


def test_max_min_with_key_over_dataclasses():
    # best = P2(2, 3), worst = P2(1, -1)
    check(f_max_key, [P2(1.0, -1.0), P2(2.0, 3.0), P2(0.5, 4.0)],
          expected=[P2(-10.0, 10.0), P2(1.0, 0.0), P2(0.0, 0.0)])


def f_starred_for(rows):
    total = 0.0
    for first, *rest in rows:
        total = total + first * sum(rest)
    return total


def test_starred_targets_in_for_loops():
    check(f_starred_for, [[1.0, 2.0, 3.0], (4.0, 0.5)],
          expected=[[5.0, 1.0, 1.0], (0.5, 4.0)])


# -- building recursive structures inside: a binary search tree with while loops

@dataclass
class BST:
    key: float
    left: Optional[BST] = None
    right: Optional[BST] = None


def bst_weighted(xs):
    root = None
    for x in xs:
        if root is None:
            root = BST(x)
            continue
        node = root
        while True:
            if x < node.key:
                if node.left is None:
                    node.left = BST(x)
                    break
                node = node.left
            else:
                if node.right is None:
                    node.right = BST(x)
                    break
                node = node.right
    total = 0.0
    stack = [(root, 1.0)]
    while stack:
        node, depth = stack.pop()
        if node is not None:
            total = total + depth * node.key * node.key
            stack.append((node.left, depth + 1.0))
            stack.append((node.right, depth + 1.0))
    return total


def test_tree_built_inside_with_while_loops():
    # keys 2, 1, 3, 2.5: depths 1, 2, 2, 3
    check(bst_weighted, [2.0, 1.0, 3.0, 2.5], expected=[4.0, 4.0, 12.0, 15.0])


# -- results of recursive types

def list_scale(cell, k):
    if cell is None:
        return None
    return Cons(cell.head * k, list_scale(cell.tail, k))


def test_recursive_result_vjp():
    value, g = check_vjp(list_scale, (make_list([1.0, 2.0, 3.0]), 2.0),
                         make_list([1.0, None, 0.5]))
    assert list_values(value) == [2.0, 4.0, 6.0]
    assert list_values(g[0]) == [2.0, 0.0, 1.0] and g[1] == pytest.approx(1.0 + 1.5)


@pytest.mark.slow
def test_recursive_result_10000_cells_vjp():
    values = [float(k % 7) for k in range(N_CELLS)]
    cells = make_list(values)

    def work():
        want = list_scale(cells, 0.5)
        value, pullback = ad(list_scale).vjp(cells, 0.5)
        return want, value, pullback(make_list([1.0] * N_CELLS))

    want, value, (gl, gk) = run_deep(work, N_CELLS + 100)
    assert list_values(value) == list_values(want)
    assert list_values(gl) == [0.5] * N_CELLS
    assert gk == pytest.approx(sum(values))
    assert not find_duals(value)


def scale_all(shapes, k):
    return [scale_shape(s, k) for s in shapes]


def test_list_of_union_result_vjp_and_variant_mismatch_path():
    shapes = [Circle(1.0), Rect(2.0, 3.0)]
    value, g = check_vjp(scale_all, (shapes, 2.0), [Circle(1.0), Rect(0.5, None)])
    assert [type(s) for s in value] == [Circle, Rect] and [type(s) for s in g[0]] == [Circle, Rect]
    _, pullback = ad(scale_all).vjp(shapes, 2.0)
    with pytest.raises(astad.InputError) as info:
        pullback([Circle(1.0), Circle(1.0)])
    assert "result[1]" in str(info.value)


def f_tuple_keys_result(x):
    return {(1, "a"): x * x, (2, "b"): [x, 2.0 * x]}


def test_dict_result_with_tuple_keys_and_mismatch_path():
    value, g = check_vjp(f_tuple_keys_result, (3.0,), {(1, "a"): 1.0, (2, "b"): [1.0, 1.0]})
    assert g == pytest.approx(6.0 + 3.0)
    _, pullback = ad(f_tuple_keys_result).vjp(3.0)
    with pytest.raises(astad.InputError) as info:
        pullback({(1, "a"): 1.0, (2, "b"): [1.0]})
    assert "result[(2, 'b')]" in str(info.value)


def f_identity(v):
    return v


def f_partly_constant(x):
    return Vec3(x, 1.0, 2.0)


def test_result_is_the_argument_or_holds_constants():
    value, g = check_vjp(f_identity, (Vec3(1.0, 2.0, 3.0),), Vec3(3.0, None, -1.0))
    assert type(value) is Vec3 and g == Vec3(3.0, 0.0, -1.0)
    value, g = check_vjp(f_partly_constant, (2.0,), Vec3(5.0, 7.0, 11.0))
    assert value == Vec3(2.0, 1.0, 2.0) and g == 5.0


def f_frozen_result(x, y):
    return Interval(x, x + y), FrozenSlot(x * y, 2)


def test_frozen_and_slotted_results_vjp():
    value, g = check_vjp(f_frozen_result, (1.0, 2.0), (Interval(0.5, 1.0), FrozenSlot(2.0, 2)))
    assert type(value[0]) is Interval and type(value[1]) is FrozenSlot
    assert g == pytest.approx((0.5 + 1.0 + 2.0 * 2.0, 1.0 + 2.0 * 1.0))


def f_result_not_float(x):
    return Vec3(x, x, x)


def test_grad_of_a_dataclass_result_suggests_vjp():
    with pytest.raises(astad.InputError, match="vjp"):
        ad(f_result_not_float).grad(1.0)


# -- more on the caller's objects

def f_appends_object(xs, y):
    xs.append(Vec3(y, y * y, 1.0))
    return xs[0].x * xs[-1].y


def test_caller_list_receives_objects_created_inside_without_duals():
    caller, reference = [Vec3(2.0, 0.0, 0.0)], [Vec3(2.0, 0.0, 0.0)]
    f_appends_object(reference, 3.0)
    g = ad(f_appends_object).grad(caller, 3.0)
    assert caller == reference and not find_duals(caller)
    assert type(caller[1]) is Vec3 and type(caller[1].y) is float
    assert_tree_close(g, ([Vec3(9.0, 0.0, 0.0)], 12.0))


def f_mutates_nested(d):
    d["xs"].append(d["xs"][0] * 2.0)
    d["p"].y = d["p"].x * 3.0
    return sum(d["xs"]) + d["p"].y


def test_nested_mutation_of_caller_objects():
    caller = {"xs": [1.0], "p": Vec3(2.0, 0.0, 0.0)}
    reference = copy.deepcopy(caller)
    xs, p = caller["xs"], caller["p"]
    f_mutates_nested(reference)
    g = ad(f_mutates_nested).grad(caller)
    assert caller == reference and not find_duals(caller)
    assert caller["xs"] is xs and caller["p"] is p
    assert_tree_close(g, {"xs": [3.0], "p": Vec3(3.0, 0.0, 0.0)})


def f_returns_mutated_arg(xs):
    xs.append(xs[0] * 2.0)
    return xs


def test_result_aliasing_a_mutated_argument():
    caller = [1.5]
    value, pullback = ad(f_returns_mutated_arg).vjp(caller)
    assert value == [1.5, 3.0] and caller == [1.5, 3.0]
    assert not find_duals(value) and not find_duals(caller)
    assert pullback([1.0, 1.0]) == [3.0]


# -- validating dataclasses constructed inside: computed fields, frozen normalisation

@dataclass
class Disc:
    r: float
    area: float = field(init=False)

    def __post_init__(self):
        self.area = math.pi * self.r * self.r


def f_disc_inside(r):
    return Disc(r).area


def f_disc_arg(d):
    return d.area * d.r


def test_computed_init_false_field():
    check(f_disc_inside, 2.0, expected=4.0 * math.pi)
    g = check(f_disc_arg, Disc(2.0))
    assert type(g) is Disc and g.area == pytest.approx(2.0) and g.r == pytest.approx(4 * math.pi)


@dataclass(frozen=True)
class FrozenDirection:
    """Frozen and normalising: __post_init__ must use object.__setattr__."""
    x: float
    y: float

    def __post_init__(self):
        n = math.sqrt(self.x * self.x + self.y * self.y)
        object.__setattr__(self, "x", self.x / n)
        object.__setattr__(self, "y", self.y / n)


def f_frozen_direction_inside(x, y):
    d = FrozenDirection(x, y)
    return 3.0 * d.x + d.y


def test_frozen_normalising_dataclass_constructed_inside():
    # d = (x, y) / r: d/dx (3x + y)/r = 3/r - x (3x + y)/r^3 = 0.6 - 3*13/125, etc.
    check(f_frozen_direction_inside, 3.0, 4.0,
          expected=(3.0 / 5.0 - 3.0 * 13.0 / 125.0, 1.0 / 5.0 - 4.0 * 13.0 / 125.0))


def f_frozen_direction_arg(d):
    return 2.0 * d.x - d.y


def test_frozen_normalising_dataclass_gradient_not_normalised():
    arg = FrozenDirection(3.0, 4.0)
    g = ad(f_frozen_direction_arg).grad(arg)
    assert type(g) is FrozenDirection and (g.x, g.y) == (2.0, -1.0)


def test_two_lambdas_on_one_line_as_fields():
    layers = [Layer(2.0, 0.0, lambda t: t * t), Layer(3.0, 0.0, lambda t: t + t * t * t)]
    # x1 = (w1 x)^2 = 1, x2 = w2 x1 + (w2 x1)^3 = 30, dx2/dx1 = w2 (1 + 3 (w2 x1)^2) = 84:
    # d/dw1 = 84 * 2 w1 x^2 = 84, d/dw2 = x1 (1 + 3 (w2 x1)^2) = 28, d/dx = 84 * 2 w1^2 x = 336
    g = check(f_layers, layers, 0.5)
    assert [layer.w for layer in g[0]] == pytest.approx([84.0, 28.0])
    assert g[1] == pytest.approx(336.0)
    assert [layer.activation for layer in g[0]] == [layer.activation for layer in layers]


# -- in-place reordering of the caller's list

def f_sorts_in_place(xs):
    xs.sort()
    return xs[0] * 1.0 + xs[1] * 10.0


def test_in_place_sort_of_the_callers_list():
    caller = [3.0, 1.0]
    g = ad(f_sorts_in_place).grad(caller)
    assert caller == [1.0, 3.0] and not find_duals(caller)
    assert g == [10.0, 1.0]          # positions as passed: 3.0 ends up second


# -- cotangent paths through dataclass fields, dicts and lists

def f_outer_result(x):
    return Outer(Middle(Inner(x), 2.0 * x, [x, x * x]), 3.0, {"k": Inner(x), "j": x})


def test_cotangent_paths_through_fields_and_keys():
    _, pullback = ad(f_outer_result).vjp(2.0)
    good = Outer(Middle(Inner(1.0), 1.0, [1.0, 1.0]), None, {"k": Inner(1.0), "j": 1.0})
    assert pullback(good) == pytest.approx(1.0 + 2.0 + 1.0 + 4.0 + 1.0 + 1.0)
    for bad, where in [
            (Outer(Middle(Inner(1.0), 1.0, [1.0]), None, {"k": Inner(1.0), "j": 1.0}),
             "result.mid.items"),
            (Outer(Middle(Inner(1.0), 1.0, [1.0, 1.0]), None, {"k": Inner(1.0)}),
             "result.table"),
            (Outer(Middle(Inner(1.0), 1.0, [1.0, 1.0]), None, {"k": 1.0, "j": 1.0}),
             "result.table['k']"),
            (Outer(Middle(Inner("s"), 1.0, [1.0, 1.0]), None, {"k": Inner(1.0), "j": 1.0}),
             "result.mid.inner.a"),
            (Outer(Middle(Inner(1.0), 1.0, [1.0, [1.0]]), None, {"k": Inner(1.0), "j": 1.0}),
             "result.mid.items[1]")]:
        with pytest.raises(astad.InputError) as info:
            pullback(bad)
        assert where in str(info.value), (where, str(info.value))


# -- recursion through a method of a recursive type: no more stack than the original

@dataclass
class Chain:
    head: float
    tail: Optional[Chain] = None

    def total(self):
        rest = 0.0 if self.tail is None else self.tail.total()
        return self.head * self.head + rest


def chain_total(c):
    return c.total()


def test_method_recursion_small():
    c = Chain(1.0, Chain(2.0, Chain(-3.0)))
    g = check(chain_total, c, expected=Chain(2.0, Chain(4.0, Chain(-6.0))))
    assert type(g.tail.tail) is Chain


def test_method_recursion_10000_cells_at_the_originals_recursion_limit():
    c = None
    for k in range(N_CELLS):
        c = Chain(float(k % 5), c)

    def work():
        want = chain_total(c)            # the original needs N_CELLS + a few frames
        return want, ad(chain_total).value_and_grad(c)

    want, (value, g) = run_deep(work, N_CELLS + 100)
    assert value == pytest.approx(want, rel=1e-12)
    n, cell = 0, g
    while cell is not None:
        assert type(cell) is Chain
        n, cell = n + 1, cell.tail
    assert n == N_CELLS


# -- hashable dataclass keys, lists inside frozen dataclasses, str and float enums

def f_dataclass_keys(d):
    return sum(k.a * v * v for k, v in d.items())


def test_frozen_dataclass_keys_are_not_differentiated():
    arg = {FrozenPair(1.0, 2.0): 3.0, FrozenPair(4.0, 0.0): 1.0}
    g = check(f_dataclass_keys, arg,
              expected={FrozenPair(1.0, 2.0): 6.0, FrozenPair(4.0, 0.0): 8.0})
    assert list(g) == list(arg)


@dataclass(frozen=True)
class Holder:
    xs: list
    w: float


def f_frozen_holder(h):
    h.xs.append(h.w * 2.0)
    return sum(h.xs)


def test_list_inside_a_frozen_dataclass_mutated():
    caller, reference = Holder([1.0], 3.0), Holder([1.0], 3.0)
    f_frozen_holder(reference)
    g = ad(f_frozen_holder).grad(caller)
    assert caller == reference and not find_duals(caller)
    assert type(g) is Holder and g.xs == [1.0] and g.w == 2.0


class Kind(str, enum.Enum):
    ADD = "add"
    MUL = "mul"


class Scale(enum.Enum):
    SMALL = 0.5
    BIG = 2.0


@dataclass
class ScaledToken:
    kind: Kind
    scale: Scale
    v: float


def run_scaled(tokens, x):
    for t in tokens:
        if t.kind == "add":
            x = x + t.v * t.scale.value
        elif t.kind is Kind.MUL:
            x = x * t.v * t.scale.value
    return x


def test_str_enum_and_float_valued_enum_tags():
    tokens = [ScaledToken(Kind.ADD, Scale.BIG, 1.5), ScaledToken(Kind.MUL, Scale.SMALL, 3.0)]
    # x = (x0 + 2 v0) * 0.5 v1 = 4 * 1.5 = 6: d/dv0 = 2 * 0.5 * 3 = 3, d/dv1 = 0.5 * 4 = 2
    g = check(run_scaled, tokens, 1.0,
              expected=([ScaledToken(Kind.ADD, Scale.BIG, 3.0),
                         ScaledToken(Kind.MUL, Scale.SMALL, 2.0)], 1.5))
    assert g[0][0].scale is Scale.BIG and g[0][1].kind is Kind.MUL


def test_none_cotangent_for_the_whole_result():
    _, pullback = ad(grow).vjp(2.0, 3.0)
    assert pullback(None) == (0.0, 0.0)
    _, pullback = ad(f_outer_result).vjp(2.0)
    assert pullback(None) == 0.0


# -- more programs over recursive types and sequences

def f_replace_validated(x, y):
    d = Direction(1.0, 0.0)
    e = dataclasses.replace(d, y=y, x=x)     # runs (the transformed) __post_init__
    return e.x * 3.0 + e.y


def test_replace_on_a_normalising_dataclass_inside():
    check(f_replace_validated, 3.0, 4.0,
          expected=(3.0 / 5.0 - 3.0 * 13.0 / 125.0, 1.0 / 5.0 - 4.0 * 13.0 / 125.0))


def tree_stats(t):
    if isinstance(t, Leaf):
        return t.value, 1
    ls, ln = tree_stats(t.left)
    rs, rn = tree_stats(t.right)
    return t.weight * (ls + rs), ln + rn


def tree_mean(t):
    s, n = tree_stats(t)
    return s / n


def test_recursion_returning_tuples():
    # s = 2 (1 + 0.5 (2 + 3)) = 7 over n = 3 leaves
    g = check(tree_mean, Node(Leaf(1.0), Node(Leaf(2.0), Leaf(3.0), 0.5), 2.0),
              expected=Node(Leaf(2.0 / 3.0), Node(Leaf(1.0 / 3.0), Leaf(1.0 / 3.0), 10.0 / 3.0),
                            3.5 / 3.0))
    assert type(g.right) is Node


def build_tree(xs):
    if len(xs) == 1:
        return Leaf(xs[0])
    mid = len(xs) // 2
    return Node(build_tree(xs[:mid]), build_tree(xs[mid:]), xs[0] * xs[-1])


def test_tree_result_built_by_divide_and_conquer_vjp():
    cot = Node(Leaf(1.0), Node(Leaf(1.0), Leaf(1.0), 1.0), 1.0)
    value, g = check_vjp(build_tree, ([1.0, 2.0, 3.0],), cot)
    assert type(value) is Node and type(value.right) is Node and value.right.weight == 6.0
    assert g == pytest.approx([4.0, 4.0, 4.0])
    value, g = check_vjp(build_tree, ([0.5, -1.0, 2.0, 1.5, 3.0],),
                         build_tree([1.0, 0.5, -2.0, 1.0, 0.25]))


def f_starred_displays_and_reduce(ps, xs):
    zs = [*xs, *[p.value for p in ps], xs[0] * 2.0]
    total = sum((p.value for p in ps), 0.5)
    prod = functools.reduce(lambda acc, p: acc * p.value, ps, 1.0)
    return sum(z * z for z in zs) + total * prod


def test_starred_in_displays_sum_start_and_reduce():
    check(f_starred_displays_and_reduce, [Leaf(2.0), Leaf(3.0)], [1.0, -0.5])


@dataclass
class _Left:
    x: float


@dataclass
class _Right:
    y: float


def match_two_variants(v):
    match v:
        case _Left(x=x):
            return x * x
        case _Right(y=y):
            return -y


def test_a_match_statement_is_commented_as_a_compound_statement():
    # its cases are not statements: the comment is the line itself, without " ..."
    source = ad(match_two_variants).source
    assert "    # match v:\n    match v:\n" in source
    assert "..." not in source
