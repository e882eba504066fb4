"""Calls from generated code to callables known only at run time: ``ad.rev(f)``.

D of a function value is its transformed version (paper section 3: D[a -> b] =
D[a] -> D[b]). ``ad.rev(f)`` returns a callable taking the tape first:
- for an astad-decorated function or a plain Python function whose source astad can
  read: its transformed version (transformed on first use, then cached), called
  directly so a recursion uses one Python frame per level, as the original does;
- for a registered primitive: its rule;
- for functions astad generated itself (lambdas and nested defs of differentiated
  code, which reach the tape through their closure): the function as it is;
- for anything else: a guard that calls it when no differentiated value is among its
  arguments, and otherwise raises an error naming the callable and the call's line.
"""
from __future__ import annotations

import builtins
import collections
import copy
import functools
import itertools
import operator
import sys
import dataclasses
import inspect
import types
import weakref

from ..errors import AstadError, NotDifferentiableError, SourceUnavailableError, \
    user_location
from ..front.source import filename_of, restore_filename
from ..registry import RECORDS, ad, define, publish
from ..rules.scalar import TAPELESS_BUILTINS
from ..rules import scipy_loader
import numpy as np

from . import pipeline, render
from .entry import (BY_CODE, CACHE, GENERATED_CODE, LOCK, Entry, cached, rebound, store,
                    template_of)
from .helpers import helper_source
from ..rules.array import constant_array_method
from ..runtime.array_dual import ARRAY_DUALS, compiled_elementwise, is_numpy_callable, \
    no_rule_message
from ..runtime.tape import native
from ..core.boundary import contains_dual
from ..transform.bindings import MISSING
from ..transform.reverse import CALL_AS_IS, Names


# Builtin types whose methods only store, move or compare values (never compute on them).
_CONTAINER_TYPES = (list, dict, set, frozenset, tuple, str, bytes, range, collections.deque)
# Builtins that only store, move, compare or format values: safe with duals inside.
# Python functions called as they are, not transformed: a dual's __copy__ and
# __deepcopy__ copy it (runtime/duals.py, runtime/array_dual.py)
_AS_THEY_ARE = frozenset({copy.copy, copy.deepcopy})
_STRUCTURAL = {builtins.len, builtins.range, builtins.enumerate, builtins.zip,
               builtins.reversed, builtins.list, builtins.tuple, builtins.dict, builtins.set,
               builtins.frozenset, builtins.sorted, builtins.iter, builtins.next,
               builtins.print, builtins.min, builtins.max, builtins.any, builtins.all,
               builtins.map, builtins.filter, builtins.bool, builtins.str, builtins.repr,
               builtins.format, builtins.hash, builtins.id, builtins.int, builtins.round,
               builtins.getattr, builtins.setattr, builtins.hasattr, builtins.callable,
               builtins.issubclass, dataclasses.replace,
               dataclasses.astuple, dataclasses.asdict,
               object.__setattr__, object.__delattr__, object.__getattribute__, builtins.vars,
               builtins.isinstance, builtins.type, builtins.iter, types.SimpleNamespace,
               collections.deque}


def transformed_as_users(fn):
    """Mark ``fn``, a function of astad's own modules, to be transformed as the user's
    code is where differentiated code calls it (any other is taken for one of astad's
    API functions, which run as they are on duals)."""
    fn.transformed_as_users = True
    return fn


def _with_tape(f):
    def call(tape, *args, **kwargs):
        return f(*args, **kwargs)
    call.as_is = f  # (calls_as_is: generated code may call ``f`` directly instead)
    return call


def _methodcaller_parts(f: operator.methodcaller) -> tuple:
    """(name, args, kwargs) of an operator.methodcaller, as its pickling gives them."""
    made, args = f.__reduce__()
    if made is operator.methodcaller:
        return args[0], args[1:], {}
    return made.args[0], args, dict(made.keywords)  # (a partial holding the keywords)


def calls_as_is(f) -> bool:
    """Is D of the class ``f`` the class itself (a dataclass or named tuple, which only
    stores its arguments)? Then generated code calls ``f`` as the original does."""
    return isinstance(f, type) and getattr(rev(f), "as_is", None) is f


def resolvable_function(f) -> bool:
    """Is ``f`` a user's plain Python function, whose D is its transformed version
    taking the tape first (as ``rev`` would find it)? Decorated functions count."""
    return (type(f) is types.FunctionType and f.__code__ not in GENERATED_CODE
            and f not in _AS_THEY_ARE
            and not (getattr(f, "__module__", None) or "").startswith("astad.")
            and not _uses_zero_argument_super(f.__code__))


def _guarded(f, reason: str = ""):
    def call(tape, *args, **kwargs):
        if contains_dual(args) or contains_dual(kwargs):
            name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
            why = reason or ("it is not a Python function with readable source, nor a "
                             "registered primitive")
            raise NotDifferentiableError(
                f"a differentiated value is passed to {name!r}, which astad cannot "
                f"differentiate ({why}). Give astad its derivative with "
                f"astad.register_scalar({name}, d_dx, ...) for a function of floats, or "
                "astad.register_vjp / @astad.custom_vjp (README: Custom derivatives); or "
                "pass it only values that do not depend on the differentiated inputs",
                *user_location())
        return f(*args, **kwargs)
    return call


def _stats_distribution(f):
    """D of a distribution of scipy.stats or a method of one without a rule of its own
    (rules/scipy_stats.py has the rules, registered on first use): astad's function for
    a frozen distribution of scipy's, else a guard naming it as the user calls it
    (``scipy.stats.weibull_min.logpdf``), not scipy's code inside it."""
    if scipy_loader.stats_pending and scipy_loader.load_rules_for(f):
        found = RECORDS.get(f)
        if found is not None and found.call is not None:
            return found.call
    call = scipy_loader.stats_call(f)
    if call is not None:
        return call
    name = scipy_loader.stats_name(f)

    def guard(tape, *args, **kwargs):
        if contains_dual(args) or contains_dual(kwargs):
            raise NotDifferentiableError(no_rule_message(name), *user_location())
        return f(*args, **kwargs)
    return guard


def _vectorized(f):
    def call(tape, *args, **kwargs):
        if contains_dual(args) or contains_dual(kwargs):
            raise NotDifferentiableError(
                "np.vectorize(...) calls its function element by element from numpy's C "
                "code, which astad cannot follow: write the loop instead, np.array([fn(t) "
                "for t in x]), or the function with numpy's operations, which astad "
                "differentiates as a whole", *user_location())
        return f(*args, **kwargs)
    return call


_WRAPPERS: dict = {}
# float, isinstance and type by any name (check = isinstance; check(x, float)): the rules
# that see through a dual, as generated code calls them for the builtins' own names
_TAPELESS = {original: _with_tape(getattr(ad, name))
             for original, name in TAPELESS_BUILTINS.items()}


def _generated_init(cls) -> bool:
    """Is ``cls.__init__`` the one ``dataclass`` wrote (not user code)?"""
    filename = filename_of(cls.__init__)
    return filename is not None and filename.startswith("<")


def _dataclass_constructor(cls):
    """Build a dataclass as its generated ``__init__`` would, then run the transformed
    ``__post_init__``: a ``__post_init__`` that computes (normalises, derives a field) is
    differentiated like any other method, on the same tape."""
    signature = inspect.signature(cls)
    fields = dataclasses.fields(cls)
    field_names = {f.name for f in fields}
    initvars = [name for name in signature.parameters if name not in field_names]
    post_init = cls.__post_init__
    _transformed_or_raise(post_init)  # unsupported code: an error now, not at each call

    def construct(tape, *args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        obj = object.__new__(cls)
        for f in fields:
            if f.init:
                value = values[f.name]
            elif f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                continue
            object.__setattr__(obj, f.name, value)
        rev(post_init)(tape, obj, *[values[name] for name in initvars])
        return obj
    return construct


def _plain_constructor(cls) -> bool:
    """A user class built by ``object.__new__`` and a Python ``__init__``."""
    return (type(cls) is type and cls.__new__ is object.__new__
            and type(cls.__init__) is types.FunctionType and not _generated_init(cls))


def _construct(cls):
    """D of ``cls(args)``: a new instance, then the transformed ``__init__`` on it."""
    def construct(tape, *args, **kwargs):
        obj = object.__new__(cls)
        rev(cls.__init__)(tape, obj, *args, **kwargs)
        return obj
    return construct


def _is_structural_class(f) -> bool:
    """Classes whose construction only stores its arguments: dataclasses (their
    ``__init__`` is generated, not user code) and named tuples."""
    if not isinstance(f, type):
        return False
    if dataclasses.is_dataclass(f):
        return True
    return issubclass(f, tuple) and hasattr(f, "_fields")


def _transformed_or_raise(fn, as_method: bool = False):
    return transformed(fn, as_method=as_method).taped


def _reason(exc: AstadError) -> str:
    if isinstance(exc, SourceUnavailableError):
        return "its source cannot be read"
    return str(exc).split("\n")[0].replace("astad cannot differentiate code that uses",
                                            "its source uses")


def _uses_zero_argument_super(code) -> bool:
    """``super()`` finds the class in ``__class__`` and the object in the first argument,
    so the transformed method must take ``self`` first and the tape second."""
    return "__class__" in code.co_freevars and "super" in code.co_names


def _self_first(method):
    return lambda tape, obj, *args, **kwargs: method(obj, tape, *args, **kwargs)


# modules Python 3.11 and later freeze (their source is not read there): their methods
# (UserDict.values, ChainMap.keys: Mapping's) run as they are on 3.10 too
_FROZEN_FROM_311 = frozenset({"_collections_abc", "collections.abc"})


# what astad's own API is made of: functions, bound methods, f.grad / f.value_and_grad
# and astad.jvp (compiled: _specialised.c, _jvp.c)
_API_CALLABLES = (types.FunctionType, types.MethodType) + (
    (native.SpecialisedCall, native.CompiledJvp) if native is not None else ())


def rev(f):
    """The transformed version of callable ``f``, taking the tape as first argument."""
    try:  # a registered rule first: a custom derivative wins over the function's source
        found = RECORDS.get(f)
    except TypeError:  # unhashable callable
        found = None
    if found is not None and found.call is not None:
        return found.call
    tapeless = _TAPELESS.get(f) if type(f) is type or type(f) is types.BuiltinFunctionType \
        else None
    if tapeless is not None:  # float, isinstance, type reached by another name
        return tapeless
    if type(f) is type:  # a class seen before (Vec3(...)): its constructor, at once
        wrapper = _WRAPPERS.get(f)
        if wrapper is not None:
            return wrapper
    transformed = getattr(f, "_astad_transformed", None)  # an astad-decorated function
    if transformed is not None and type(f) is not types.MethodType:
        return transformed()
    t = type(f)
    if t in _API_CALLABLES and (getattr(f, "__module__", None) or "").startswith("astad.") \
            and not getattr(f, "transformed_as_users", False):
        return _with_tape(f)  # astad's own API (a gradient inside differentiated code)
    if t is types.FunctionType:
        # scipy.special's and scipy.linalg's rules, on first use
        if (scipy_loader.pending or scipy_loader.linalg_pending or scipy_loader.ABOVE) and \
                scipy_loader.load_rules_for(f):
            return rev(f)
        if f.__code__ in GENERATED_CODE or f in _AS_THEY_ARE:
            return _with_tape(f)
        try:
            if _uses_zero_argument_super(f.__code__):  # Base.__init__(self, ...) and the like
                return _self_first(_transformed_or_raise(f, as_method=True))
            return _transformed_or_raise(f)
        except AstadError as exc:
            return _guarded(f, _reason(exc))
    if "scipy.stats" in sys.modules and scipy_loader.is_stats_distribution(f):
        return _stats_distribution(f)  # (scipy.stats.norm.logpdf, scipy.stats.norm(...))
    if t is types.MethodType and type(f.__func__) is types.FunctionType:
        method = f.__func__.__dict__.get("_astad_method")  # obj.f of a decorated method
        if method is not None:                                # (api/methods.py)
            return method.bound_transformed(f.__self__)
        code = f.__func__.__code__
        if code in GENERATED_CODE:
            return _with_tape(f)
        if f.__func__.__module__ in _FROZEN_FROM_311:  # the same on every Python version
            return _guarded(f, "its source is not read: a method of Python's collections")
        if code.co_argcount == 0:  # def m(*args): the tape cannot follow self
            inner, obj = rev(f.__func__), f.__self__
            return lambda tape, *args, **kwargs: inner(tape, obj, *args, **kwargs)
        try:
            # the method's transformed version takes the tape after self, so binding it
            # to the object gives a C-level bound method: no extra frame per recursion
            return types.MethodType(_transformed_or_raise(f.__func__, as_method=True),
                                    f.__self__)
        except AstadError as exc:
            return _guarded(f, _reason(exc))
    if t is types.BuiltinMethodType and isinstance(getattr(f, "__self__", None),
                                                   _CONTAINER_TYPES):
        return _with_tape(f)  # (also of a subclass: list.append of a list subclass)
    if t is types.BuiltinMethodType and type(getattr(f, "__self__", None)) is np.ufunc:
        # np.add.at, np.add.reduce: numpy's dispatch finds the rule (writes into plain
        # arrays logged)
        return lambda tape, *args, **kwargs: ad.numpy(f, *args, **kwargs)
    if t is types.BuiltinMethodType and type(getattr(f, "__self__", None)) is np.ndarray:
        return constant_array_method(f)  # c.dot(x): numpy's function finds the rule
    if t is TapeBound:
        return _with_tape(f)  # already runs on the tape it was bound to
    if t is operator.itemgetter or t is operator.attrgetter:
        return _with_tape(f)  # structure access (x[k], x.a): the same on duals
    if t is operator.methodcaller:  # obj.name(*args, **kwargs): the method, transformed
        name, args, kwargs = _methodcaller_parts(f)
        return lambda tape, obj: rev(getattr(obj, name))(tape, *args, **kwargs)
    if t is np.vectorize:
        return _vectorized(f)
    if is_numpy_callable(f):  # numpy's dispatch finds the array rules (lists made arrays)
        return lambda tape, *args, **kwargs: ad.numpy(f, *args, **kwargs)
    if t is functools.partial:  # D of a partial application: partial application of D
        inner, bound_args, bound_kwargs = rev(f.func), f.args, f.keywords
        return lambda tape, *args, **kwargs: inner(tape, *bound_args, *args,
                                                   **{**bound_kwargs, **kwargs})
    if isinstance(t, type) and t.__module__ != "builtins" and not isinstance(f, type):
        call = _python_method(t, "__call__")  # a callable object of a user class
        if call is not None:
            inner = rev(call)
            return lambda tape, *args, **kwargs: inner(tape, f, *args, **kwargs)
    try:
        wrapper = _WRAPPERS.get(f)
    except TypeError:
        return _guarded(f)
    if wrapper is None:
        if isinstance(f, type) and dataclasses.is_dataclass(f) and _generated_init(f) \
                and hasattr(f, "__post_init__"):
            try:
                wrapper = _dataclass_constructor(f)
            except AstadError as exc:
                wrapper = _guarded(f, _reason(exc))
        elif f in _STRUCTURAL or _is_structural_class(f):
            wrapper = _with_tape(f)
        elif isinstance(f, type) and _plain_constructor(f):
            wrapper = _construct(f)
        else:
            wrapper = _guarded(f)
        _WRAPPERS[f] = wrapper
    return wrapper


publish("rev", rev)


# -- user classes: dunder operators and properties, transformed -----------------------
_METHODS: dict = {}


def _python_method(cls, name):
    """``cls``'s own Python method ``name`` (from its MRO), or None for builtins."""
    key = (cls, name)
    try:
        return _METHODS[key]
    except KeyError:
        pass
    method = None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            found = klass.__dict__[name]
            method = found if type(found) is types.FunctionType else None
            break
    _METHODS[key] = method
    return method


OPERATOR_UFUNCS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
                   operator.truediv: np.true_divide}


def user_binary(tape, a, b, name, reflected, op):
    """``a op b`` for a user class: its ``__op__`` (or ``b``'s ``__rop__``) transformed,
    as Python would choose them; anything else by Python's own operator."""
    if type(a) in ARRAY_DUALS or type(b) in ARRAY_DUALS or type(a) is np.ndarray:
        ufunc = OPERATOR_UFUNCS.get(op)
        if ufunc is not None and compiled_elementwise is not None:  # (its commonest cases)
            result = compiled_elementwise(ufunc, (a, b))
            if result is not NotImplemented:
                return result
        return op(a, b)  # numpy's dispatch finds the array rule (arrays.py)
    method = _python_method(type(a), name)
    if method is not None:
        result = rev(method)(tape, a, b)
        if result is not NotImplemented:
            return result
    method = _python_method(type(b), reflected)
    if method is not None and type(b) is not type(a):
        result = rev(method)(tape, b, a)
        if result is not NotImplemented:
            return result
    return op(a, b)


def user_unary(tape, a, name, op):
    method = _python_method(type(a), name)
    return rev(method)(tape, a) if method is not None else op(a)


def getattr_(tape, obj, name):
    """``obj.name`` where ``name`` may be a property: its getter runs transformed."""
    prop = None
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            prop = klass.__dict__[name]
            break
    if type(prop) is property and type(prop.fget) is types.FunctionType:
        return rev(prop.fget)(tape, obj)
    return getattr(obj, name)


publish("python_method", _python_method)
publish("user_binary", user_binary)
publish("user_unary", user_unary)
publish("getattr", getattr_)




# -- builtins that call functions: they call the transformed versions ------------------
class TapeBound(functools.partial):
    """A transformed function with its tape bound: callable as the original is."""


def bind(tape, fn):
    """``fn`` as a plain callable that runs its transformed version on this tape."""
    if type(fn) is types.FunctionType and fn.__code__ in GENERATED_CODE:
        return fn  # a lambda or def of differentiated code: already on this tape
    if not callable(fn) or type(fn) is TapeBound:
        return fn
    bound = TapeBound(rev(fn), tape)
    bound.tape_bound = True  # an instance dict: functools.partial(bound, ...) won't flatten it
    return bound


def _calls_functions(name, original, positions, keywords=("key",)):
    def rule(tape, *args, **kwargs):
        args = [bind(tape, a) if k in positions else a for k, a in enumerate(args)]
        for key in keywords:
            if kwargs.get(key) is not None:
                kwargs[key] = bind(tape, kwargs[key])
        return original(*args, **kwargs)
    rule.__name__ = name
    define(name, rule, original)


_calls_functions("map", builtins.map, {0})
_calls_functions("filter", builtins.filter, {0})
_calls_functions("sorted", builtins.sorted, set())
_calls_functions("min", builtins.min, set())
_calls_functions("max", builtins.max, set())
_calls_functions("reduce", functools.reduce, {0})
_calls_functions("partial", functools.partial, {0})
_calls_functions("accumulate", itertools.accumulate, {1}, ("func",))
_calls_functions("starmap", itertools.starmap, {0})


# -- D of a Python function: its entry, built once and kept while it is current ---------------
_building: set = set()  # functions being transformed now, by this thread (under LOCK)


def transformed(fn, preaccumulate: bool = True, as_method: bool = False) -> Entry:
    """The entry of ``fn`` (compile/entry.py), built now if it has none or if it is no
    longer current (a global it resolved has changed, its ``__code__`` was replaced).

    ``as_method``: the tape is the second parameter, after ``self`` (``rev``)."""
    entry = cached(fn, preaccumulate, as_method)
    if entry is not None:
        return entry
    with LOCK:
        entry = CACHE.get((id(fn), preaccumulate, as_method))
        if entry is None or entry.function() is not fn or not entry.is_current(fn):
            restore_filename(fn)  # (code that travelled by value: as building it does)
            key = (fn.__code__, preaccumulate, as_method)
            template = BY_CODE.get(key)  # (a lambda made again: its code written once)
            entry = rebound(template, fn) if template is not None else None
            if entry is None:
                entry = build(fn, preaccumulate, as_method)
                if len(BY_CODE) > 4096:  # (code made at run time without end: exec)
                    BY_CODE.clear()
                made = template_of(entry, fn)
                if made is not None:  # (a function with defaults makes none: the
                    BY_CODE[key] = made  # template of another of its code is kept)
            store(fn, entry, preaccumulate, as_method)
    return entry


def build(fn, preaccumulate: bool = True, as_method: bool = False) -> Entry:
    """The pipeline (compile/pipeline.py) on ``fn``, its callees resolved by ``Callees``."""
    with LOCK:
        _building.add(fn)
        try:
            return pipeline.build(fn, preaccumulate, as_method, Callees)
        finally:
            _building.discard(fn)


def readable_source(fn, entry: Entry, preaccumulate: bool, helpers: bool = True) -> str:
    """What ``f.source`` shows for ``fn`` (compile/render.py): the paper's transform first
    (``preaccumulate=False``), then what runs, then (``helpers``) the code of each helper
    it calls (compile/helpers.py)."""
    text = render.readable_source(entry, transformed(fn, False) if preaccumulate else None)
    return text + helper_source(entry, transformed) if helpers else text


class Callees:
    """D of the callables a function calls by a global name, resolved when it is
    transformed, so a call costs one Python call instead of an ``ad.rev`` lookup:

    - a dataclass or named tuple (D is the class itself): called as written;
    - the function itself (a recursion): its transformed version, directly;
    - another plain Python function: its transformed version, built now (a function
      still being built, as in a mutual recursion, is left to ``ad.rev``).

    Each answer depends on the global binding (recorded by transform), on no rule being
    registered for the callee later: its record), and on the callee's own code and
    dependencies: if any changes, the caller is rebuilt as a whole."""

    def __init__(self, fn, preaccumulate: bool, as_method: bool, names: Names):
        self.fn, self.preaccumulate, self.as_method = fn, preaccumulate, as_method
        self.names = names
        self.functions: dict = {}  # name in generated code -> transformed function
        self._named: dict = {}  # id(callee) -> that name
        # the plain functions whose D this code calls, for .source (compile/helpers.py):
        # (weakref, preaccumulate, line of the first call), in the order they are met
        self.helpers: list = []

    def __call__(self, callee, line=None):
        try:
            no_rule = [(RECORDS, callee, RECORDS.get(callee, MISSING))]
        except TypeError:  # unhashable
            return None
        if calls_as_is(callee):
            return CALL_AS_IS, no_rule
        if not resolvable_function(callee):
            return None
        decorated = getattr(callee, "_astad_transformed", None)  # its own preaccumulate
        preaccumulate = True if decorated is None else \
            getattr(getattr(decorated, "__self__", None), "_preaccumulate", None)
        if preaccumulate is None:  # not api.DiffFunction's: leave it to ad.rev
            return None
        code_of = [(weakref.ref(callee), "__code__", callee.__code__)]
        if callee is self.fn:
            if self.as_method or preaccumulate != self.preaccumulate:
                return None
            return self.names.factory_def, no_rule
        if callee in _building:  # (a mutual recursion: still a helper to show)
            self._note(callee, preaccumulate, line)
            return None
        try:
            entry = transformed(callee, preaccumulate)
        except Exception:  # noqa: BLE001 (ad.rev meets the same error when it is called)
            return None
        self._note(callee, preaccumulate, line)
        name = self._named.get(id(callee))
        if name is None:
            name = self._named[id(callee)] = self.names.fresh(f"D_{callee.__name__}")
            self.functions[name] = entry.taped
        return name, no_rule + code_of + entry.dependencies

    def _note(self, callee, preaccumulate: bool, line) -> None:
        if all(ref() is not callee for ref, _, _ in self.helpers):  # (the first call's line)
            self.helpers.append((weakref.ref(callee), preaccumulate, line))
