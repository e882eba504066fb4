"""A differentiation leaves no dual behind: what the function stored in objects that
outlive the call ends as the original function leaves it, holding plain values.

The function runs on copies of its arguments (core/boundary.py writes their primals back).
Everything else it can reach is scanned when it returns, and every dual of its level
found there is replaced by its primal, in place: the objects passed but not copied
(instances of the user's classes), the mutable default arguments and closure cells of
the functions it may call, the module globals and class attributes those functions name,
and attributes of the user's modules they name. Which functions it may call is read from
the code when the function is transformed (the functions its globals, closures and
defaults name, transitively; library code is not followed). Without this, a dual kept in
``d[x * 2.0] = 1.0``, a cache list or a default argument makes the plain function fail on
its next call (a dual of a finished differentiation refuses to be used).

The result may share an object that is cleaned (a global list the function appends to
and returns): before anything is changed, the result is detached (its containers copied,
its duals kept), so the gradient still sees them.
"""
from __future__ import annotations

import collections
import operator
import os
import sys
import sysconfig
import threading
import types
import weakref

import numpy as np

from ..data.tree import (is_instance, node_of, record_attributes, set_entries, set_items,
                        tree_map)
from ..runtime.duals import DUAL_TYPES, level, running

_setattr = object.__setattr__
_LIBRARY_DIRS = tuple({os.path.normcase(p) for p in (
    sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib"),
    sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib"),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) if p})  # (astad's own)
_NOT_DATA = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
             types.MethodType, staticmethod, classmethod, property)


def _library(code_or_module) -> bool:
    filename = getattr(code_or_module, "co_filename", None) or getattr(
        code_or_module, "__file__", None)
    if not filename or filename.startswith("<"):
        return not filename  # a built-in module; code typed at a prompt is the user's
    return os.path.normcase(os.path.abspath(filename)).startswith(_LIBRARY_DIRS)


def code_names(code: types.CodeType) -> set:
    """The global and attribute names ``code`` reads (``co_names``), its nested code's
    (comprehensions, lambdas, inner functions) included."""
    names = set(code.co_names)
    for nested in nested_code(code):
        names |= set(nested.co_names)
    return names


def nested_code(code: types.CodeType):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from nested_code(const)


# -- where a function can leave values: its roots -------------------------------------------
class Roots:
    """The places a function (and the functions it may call) can store a value that
    outlives the call: (mapping, name) entries of module globals and of the user's
    modules, whole global dicts (a function calling ``globals()``), the closure cells and
    mutable defaults of the functions, the attributes of the classes. Functions and
    classes are held weakly: a function made at run time (a closure over a large array)
    must not be kept alive by astad."""

    __slots__ = ("entries", "dicts", "functions", "classes", "__weakref__")

    def __init__(self):
        self.entries: list = []    # (dict, name)
        self.dicts: list = []      # whole dicts
        self.functions: list = []  # weakrefs: their closure cells and defaults
        self.classes: list = []    # weakrefs: their attributes

    def empty(self) -> bool:
        return not (self.entries or self.dicts or self.functions or self.classes)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def roots_of(fn) -> Roots:
    """The roots of the Python function ``fn`` (cached per function)."""
    try:
        found = _CACHE.get(fn)
    except TypeError:
        found = None
    if found is None:
        found = _find_roots(fn)
        try:
            _CACHE[fn] = found
        except TypeError:
            pass
    return found


def _find_roots(fn) -> Roots:
    roots = Roots()
    seen_functions, seen_entries, seen_classes = set(), set(), set()
    queue = [fn]
    while queue:
        f = queue.pop()
        if id(f) in seen_functions:
            continue
        seen_functions.add(id(f))
        code = f.__code__
        names = code_names(code)
        namespace = f.__globals__
        for name in names:
            if name not in namespace:
                continue
            value = namespace[name]
            if isinstance(value, types.FunctionType):
                if not _library(value.__code__):
                    queue.append(value)
            elif isinstance(value, type):
                if id(value) not in seen_classes and not _library(sys.modules.get(
                        value.__module__)):
                    seen_classes.add(id(value))
                    roots.classes.append(weakref.ref(value))
                    queue.extend(_methods(value))
            elif isinstance(value, types.ModuleType):
                if not _library(value):  # a user's module: the attributes named here
                    for attribute in names & set(vars(value)):
                        member = vars(value)[attribute]
                        if isinstance(member, types.FunctionType):
                            queue.append(member)
                        elif not isinstance(member, _NOT_DATA):
                            _add_entry(roots, seen_entries, vars(value), attribute)
            elif not isinstance(value, _NOT_DATA):
                _add_entry(roots, seen_entries, namespace, name)
        if names & {"globals", "vars"} and all(d is not namespace for d in roots.dicts):
            roots.dicts.append(namespace)
        defaults = list(f.__defaults__ or ()) + list((f.__kwdefaults__ or {}).values())
        if f.__closure__ or any(not isinstance(v, _IMMUTABLE) for v in defaults):
            roots.functions.append(weakref.ref(f))
        for cell in f.__closure__ or ():
            try:
                inside = cell.cell_contents
            except ValueError:
                continue
            if isinstance(inside, types.FunctionType) and not _library(inside.__code__):
                queue.append(inside)
        for value in defaults:
            if isinstance(value, types.FunctionType) and not _library(value.__code__):
                queue.append(value)
    return roots


_IMMUTABLE = (int, float, str, bytes, bool, type(None), tuple, frozenset) + _NOT_DATA


def _add_entry(roots, seen, mapping, name) -> None:
    key = (id(mapping), name)
    if key not in seen:
        seen.add(key)
        roots.entries.append((mapping, name))


def _methods(cls) -> list:
    found = []
    for klass in cls.__mro__:
        if klass is object or _library(sys.modules.get(klass.__module__)):
            continue
        for member in vars(klass).values():
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            elif isinstance(member, property):
                member = member.fget
            if isinstance(member, types.FunctionType):
                found.append(member)
    return found


def origin_of(rev):
    """The user's function a transformed function (or a bound method of one) was made
    from, and the object it is bound to; (None, None) if unknown."""
    bound = None
    if type(rev) is types.MethodType:
        rev, bound = rev.__func__, rev.__self__
    origin = getattr(rev, "_astad_origin", None)  # (a weak reference: compile/pipeline.py)
    return (origin() if origin is not None else None), bound


# -- the run ------------------------------------------------------------------------------
class _Pending(threading.local):
    """What the differentiations running inside the current one could reach: an inner
    call cleans its own duals, leaving the values of enclosing levels in their place, so
    each enclosing level cleans those places again when it ends."""

    def __init__(self):
        self.places: list = []  # (roots or None, objects)


_pending = _Pending()


def run(rev, handle, state, args, kwargs, running_level=None):
    """``rev(handle, *args, **kwargs)`` as the differentiation ``handle`` (inside
    ``running_level``, a ``level(handle)``, when given: its ``writes`` are the caller's);
    afterwards the caller's arguments are written back (``state``, an Interleaving, may be
    None) and no object the call could reach holds a dual of it. Return the result,
    detached from the objects changed."""
    places = _pending.places
    mark = len(places)
    with running_level if running_level is not None else level(handle):
        try:
            result = rev(handle, *args, **kwargs)
        except BaseException:
            _finish(rev, handle, state, None, places, mark)
            raise
        return _finish(rev, handle, state, result, places, mark)


def _finish(rev, handle, state, result, places, mark):
    if state is not None and state.places and result is not None:
        state.check_places()  # (an array given twice and written: refused)
    if state is not None and state.copies:
        state.write_back()
    fn, bound = origin_of(rev)
    roots = roots_of(fn) if fn is not None else None
    objects = list(state.opaque) if state is not None else []
    if bound is not None:
        objects.append(bound)
    if objects or (roots is not None and not roots.empty() and not any(
            place[0] is roots and not place[1] for place in places[mark:])):
        places.append((roots, objects))  # (an inner call run many times: its roots once)
    if len(places) == mark:
        return result  # (the common case: nothing but the arguments to look at)
    cleaner = Cleaner(handle, result)
    for place_roots, place_objects in places[mark:]:
        for obj in place_objects:
            cleaner.clean_value(obj)
        if place_roots is not None:
            cleaner.clean_roots(place_roots)
    if not is_running_inside():
        del places[mark:]  # (the outermost: nobody else to clean for)
    return cleaner.result


def is_running_inside() -> bool:
    """Is a differentiation running around the one ending now (still on the stack)?"""
    return len(running.stack) > 1


class Cleaner:
    """Replaces, in place, the duals of one level held by objects that outlive the call
    (see the module docstring)."""

    def __init__(self, handle, result):
        self.level = handle
        self.result = result
        self.detached = False
        self.seen: set = set()

    # -- entry points --------------------------------------------------------------------
    def clean_roots(self, roots: Roots) -> None:
        for mapping, name in roots.entries:
            if name in mapping:
                self._slot(mapping, name)
        for mapping in roots.dicts:
            # (not a module's own __builtins__, __loader__...: a loader can reach the whole
            # process, under pytest the whole session)
            for name in [n for n, v in mapping.items() if not isinstance(v, _NOT_DATA)
                         and not (n.startswith("__") and n.endswith("__"))]:
                self._slot(mapping, name)
        for function in roots.functions:
            f = function()
            if f is None:
                continue
            for cell in f.__closure__ or ():
                self._cell(cell)
            for value in list(f.__defaults__ or ()) + list((f.__kwdefaults__ or {}).values()):
                self.clean_value(value)
        for reference in roots.classes:
            cls = reference()
            if cls is None:
                continue
            for name, value in list(vars(cls).items()):
                if isinstance(value, _NOT_DATA) or name.startswith("__"):
                    continue
                replacement = self.cleaned(value)
                if replacement is not value:
                    type.__setattr__(cls, name, replacement)

    def clean_value(self, value) -> None:
        """Clean a mutable object in place (its replacement, if it must be replaced as a
        whole, is dropped: the caller holds the object itself)."""
        self.cleaned(value)

    def _cell(self, cell) -> None:
        try:
            value = cell.cell_contents
        except ValueError:  # (empty)
            return
        replacement = self.cleaned(value)
        if replacement is not value:
            self._detach()
            cell.cell_contents = replacement

    def _slot(self, mapping, name) -> None:
        value = mapping[name]
        replacement = self.cleaned(value)
        if replacement is not value:
            mapping[name] = replacement

    # -- the walk --------------------------------------------------------------------------
    def cleaned(self, value):
        """``value`` with no dual of this level: the same object, cleaned in place if it
        is mutable, or a new one (a dual's primal, a tuple or frozenset that held one)."""
        t = type(value)
        if t in DUAL_TYPES:
            if value.t is self.level:
                self._detach()
                return value.v
            return value
        if t in _ATOMS:
            return value
        if t is types.FunctionType:  # a closure made in the call may hold a dual
            if value.__closure__ and id(value) not in self.seen:
                self.seen.add(id(value))
                for cell in value.__closure__:
                    self._cell(cell)
            return value
        if isinstance(value, _NOT_DATA):
            return value
        if t is np.ndarray:
            if value.dtype != object:
                return value
        if id(value) in self.seen:
            return value
        self.seen.add(id(value))
        if t is list and _plain_floats(value):
            return value
        node = node_of(t)
        if node is not None and node.kind != "proxy":  # (a proxy: its dict is cleaned)
            if node.kind == "dict":  # in place, keys too
                items = [(self.cleaned(k), self.cleaned(v)) for k, v in list(value.items())]
                if any(a[0] is not k or a[1] is not v
                       for a, (k, v) in zip(items, value.items())):
                    self._detach()
                    set_entries(value, items)
                return value
            keys, children, aux = node.flatten(value)
            items = [self.cleaned(x) for x in children]
            if all(map(operator.is_, items, children)):
                return value
            if isinstance(value, (list, collections.deque)):  # in place
                self._detach()
                set_items(value, items)
            elif node.kind == "record":  # in place
                self._detach()
                for name, x, replacement in zip(keys, children, items):
                    if replacement is not x:
                        _setattr(value, name, replacement)
            else:  # a tuple, a registered container: made again
                return node.unflatten(aux, keys, items)
            return value
        if t in (set, frozenset):
            items = [self.cleaned(x) for x in value]
            if any(a is not b for a, b in zip(items, value)):
                if t is frozenset:
                    return frozenset(items)
                self._detach()
                value.clear()
                value.update(items)
            return value
        if t is np.ndarray:  # an object array
            for index, x in np.ndenumerate(value):
                replacement = self.cleaned(x)
                if replacement is not x:
                    self._detach()
                    value[index] = replacement
            return value
        if is_instance(value):
            try:
                attributes = record_attributes(value)
            except Exception:  # noqa: BLE001 (an attribute that cannot be read)
                return value
            for name, x in attributes:
                replacement = self.cleaned(x)
                if replacement is not x:
                    self._detach()
                    _setattr(value, name, replacement)
            return value
        return value

    def _detach(self) -> None:
        """Before the first change: the result keeps its own containers (and duals)."""
        if not self.detached:
            self.detached = True
            if self.result is not None:
                self.result = detached(self.result)


_ATOMS = frozenset({int, float, bool, str, bytes, complex, type(None), range, np.float64,
                    np.float32, np.int64, np.bool_})


def _plain_floats(values: list) -> bool:
    return set(map(type, values)) <= _FLOAT_ONLY


_FLOAT_ONLY = frozenset({float})


def detached(value):
    """A copy of ``value``'s containers (lists, tuples, dicts, sets, dataclasses and other
    objects holding duals), the duals themselves and everything else shared."""
    return tree_map(_same, value, _kept, objects=True)


def _kept(x) -> bool:
    t = type(x)
    return t in DUAL_TYPES or t in _ATOMS or isinstance(x, _NOT_DATA)


def _same(x):
    return x
