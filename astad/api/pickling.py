"""Decorated functions in other processes: pickling, and Dask's deterministic tokens.

What travels is the user's function and the options it was decorated with, never the
machinery (transformed code, caches, weak references, locks): the receiving process
rebuilds that on first use, from the same source.

- A decorated function that can be imported by name (``module.qualname`` gives it back)
  pickles by reference, with plain ``pickle`` as with ``cloudpickle``, like any function.
  Its ``.grad``, ``.value_and_grad`` and ``.vjp`` are bound methods of its
  ``api.DiffFunction``, which pickles as ``machinery(fn, argnums, preaccumulate, None)``:
  on the other side ``fn`` is imported and its own machinery returned.
- One defined in ``__main__``, a notebook or a closure travels by value with cloudpickle:
  cloudpickle rebuilds the function (code, globals, closure, ``__dict__``), and the
  ``DiffFunction`` in its ``__dict__`` is rebuilt unfinished (``DiffFunction.__getattr__``
  finishes it when first used, once the function is whole). A new process has no copy of
  a notebook cell or of a script on another machine, so the source text of the files the
  function reaches that the other side may lack (``needs_source``) travels with it and is
  put in ``linecache`` (IPython keeps cells there the same way), where ``inspect`` finds
  it. A closure of an importable module needs none: its module's file is there. Since
  cloudpickle 3.1.3 a code object travels with the file name ``<dynamic-code>``; the
  bundle also names the file of every code object that travels by value (by name, first
  line and bytecode), and astad gives a function its file name back before reading its
  source (``front.source.restore_filename``).

Function transforms (``astad.grad(f, argnums=...)`` and the like, api/transforms.py) use the
same mechanism: their ``__reduce__`` is ``transform_reduction(factory, fn, options)``,
which pickles the importable factory (the transform's class), the user's function (by
reference, or by value with its source) and the options, and rebuilds with
``factory(fn, **options)``; ``transform_token`` is their ``__dask_tokenize__``.
"""
from __future__ import annotations

import copyreg
import functools
import hashlib
import linecache
import os
import sys
import threading
import types

from ..core.escape import code_names
from ..front.source import TRAVELLED, code_identity, restore_filename

__all__ = ["rebuild_transform", "transform_reduction", "transform_token",
           "function_token", "importable", "source_bundle", "install_sources"]


# -- by reference or by value ---------------------------------------------------------------
def importable(obj) -> bool:
    """Does ``obj`` pickle by reference: is it what its module's attribute at its qualified
    name gives (``Model.energy`` through the class), in a module that is not ``__main__``
    and not registered with cloudpickle to travel by value?"""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module_name or not qualname or module_name in ("__main__", "__mp_main__") \
            or "<locals>" in qualname:
        return False
    if _registered_by_value(module_name):
        return False
    found = sys.modules.get(module_name)
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 (a property or __getattr__ of the user's may raise)
        return False
    return found is obj


def _registered_by_value(module_name: str) -> bool:
    cloudpickle = sys.modules.get("cloudpickle")
    if cloudpickle is None:
        return False
    by_value = cloudpickle.list_registry_pickle_by_value()
    parts = module_name.split(".")
    return any(".".join(parts[:k]) in by_value for k in range(1, len(parts) + 1))


# -- the source that travels with a function pickled by value --------------------------------
def needs_source(fn) -> bool:
    """May a process that unpickles ``fn`` be unable to read its source? Yes for
    ``__main__`` (a script, perhaps not on that machine, or a notebook), for a module not
    imported here or registered with cloudpickle to travel by value, and for code whose
    file does not exist (a notebook cell, ``exec``); no for an importable module's
    functions, closures included: the other side imports the module, from its file."""
    module_name = getattr(fn, "__module__", None)
    if not module_name or module_name in ("__main__", "__mp_main__") \
            or module_name not in sys.modules or _registered_by_value(module_name):
        return True
    code = getattr(fn, "__code__", None)
    return code is not None and not os.path.isfile(code.co_filename)


_MAX_REACHED = 2000  # objects walked at most (a guard against pathological namespaces)


def _functions_in(value) -> list:
    """The Python functions and classes a global, closure cell or default may hand on."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if f is not None]
    if isinstance(value, (types.FunctionType, type)):
        return [value]
    if getattr(type(value), "astad_method", False):  # a decorated method (api/methods.py)
        return [value.function]
    return []


def source_bundle(fn) -> dict:
    """What the other side needs to transform ``fn`` and what it calls: ``files``,
    ``{filename: lines}`` of ``fn``'s file and of the files of every function and class it
    reaches by name (globals, closure, defaults, methods, recursively) whose source the
    other side may not have (``needs_source``); ``codes``, the file of each code object of
    the functions among them that travel by value, by ``code_identity`` (cloudpickle sends
    their code without its file name: front/source.py restores it)."""
    files: dict = {}
    codes: list = []
    seen: set = set()
    stack = [fn]
    while stack and len(seen) < _MAX_REACHED:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            restore_filename(obj)  # (a function that travelled here, passed on)
            if not importable(obj):
                codes += _code_files(obj.__code__)
        needed = needs_source(obj)
        if obj is not fn and not needed:
            continue  # the other side imports it, with its file
        if isinstance(obj, type):
            if obj.__module__ == "builtins":
                continue
            for value in vars(obj).values():
                stack += _functions_in(value)
            continue
        code = obj.__code__
        if needed and code.co_filename not in files:
            lines = linecache.getlines(code.co_filename)
            if lines:
                files[code.co_filename] = list(lines)
        namespace = obj.__globals__
        for name in code_names(code):
            if name in namespace:
                stack += _functions_in(namespace[name])
        for cell in obj.__closure__ or ():
            try:
                stack += _functions_in(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        for default in (obj.__defaults__ or ()) + tuple((obj.__kwdefaults__ or {}).values()):
            stack += _functions_in(default)
    return {"files": files, "codes": codes}


def _code_files(code: types.CodeType) -> list:
    """``(code_identity, filename)`` of ``code`` and of the code objects nested in it
    (inner functions, lambdas)."""
    found = [(code_identity(code), code.co_filename)]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _code_files(const)
    return found


def install_sources(bundle: dict | None) -> None:
    """Put source text that travelled with a function into ``linecache`` (unless the same
    text is there already), as IPython does for notebook cells: an entry without a
    modification time is never checked against the disk, so it stays. Note the files of
    the code objects that travelled (``source.TRAVELLED``)."""
    if not bundle:
        return
    for filename, lines in bundle["files"].items():
        if linecache.getlines(filename) != lines:
            linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
    TRAVELLED.update(bundle["codes"])


# -- the machinery of a decorated function (api/diff.py: DiffFunction.__reduce__) -----------
def bundle_for(fn):
    """``source_bundle(fn)`` for a function that travels by value, else None."""
    if fn is None or importable(fn):
        return None
    bundle = source_bundle(fn)
    return bundle if bundle["files"] or bundle["codes"] else None


# -- function transforms (astad.grad(f) and the like) ---------------------------------------
def rebuild_transform(factory, fn, options: dict, sources=None):
    """The transform ``factory(fn, **options)``, rebuilt where it was unpickled."""
    install_sources(sources)
    return factory(fn, **options)


def transform_reduction(factory, fn, options: dict) -> tuple:
    """``__reduce__`` of a transform made by ``factory(fn, **options)`` (api/transforms.py):
    the importable factory, the options, and ``fn`` by reference or by value; a Python
    function that travels by value takes its source along, as a decorated one does."""
    function = _python_function(fn)
    return rebuild_transform, (factory, fn, dict(options), bundle_for(function))


def transform_token(factory, fn, options: dict) -> tuple:
    """``__dask_tokenize__`` of such a transform."""
    if isinstance(fn, types.FunctionType):
        identity = function_token(fn)
    else:  # a bound method, a partial, another transform, a callable object
        from dask.base import normalize_token  # (only Dask asks for a token)
        identity = normalize_token(fn)
    return ("astad", f"{factory.__module__}.{factory.__qualname__}", identity,
            sorted(options.items(), key=lambda item: item[0]))


def _python_function(fn):
    """The Python function a callable runs (through bound methods and partials)."""
    while True:
        if isinstance(fn, types.FunctionType):
            return fn
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif isinstance(fn, functools.partial):
            fn = fn.func
        else:
            return None


# -- Dask's tokens --------------------------------------------------------------------------
def function_token(fn) -> tuple:
    """What identifies ``fn`` for Dask, the same in every process and after unpickling: an
    importable function by its module, name and code; any other by its content (code,
    closure, defaults and the globals it reads, by Dask's own tokens), so that two
    closures over different data never share a token. (Dask's default, the bytes of
    cloudpickle, depends on which equal strings happen to be one object, which unpickling
    changes.)"""
    if importable(fn):
        return ("reference", fn.__module__, fn.__qualname__, code_digest(fn.__code__))
    from dask.base import normalize_token  # (only Dask asks for a token)

    seen = _tokenizing.__dict__.setdefault("ids", set())
    if id(fn) in seen:  # a recursion through a global: named, not entered again
        return ("recursion", fn.__qualname__)
    seen.add(id(fn))
    try:
        namespace = fn.__globals__
        reads = [(name, _value_token(namespace[name], normalize_token))
                 for name in sorted(code_names(fn.__code__)) if name in namespace]
        closure = [_value_token(cell.cell_contents, normalize_token)
                   if _filled(cell) else "<empty>" for cell in fn.__closure__ or ()]
        return ("value", fn.__module__, fn.__qualname__, code_digest(fn.__code__),
                normalize_token(fn.__defaults__), normalize_token(fn.__kwdefaults__),
                closure, reads)
    finally:
        seen.discard(id(fn))


_tokenizing = threading.local()


def _value_token(value, normalize_token):
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, types.FunctionType):
        return function_token(value)
    if isinstance(value, type) and not importable(value):
        return ("class", value.__module__, value.__qualname__,
                [(name, _value_token(member, normalize_token))
                 for name, member in sorted(vars(value).items())
                 if isinstance(member, types.FunctionType)])
    return normalize_token(value)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (reading an empty cell raises)
    except ValueError:
        return False
    return True


def diff_token(diff) -> tuple:
    """``DiffFunction.__dask_tokenize__``."""
    return ("astad.reverse_diff", function_token(diff.fn), diff._argnums,
            diff._preaccumulate)


def code_digest(code: types.CodeType) -> str:
    """A digest of what a code object does, equal in every process (``marshal`` output
    depends on reference counts, and a frozenset's order on the string hash seed)."""
    digest = hashlib.sha256()

    def feed(code):
        digest.update(code.co_code)
        for part in (code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                     (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                      code.co_flags)):
            digest.update(repr(part).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                feed(const)
            elif isinstance(const, frozenset):
                digest.update(repr(sorted(map(repr, const))).encode())
            else:
                digest.update(repr(const).encode())

    feed(code)
    return digest.hexdigest()


# -- what does not travel -------------------------------------------------------------------
def _refuse_pullback(pullback):
    raise TypeError(
        "an astad Pullback cannot be pickled: it holds the tape of one forward pass, which "
        "lives in the process that ran it. Send the arguments instead and call .vjp (or "
        ".grad) where the pullback is used")


def register_refusals(*pullback_types) -> None:
    for pullback_type in pullback_types:
        copyreg.pickle(pullback_type, _refuse_pullback)
