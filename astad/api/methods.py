"""Decorated methods: ``obj.f.grad(x)`` differentiates the arguments after ``obj``.

``reverse_diff`` returns a plain function (``api.DiffFunction.decorated``), whose call is
the user's own code with no extra Python frame. A plain function in a class body binds
as Python binds it: ``obj.f`` would be a bound method whose ``.grad`` is the function's,
with ``obj`` missing. So for a function defined in a class body ``reverse_diff`` returns
a ``DiffMethod``, a descriptor:

- ``Model.energy`` (through the class) is the decorated function itself:
  ``Model.energy(obj, x)`` runs the method at no extra cost, and
  ``Model.energy.grad(obj, x)`` differentiates every argument, ``obj``'s own floats too;
- ``obj.energy`` is a bound method (``types.MethodType``) of a copy of the decorated
  function (same code, globals, closure and defaults) whose ``grad``, ``value_and_grad``
  and ``vjp`` are bound to ``obj``: they take the arguments after ``obj``, and ``argnums``
  counts from the first of them, as for JAX's ``grad`` of a bound method.

Why a bound method of a copy: CPython runs a call of a Python function or of a bound
method of one inside the caller's interpreter loop, while a call of any other callable
(a ``functools.partial``, an object with ``__call__``) goes through C, which costs
recursion depth: measured, a recursive method bound through a ``partial`` reached half
the original's depth on Python 3.10 and 3.11 and at most 747 levels on 3.12; bound this
way it reaches the original's depth, in the call and in ``.grad``. The price is paid at
each ``obj.f``: making the copy takes about 20 times a plain method's binding
(``benchmarks/methods.py``). ``Model.f`` costs one descriptor call, then runs the
function directly.

A function is taken to be defined in a class body when its qualified name says so
(``Model.energy``, not ``make.<locals>.f``) or ``reverse_diff`` is called from a class
body. ``@classmethod`` and ``@staticmethod`` may be written above or below
``@reverse_diff``: below, ``reverse_diff`` wraps them itself (``DiffClassMethod``, a
``staticmethod`` of the decorated function); above, a hook that ``reverse_diff`` leaves
in the class body re-wraps them the same way when the class is made (``__set_name__``),
since Python 3.13 no longer lets ``classmethod`` bind the object it wraps. (A class body
whose namespace is not a dict, as ``Enum``'s, gets no hook; nor does ``NamedTuple``, which
sets attributes one by one: on 3.13 write ``@reverse_diff`` above ``@classmethod`` there.)
"""
from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from ..compile import calls as compiled
from ..compile.numba_backend import check_backend, python_function_of
from ..core.reverse_pass import Pullback
from ..errors import AstadError, InputError, api_boundary
from . import diff as api
from .transforms import BoundJvp

_FunctionType, _MethodType, _new_gradients = types.FunctionType, types.MethodType, object.__new__
_NAMES_FROM_NAME = sys.version_info < (3, 11)


def decorate(fn, argnums, preaccumulate: bool):
    """What ``reverse_diff(fn, ...)`` returns."""
    if isinstance(fn, types.MethodType):  # obj.method, Model.a_classmethod, obj.decorated
        method = fn.__func__.__dict__.get("_astad_method") \
            if isinstance(fn.__func__, types.FunctionType) else None
        if method is not None:  # a decorated method through its object
            if method._argnums == argnums and method._preaccumulate == bool(preaccumulate):
                return fn
            return DiffMethod(method.function.__wrapped__, argnums, preaccumulate).bind(
                fn.__self__)
        if not isinstance(fn.__func__, types.FunctionType):
            raise AstadError(f"reverse_diff needs a Python function or method, got {fn!r}")
        return DiffMethod(fn.__func__, argnums, preaccumulate).bind(fn.__self__)
    if isinstance(fn, staticmethod):
        return staticmethod(_decorated(_function_of(fn.__func__), argnums, preaccumulate))
    if isinstance(fn, classmethod):
        return DiffClassMethod(DiffMethod(_function_of(fn.__func__), argnums, preaccumulate))
    if isinstance(fn, (DiffMethod, DiffClassMethod)):
        fn = fn.function
    namespace = _calling_class_body()
    if namespace is not None or _defined_in_class_body(fn):
        if namespace is not None:
            namespace.setdefault("__astad_methods__", _ClassBodyHook())
        return DiffMethod(fn, argnums, preaccumulate)
    return _decorated(fn, argnums, preaccumulate)


def _decorated(fn, argnums, preaccumulate: bool, backend=None):
    """``fn`` decorated: its DiffFunction's function, with ``.jvp`` (api/transforms.py)."""
    wrapper = api.DiffFunction(fn, argnums, preaccumulate, backend).decorated()
    wrapper.jvp = BoundJvp(wrapper)
    return wrapper


def _function_of(fn):
    return fn.function if isinstance(fn, DiffMethod) else fn


def _defined_in_class_body(fn) -> bool:
    owner = getattr(fn, "__qualname__", "").rpartition(".")[0]
    return bool(owner) and not owner.endswith("<locals>")


def _calling_class_body():
    """The namespace of the class body that called ``reverse_diff`` (the first frame
    outside astad), if that is a class body whose namespace is a plain dict."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("astad."):
        frame = frame.f_back
    if frame is None or frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        return None  # a function's frame (reading f_locals would copy it)
    namespace = frame.f_locals
    if type(namespace) is not dict or frame.f_globals is namespace \
            or "__qualname__" not in namespace or "__module__" not in namespace:
        return None  # the module's own namespace, or a metaclass's own mapping (Enum)
    return namespace


class DiffMethod:
    """A decorated function defined in a class body (the module docstring says how it
    binds). Used directly (from the class's ``__dict__``, under ``staticmethod``) it
    behaves as the decorated function ``function``, whose attributes it shows."""

    astad_method = True  # (api/pickling.py: what travels with it is ``function``)

    def __init__(self, fn, argnums=None, preaccumulate: bool = True):
        function = _decorated(fn, argnums, preaccumulate)
        params = list(inspect.signature(function).parameters.values())
        self._setup(function, argnums, preaccumulate, {
            "__name__": function.__name__, "__qualname__": function.__qualname__,
            "__module__": function.__module__, "__doc__": function.__doc__,
            "_n_positional": sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                                 p.POSITIONAL_OR_KEYWORD)),
            "_varargs": any(p.kind == p.VAR_POSITIONAL for p in params)})

    def _setup(self, function, argnums, preaccumulate, attributes: dict) -> None:
        self.function = function
        function._astad_method = self  # (how calls.rev and bind's copies find it)
        self._argnums, self._preaccumulate = argnums, bool(preaccumulate)
        self._views: dict = {}  # n_args (obj included) -> DiffFunction with obj not counted
        self._attributes = attributes
        self.__dict__.update(attributes)

    @classmethod
    def _rebuilt(cls, function, argnums, preaccumulate, attributes):
        """The descriptor of a decorated function that was unpickled: the function's own
        when it was imported, else a new one (``function`` may still be being
        unpickled: its attributes travel on their own)."""
        own = function.__dict__.get("_astad_method")
        if isinstance(own, cls) and own._argnums == argnums \
                and own._preaccumulate == bool(preaccumulate):
            return own
        method = cls.__new__(cls)
        method._setup(function, argnums, preaccumulate, attributes)
        return method

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.function
        return self.bind(obj)

    def bind(self, obj) -> types.MethodType:
        """``obj.f``: a bound method of a copy of the decorated function (the module
        docstring says why a copy) carrying gradient functions bound to ``obj``."""
        function = self.function
        copy = _FunctionType(function.__code__, function.__globals__, function.__name__,
                             function.__defaults__, function.__closure__)
        if function.__kwdefaults__ is not None:
            copy.__kwdefaults__ = function.__kwdefaults__
        gradients = _new_gradients(_Gradients)
        gradients.method, gradients.obj = self, obj
        copy.__dict__ = {
            "grad": gradients.grad, "value_and_grad": gradients.value_and_grad,
            "vjp": gradients.vjp, "jvp": gradients.jvp,
            "source": function.source, "_repr_html_": function._repr_html_,
            "_astad_method": self}
        if _NAMES_FROM_NAME:  # (3.11 and later take the qualified name from the code)
            copy.__qualname__ = function.__qualname__
        copy.__annotations__ = function.__annotations__
        return _MethodType(copy, obj)

    def bound_transformed(self, obj):
        """What ``ad.rev`` (calls.py) gives for ``obj.f`` inside differentiated code: the
        transformed method, with the tape after ``obj``, bound to ``obj`` (a C-level
        bound method: a recursion costs one frame per level, as the original)."""
        function = self.function
        if function.__code__.co_argcount == 0:  # def f(*args): the tape cannot follow obj
            rev = compiled.transformed(function, self._preaccumulate).taped
            return lambda tape, *args, **kwargs: rev(tape, obj, *args, **kwargs)
        return types.MethodType(compiled.transformed(function, self._preaccumulate,
                                                     as_method=True).taped, obj)

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def __getattr__(self, name):
        if name == "function" or "function" not in self.__dict__:
            raise AttributeError(name)  # (while being unpickled)
        return getattr(self.function, name)

    def __repr__(self) -> str:
        return f"<astad method {self.__qualname__}>"

    def __reduce__(self):
        return DiffMethod._rebuilt, (self.function, self._argnums, self._preaccumulate,
                                     self._attributes)

    def view(self, n_args: int):
        """The gradient machinery for a call ``obj.f(*args)`` with ``n_args - 1``
        positional arguments after ``obj``: ``argnums`` shifted past ``obj``."""
        view = self._views.get(n_args)
        if view is None:
            view = api.DiffFunction.unfinished(self.function, self._bound_argnums(n_args),
                                               self._preaccumulate)
            self._views[n_args] = view
        return view

    def _bound_argnums(self, n_args: int):
        n = n_args - 1  # the arguments the user passes after obj
        argnums = self._argnums
        if argnums is None:  # every argument after obj; one parameter: its gradient alone
            single = self._n_positional == 2 and not self._varargs and n == 1
            if n_args == 1 and (self._n_positional > 1 or self._varargs):
                return 1  # (no argument after obj: the call's own error says what is missing)
            if n_args == 1:
                raise InputError(
                    "obj.f.grad(...) differentiates the arguments after the object, and this "
                    "method takes none; differentiate the object's floats with "
                    "Class.f.grad(obj)")
            return 1 if single else tuple(range(1, n_args))
        single = isinstance(argnums, int)
        shifted = []
        for k in (argnums,) if single else argnums:
            position = k + n if k < 0 else k
            if not 0 <= position < n:
                raise InputError(
                    f"argnums {argnums!r} refers to positional argument {k}, but the call "
                    f"passes {n} positional arguments after the object the method is bound "
                    "to (keyword arguments are not differentiated; pass that argument "
                    "positionally)")
            shifted.append(position + 1)
        return shifted[0] if single else tuple(shifted)


class _Gradients:
    """The gradient functions of ``obj.f``, bound to ``obj``: the arguments after ``obj``
    are differentiated, ``argnums`` counted from the first of them."""

    __slots__ = ("method", "obj")

    @classmethod
    def _make(cls, method, obj):
        gradients = cls.__new__(cls)
        gradients.method, gradients.obj = method, obj
        return gradients

    @api_boundary
    def grad(self, *args, **kwargs):
        return self.method.view(len(args) + 1).grad(self.obj, *args, **kwargs)

    @api_boundary
    def value_and_grad(self, *args, **kwargs):
        return self.method.view(len(args) + 1).value_and_grad(self.obj, *args, **kwargs)

    @api_boundary
    def vjp(self, *args, **kwargs):
        return self.method.view(len(args) + 1).vjp(self.obj, *args, **kwargs)

    @api_boundary
    def jvp(self, primals, tangents, **kwargs):
        """Forward mode along ``tangents`` (one per argument after ``obj``, which is a
        constant: its tangent is zero)."""
        return self.method.function.jvp((self.obj, *primals), (None, *tangents), **kwargs)

    def __reduce__(self):
        # as obj.name.grad when that gives them back: it pickles wherever obj does (the
        # function of a class method is not what Model.name gives: not by reference)
        obj, name = self.obj, self.method.__name__
        try:
            again = getattr(obj, name)
        except Exception:  # noqa: BLE001 (the user's __getattr__ or property may raise)
            again = None
        if isinstance(again, types.MethodType) and \
                again.__func__.__dict__.get("_astad_method") is self.method:
            return _gradients_of, (obj, name)
        return _Gradients._make, (self.method, obj)

    def __dask_tokenize__(self):
        from dask.base import normalize_token  # (only Dask asks for a token)

        return ("astad.method", normalize_token(self.method.function),
                normalize_token(self.obj))


def _gradients_of(obj, name):
    return getattr(obj, name).grad.__self__


class DiffClassMethod:
    """``reverse_diff`` of a ``classmethod``: ``Model.f`` and ``obj.f`` are the decorated
    function bound to the class, as ``DiffMethod`` binds an object."""

    astad_method = True

    def __init__(self, method: DiffMethod):
        self.method = method
        self.function = self.__func__ = method.function
        self.__wrapped__ = method.function.__wrapped__
        self.__doc__ = method.function.__doc__

    def __get__(self, obj, owner=None):
        return self.method.bind(type(obj) if owner is None else owner)

    def __repr__(self) -> str:
        return f"<astad classmethod {self.function.__qualname__}>"


class _ClassBodyHook:
    """Left in a class body by ``reverse_diff``; when the class is made, re-wraps the
    decorated functions that ``@classmethod`` or ``@staticmethod`` wrapped afterwards
    (as ``reverse_diff`` wraps them when it is written above them), then removes
    itself."""

    def __set_name__(self, owner, name):
        delattr(owner, name)  # (type() calls __set_name__ over a copy of the namespace)
        for attribute, value in list(vars(owner).items()):
            if isinstance(value, classmethod) and isinstance(value.__func__, DiffMethod):
                setattr(owner, attribute, DiffClassMethod(value.__func__))
            elif isinstance(value, staticmethod) and isinstance(value.__func__, DiffMethod):
                setattr(owner, attribute, staticmethod(value.__func__.function))


P = ParamSpec("P")
Q = ParamSpec("Q")
R = TypeVar("R", covariant=True)
S = TypeVar("S")
T = TypeVar("T")


class GradientFunction(Protocol[P, R]):
    """The type of what ``reverse_diff`` returns, for type checkers: the decorated
    function, with its parameters and result, carrying its gradient functions (which
    take the same parameters) and its generated source. Through an instance (a decorated
    method) the first parameter is bound, as for any method."""

    source: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...
    def grad(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...
    def value_and_grad(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R, Any]: ...
    def vjp(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R, Pullback]: ...
    def jvp(self, primals: tuple[Any, ...], tangents: tuple[Any, ...],
            **kwargs: Any) -> tuple[R, Any]: ...

    @overload
    def __get__(self, obj: None, owner: type | None = None, /) -> GradientFunction[P, R]: ...
    @overload
    def __get__(self: GradientFunction[Concatenate[S, Q], T], obj: S,
                owner: type | None = None, /) -> GradientFunction[Q, T]: ...


class _Decorator(Protocol):
    """What ``reverse_diff(argnums=...)`` returns: a decorator."""

    def __call__(self, fn: Callable[P, T], /) -> GradientFunction[P, T]: ...


@overload
def reverse_diff(fn: Callable[P, T], *, argnums: int | tuple[int, ...] | None = None,
                 preaccumulate: bool = True,
                 compile: str | None = None) -> GradientFunction[P, T]: ...


@overload
def reverse_diff(fn: None = None, *, argnums: int | tuple[int, ...] | None = None,
                 preaccumulate: bool = True, compile: str | None = None) -> _Decorator: ...


@api_boundary
def reverse_diff(fn: Any = None, *,
                 argnums: int | tuple[int, ...] | None = None,
                 preaccumulate: bool = True, compile: str | None = None) -> Any:  # noqa: A002
    """Decorate ``fn`` so that ``fn.grad``, ``fn.value_and_grad``, ``fn.vjp`` and
    ``fn.source`` are available; calling ``fn`` still runs the original code.

    Use bare (``@reverse_diff``) or with options (``@reverse_diff(argnums=(0, 2))``).
    ``preaccumulate=False`` records one tape entry per primitive operation instead of one
    per float expression (slower; the paper's plain algorithm, useful for teaching).
    The function is transformed at decoration, so unsupported syntax is reported at once.
    On a method (also a classmethod or staticmethod, either side of ``@reverse_diff``),
    ``obj.f.grad(x)`` differentiates the arguments after ``obj``; a bound method ``obj.f``
    is accepted too.

    ``compile="numba"`` runs ``grad`` and ``value_and_grad`` of loop code on floats,
    lists of floats and float arrays compiled by numba (docs/compiled.md); what cannot be
    compiled says why in a ``CompileWarning`` at its first call and runs as Python. A
    function decorated with ``numba.njit`` is taken by its Python code (``.py_func``).
    """
    if fn is None:
        return functools.partial(reverse_diff, argnums=argnums, preaccumulate=preaccumulate,
                                 compile=compile)
    backend = check_backend(compile)
    fn = python_function_of(fn)
    if backend is not None:
        if not isinstance(fn, types.FunctionType) or _defined_in_class_body(fn):
            raise AstadError(f"compile={backend!r} takes a plain function (not a method), "
                             f"got {fn!r}")
        return _decorated(fn, argnums, preaccumulate, backend)
    return decorate(fn, argnums, preaccumulate)
