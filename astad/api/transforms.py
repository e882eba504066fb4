"""Function transforms with JAX's names, signatures and conventions.

    astad.grad(f, argnums=0, has_aux=False)            # x -> df/dx
    astad.value_and_grad(f, argnums=0, has_aux=False)  # x -> (f(x), df/dx)
    astad.vjp(f, *primals, has_aux=False)              # -> (out, vjp_fn[, aux])
    astad.jvp(f, primals, tangents, has_aux=False)     # -> (out, tangent_out[, aux])
    astad.jacfwd(f, argnums=0, has_aux=False)          # forward mode, a column per input
    astad.jacrev(f, argnums=0, has_aux=False)          # reverse mode, a row per output
    astad.jacobian(f, argnums=0, has_aux=False)        # whichever is cheaper for the shapes
    astad.hessian(f, argnums=0)                        # jacfwd(jacrev(f))

``f`` may be any callable astad can follow: a function or lambda, a function decorated
with ``reverse_diff``, a bound method, a ``functools.partial``, a callable object, or the
result of another transform: transforms compose to any depth, because a transformed
function called on differentiated values differentiates them in turn (levels,
runtime/duals.py). As in JAX: ``argnums`` counts positional arguments (an int gives one
result, a tuple a tuple; negative numbers count from the end; repeats are an error);
keyword arguments are never differentiated; ``has_aux=True`` means ``f`` returns
``(value, aux)`` and ``aux`` comes back as it is (with no dual of this differentiation).
"""
from __future__ import annotations

import functools
import types
from math import isfinite
from collections.abc import Callable
from typing import Any

import numpy as np

from ..compile import calls as compiled
from ..compile.entry import CACHE, cached
from ..compile.numba_backend import check_backend, compiled_code, python_function_of
from . import pickling
from ..transform.bindings import MISSING
from .diff import (ALL_GRADIENTS, DiffFunction, Pullback, float_result_gradient,
                   reverse_pass, specialised, specialised_call,
                   specialised_rows, with_defaults)
from ..core.reverse_pass import RowsPullback, ScaledPullback, scalable, snapshot
from ..argnums import ANY_COUNT, argnums_positions  # (shared with reverse_diff)
from ..errors import AstadError, InputError, api_boundary, hide_own_frames
from ..core.forward_pass import forward
from .inline import inline_call, plain_call
from .hvp import HvpKnown, hessian_vector_product, hvp_source, of_floats
from .hvp import floats_code as floats_code_of
from ..specialise.value_kinds import float_sequences, floats
from ..compile.calls import rev as transformed_callable, resolvable_function
from ..runtime.duals import is_nested, running
from ..runtime.tape import native, sweep, sweep_general
from ..data.tree import FUNCTIONS
from ..core.boundary import refuse_functions, seed


def name_of(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


def _no_float_error(fun):
    def error(args, positions):
        shown = ", ".join(repr(args[k]) for k in positions)
        return InputError(
            f"{name_of(fun)}: no argument chosen for differentiation holds a float (got "
            f"{shown or 'no positional arguments'}); astad differentiates with respect to "
            "float values passed positionally")
    return error


def split_aux(out, has_aux: bool, fun):
    """``(out, aux)`` of a result, ``aux`` None without ``has_aux``. A function in ``out``
    is refused: its derivative is not a value (JAX refuses it too)."""
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            # (__class__: a differentiated value answers as its primal, float or ndarray)
            raise InputError(f"{name_of(fun)} was transformed with has_aux=True, so it must "
                             f"return a pair (value, aux); it returned "
                             f"{out.__class__.__name__}")
        out, aux = out
    refuse_functions(out, name_of(fun), FUNCTIONS + (DiffFunction, Transform))
    return out, aux


def reverse(fun, args, kwargs, positions, single=False):
    """One forward pass of reverse mode of any callable ``fun`` (api.reverse_pass)."""
    others = tuple(k for k in range(len(args)) if k not in positions)
    return reverse_pass(transformed_callable(fun), args, kwargs, positions, others, single,
                        _no_float_error(fun))


class _PerTransform:
    """A text of each transform (its name, its doc), made when it is read rather than when
    the transform is made, which a transform made inline does on every call; assigned, it
    is the transform's own. Read on the class: ``class_value`` (the class's docstring)."""

    def __init__(self, make, class_value=None):
        self.make, self.class_value = make, class_value

    def __get__(self, obj, cls=None):
        return self.class_value if obj is None else self.make(obj)


def _name_of_transform(transform) -> str:
    return f"{transform.kind}_{name_of(transform.fun)}"


def _doc_of(transform) -> str:
    return f"astad.{transform.kind} of {name_of(transform.fun)}"


class Transform:
    """The result of a transform: callable like the function it transforms, with
    ``__wrapped__`` naming it. It is picklable when that function is (it pickles the
    function and the options, and is rebuilt on the other side)."""

    kind = ""

    def __init__(self, fun: Callable[..., Any], **options):
        if not callable(fun):
            raise AstadError(f"astad.{self.kind} needs a callable, got {fun!r}")
        self.fun = self.__wrapped__ = fun
        self.options = options

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__doc__ = _PerTransform(_doc_of, cls.__dict__.get("__doc__"))

    def __getattr__(self, name):
        # (only what the instance lacks: its name, made when first read, not per call)
        if name == "__name__" or name == "__qualname__":
            return _name_of_transform(self)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self):
        options = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"astad.{self.kind}({self.fun!r}{options})"

    def __reduce__(self):  # the function (with its source when by value) and the options
        return pickling.transform_reduction(type(self), self.fun, self.options)

    def __dask_tokenize__(self):
        return pickling.transform_token(type(self), self.fun, self.options)


_PLAIN_CALLABLES = (types.FunctionType, functools.partial)


class value_and_grad(Transform):  # noqa: N801 - named as JAX names it
    """``value_and_grad(f, argnums=0, has_aux=False, compile=None)(*args)``:
    ``(f(*args), gradient)``; with ``has_aux``, ``((value, aux), gradient)``.
    ``compile="numba"``: loop code compiled by numba (docs/compiled.md)."""

    kind = "value_and_grad"
    gradient_only = False  # (grad: what the fast call returns)

    def __init__(self, fun, argnums=0, has_aux=False, compile=None):  # noqa: A002
        if compile is None and type(argnums) is int and argnums >= 0 and \
                type(fun) in _PLAIN_CALLABLES:  # (the common form: nothing to check;
            self.fun = self.__wrapped__ = fun    # a transform made inline pays no more)
            self.options = {"argnums": argnums, "has_aux": bool(has_aux)}
            return
        argnums_positions(argnums, ANY_COUNT)  # (its form, checked now)
        backend = check_backend(compile)
        if backend is None:
            super().__init__(fun, argnums=argnums, has_aux=bool(has_aux))
            return
        fun = python_function_of(fun)
        if type(fun) is not types.FunctionType or has_aux:
            raise AstadError(f"astad.{self.kind}(compile={backend!r}) takes a Python "
                             f"function without has_aux, got {fun!r}")
        super().__init__(fun, argnums=argnums, has_aux=False, compile=backend)
        # (the compiled call of a DiffFunction of its own: api/diff.py, numba_backend)
        diff = DiffFunction(fun, argnums, backend=backend)
        diff.call = f"astad.{self.kind}"
        diff.entry = compiled.transformed(fun)
        self._plain = specialised_call(diff, self.gradient_only)
        self._resolvable = fun.__code__

    # (read on the class until set: a transform made inline sets none of them)
    _plain = None  # for a plain Python function: its DiffFunction's fast call
    _called = False  # (the first call takes api/inline.py's shared call)
    _resolvable = None  # the __code__ of ``fun`` found resolvable_function
    _selections = None  # number of arguments -> argnums_positions' answer
    _partial_calls = None  # of a partial: number of arguments -> _of_partial's call
    # what hessian_vector found (api/hvp.py's HvpKnown), used while the entry is current
    hvp_known = None

    def _selection(self, n_args: int):
        if self._selections is None:
            self._selections = {}
        selection = self._selections.get(n_args)
        if selection is None:
            selection = self._selections[n_args] = argnums_positions(
                self.options["argnums"], n_args)
        return selection

    def __call__(self, *args, **kwargs):
        try:  # (inline rather than api_boundary: no frame more on the fast call)
            plain = self._plain
            if plain is not None and self._resolvable is self.fun.__code__:
                return plain(*args, **kwargs)  # (checked in _evaluate, once per code)
            if not self._called and not self.options["has_aux"]:  # (made inline: what is
                out = inline_call(self.fun, self.options["argnums"],  # kept for its function)
                                  self.gradient_only, args, kwargs)
                if out is not MISSING:
                    self._called = True
                    return out
            return self._evaluate(args, kwargs)
        except Exception as error:
            hide_own_frames(error)
            raise

    def _evaluate(self, args, kwargs):
        """What ``__call__`` returns: by a DiffFunction's fast call (``api.specialised_call``)
        for a plain Python function, else by one reverse pass of any callable."""
        fun, has_aux = self.fun, self.options["has_aux"]
        if type(fun) is functools.partial and self._partial_calls is not None:
            call = self._partial_calls.get(len(args))  # (a partial: its function's call)
            if call is not None:
                return call(*fun.args, *args, **kwargs)
        positions, single = self._selection(len(args))
        if not has_aux and type(fun) is functools.partial and not fun.keywords and \
                type(fun.func) is types.FunctionType and resolvable_function(fun.func):
            return self._of_partial(fun, args, kwargs, positions, single)
        if not has_aux and type(fun) is types.FunctionType and resolvable_function(fun):
            argnums = positions[0] if single else positions
            if self._plain is None and not self._called:
                # the first call, where inline_call (a function made again: the code of
                # its kind) did not answer: the call kept per function and argnums
                # (api/inline.py), which a transform made inline finds made (None: the
                # Python runtime)
                self._called = True
                shared = plain_call(fun, argnums, self.gradient_only, self.kind)
                if shared is not None:
                    return shared(*args, **kwargs)
            if self._plain is None:  # called again: kept, so a DiffFunction of its own
                diff = DiffFunction(fun, argnums)
                diff.call = f"astad.{self.kind}"
                diff.entry = compiled.transformed(fun)
                self._plain = specialised_call(diff, self.gradient_only)
            self._resolvable = fun.__code__
            return self._plain(*args, **kwargs)
        pass_ = reverse(fun, args, kwargs, positions, single)
        out, aux = split_aux(pass_.result, has_aux, fun)
        value, gradient = float_result_gradient(pass_, out, name_of(fun), f"astad.{self.kind}")
        if has_aux:
            value = value, pass_.primal_of(aux)
        if self.gradient_only:
            return (gradient, value[1]) if has_aux else gradient
        return value, gradient

    def _of_partial(self, fun, args, kwargs, positions, single):
        """``functools.partial(f, *bound)`` of a plain Python function: ``f``'s fast call
        (its code for floats) with the argnums after the bound arguments, which are
        constants, as they are to JAX. The same numbers as a pass through the partial."""
        bound = len(fun.args)
        shifted = tuple(p + bound for p in positions)
        argnums = shifted[0] if single else shifted
        call = plain_call(fun.func, argnums, self.gradient_only, self.kind)
        if call is None:  # (the Python runtime: a DiffFunction of ``f``)
            diff = DiffFunction(fun.func, argnums)
            diff.call = f"astad.{self.kind}"
            diff.entry = compiled.transformed(fun.func)
            call = specialised_call(diff, self.gradient_only)
        if self._partial_calls is None:
            self._partial_calls = {}
        self._partial_calls[len(args)] = call  # (kept: the partial keeps ``f`` alive)
        return call(*fun.args, *args, **kwargs)


class grad(value_and_grad):  # noqa: N801
    """``grad(f, argnums=0, has_aux=False)(*args)``: the gradient of a float-valued ``f``
    with respect to the positional arguments ``argnums``; with ``has_aux``,
    ``(gradient, aux)``."""

    kind = "grad"
    gradient_only = True

    @property
    def source(self) -> str:
        """The code this gradient runs (``f``'s, as ``.source`` shows it) and, after it,
        the code ``jvp`` of this gradient runs for float arguments (api/hvp.py), then the
        helpers ``f`` calls, as ``f.source`` ends with them."""
        fun = self._function()
        if fun is None:
            raise AttributeError(f"{self!r} has no source: astad transforms Python functions")
        entry = compiled.transformed(fun)
        text = compiled.readable_source(fun, entry, True, helpers=False)
        nested = None if self.options["has_aux"] else hvp_source(entry, fun)
        if nested is not None:
            text = text.rstrip("\n") + "\n\n" + nested.rstrip("\n") + "\n"
        return text + compiled.helper_source(entry, compiled.transformed)

    def _function(self):
        """The Python function this gradient is of (a @reverse_diff function's own)."""
        fun = self.fun
        if type(fun) is DiffFunction:  # (a @reverse_diff function: the one it decorates)
            fun = fun.fn
        return fun if type(fun) is types.FunctionType and resolvable_function(fun) else None

    def hessian_vector(self, primals, tangents):
        """``jvp(self, primals, tangents)`` by the code written for floats when ``f`` has
        it (api/hvp.py: one reverse pass over forward mode's code), else None."""
        known = self.hvp_known
        backend = self.options.get("compile")
        if known is not None and cached(known[0]) is known[1]:  # still current
            fun, entry, floats_code, n = known[:4]
            if floats_code is not None and len(primals) == n and \
                    floats(*primals, *tangents):
                return of_floats(floats_code, *self._selection(n), primals, tangents)
            return hessian_vector_product(entry, fun, *self._selection(len(primals)),
                                          primals, tangents, backend)
        fun = self._function()
        if self.options["has_aux"] or fun is None:
            return None
        entry = compiled.transformed(fun)
        out = hessian_vector_product(entry, fun, *self._selection(len(primals)), primals,
                                     tangents, backend)
        built = entry.hvp
        if built:  # (None: no code written for this function)
            plans = built[1]
            floats_code = floats_code_of(entry, fun, len(plans), backend)
            n = len(plans)
            self.hvp_known = HvpKnown(fun, entry, floats_code, n, entry.code,
                                      entry.dependencies, *self._selection(n))
        return out


class _VjpFunction:
    """The pullback ``vjp`` returns: a cotangent shaped like the output in, a tuple of
    cotangents (one per primal) out; it may be called any number of times."""

    def __init__(self, pass_, out):
        self._pass, self._out = pass_, out

    @api_boundary
    def __call__(self, cotangent):
        pass_ = self._pass
        adjoint, arrays = [0.0] * len(pass_.tape), {}
        seed(self._out, cotangent, adjoint, arrays, level=pass_.tape)
        return pass_.gradients(adjoint, arrays, sweep_general if is_nested() else sweep)


class _Taped:
    """What a ScaledPullback of ``astad.vjp`` runs for a cotangent it cannot scale (nan,
    inf, an array): reverse mode's pass of ``fun`` (its DiffFunction, made then)."""

    def __init__(self, fun, n: int):
        self.fun, self.n = fun, n

    def _forward(self, args, kwargs):
        return DiffFunction(self.fun, tuple(range(self.n)))._forward(args, kwargs)


def _float_vjp(fun, primals):
    """``vjp`` of a plain function of floats and lists of floats returning a float (or a
    tuple of floats) by the code written for them (as ``f.vjp`` runs it): the value and
    a pullback scaling the gradient (summing the outputs' scaled gradients); None where
    that code does not apply."""
    if type(fun) is not types.FunctionType or not resolvable_function(fun):
        return None
    for p in primals:
        t = type(p)
        if t is not float and t is not np.float64 and not (t is list and floats(*p) and p) \
                and not (t is np.ndarray and p.ndim == 1 and p.dtype == np.float64):
            return None  # (ints, other arrays, structures: the pass, as JAX's vjp)
    entry = compiled.transformed(fun)
    out = specialised(entry, fun, primals, ALL_GRADIENTS, current=True)
    if out is None:  # (a tuple of floats: each output's gradient, a pullback summing them)
        out = specialised_rows(entry, fun, primals)
        if out is None:
            return None
        return out[0], RowsPullback(_Taped(fun, len(primals)),
                                    tuple(map(snapshot, primals)), *out)
    if type(out[0]) is not float and type(out[0]) is not np.float64 or \
            not scalable(out[1]):
        return None
    pullback = ScaledPullback(_Taped(fun, len(primals)), tuple(map(snapshot, primals)),
                              out[1])
    return out[0], pullback


@api_boundary
def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False):
    """``(out, vjp_fn)`` (with ``has_aux``: ``(out, vjp_fn, aux)``): ``vjp_fn(ct)`` gives
    one cotangent per primal, as a tuple, for a cotangent ``ct`` shaped like ``out``."""
    if not has_aux and primals:
        found = _float_vjp(fun, primals)
        if found is not None:
            return found
    pass_ = reverse(fun, primals, {}, tuple(range(len(primals))))
    out, aux = split_aux(pass_.result, has_aux, fun)
    value = pass_.primal_of(out)
    function = _VjpFunction(pass_, out)
    function.tape_length = Pullback(pass_).tape_length
    if has_aux:
        return value, function, pass_.primal_of(aux)
    return value, function


def _zero_tangent(value):
    """The tangent of a constant the forward code for floats takes (a float's 0.0, a list
    of floats' list of them); None for what it takes no tangent of."""
    if type(value) is float:
        return 0.0
    if float_sequences((value,), ()):  # (lists, tuples, 1-d arrays of float64)
        return [0.0] * len(value)
    return None


def _finite(tangent) -> bool:
    """Is the forward code's tangent (a float, or a tuple of them for a tuple returned)
    finite throughout?"""
    if type(tangent) is tuple:
        return all(map(_finite, tangent))
    return isfinite(tangent)


@api_boundary
def jvp(fun: Callable[..., Any], primals, tangents, has_aux: bool = False,
        compile: str | None = None):  # noqa: A002
    """``(out, tangent_out)`` (with ``has_aux``: ``(out, tangent_out, aux)``): ``f`` at
    ``primals`` and its directional derivative along ``tangents`` (a sequence of the
    same length and structures as ``primals``; None is zero), by forward mode.
    ``compile="numba"``: forward mode's code for floats compiled (docs/compiled.md)."""
    backend = check_backend(compile)
    if backend is not None:
        fun = python_function_of(fun)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise InputError("jvp takes the primals and the tangents as two tuples (as in JAX: "
                         "astad.jvp(f, (x,), (v,)))")
    if len(primals) != len(tangents):
        raise InputError(f"jvp got {len(primals)} primals and {len(tangents)} tangents; give "
                         "one tangent per primal")
    outermost = not has_aux and not running.stack
    if outermost and type(fun) is grad:
        out = fun.hessian_vector(primals, tangents)  # api/hvp.py, or None
        if out is not None:
            return out
    if outermost and type(fun) is types.FunctionType:
        given = tangents  # (None is a zero: the float code's, a float's or a list's)
        if any(t is None for t in tangents):
            given = tuple(_zero_tangent(p) if t is None else t
                          for p, t in zip(primals, tangents))
        entry = cached(fun) or (compiled.transformed(fun) if resolvable_function(fun)
                                        else None)  # (cached: it was resolvable)
        code = None if entry is None else \
            compiled_code(entry, fun, backend, "forward", entry.forward)  # (None: why)
        full = None if code is None else with_defaults(fun, tuple(primals), entry.arity)
        if full is not None:
            omitted = full[len(primals):]  # (the defaults: constants, a zero tangent each)
            try:  # specialise/forward.py: no dual
                out = code(*full, *given, *map(_zero_tangent, omitted))
            except Exception:  # noqa: BLE001 (it only reads its arguments: the forward
                out = None  # duals run and raise the error at the user's line)
            # (None: not every primal and tangent is a float; a tangent that is not
            # finite may be a zero tangent through an infinite partial: the duals decide)
            if out is not None and _finite(out[1]):
                return out
    pass_ = forward(transformed_callable(fun), tuple(primals), {},
                    tuple(range(len(primals))), tuple(tangents))
    out, aux = split_aux(pass_.result, has_aux, fun)
    value, tangent = pass_.primal_of(out), pass_.tangent_of(out)
    if has_aux:
        return value, tangent, pass_.primal_of(aux)
    return value, tangent


if native is not None:  # the float cases compiled (runtime/_jvp.c), the rest by jvp above
    jvp = native.CompiledJvp(jvp, CACHE, grad, running, MISSING, HvpKnown)


class BoundJvp:
    """``f.jvp(primals, tangents, **kwargs)`` of a decorated function ``f``: ``jvp`` of
    ``f``, its keyword arguments constants."""

    __slots__ = ("function",)

    def __init__(self, function):
        self.function = function

    @api_boundary
    def __call__(self, primals: tuple, tangents: tuple, **kwargs: Any) -> tuple[Any, Any]:
        """``(value, tangent)`` by forward mode: the function at ``primals`` (its
        positional arguments) and its directional derivative along ``tangents`` (one per
        primal, the same structures; None is zero). Keyword arguments are constants."""
        function = functools.partial(self.function, **kwargs) if kwargs else self.function
        machinery = getattr(self.function, "_astad_transformed", None)
        backend = getattr(getattr(machinery, "__self__", None), "backend", None)
        if backend is not None and not kwargs:  # (compile=: its compiled forward code)
            return jvp(function, primals, tangents, compile=backend)
        return jvp(function, primals, tangents)



__all__ = ["grad", "value_and_grad", "vjp", "jvp", "argnums_positions", "Transform",
           "BoundJvp"]
