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
import copy
import dataclasses
import inspect
import types

from .errors import AstadError, NotDifferentiableError, SourceUnavailableError
from .primitives import PRIMITIVES, _caller_location, ad
from .structure import contains_dual

# Code objects astad generated: their functions already take part in the transform.
GENERATED_CODE: set = set()

# Builtin types whose methods only store, move or compare values (never compute on them).
_CONTAINER_TYPES = (list, dict, set, frozenset, tuple, str, bytes, range)
# Builtins that only store, move, compare or format values: safe with duals inside.
_STRUCTURAL = {builtins.len, builtins.range, builtins.enumerate, builtins.zip,
               builtins.reversed, builtins.list, builtins.tuple, builtins.dict, builtins.set,
               builtins.frozenset, builtins.sorted, builtins.iter, builtins.next,
               builtins.print, builtins.min, builtins.max, builtins.any, builtins.all,
               builtins.map, builtins.filter, builtins.bool, builtins.str, builtins.repr,
               builtins.format, builtins.hash, builtins.id, builtins.int, builtins.round,
               builtins.getattr, builtins.setattr, builtins.hasattr, builtins.callable,
               builtins.issubclass, builtins.divmod, dataclasses.replace,
               dataclasses.astuple, dataclasses.asdict, copy.copy, copy.deepcopy}


def _with_tape(f):
    def call(tape, *args, **kwargs):
        return f(*args, **kwargs)
    return call


def _guarded(f, reason: str = ""):
    def call(tape, *args, **kwargs):
        if contains_dual(args) or contains_dual(kwargs):
            name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
            why = reason or ("it is not a Python function with readable source, nor a "
                             "registered primitive")
            raise NotDifferentiableError(
                f"a differentiated value is passed to {name!r}, which astad cannot "
                f"differentiate ({why}). Register its derivative with "
                "astad.register_scalar, or pass it only values that do not depend on the "
                "differentiated inputs", *_caller_location())
        return f(*args, **kwargs)
    return call


_WRAPPERS: dict = {}


def _generated_init(cls) -> bool:
    """Is ``cls.__init__`` the one ``dataclass`` wrote (not user code)?"""
    code = getattr(cls.__init__, "__code__", None)
    return code is not None and code.co_filename.startswith("<")


def _dataclass_constructor(cls):
    """Build a dataclass as its generated ``__init__`` would, then run the transformed
    ``__post_init__``: a ``__post_init__`` that computes (normalises, derives a field) is
    differentiated like any other method, on the same tape."""
    signature = inspect.signature(cls)
    fields = dataclasses.fields(cls)
    field_names = {f.name for f in fields}
    initvars = [name for name in signature.parameters if name not in field_names]
    post_init = _transformed_or_raise(cls.__post_init__)

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
        post_init(tape, obj, *[values[name] for name in initvars])
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


def _transformed_or_raise(fn):
    from .codegen import transformed_function
    return transformed_function(fn)


def _reason(exc: AstadError) -> str:
    if isinstance(exc, SourceUnavailableError):
        return "its source cannot be read"
    return str(exc).split("\n")[0].replace("astad cannot differentiate code that uses",
                                            "its source uses")


def rev(f):
    """The transformed version of callable ``f``, taking the tape as first argument."""
    transformed = getattr(f, "_astad_transformed", None)  # an astad-decorated function
    if transformed is not None:
        return transformed()
    try:
        name = PRIMITIVES.get(f)
    except TypeError:  # unhashable callable
        name = None
    if name is not None:
        return getattr(ad, name)
    t = type(f)
    if t in (types.FunctionType, types.MethodType) and \
            getattr(f, "__module__", "").startswith("astad."):
        return _with_tape(f)  # astad's own API (a gradient inside differentiated code)
    if t is types.FunctionType:
        if f.__code__ in GENERATED_CODE:
            return _with_tape(f)
        try:
            return _transformed_or_raise(f)
        except AstadError as exc:
            return _guarded(f, _reason(exc))
    if t is types.MethodType and type(f.__func__) is types.FunctionType:
        try:
            inner = _transformed_or_raise(f.__func__)
        except AstadError as exc:
            return _guarded(f, _reason(exc))
        obj = f.__self__
        return lambda tape, *args, **kwargs: inner(tape, obj, *args, **kwargs)
    if t is types.BuiltinMethodType and type(getattr(f, "__self__", None)) in _CONTAINER_TYPES:
        return _with_tape(f)
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
        else:
            wrapper = _guarded(f)
        _WRAPPERS[f] = wrapper
    return wrapper


ad.rev = rev
