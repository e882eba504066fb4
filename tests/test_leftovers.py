"""Issue 12, class 7: after a gradient (or derivative) call, no object the call could reach
holds a differentiated value: each ends as the original function leaves it, with plain
values, so the plain function keeps working. Checked for dict keys, sets, objects of the
user's classes, SimpleNamespace, mutable default arguments, closure cells, module globals
(also through ``globals()``), class attributes, a user module's attributes, and the value
``.vjp`` returns; in reverse mode (tape and specialised code), forward mode and nested.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

import astad
from astad.runtime.duals import DUAL_TYPES

CACHE: list = []
LOG: dict = {}


class Holder:
    count = 0.0  # a class attribute the function updates

    def __init__(self):
        self.v = 0.0


GLOBAL_HOLDER = Holder()


def holds_dual(value, seen=None) -> bool:
    seen = set() if seen is None else seen
    if type(value) in DUAL_TYPES:
        return True
    if id(value) in seen or isinstance(value, (str, bytes, int, float, type(None))):
        return False
    seen.add(id(value))
    if isinstance(value, dict):
        return any(holds_dual(k, seen) or holds_dual(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_dual(v, seen) for v in value)
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return any(holds_dual(v, seen) for v in vars(value).values())
    return False


def store_in_dict_key(x, d):
    d[x * 2.0] = "seen"
    d["value"] = x
    return x * 3.0


def store_in_set(x, s):
    s.add(x * 2.0)
    s.add((x, "pair"))
    return x * 3.0


def store_in_object(x, obj):
    obj.v = x * 2.0
    obj.nested = [x, {"k": x}]
    return x * 3.0


def store_in_default(x, acc=[]):  # noqa: B006 (a mutable default, on purpose)
    acc.append(x * 2.0)
    return x * 3.0


def store_in_globals(x):
    CACHE.append(x * 2.0)
    LOG["last"] = (x, x * x)
    GLOBAL_HOLDER.v = x * 5.0
    Holder.count = x
    globals()["LAST_SEEN"] = x
    return x * 3.0


def make_closure():
    seen = []

    def store_in_closure(x):
        seen.append(x)
        return x * 3.0
    return store_in_closure, seen


@pytest.mark.parametrize("route", ["grad", pytest.param("vjp", marks=pytest.mark.slow),
                                   pytest.param("unfused", marks=pytest.mark.slow),
                                   "forward", "nested"])
def test_what_the_call_stores_ends_plain_everywhere(route):
    store_in_closure, seen = make_closure()
    d, s, obj, ns = {}, set(), Holder(), types.SimpleNamespace(v=0.0)
    cases = [(store_in_dict_key, (d,)), (store_in_set, (s,)), (store_in_object, (obj,)),
             (store_in_object, (ns,)), (store_in_default, ()), (store_in_globals, ()),
             (store_in_closure, ())]
    for f, rest in cases:
        run(route, f, 1.5, rest)
    # as the original leaves them, with plain values
    assert d == {3.0: "seen", "value": 1.5} and not holds_dual(d)
    assert s == {3.0, (1.5, "pair")} and not holds_dual(s)
    assert obj.v == 3.0 and obj.nested == [1.5, {"k": 1.5}] and not holds_dual(obj)
    assert ns.v == 3.0 and not holds_dual(ns)
    assert store_in_default.__defaults__[0][-1] == 3.0
    assert not holds_dual(store_in_default.__defaults__)
    assert CACHE[-1] == 3.0 and LOG["last"] == (1.5, 2.25) and GLOBAL_HOLDER.v == 7.5
    assert Holder.count == 1.5 and type(Holder.count) is float
    assert globals()["LAST_SEEN"] == 1.5 and type(globals()["LAST_SEEN"]) is float
    assert not holds_dual(CACHE) and not holds_dual(LOG) and not holds_dual(GLOBAL_HOLDER)
    assert seen == [1.5] and not holds_dual(seen)
    # and the plain functions run on what the calls left
    assert store_in_globals(2.0) == 6.0 and store_in_default(2.0) == 6.0


def run(route, f, x, rest):
    if route == "grad":
        return astad.reverse_diff(f, argnums=0).grad(x, *rest)
    if route == "vjp":
        return astad.reverse_diff(f, argnums=0).vjp(x, *rest)[1](1.0)
    if route == "unfused":
        return astad.reverse_diff(f, argnums=0, preaccumulate=False).grad(x, *rest)
    def of_x(v):  # (forward mode differentiates every primal: the others are constants)
        return f(v, *rest)
    if route == "forward":
        return astad.jvp(of_x, (x,), (1.0,))
    return astad.jvp(astad.grad(of_x), (x,), (1.0,))


def returns_a_dict_keyed_by_a_dual(x):
    return {x * 2.0: 1.0, "object": Holder(), "ns": types.SimpleNamespace(v=x)}


def test_vjp_returns_plain_values():
    value, pullback = astad.reverse_diff(returns_a_dict_keyed_by_a_dual).vjp(1.5)
    assert 3.0 in value and not holds_dual(value)
    assert value["ns"].v == 1.5 and type(value["ns"].v) is float


SHARED: list = []


def appends_and_returns_a_global(x):
    SHARED.append(x * x)
    return SHARED


def test_a_result_shared_with_a_global_keeps_its_gradient():
    SHARED.clear()
    value, pullback = astad.reverse_diff(appends_and_returns_a_global).vjp(1.5)
    assert value == [2.25] and SHARED == [2.25] and not holds_dual(SHARED)
    assert pullback([1.0]) == 3.0  # d(x^2)/dx, though SHARED holds plain floats now
    SHARED.clear()
    assert astad.jvp(appends_and_returns_a_global, (1.5,), (1.0,))[1] == [3.0]


def test_a_user_module_attribute(tmp_path, monkeypatch):
    (tmp_path / "astad_leftover_config.py").write_text("HISTORY = []\nLAST = None\n")
    (tmp_path / "astad_leftover_user.py").write_text(
        "import astad_leftover_config as config\n\n\n"
        "def f(x):\n    config.HISTORY.append(x)\n    config.LAST = x * 2.0\n"
        "    return x * 3.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import astad_leftover_config as config
    import astad_leftover_user as user
    assert astad.reverse_diff(user.f).grad(1.5) == 3.0
    assert config.HISTORY == [1.5] and config.LAST == 3.0
    assert not holds_dual(config.HISTORY) and type(config.LAST) is float


def test_an_array_of_objects_and_an_exception_mid_call():
    boxes = np.empty(1, dtype=object)

    def f(x, b):
        b[0] = x * 2.0
        CACHE.append(x)
        raise KeyError("stop")
    with pytest.raises(KeyError):
        astad.reverse_diff(f, argnums=0).grad(1.5, boxes)
    assert boxes[0] == 3.0 and type(boxes[0]) is float  # as the original leaves it
    assert CACHE[-1] == 1.5 and type(CACHE[-1]) is float


def test_astads_own_modules_are_not_places_to_clean():
    """A function calling astad's API (a derivative inside a derivative) has roots in the
    user's code only: astad's own globals (its caches, which finalisers change at any
    allocation) are never walked, which once raised "dictionary changed size during
    iteration" from the transform cache."""
    from astad.core.escape import roots_of

    def inner(x):
        return astad.jvp(lambda y: y * y, (x,), (1.0,))[1] + astad.vjp(lambda y: y, x)[0]
    roots = roots_of(inner)
    assert all(not getattr(m, "get", lambda *_: None)("__name__", "").startswith("astad")
               for m, _ in roots.entries)
    value, tangent = astad.jvp(inner, (1.5,), (1.0,))
    assert (value, tangent) == (4.5, 3.0)
