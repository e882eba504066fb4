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
import enum
import operator
import types

import numpy as np

from ..data.tree import (COMPLEX_SCALARS, FUNCTIONS, RECORD, FROZEN, children_like, find,
                        format_path, instance_attributes, is_differentiable, is_float,
                        is_float_array, is_frozen, is_instance, leaf_paths, node_of,
                        plain_record, record_attributes, run, set_entries, set_items,
                        short)
from ..errors import InputError
from ..runtime.array_dual import ARRAY_DUALS, ArrayDual, constant, index_of
from ..runtime.duals import (DUAL_TYPES, FAST_PRIMALS, SCALAR_DUALS, Dual, NestedDual, innermost,
                            new_dual, running)

_NO_ENTRY = ()


def towered(value, level):
    """A plain array, as a constant of every running level enclosing ``level``
    (rules/array_writes.py)."""
    depth = running.depth.get(id(level))
    outer = running.stack if depth is None else running.stack[:depth - 1]
    return constant(outer[-1], value) if outer else value
_setattr = object.__setattr__
_run = run
_GENERATOR = types.GeneratorType


def _text(path) -> str:
    """An argument's path as text: ``Interleaving._walk`` keeps it as (parent, node, key)
    steps from the argument's name."""
    steps = []
    while type(path) is tuple:
        path, node, key = path
        steps.append(node.step(key))
    return path + "".join(reversed(steps))


def _finished(walked):
    """What ``Interleaving._walk`` gave, its walk run if it gave one."""
    return _run(walked) if type(walked) is _GENERATOR else walked


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
    if kind.__module__ == "numpy" and getattr(getattr(value, "dtype", None), "kind", "") == "c":
        return InputError(f"{path} is a {kind.__name__}; pass complex values as Python's "
                          "complex or as numpy arrays")
    if kind in (set, frozenset) and any(is_float(v) for v in value):
        return InputError(f"{path} is a set of floats; a set has no stable order for a "
                          "gradient to follow: pass a list or a tuple")
    if not isinstance(value, (type, types.ModuleType, types.FunctionType, enum.Enum)) and \
            _holds_float(value):
        return InputError(
            f"{path} is a {kind.__qualname__} instance holding floats; astad walks "
            "dataclasses, named tuples, lists, tuples, dicts and the standard containers "
            "(deque, UserList, UserDict, ChainMap, SimpleNamespace): make it a dataclass, "
            "register it (astad.register_pytree_node), or leave it out of argnums")
    return None


# Plan nodes: what interleave saw, so that the gradient can be rebuilt later even if the
# function mutated its arguments. A plain int is a float leaf's input slot.
class RunPlan:          # a list or tuple of exactly-float elements: slots start..start+n
    __slots__ = ("start", "n", "kind", "element")  # element: float, or numpy.float64

    def __init__(self, start, n, kind, element=float):
        self.start, self.n, self.kind, self.element = start, n, kind, element


class NodePlan:         # a container (data/tree.py): its kind and class, what making it
    __slots__ = ("node", "cls", "aux", "keys", "children")  # again needs, its children's
                                                           # keys and plans
    def __init__(self, node, cls, aux, keys, children):
        self.node, self.cls, self.aux = node, cls, aux
        self.keys, self.children = keys, children


class ConstPlan:        # a non-float leaf: the gradient holds the argument's own value
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class ArrayPlan:    # a float numpy array: one input slot, its cotangent in ``arrays``
    __slots__ = ("slot", "shape", "dtype", "scalar")  # scalar: the class of a complex
                                                       # number given (a 0-d array here)
    def __init__(self, slot, shape, dtype, scalar=None):
        self.slot, self.shape, self.dtype, self.scalar = slot, shape, dtype, scalar


class RecordPlan:  # a plain dataclass of float attributes only: slots start, start+1...
    __slots__ = ("cls", "names", "start")

    def __init__(self, cls, names, start):
        self.cls, self.names, self.start = cls, names, start


class FloatPlan:    # a float subclass (numpy.float64): rebuilt with its own type
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
        # which core/escape.py replaces by their primals afterwards
        self.opaque: list = []
        # an array or container met at two places: each place its own input (JAX's
        # partials); per place (path, copy, its slot or contents), checked for writes
        # after the call (check_places)
        self.places: dict = {}   # id(original) -> [(path, copy, before), ...]
        self.first_paths: dict = {}  # id(object) -> the path where it was met first
        self.walking: set = set()  # ids of the containers being walked (cycles)

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
        kind = plain_record(type(value))
        if kind and id(value) not in self.copies:
            done = self._float_record(value, kind == FROZEN)
            if done is not None:
                return done
        return _finished(self._walk(value, path, True))

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
        plan = RecordPlan(t, names, start)
        self._remember(value, copy, plan, None if frozen else duals)
        return copy, plan

    def copy_constant(self, value):
        """A copy of a mutable argument that is not differentiated (floats stay floats),
        so that duals the function stores into it never reach the caller's object."""
        if type(value) in (float, int, str, bool) or value is None:
            return value
        return _finished(self._walk(value, "", False))[0]

    def _float_run(self, value):
        """Duals for a list/tuple of floats, or of numpy.float64 values, inline (no walk
        per element); None, with the tape as it was, for any other."""
        for x in value:
            if type(x) is not float:
                break
        else:
            start = len(self.tape)
            out = self._new_duals(value)
            return out, RunPlan(start, len(out), type(value))
        if not value or not set(map(type, value)) <= _FLOAT64:
            return None
        start = len(self.tape)
        out = self._new_duals(value)
        return out, RunPlan(start, len(out), type(value), np.float64)

    def _walk(self, value, path, active):
        """(copy, plan) of a leaf; for a container, the walk (a generator) that gives
        them (``_container``)."""
        t = type(value)
        if not active and (t is int or t is str or value is None or is_float(value)):
            return value, None
        if t is int or t is str or t is bool or value is None:  # (the common constants)
            return value, ConstPlan(value)
        if is_float(value):  # (a float subclass keeps its class: isinstance sees it)
            d = self._dual(value)
            return (d, len(self.tape) - 1 if t is float else FloatPlan(len(self.tape) - 1, t))
        if t in SCALAR_DUALS:  # a value of an enclosing differentiation: a float here
            if not active:
                return value, None
            return self._dual(value), len(self.tape) - 1
        if t is complex or t is np.complex128 or t is np.complex64:  # (a 0-d array:
            if not active:                                     # complex scalars are
                return value, None                             # array duals)
            d = self._array_dual(np.array(value))
            return d, ArrayPlan(len(self.tape) - 1, (), d.v.dtype, scalar=t)
        if is_float_array(value) or t in ARRAY_DUALS:
            if not active:
                return value, None
            # the same array at two places: each place its own input, as in JAX (its
            # partial derivative; forward mode: its tangent), over a copy of its own; a
            # write through either is refused after the call (check_places)
            if id(value) in self.copies:
                d = self._array_dual(np.array(value) if type(value) is np.ndarray else
                                     value.copy())
                self._place(value, path, d)
                return d, ArrayPlan(len(self.tape) - 1, value.shape, value.dtype)
            d = self._array_dual(value)
            plan = ArrayPlan(len(self.tape) - 1, value.shape, value.dtype)
            self._remember(value, d, plan)
            self.first_paths[id(value)] = path
            return d, plan
        seen = self.copies.get(id(value))
        again = False
        if seen is not None:
            # the same mutable object twice: a container holding floats met again (not a
            # cycle through it) is another input (JAX's partials; in forward mode with a
            # tangent of its own), over a copy of its own; otherwise one copy, aliasing kept
            if not active or id(value) in self.walking or not contains_float(value):
                return seen[1], seen[2]
            again = True
        node = node_of(t)
        if node is not None:
            if t is list or t is tuple:  # a run of floats: inline, one plan for all
                run = self._float_run(value) if active else (
                    (list(value), None) if all(type(x) is float for x in value) else None)
                if run is not None:
                    out, plan = run
                    if t is tuple:
                        return tuple(out), plan
                    if again:
                        self._place(value, path, out)
                    else:
                        self._remember(value, out, plan, list(out))
                        self.first_paths[id(value)] = path
                    return out, plan
            return self._container(value, node, path, active, again)
        if active:
            error = _unsupported_argument(value, _text(path))
            if error is not None:
                raise error
        if t is set:  # mutable: the function gets a copy, written back as it leaves it
            copy = set(value)
            self._remember(value, copy, None, set(copy))
            return copy, ConstPlan(value)
        if is_instance(value) or (t is np.ndarray and value.dtype == object):
            self.opaque.append(value)
        return value, ConstPlan(value)

    def _container(self, value, node, path, active, again=False):
        """A container (data/tree.py): a copy of its kind holding its children's copies,
        and its plan. A mutable one is noted before its children (a cycle through it
        finds the copy) and again after them with a snapshot for write-back; one met
        ``again`` (another place of an object walked before) is a copy of its own, noted
        as a place instead."""
        keys, children, aux = node.flatten(value)
        plan = NodePlan(node, type(value), aux, keys, [])
        copy = node.shell(aux) if node.mutable else None
        if copy is not None and not again:
            self._remember(value, copy, plan)  # before the elements: cycles
            self.first_paths[id(value)] = path
        self.walking.add(id(value))
        if active and node.kind == "sequence" and contains_float(instance_attributes(value)):
            raise InputError(f"{_text(path)} is a {type(value).__qualname__} whose own "
                             "attributes hold floats; astad walks its items only")
        copies, plans = [], plan.children
        for key, x in zip(keys, children):
            if active and type(x) is float:  # a float leaf inline: no sub-walk
                y = self._dual(x)
                child = len(self.tape) - 1
            else:
                walked = self._walk(x, (path, node, key), active)  # (a path, made text
                                                                   # only for a message)
                if type(walked) is _GENERATOR:  # a container: its walk, on the driver's
                    walked = yield walked       # stack
                y, child = walked
            copies.append(y)
            plans.append(child)
        self.walking.discard(id(value))
        if copy is None:  # (immutable: a value, copied at each place it appears)
            copy = node.unflatten(aux, keys, copies)
            if isinstance(copy, collections.deque) and not again:  # (made whole, mutable)
                self._remember(value, copy, plan, list(copy))
        else:
            node.fill(copy, keys, copies)
            kind = node.kind
            if again:
                self._place(value, path, copy)
            elif kind == "record":  # (a frozen record cannot be mutated: no write-back)
                if not is_frozen(type(value)):
                    self._remember(value, copy, plan, list(zip(keys, copies)))
            else:
                self._remember(value, copy, plan, list(copy.items()) if kind == "dict"
                               else list(copy))
        return copy, plan

    def _place(self, original, path, copy) -> None:
        """Note another place of an array or a mutable object holding floats: what its
        copy holds, checked after the call (``check_places``), and the first place's."""
        places = self.places.get(id(original))
        if places is None:
            first = self.copies[id(original)][1]
            places = self.places[id(original)] = [
                (self.first_paths.get(id(original), "an argument"), first, self._held(first))]
        places.append((path, copy, self._held(copy)))

    def _remember(self, original, copy, plan, snapshot=None) -> None:
        """Note the copy of a mutable argument; ``snapshot`` (its contents as copied)
        lets write-back tell whether the function changed it."""
        self.copies[id(original)] = (original, copy, plan, snapshot)

    @staticmethod
    def _held(copy):
        """What tells, after the call, whether the function changed ``copy``: an array
        dual's root's slot (a write makes a new one), a container's contents."""
        if type(copy) in ARRAY_DUALS:
            root = copy.root if copy.root is not None else copy
            return root.i
        return _contents(copy)

    def _written(self, copy, before) -> bool:
        after = self._held(copy)
        if type(copy) in ARRAY_DUALS:
            return after != before
        return len(after) != len(before) or not all(map(operator.is_, after, before))

    def check_places(self) -> None:
        """An object given at two places has a partial derivative at each only if the
        function changes it through neither (it ran on a copy per place); else an error
        naming both places."""
        for places in self.places.values():
            for path, copy, before in places:
                if self._written(copy, before):
                    first, second = places[0][0], places[1][0]
                    raise InputError(
                        f"the same object is given as {_text(first)} and as "
                        f"{_text(second)}, and the function changes it (through "
                        f"{_text(path)}): the partial derivative at each place is not "
                        "defined. Pass a copy at one of them (np.copy, list(...)), or the "
                        "object once")

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
            elif type(plan) is RecordPlan:  # (snapshot: the duals, in plan.names order)
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
    """The cotangents of a RunPlan's elements, of the elements' class."""
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
    if type(plan) is RecordPlan:
        return _float_record_gradient(plan, adjoint)
    return _run(_build(plan, adjoint, arrays, {}))


def argument_gradient(plan, adjoint: list, arrays: dict):
    """The gradient of a differentiated argument: ``build_gradient``'s, but None for an
    argument that holds no float (an int, a string): never its value, which would pass for
    a gradient. (Inside a structure a non-float leaf is part of the structure and stays,
    as a pytree's static data does in JAX.)"""
    return None if type(plan) is ConstPlan else build_gradient(plan, adjoint, arrays)


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
    if t is ArrayPlan:
        g = arrays.get(plan.slot)
        if type(g) in SCALAR_DUALS:  # a 0-d array's cotangent at an enclosing level
            g = np.reshape(np.stack([g]), ())
        g = np.zeros(plan.shape, plan.dtype) if g is None else g.astype(plan.dtype,
                                                                       copy=False)
        return plan.scalar(g) if plan.scalar and type(g) not in DUAL_TYPES else g
    if t is RunPlan:
        values = run_gradient(plan, adjoint)
        return values if plan.kind is list else tuple(values)
    if t is ConstPlan:
        return plan.value
    if t is FloatPlan:
        g = adjoint[plan.slot]
        return plan.cls(g) if type(g) in FAST_PRIMALS else g
    if t is RecordPlan:
        return _float_record_gradient(plan, adjoint)
    built = memo.get(id(plan))
    if built is not None:  # an aliased argument: the same gradient object
        return built
    node = plan.node
    shell = node.shell(plan.aux) if node.mutable else None
    if shell is not None:
        memo[id(plan)] = shell
    out = []
    for child in plan.children:
        out.append(float_gradient(adjoint[child]) if type(child) is int else
                   (yield _build(child, adjoint, arrays, memo)))
    if shell is None:
        return node.unflatten(plan.aux, plan.keys, out)
    node.fill(shell, plan.keys, out)
    return shell


def leaf_slots(plan) -> list:
    """``(slot, shape)`` of every float leaf ``plan`` describes, in slot order (shape ()
    for a float, the array's shape for an array); an aliased part once."""
    found, seen, stack = [], set(), [plan]
    while stack:
        p = stack.pop()
        t = type(p)
        if t is int:
            found.append((p, ()))
        elif t is FloatPlan:
            found.append((p.slot, ()))
        elif t is ArrayPlan:
            found.append((p.slot, p.shape))
        elif t is RunPlan:
            found.extend((s, ()) for s in range(p.start, p.start + p.n))
        elif t is RecordPlan:
            found.extend((s, ()) for s in range(p.start, p.start + len(p.names)))
        elif t is NodePlan and id(p) not in seen:
            seen.add(id(p))
            stack.extend(p.children)
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
    node = node_of(t)
    if node is None:
        if t is set or t is frozenset:
            out = []
            for x in value:
                out.append((yield _primal(x, originals, memo, level)))
            return t(out)
        if not (is_instance(value) and contains_dual(value)):
            return value
        node = RECORD  # another object holding a dual: a copy, as a record
    keys, children, aux = node.flatten(value)
    if node is RECORD and not any(type(x) in DUAL_TYPES or not isinstance(
            x, (int, float, str, type(None))) for x in children):
        return value  # nothing to strip: keep the object itself
    shell = node.shell(aux) if node.mutable else None
    if shell is not None:
        memo[id(value)] = shell
    if node.kind == "dict":  # (a key may be a differentiated value too)
        stripped = []
        for key in keys:
            stripped.append((yield _primal(key, originals, memo, level)))
        keys = stripped
    out = []
    for x in children:
        out.append((yield _primal(x, originals, memo, level)))
    if shell is None:
        return node.unflatten(aux, keys, out)
    node.fill(shell, keys, out)
    return shell


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
    node = node_of(t)
    if node is not None:
        seen.add(key)
        keys, children, _ = node.flatten(result)
        given = children_like(node, t, keys, cotangent, path, "cotangent", "result")
        for k, r, c in zip(keys, children, given):
            yield _seed(r, c, adjoint, arrays, path + node.step(k), seen, level)
        return
    if is_float(result) or result is None or isinstance(result, (int, str, bytes, enum.Enum,
                                                                 np.ndarray)):
        return  # not differentiated (a constant float, an int, a tag): nothing to seed
    if is_instance(result) and contains_dual(result):
        raise InputError(
            f"{path} is a {t.__qualname__} instance holding differentiated values; astad "
            "follows them through dataclasses, named tuples, lists, tuples, dicts, the "
            "standard containers and registered containers only")


def _holds_float_leaf(x) -> bool:
    t = type(x)
    return t is float or t in COMPLEX_SCALARS or t in DUAL_TYPES or is_float(x) or (
        isinstance(x, np.ndarray) and x.dtype.kind in "fc") or (  # (a subclass: matrix)
        t is array.array and x.typecode in "fd" and len(x) > 0)


def _contents(copy) -> list:
    """What a mutable copy holds, to tell by identity whether the function changed it."""
    if isinstance(copy, dict):
        return [x for item in copy.items() for x in item]
    if isinstance(copy, (list, collections.deque)):
        return list(copy)
    return [x for item in record_attributes(copy) for x in item]


def contains_float(value) -> bool:
    """Does ``value`` hold a float (or a float array) anywhere: in containers, dataclasses
    and the attributes of other objects? (Not in a dict's keys, which are not
    differentiated.)"""
    return find(value, _holds_float_leaf, keys=False) is not None


def _is_dual(x) -> bool:
    return type(x) in DUAL_TYPES


def holds_derivative(x) -> bool:
    """A leaf of a result that has a derivative: a dual, a float or a float array (one
    that does not depend on the inputs has a zero derivative)."""
    return type(x) in DUAL_TYPES or is_differentiable(x)


def contains_dual(value) -> bool:
    """Does ``value`` hold a dual anywhere (through containers, dict keys and objects)?"""
    return find(value, _is_dual) is not None


def duals_in(value) -> list:
    """Every dual ``value`` holds (through containers, dict keys and objects)."""
    return find(value, _is_dual, every=True)


def level_in(value):
    """The innermost running level among the duals ``value`` holds (through containers
    and dataclasses), or None; a dual of an ended differentiation raises."""
    return innermost(duals_in(value))


def refuse_functions(out, name: str, functions: tuple = FUNCTIONS) -> None:
    """Raise if a differentiated function's result ``out`` holds a function (an instance
    of ``functions``, through its containers) that holds a differentiated value (in its
    closure, defaults, bound object or partial's arguments): its derivative is not a
    value astad can give (JAX's results are arrays). A function of constants is a
    constant, returned as it is."""
    for where, fn in leaf_paths(out, lambda x: isinstance(x, functions)):
        if find(fn, _is_dual, functions=True) is not None:
            raise InputError(
                f"{name} returned a function of the differentiated values "
                f"({format_path('result', where)}); astad differentiates functions whose "
                "results are numbers, arrays and structures of them: call that function "
                "inside, or differentiate it on its own")


_short = short
