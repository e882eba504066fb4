"""Walking the user's data: interleave, rebuild, seed, primal, and write-back.

D maps every data type homomorphically (paper section 9): a list of floats becomes a list
of duals, a dataclass holding floats the same dataclass holding duals, a value of a union
keeps its variant. This module is that map at the boundary of a gradient call (Figure 7,
Appendix A):

- ``Interleaving.interleave`` copies an argument, giving every float leaf a fresh input
  slot, and records a *plan* of the argument's shape;
- ``build_gradient`` turns the plan and the adjoints into a gradient shaped exactly like
  the argument (same container types, dataclass types, variants, non-float leaves),
  creating objects without running user code (no ``__init__``/``__post_init__``);
- ``seed`` adds a cotangent shaped like the result into the adjoints of its duals;
- ``primal`` turns a result holding duals into plain values;
- ``Interleaving.write_back`` makes the caller's mutable arguments look as the original
  function would have left them (the function ran on copies).

Walks are written as recursive generators driven by ``_run``, which keeps its own stack:
a linked list of 10^5 cells does not need Python's recursion limit raised.
"""
from __future__ import annotations

import array
import collections
import dataclasses
import enum
import functools
import operator
import types

import numpy as np

from .runtime.array_dual import ARRAY_DUALS, ArrayDual, index_of, is_float_array
from .containers import (copy_mapping, empty_like, empty_mapping, instance_attributes,
                         is_sequence, is_walked_object, make_sequence, other_sequence,
                         set_entries, set_items)
from .errors import InputError
from .runtime.duals import (DUAL_TYPES, FAST_PRIMALS, SCALAR_DUALS, Dual, NestedDual, innermost,
                            new_dual, running)

_NO_ENTRY = ()


def towered(value, level):
    """A plain array, as a constant of every running level enclosing ``level``
    (rules/array_writes.py)."""
    from .rules.array_writes import constant
    depth = running.depth.get(id(level))
    outer = running.stack if depth is None else running.stack[:depth - 1]
    return constant(outer[-1], value) if outer else value
_setattr = object.__setattr__


def _run(walk):
    """Drive a recursive generator: ``yield sub_walk`` calls it and receives its result."""
    stack, value = [walk], None
    while stack:
        try:
            child = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            value = stop.value
            continue
        stack.append(child)
        value = None
    return value


def _is_float(value) -> bool:
    """A float leaf: a float, a subclass of float (numpy.float64, the user's own) or another
    numpy float scalar (numpy.float32). Read from the real type: a dual answers
    ``isinstance(x, float)`` as its primal does, but is not a leaf of the user's data."""
    t = type(value)
    return t is float or (t is not bool and (issubclass(t, float) or issubclass(t, np.floating)))


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _is_record(value) -> bool:
    """A dataclass instance, or a standard container kept in its attributes (UserList,
    UserDict, ChainMap, SimpleNamespace): walked attribute by attribute, made again
    without running its code."""
    return (dataclasses.is_dataclass(value) or is_walked_object(value)) and \
        not isinstance(value, type)


def new_object(cls):
    """An instance of ``cls`` made without running its ``__init__``."""
    return object.__new__(cls) if cls.__new__ is object.__new__ else cls.__new__(cls)


_SLOTS: dict = {}  # class -> the names of its (and its bases') slots


def slot_names(cls) -> tuple:
    names = _SLOTS.get(cls)
    if names is None:
        names = []
        for klass in cls.__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name not in ("__dict__", "__weakref__") and name not in names:
                    names.append(name)
        names = _SLOTS[cls] = tuple(names)
    return names


def record_attributes(obj) -> list:
    """All instance attributes of ``obj``: its ``__dict__`` and every filled slot."""
    slots = slot_names(type(obj))
    if not slots:  # (the common case: no class scan per call)
        return [(name, getattr(obj, name)) for name in getattr(obj, "__dict__", ())]
    names = list(getattr(obj, "__dict__", {}))
    for name in slots:
        if name not in names and hasattr(obj, name):
            names.append(name)
    return [(name, getattr(obj, name)) for name in names]


def _holds_float(obj) -> bool:
    """Does the object hold a float in an attribute, a slot, or anything they hold?"""
    try:
        attributes = record_attributes(obj)
    except Exception:  # noqa: BLE001 (an attribute that cannot be read: not a float)
        return False
    return any(contains_float(v) for _, v in attributes)


def _unsupported_argument(value, path: str):
    kind = type(value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":  # (a subclass)
        return InputError(
            f"{path} is a {kind.__qualname__}, a subclass of numpy's ndarray whose "
            "operators may mean something else (numpy.matrix: * is a matrix product); "
            "astad differentiates numpy.ndarray: pass np.asarray(...) of it")
    if kind is array.array and value.typecode in "fd":
        return InputError(f"{path} is an array.array of floats; pass a list or a numpy "
                          "array")
    if kind is complex:
        return InputError(f"{path} is a complex number; astad differentiates real floats only")
    if kind.__module__ == "numpy" and getattr(getattr(value, "dtype", None), "kind", "") == "c":
        return InputError(f"{path} is a complex numpy array; astad differentiates real floats "
                          "only")
    if kind in (set, frozenset) and any(_is_float(v) for v in value):
        return InputError(f"{path} is a set of floats; a set has no stable order for a "
                          "gradient to follow: pass a list or a tuple")
    if not isinstance(value, (type, types.ModuleType, types.FunctionType, enum.Enum)) and \
            _holds_float(value):
        return InputError(
            f"{path} is a {kind.__qualname__} instance holding floats; astad walks "
            "dataclasses, named tuples, lists, tuples, dicts and the standard containers "
            "(deque, UserList, UserDict, ChainMap, SimpleNamespace): make it a dataclass, "
            "or leave it out of argnums")
    return None


# Plan nodes: what interleave saw, so that the gradient can be rebuilt later even if the
# function mutated its arguments. A plain int is a float leaf's input slot.
class _Run:          # a list or tuple of exactly-float elements: slots start..start+n
    __slots__ = ("start", "n", "kind", "element")  # element: float, or numpy.float64

    def __init__(self, start, n, kind, element=float):
        self.start, self.n, self.kind, self.element = start, n, kind, element


class _Node:         # a container: kind in "seq", "namedtuple", "map", "record"
    __slots__ = ("kind", "cls", "children", "original")

    def __init__(self, kind, cls, children, original):
        self.kind, self.cls, self.children, self.original = kind, cls, children, original


class _Const:        # a non-float leaf: the gradient holds the argument's own value
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _ArrayLeaf:    # a float numpy array: one input slot, its cotangent in ``arrays``
    __slots__ = ("slot", "shape", "dtype")

    def __init__(self, slot, shape, dtype):
        self.slot, self.shape, self.dtype = slot, shape, dtype


class _FloatRecord:  # a plain dataclass of float attributes only: slots start, start+1...
    __slots__ = ("cls", "names", "start")

    def __init__(self, cls, names, start):
        self.cls, self.names, self.start = cls, names, start


_PLAIN_RECORDS: dict = {}  # class -> _MUTABLE, _FROZEN, or 0: not a plain dataclass
_MUTABLE, _FROZEN = 1, 2


def _plain_record_kind(cls) -> int:
    """Is ``cls`` a dataclass whose instances keep every attribute in their ``__dict__``,
    read and written as stored (no slots, properties or other data descriptors, no
    ``__getattribute__`` of its own)? Then its ``__dict__`` is its record_attributes."""
    kind = 0
    if dataclasses.is_dataclass(cls) and not slot_names(cls) and \
            cls.__getattribute__ is object.__getattribute__ and not any(
                hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")
                for klass in cls.__mro__ for name, attr in vars(klass).items()
                if not (name.startswith("__") and name.endswith("__"))):
        frozen = getattr(getattr(cls, "__dataclass_params__", None), "frozen", False)
        kind = _FROZEN if frozen else _MUTABLE
    _PLAIN_RECORDS[cls] = kind
    return kind


class _FloatLeaf:    # a float subclass (numpy.float64): rebuilt with its own type
    __slots__ = ("slot", "cls")

    def __init__(self, slot, cls):
        self.slot, self.cls = slot, cls


class Interleaving:
    """One gradient call's copies of its arguments (paper: interleave / Figure 7)."""

    def __init__(self, tape: list):
        self.tape = tape         # one slot per float leaf (for reverse mode, the tape)
        self.level = tape        # the level the leaves' duals belong to
        self.copies: dict = {}   # id(original) -> (original, copy, plan, snapshot or None)
        # objects passed as they are (a user's class): the call may store duals in them,
        # which leftovers.py replaces by their primals afterwards
        self.opaque: list = []

    # -- the leaves: a new dual and its slot (ForwardInterleaving makes forward duals) --
    def _new_duals(self, xs) -> list:
        """Duals for the floats ``xs``, in fresh consecutive slots."""
        tape = self.tape
        start = len(tape)
        out = []
        for i, x in enumerate(xs, start):
            d = new_dual(Dual)
            d.v = x
            d.i = i
            d.t = tape
            out.append(d)
        tape.extend([_NO_ENTRY] * len(out))
        return out

    def _dual(self, x):
        """A dual for the float (or the dual of an enclosing level) ``x``, in a new slot."""
        d = new_dual(Dual if type(x) in FAST_PRIMALS else NestedDual)
        d.v = x
        d.i = len(self.tape)
        d.t = self.tape
        self.tape.append(_NO_ENTRY)
        return d

    def _array_dual(self, value):
        if type(value) is np.ndarray and running.stack:  # (inside enclosing levels: a
            value = towered(value, self.level)  # constant of each, so that their values
        d = ArrayDual(value, len(self.tape), self.tape)  # can be written into it)
        self.tape.append(_NO_ENTRY)
        return d

    # -- interleave --------------------------------------------------------------------
    def interleave(self, value, path: str):
        """Return (copy of ``value`` holding duals, plan of its shape)."""
        if type(value) is float:
            return self._dual(value), len(self.tape) - 1
        kind = _PLAIN_RECORDS.get(type(value))
        if kind is None:
            kind = _plain_record_kind(type(value))
        if kind and id(value) not in self.copies:
            done = self._float_record(value, kind == _FROZEN)
            if done is not None:
                return done
        return _run(self._walk(value, path, True))

    def _float_record(self, value, frozen: bool):
        """A plain dataclass whose attributes are all floats (Vec3), inline: what
        ``_walk`` does for it, without a walk. None, with nothing changed, for any other."""
        attributes = value.__dict__
        xs = list(attributes.values())
        for x in xs:
            if type(x) is not float:
                return None
        start = len(self.tape)
        duals = self._new_duals(xs)
        t = type(value)
        copy = object.__new__(t)
        names = tuple(attributes)
        copy.__dict__.update(zip(names, duals))
        plan = _FloatRecord(t, names, start)
        self._remember(value, copy, plan, None if frozen else duals)
        return copy, plan

    def copy_constant(self, value):
        """A copy of a mutable argument that is not differentiated (floats stay floats),
        so that duals the function stores into it never reach the caller's object."""
        if type(value) in (float, int, str, bool) or value is None:
            return value
        return _run(self._walk(value, "", False))[0]

    def _float_run(self, value):
        """Duals for a list/tuple of floats, or of numpy.float64 values, inline (no walk
        per element); None, with the tape as it was, for any other."""
        for x in value:
            if type(x) is not float:
                break
        else:
            start = len(self.tape)
            out = self._new_duals(value)
            return out, _Run(start, len(out), type(value))
        if not value or not set(map(type, value)) <= _FLOAT64:
            return None
        start = len(self.tape)
        out = self._new_duals(value)
        return out, _Run(start, len(out), type(value), np.float64)

    def _walk(self, value, path, active):
        t = type(value)
        if not active and (t is int or t is str or value is None or _is_float(value)):
            return value, None
        if t is int or t is str or t is bool or value is None:  # (the common constants)
            return value, _Const(value)
        if _is_float(value):  # (a float subclass keeps its class: isinstance sees it)
            d = self._dual(value)
            return (d, len(self.tape) - 1 if t is float else _FloatLeaf(len(self.tape) - 1, t))
        if t in SCALAR_DUALS:  # a value of an enclosing differentiation: a float here
            if not active:
                return value, None
            return self._dual(value), len(self.tape) - 1
        if is_float_array(value) or t in ARRAY_DUALS:
            if not active:
                return value, None
            # the same array twice is one input of reverse mode, as the same list is (its
            # whole gradient at each place); forward mode keeps one tangent per place
            seen = self.copies.get(id(value)) if self.level is self.tape else None
            if seen is not None:
                return seen[1], seen[2]
            d = self._array_dual(value)
            plan = _ArrayLeaf(len(self.tape) - 1, value.shape, value.dtype)
            if self.level is self.tape:
                self._remember(value, d, plan)
            return d, plan
        seen = self.copies.get(id(value))
        if seen is not None:  # the same mutable object twice: one copy, aliasing kept
            return seen[1], seen[2]
        exact = t is list or t is tuple
        if exact or other_sequence(t):
            run = self._float_run(value) if active and exact else None
            if run is not None:
                out, plan = run
            elif not active and exact and all(type(x) is float for x in value):
                out, plan = list(value), None
            else:
                out, children = [], []
                # (a subclass or a deque: the original gives its class's own fields)
                plan = _Node("seq", t, children, None if exact else value)
                target = out if t is list else (None if exact else empty_like(value))
                if target is not None:
                    self._remember(value, target, plan)  # before the elements: cycles
                if not exact and active and contains_float(instance_attributes(value)):
                    raise InputError(f"{path} is a {t.__qualname__} whose own attributes "
                                     "hold floats; astad walks its items only")
                for k, x in enumerate(value):
                    if active and type(x) is float:  # a float leaf inline: no sub-walk
                        copy = self._dual(x)
                        child = len(self.tape) - 1
                    else:
                        copy, child = yield self._walk(x, f"{path}[{k}]", active)
                    out.append(copy)
                    children.append(child)
                if not exact:
                    out = make_sequence(t, out, value, target)
                    if not isinstance(out, tuple):
                        self._remember(value, out, plan, list(out))
                    return out, plan
            if t is tuple:
                return tuple(out), plan
            self._remember(value, out, plan, list(out))
            return out, plan
        if _is_namedtuple(value):
            out, children = [], []
            for name, x in zip(t._fields, value):
                if active and type(x) is float:
                    copy = self._dual(x)
                    child = len(self.tape) - 1
                else:
                    copy, child = yield self._walk(x, f"{path}.{name}", active)
                out.append(copy)
                children.append(child)
            return tuple.__new__(t, out), _Node("namedtuple", t, children, None)
        if isinstance(value, dict):
            copy = copy_mapping(value)  # of its class (OrderedDict, defaultdict, a subclass)
            plan = _Node("map", t, [], value)
            self._remember(value, copy, plan)
            for key, x in value.items():
                item, child = yield self._walk(x, f"{path}[{key!r}]", active)
                dict.__setitem__(copy, key, item)
                plan.children.append((key, child))
            self._remember(value, copy, plan, list(copy.items()))
            return copy, plan
        if t is types.MappingProxyType:  # a read-only view: over a copy of what it shows
            inner, plan = yield self._walk(dict(value), path, active)
            if plan is not None:  # (the map's plan, made again as a view: _build)
                plan.cls, plan.original = t, value
            return types.MappingProxyType(inner), plan
        if _is_record(value):
            copy = new_object(t)
            plan = _Node("record", t, [], None)
            frozen = getattr(getattr(t, "__dataclass_params__", None), "frozen", False)
            self._remember(value, copy, plan)
            attributes = []
            for name, x in record_attributes(value):
                if active and type(x) is float:
                    y = self._dual(x)
                    child = len(self.tape) - 1
                else:
                    y, child = yield self._walk(x, f"{path}.{name}", active)
                _setattr(copy, name, y)
                plan.children.append((name, child))
                attributes.append((name, y))
            if not frozen:  # a frozen record cannot be mutated: nothing to write back
                self._remember(value, copy, plan, attributes)
            return copy, plan
        if active:
            error = _unsupported_argument(value, path)
            if error is not None:
                raise error
        if t is set:  # mutable: the function gets a copy, written back as it leaves it
            copy = set(value)
            self._remember(value, copy, None, set(copy))
            return copy, _Const(value)
        if _is_instance(value) or (t is np.ndarray and value.dtype == object):
            self.opaque.append(value)
        return value, _Const(value)

    def _remember(self, original, copy, plan, snapshot=None) -> None:
        """Note the copy of a mutable argument; ``snapshot`` (its contents as copied)
        lets write-back tell whether the function changed it."""
        self.copies[id(original)] = (original, copy, plan, snapshot)

    # -- write-back --------------------------------------------------------------------
    def write_back(self) -> None:
        """Give each mutable argument the state the original function would have left:
        the primal of its copy, with copies of other arguments mapped back to them."""
        originals = None  # id(copy) -> original, made once something must be written
        for original, copy, plan, snapshot in list(self.copies.values()):
            if snapshot is None:
                continue  # frozen, or only reached as part of a cycle
            if type(copy) is list or isinstance(copy, (list, collections.deque)):
                if len(copy) == len(snapshot) and all(map(operator.is_, copy, snapshot)):
                    continue  # untouched: nothing to do (the common case, at C speed)
                originals = originals or self.originals()
                items = [primal(x, originals, self.level) for x in copy]
                if type(copy) is list:
                    original[:] = items
                else:
                    set_items(original, items)
            elif isinstance(copy, dict):
                items = list(copy.items())
                if len(items) == len(snapshot) and all(
                        a[0] is b[0] and a[1] is b[1] for a, b in zip(items, snapshot)):
                    continue
                originals = originals or self.originals()
                set_entries(original, [(primal(k, originals, self.level),
                                        primal(v, originals, self.level)) for k, v in items])
            elif type(copy) is set:
                if set(map(id, copy)) == set(map(id, snapshot)):
                    continue  # (by identity: an equal dual may have replaced a float)
                originals = originals or self.originals()
                original.clear()
                original.update(primal(x, originals, self.level) for x in copy)
            elif type(plan) is _FloatRecord:  # (snapshot: the duals, in plan.names order)
                attributes = copy.__dict__
                if len(attributes) == len(snapshot) and tuple(attributes) == plan.names \
                        and all(map(operator.is_, attributes.values(), snapshot)):
                    continue
                originals = originals or self.originals()
                for name, value in list(attributes.items()):
                    _setattr(original, name, primal(value, originals, self.level))
                for name in [n for n in original.__dict__ if n not in copy.__dict__]:
                    object.__delattr__(original, name)
            else:  # a (non-frozen) dataclass record
                attributes = record_attributes(copy)
                if len(attributes) == len(snapshot) and all(
                        a[0] == b[0] and a[1] is b[1] for a, b in zip(attributes, snapshot)):
                    continue
                originals = originals or self.originals()
                for name, value in attributes:
                    _setattr(original, name, primal(value, originals, self.level))
                for name in [n for n, _ in record_attributes(original)
                             if n not in dict(attributes)]:
                    object.__delattr__(original, name)

    def originals(self) -> dict:
        return {id(copy): original for original, copy, _, _ in self.copies.values()}


# -- rebuild ------------------------------------------------------------------------------
def float_gradient(g):
    """The cotangent of a float leaf, as a float: partials of numpy.float64 values leave
    numpy.float64 adjoints (a dual of an enclosing level stays as it is)."""
    return float(g) if type(g) is np.float64 else g


def run_gradient(plan, adjoint: list) -> list:
    """The cotangents of a _Run's elements, of the elements' class."""
    values = adjoint[plan.start:plan.start + plan.n]
    if plan.element is float:
        if set(map(type, values)) <= _FLOAT:
            return values
        return [float_gradient(g) for g in values]
    return [np.float64(g) if type(g) is float else g for g in values]


_FLOAT, _FLOAT64 = frozenset({float}), frozenset({np.float64})


def build_gradient(plan, adjoint: list, arrays: dict):
    """The gradient described by ``plan``: adjoints at float leaves, the argument's own
    values elsewhere, the same types throughout, no user code run."""
    if type(plan) is int:
        return float_gradient(adjoint[plan])
    if type(plan) is _FloatRecord:
        return _float_record_gradient(plan, adjoint)
    return _run(_build(plan, adjoint, arrays, {}))


def _float_record_gradient(plan, adjoint):
    obj = object.__new__(plan.cls)
    start = plan.start
    obj.__dict__.update(zip(plan.names, map(float_gradient,
                                            adjoint[start:start + len(plan.names)])))
    return obj


def _build(plan, adjoint, arrays, memo):
    t = type(plan)
    if t is int:
        return float_gradient(adjoint[plan])
    if t is _ArrayLeaf:
        g = arrays.get(plan.slot)
        if type(g) in SCALAR_DUALS:  # a 0-d array's cotangent at an enclosing level
            g = np.reshape(np.stack([g]), ())
        return np.zeros(plan.shape, plan.dtype) if g is None else g.astype(plan.dtype,
                                                                          copy=False)
    if t is _Run:
        values = run_gradient(plan, adjoint)
        return values if plan.kind is list else tuple(values)
    if t is _Const:
        return plan.value
    if t is _FloatLeaf:
        g = adjoint[plan.slot]
        return plan.cls(g) if type(g) in FAST_PRIMALS else g
    if t is _FloatRecord:
        return _float_record_gradient(plan, adjoint)
    built = memo.get(id(plan))
    if built is not None:  # an aliased argument: the same gradient object
        return built
    kind = plan.kind
    if kind == "seq":
        out = []
        cls = plan.cls
        target = out if cls is list else (
            None if cls is tuple else empty_like(plan.original))
        if target is not None:
            memo[id(plan)] = target
        for child in plan.children:
            out.append(float_gradient(adjoint[child]) if type(child) is int else
                       (yield _build(child, adjoint, arrays, memo)))
        return make_sequence(cls, out, plan.original, target)
    if kind == "namedtuple":
        out = []
        for child in plan.children:
            out.append(float_gradient(adjoint[child]) if type(child) is int else
                       (yield _build(child, adjoint, arrays, memo)))
        return tuple.__new__(plan.cls, out)
    if kind == "map":
        proxy = plan.cls is types.MappingProxyType
        out = {} if proxy else empty_mapping(plan.original)
        memo[id(plan)] = out
        for key, child in plan.children:
            dict.__setitem__(out, key, (yield _build(child, adjoint, arrays, memo)))
        return types.MappingProxyType(out) if proxy else out
    obj = new_object(plan.cls)  # record
    memo[id(plan)] = obj
    for name, child in plan.children:
        _setattr(obj, name, float_gradient(adjoint[child]) if type(child) is int else
                 (yield _build(child, adjoint, arrays, memo)))
    return obj


def leaf_slots(plan) -> list:
    """``(slot, shape)`` of every float leaf ``plan`` describes, in slot order (shape ()
    for a float, the array's shape for an array); an aliased part once."""
    found, seen, stack = [], set(), [plan]
    while stack:
        p = stack.pop()
        t = type(p)
        if t is int:
            found.append((p, ()))
        elif t is _FloatLeaf:
            found.append((p.slot, ()))
        elif t is _ArrayLeaf:
            found.append((p.slot, p.shape))
        elif t is _Run:
            found.extend((s, ()) for s in range(p.start, p.start + p.n))
        elif t is _FloatRecord:
            found.extend((s, ()) for s in range(p.start, p.start + len(p.names)))
        elif t is _Node and id(p) not in seen:
            seen.add(id(p))
            stack.extend(c if p.kind in ("seq", "namedtuple") else c[1] for c in p.children)
    return sorted(set(found))


# -- primal -------------------------------------------------------------------------------
def _strip(value, level):
    """A dual's value under ``level`` (under every level when ``level`` is None); a dual
    of another level is a constant here and stays as it is."""
    if level is None:
        while type(value) in DUAL_TYPES:
            value = value.v
        return value
    return value.v if value.t is level else value


def primal(value, originals: dict | None = None, level=None):
    """``value`` with every dual of ``level`` replaced by its primal (every dual, down to
    plain values, when ``level`` is None). Copies of the caller's arguments
    (``originals``: id(copy) -> original) become the originals again."""
    t = type(value)
    if t in DUAL_TYPES:
        return _strip(value, level)
    if t is float or t is int or value is None:
        return value
    return _run(_primal(value, originals or {}, {}, level))


def _primal(value, originals, memo, level):
    t = type(value)
    if t in DUAL_TYPES:
        return _strip(value, level)
    original = originals.get(id(value))
    if original is not None:
        return original
    done = memo.get(id(value))
    if done is not None:
        return done
    if t is list:
        out = []
        memo[id(value)] = out
        for x in value:
            out.append((yield _primal(x, originals, memo, level)))
        return out
    if t is tuple or _is_namedtuple(value):
        out = []
        for x in value:
            out.append((yield _primal(x, originals, memo, level)))
        return tuple(out) if t is tuple else tuple.__new__(t, out)
    if other_sequence(t):  # a subclass of list or tuple, a deque: of its class
        target = empty_like(value)
        if target is not None:
            memo[id(value)] = target
        out = []
        for x in value:
            out.append((yield _primal(x, originals, memo, level)))
        return make_sequence(t, out, value, target)
    if isinstance(value, dict):
        out = empty_mapping(value)
        memo[id(value)] = out
        for key, x in value.items():  # (a key may be a differentiated value too)
            dict.__setitem__(out, (yield _primal(key, originals, memo, level)),
                             (yield _primal(x, originals, memo, level)))
        return out
    if t is types.MappingProxyType:
        return types.MappingProxyType((yield _primal(dict(value), originals, memo, level)))
    if t in (set, frozenset):
        out = []
        for x in value:
            out.append((yield _primal(x, originals, memo, level)))
        return t(out)
    if _is_record(value) or (_is_instance(value) and contains_dual(value)):
        # a dataclass or a standard container; another object only if it holds a dual
        attributes = record_attributes(value)
        if not any(type(x) in DUAL_TYPES or not isinstance(x, (int, float, str, type(None)))
                   for _, x in attributes):
            return value  # nothing to strip: keep the object itself
        obj = new_object(t)
        memo[id(value)] = obj
        for name, x in attributes:
            _setattr(obj, name, (yield _primal(x, originals, memo, level)))
        return obj
    return value


_NOT_INSTANCES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                  types.MethodType, types.BuiltinMethodType, types.CodeType, enum.Enum,
                  np.ndarray, np.generic)


def _is_instance(value) -> bool:
    """An object of a class that keeps values in attributes (a user's class), whose
    attributes astad may read: not a class, a module, a function or a numpy value."""
    return not isinstance(value, _NOT_INSTANCES) and (
        hasattr(value, "__dict__") or bool(slot_names(type(value))))


# -- seed ---------------------------------------------------------------------------------
def seed(result, cotangent, adjoint: list, arrays: dict, path: str = "result",
         level=None) -> None:
    """Deinterleave: add the cotangent of each dual of ``level`` (the tape ``adjoint``
    belongs to) in ``result`` into its adjoint slot.

    ``cotangent`` has the result's shape; ``None`` for a leaf or a whole subtree means
    zero. A mismatch (wrong variant, wrong length, missing key) says where it is. A dual
    of an enclosing level in the result is a constant of this one (nothing to seed); a
    dual of a differentiation that has ended raises.
    """
    _run(_seed(result, cotangent, adjoint, arrays, path, set(), level))


_COTANGENT_SCALARS = (int, float)


def scalar_of(value):
    """A 0-d number array as the float it holds (a tangent or cotangent for a float, as
    JAX takes it); any other value as it is."""
    if type(value) is np.ndarray and value.shape == () and value.dtype.kind in "fiu":
        return float(value)
    return value


def _of_level(result, level) -> bool:
    """Is the dual ``result`` one of ``level``'s? Another running level's is a constant."""
    if level is None or result.t is level:
        return True
    innermost((result,))  # raises if its differentiation has ended
    return False


def _seed(result, cotangent, adjoint, arrays, path, seen, level):
    if cotangent is None:
        return
    t = type(result)
    if t is ArrayDual:
        if not _of_level(result, level):
            return
        shape = result.v.shape
        if np.shape(cotangent) != shape:
            raise InputError(f"the cotangent at {path} should be an array of shape {shape} "
                             f"like the result, got {_short(cotangent)}")
        g = cotangent if type(cotangent) in DUAL_TYPES else np.array(
            cotangent, dtype=result.v.dtype)  # an owned copy
        slot = index_of(result)
        if slot in arrays:
            arrays[slot] = arrays[slot] + g
        else:
            arrays[slot] = g
        return
    if t in SCALAR_DUALS:
        if not _of_level(result, level):
            return
        cotangent = scalar_of(cotangent)
        if type(cotangent) not in SCALAR_DUALS and (isinstance(cotangent, bool) or not
                                                    isinstance(cotangent, _COTANGENT_SCALARS)):
            raise InputError(f"the cotangent at {path} should be a float, got "
                             f"{type(cotangent).__name__} {_short(cotangent)}")
        adjoint[result.i] = adjoint[result.i] + (
            cotangent if type(cotangent) in SCALAR_DUALS else float(cotangent))
        return
    key = (id(result), id(cotangent))
    if key in seen:  # a cyclic structure: each (value, cotangent) pair once
        return
    if t is list or t is tuple or is_sequence(result):
        seen.add(key)
        if not is_sequence(cotangent) or len(cotangent) != len(result):
            raise InputError(
                f"the cotangent at {path} should be a {t.__name__} of length {len(result)} "
                f"like the result, got {type(cotangent).__name__} {_short(cotangent)}")
        for k, (r, c) in enumerate(zip(result, cotangent)):
            yield _seed(r, c, adjoint, arrays, f"{path}[{k}]", seen, level)
        return
    if isinstance(result, _MAPPINGS):
        seen.add(key)
        if not isinstance(cotangent, _MAPPINGS) or cotangent.keys() != result.keys():
            missing = [k for k in result if not isinstance(cotangent, _MAPPINGS)
                       or k not in cotangent]
            raise InputError(
                f"the cotangent at {path} should be a dict with the result's keys "
                f"{list(result)!r}" + (f" (missing {missing!r})" if missing else "")
                + f", got {_short(cotangent)}")
        for k, r in result.items():
            yield _seed(r, cotangent[k], adjoint, arrays, f"{path}[{k!r}]", seen, level)
        return
    if _is_record(result):
        seen.add(key)
        if type(cotangent) is not t:
            raise InputError(
                f"the cotangent at {path} should be a {t.__qualname__} like the result "
                f"(the same variant), got {type(cotangent).__qualname__} {_short(cotangent)}")
        for name, r in record_attributes(result):
            yield _seed(r, getattr(cotangent, name, None), adjoint, arrays, f"{path}.{name}",
                        seen, level)
        return
    if _is_float(result) or result is None or isinstance(result, (int, str, bytes, enum.Enum,
                                                                  np.ndarray)):
        return  # not differentiated (a constant float, an int, a tag): nothing to seed
    if _is_instance(result) and contains_dual(result):
        raise InputError(
            f"{path} is a {t.__qualname__} instance holding differentiated values; astad "
            "follows them through dataclasses, named tuples, lists, tuples, dicts and the "
            "standard containers only")


_MAPPINGS = (dict, types.MappingProxyType)


def contains_float(value) -> bool:
    """Does ``value`` hold a float (or a float array) anywhere: in containers, dataclasses
    and the attributes of other objects?"""
    stack, seen = [value], set()
    while stack:
        x = stack.pop()
        t = type(x)
        if t is float or t in DUAL_TYPES or is_float_array(x) or _is_float(x):
            return True
        if t in (int, str, bool, bytes, type(None)) or id(x) in seen:
            continue
        seen.add(id(x))
        if t is list or t is tuple or isinstance(x, (list, tuple, collections.deque)):
            stack.extend(x)
        elif isinstance(x, _MAPPINGS):
            stack.extend(x.values())
        elif isinstance(x, np.ndarray) and x.dtype.kind == "f":  # (a subclass: matrix)
            return True
        elif t is array.array:
            return x.typecode in "fd" and len(x) > 0
        elif _is_record(x) or _is_instance(x):
            try:
                stack.extend(v for _, v in record_attributes(x))
            except Exception:  # noqa: BLE001 (an attribute that cannot be read)
                continue
    return False


def contains_dual(value) -> bool:
    """Does ``value`` hold a dual anywhere (through containers and dataclasses)?"""
    return _run(_contains_dual(value, set(), None))


def duals_in(value) -> list:
    """Every dual ``value`` holds (through containers and dataclasses)."""
    found: list = []
    _run(_contains_dual(value, set(), found))
    return found


def level_in(value):
    """The innermost running level among the duals ``value`` holds (through containers
    and dataclasses), or None; a dual of an ended differentiation raises."""
    return innermost(duals_in(value))


def _contains_dual(value, seen, found, functions=False):
    """Does ``value`` hold a dual? With a list ``found``: every dual, appended to it. With
    ``functions``, also through functions: their closure cells and defaults, a bound
    method's object, a partial's function and arguments."""
    t = type(value)
    if t in DUAL_TYPES:
        if found is not None:
            found.append(value)
        return True
    if t in (float, int, str, bool, type(None)):
        return False
    if id(value) in seen:
        return False
    seen.add(id(value))
    if t in (list, tuple, set, frozenset) or isinstance(value, (list, tuple,
                                                                collections.deque)):
        items = value
    elif isinstance(value, _MAPPINGS):  # (a key may hold a dual too)
        items = list(value.keys()) + list(value.values())
    elif functions and isinstance(value, FUNCTIONS):  # (before objects: a partial is one)
        items = _function_parts(value)
    elif _is_record(value) or _is_instance(value):
        try:
            items = [x for _, x in record_attributes(value)]
        except Exception:  # noqa: BLE001 (an attribute that cannot be read)
            return False
    else:
        return False
    any_dual = False
    for x in items:
        if type(x) in DUAL_TYPES:
            if found is None:
                return True
            found.append(x)
            any_dual = True
        elif (yield _contains_dual(x, seen, found, functions)):
            if found is None:
                return True
            any_dual = True
    return any_dual


FUNCTIONS = (types.FunctionType, types.MethodType, functools.partial)


def refuse_functions(out, name: str, functions: tuple = FUNCTIONS) -> None:
    """Raise if a differentiated function's result ``out`` holds a function (an instance
    of ``functions``, through containers and dataclasses) that holds a differentiated
    value (in its closure, defaults, bound object or partial's arguments): its derivative
    is not a value astad can give (JAX's results are arrays). A function of constants is
    a constant, returned as it is."""
    seen: set = set()
    stack = [(out, "result")]
    while stack:
        x, where = stack.pop()
        t = type(x)
        if t in DUAL_TYPES or t in (float, int, str, bool, type(None)) or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, functions):
            if _run(_contains_dual(x, set(), None, functions=True)):
                raise InputError(
                    f"{name} returned a function of the differentiated values ({where}); "
                    "astad differentiates functions whose results are numbers, arrays and "
                    "structures of them: call that function inside, or differentiate it on "
                    "its own")
        elif t in (list, tuple) or _is_namedtuple(x):
            stack += [(item, f"{where}[{k}]") for k, item in enumerate(x)]
        elif isinstance(x, dict):
            stack += [(item, f"{where}[{key!r}]") for key, item in x.items()]
        elif _is_record(x):
            stack += [(item, f"{where}.{attr}") for attr, item in record_attributes(x)]


def _function_parts(fn) -> list:
    """What a function holds: its closure cells' values and its defaults, a bound
    method's function and object, a partial's function and arguments."""
    if isinstance(fn, functools.partial):
        return [fn.func, fn.args, fn.keywords]
    if type(fn) is types.MethodType:
        return [fn.__func__, fn.__self__]
    parts = [fn.__defaults__, fn.__kwdefaults__]
    for cell in fn.__closure__ or ():
        try:
            parts.append(cell.cell_contents)
        except ValueError:  # (a cell not yet filled)
            pass
    return parts


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
