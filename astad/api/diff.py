"""The public API: ``@reverse_diff`` and the gradient functions it attaches.

Conventions follow JAX and autograd: ``argnums`` chooses positional arguments (an int
gives one gradient, a tuple a tuple; by default all positional parameters, and a
one-parameter function gives its gradient alone), and a gradient has exactly the
structure of its argument.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import inspect
import threading
import types
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

import numpy as np

from ..compile import pipeline as codegen
from ..compile.pipeline import MISSING, unchanged

from .. import display
from . import pickling
from ..argnums import argnums_positions, check_form
from ..runtime.array_dual import ArrayDual, index_of
from ..errors import AstadError, InputError, SignatureError
from ..core.escape import run
from ..runtime.duals import SCALAR_DUALS, Dual, is_nested, level, new_dual, running
from ..runtime.tape import _native, sweep, sweep_and_free, sweep_general
from ..rules.array_writes import UNDO
from ..data.tree import FUNCTIONS, new_object, slot_names
from ..core.boundary import (Interleaving, build_gradient, contains_float, float_gradient, primal,
                        refuse_functions, seed)


_ARG_PATHS = [f"args[{k}]" for k in range(8)]
_finishing = threading.RLock()  # (DiffFunction.__getattr__)


class Pullback:
    """The backward half of ``.vjp``: maps a result cotangent to argument gradients.

    It keeps the tape, so it can be called any number of times. ``tape_length`` is the
    number of tape entries recorded (other than the inputs' slots): one per executed
    primitive float operation with ``preaccumulate=False``, and with preaccumulation one
    per executed float expression, however many operations it holds.
    """

    def __init__(self, forward):
        self._forward = forward
        self.tape_length = len(forward.tape) - forward.n_inputs

    def __call__(self, cotangent: Any) -> Any:
        forward = self._forward
        with _pause_gc():
            adjoint, arrays = [0.0] * len(forward.tape), {}
            seed(forward.result, cotangent, adjoint, arrays, level=forward.tape)
            return forward.gradients(adjoint, arrays, sweep_general if is_nested() else sweep)


class ScaledPullback(Pullback):
    """The pullback of a float result whose gradient the specialised code gave
    (straightline.py, scalarloops.py): a pullback is linear in its cotangent, so
    ``pullback(c)`` is ``c`` times the gradient at 1.0, and no tape is kept. A cotangent
    that is not a finite float or int (nan, inf, a dual of an enclosing level, an array)
    takes the tape as ``Pullback`` does: the forward pass runs on the arguments as they
    were at the call (copied then), once, as does ``tape_length``."""

    def __init__(self, function, args, gradient):
        self._function, self._args, self._gradient = function, args, gradient
        self._taped = None

    def __call__(self, cotangent: Any) -> Any:
        t = type(cotangent)
        if t is float or t is int:
            c = float(cotangent)
            if c - c == 0.0:  # finite (an infinite or nan seed reaches fewer leaves)
                return _scaled(self._gradient, c, {})
        return self._tape()(cotangent)

    def _tape(self) -> Pullback:
        if self._taped is None:
            function, args = self._function, self._args
            with _pause_gc():
                self._taped = Pullback(function._forward(args, {}))
        return self._taped

    @property
    def tape_length(self) -> int:  # type: ignore[override]
        return self._tape().tape_length


def _scaled(gradient, c: float, memo: dict):
    """``gradient`` (floats in lists, tuples and records, constants elsewhere) times
    ``c``, with the same structure and aliasing."""
    t = type(gradient)
    if t is float or t is np.float64:
        return gradient * c
    if t in _PLAIN:
        return gradient
    made = memo.get(id(gradient))
    if made is not None:
        return made
    if t is list:
        made = memo[id(gradient)] = []
        made.extend([g * c if type(g) is float else _scaled(g, c, memo) for g in gradient])
        return made
    if t is tuple:
        return tuple([_scaled(g, c, memo) for g in gradient])
    made = memo[id(gradient)] = new_object(t)  # a record (_scalable)
    made.__dict__.update({name: _scaled(g, c, memo) for name, g in gradient.__dict__.items()})
    return made


def _scalable(gradient) -> bool:
    """Whether ``_scaled`` takes ``gradient``: floats, numpy.float64, plain constants,
    lists, tuples, and records kept in a ``__dict__`` alone (no slots)."""
    t = type(gradient)
    if t is float or t is np.float64 or t in _PLAIN:
        return True
    if t is list:
        return all(type(g) is float for g in gradient) or all(map(_scalable, gradient))
    if t is tuple:
        return all(map(_scalable, gradient))
    return dataclasses.is_dataclass(gradient) and not slot_names(t) and \
        all(map(_scalable, gradient.__dict__.values()))


def _snapshot(value):
    """A copy of an argument of the specialised code (floats, lists, tuples, dataclasses
    in a ``__dict__``) for a later forward pass: its containers copied, its values not."""
    t = type(value)
    if t is list:
        return value[:] if all(type(v) is float for v in value) else list(map(_snapshot,
                                                                               value))
    if t is tuple:
        return tuple(map(_snapshot, value))
    if dataclasses.is_dataclass(value) and hasattr(value, "__dict__") and \
            not isinstance(value, type):
        made = new_object(t)
        made.__dict__.update({name: _snapshot(v) for name, v in value.__dict__.items()})
        return made
    return value  # (a float, an int, a string, None: nothing to copy)


class _Forward:
    """What one forward pass leaves for the backward pass."""

    __slots__ = ("tape", "n_inputs", "result", "plans", "single", "originals", "writes")

    def __init__(self, tape, n_inputs, result, plans, single, originals, writes=()):
        self.tape, self.n_inputs, self.result = tape, n_inputs, result
        self.plans, self.single, self.originals = plans, single, originals
        self.writes = writes  # [(entry index, Write)]: writes into arrays (array_writes.py)

    def value(self):
        return self.primal_of(self.result)

    def primal_of(self, value):
        """``value`` (the result or a part of it) with this call's duals replaced by their
        primals, and copies of the caller's arguments by the arguments themselves."""
        originals = self.originals  # (the Interleaving, until a value is asked for)
        if originals is not None and type(originals) is not dict:
            originals = self.originals = originals.originals()
        return primal(value, originals, self.tape)

    def sweep(self, adjoint, arrays, sweep=sweep, **options):
        """Sweep the tape (``sweep_and_free`` when it is not needed again, runtime.py).
        Writes into arrays are undone as the sweep passes them, so that every entry sees
        the values it saw, and done again after it, so that the arrays end as the
        function left them (array_writes.py)."""
        writes = self.writes
        if not writes:
            sweep(self.tape, adjoint, self.n_inputs, arrays, **options)
            return
        for k, _ in writes:  # a write's entry always runs: it undoes the write
            adjoint[k] = UNDO
        try:
            sweep(self.tape, adjoint, self.n_inputs, arrays, **options)
        finally:
            for _, write in writes:
                write.redo()

    def gradients(self, adjoint, arrays, sweep=sweep):
        """Sweep the tape, then rebuild the gradients (paper: rebuild, Appendix A)."""
        self.sweep(adjoint, arrays, sweep)
        if self.single:
            return build_gradient(self.plans[0], adjoint, arrays)
        return tuple([float_gradient(adjoint[plan]) if type(plan) is int else
                      build_gradient(plan, adjoint, arrays) for plan in self.plans])


def reverse_pass(rev, args, kwargs, positions, others, single, no_float_error) -> _Forward:
    """One forward pass of reverse mode (Figure 7): interleave the arguments at
    ``positions`` (every float leaf a fresh input slot of a new tape), run ``rev``
    (a transformed function, called as ``rev(tape, *args, **kwargs)``) as a level of its
    own, and write the caller's mutable arguments back. ``no_float_error(args,
    positions)`` is the error when no chosen argument holds a float."""
    tape: list = []
    state = None
    dual_args = list(args)
    plans = []
    for k in positions:
        arg = args[k]
        if type(arg) is float:  # the common case, inline
            d = new_dual(Dual)
            d.v = arg
            d.i = len(tape)
            d.t = tape
            tape.append(())
            dual_args[k] = d
            plans.append(d.i)
        else:
            if state is None:
                state = Interleaving(tape)
            dual_args[k], plan = state.interleave(arg, _ARG_PATHS[k] if k < 8
                                                  else f"args[{k}]")
            plans.append(plan)
    n_inputs = len(tape)
    if not n_inputs and not any(contains_float(args[k]) for k in positions):
        raise no_float_error(args, positions)
    if others or kwargs:  # the function may store duals into them: it gets copies
        if state is None:
            state = Interleaving(tape)
        for k in others:
            dual_args[k] = state.copy_constant(args[k])
        kwargs = {name: state.copy_constant(v) for name, v in kwargs.items()}
    # the level this call is: its duals are constants of any differentiation inside it;
    # afterwards the caller's objects hold none of them (leftovers.py)
    running_level = level(tape)
    result = run(rev, tape, state, dual_args, kwargs, running_level)
    return _Forward(tape, n_inputs, result, plans, single,
                    state if state is not None and state.copies else None,
                    running_level.writes)


class DiffFunction:
    """The gradient machinery of one decorated function.

    ``reverse_diff`` does not wrap the user's function in an object with a ``__call__``
    (which would cost extra Python stack per recursion level). It returns a plain function
    with the same code, globals and closure, carrying ``grad``, ``value_and_grad``,
    ``vjp`` and ``source`` as attributes; those are the bound methods of this object.
    """

    def __init__(self, fn, argnums=None, preaccumulate=True):
        if not isinstance(fn, types.FunctionType):
            raise AstadError(f"reverse_diff needs a Python function, got {fn!r}")
        self._fn = fn
        self.__name__ = fn.__name__
        self._argnums = argnums
        self._preaccumulate = bool(preaccumulate)
        self._signature = inspect.signature(fn)
        params = list(self._signature.parameters.values())
        self._positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
        self._has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        self._min_args = sum(1 for p in self._positional if p.default is p.empty)
        self._max_args = float("inf") if self._has_varargs else len(self._positional)
        self._positions_cache: dict = {}
        self._select: dict = {}  # n_args -> _selection(n_args), for the specialised code
        self._entry = None  # the transformed function, revalidated on every call
        self._super = None  # its version for a method using zero-argument super() (_rev)
        if argnums is not None:
            check_form(argnums)  # (JAX's reading, as the function transforms: argnums.py)

    def decorated(self):
        """A function that runs ``fn``'s own code and carries the gradient attributes.

        Everything it carries pickles (``__reduce__``): with cloudpickle, a function from
        ``__main__`` or a notebook travels by value with its ``__dict__``."""
        fn = self._fn
        wrapper = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                                     fn.__defaults__, fn.__closure__)
        functools.update_wrapper(wrapper, fn)
        wrapper.__kwdefaults__ = fn.__kwdefaults__
        wrapper.grad = specialised_call(self, True)
        wrapper.value_and_grad = specialised_call(self, False)
        wrapper.vjp = self.vjp
        wrapper.jvp = self.jvp
        # From now on the gradient follows the function callers see: if its __code__ is
        # replaced (IPython's autoreload), the transformation is rebuilt from the new code.
        self._fn = wrapper
        self._entry = codegen.transformed(wrapper, self._preaccumulate)  # now: errors show early
        self._rev(self._entry)
        wrapper.source = codegen.readable_source(wrapper, self._entry, self._preaccumulate)
        wrapper._astad_transformed = self._transformed
        # a notebook shows the original and generated code (display.html); a bound
        # method, not display.attach's closure over a weak reference, which cannot pickle
        wrapper._repr_html_ = self._repr_html_
        wrapper.__dask_tokenize__ = self.__dask_tokenize__  # (Dask reads it with getattr)
        return wrapper

    @classmethod
    def unfinished(cls, fn, argnums, preaccumulate: bool) -> DiffFunction:
        """The machinery of decorated ``fn``, set up on first use (``__getattr__``): ``fn``
        may still be being unpickled, its defaults, closure and globals not yet there."""
        diff = cls.__new__(cls)
        diff._fn, diff._argnums, diff._preaccumulate = fn, argnums, bool(preaccumulate)
        return diff

    def __getattr__(self, name):
        # only an unfinished DiffFunction lacks attributes: finish it now (once, for all
        # threads: a Dask worker may run several tasks of one function at once)
        if name.startswith("__") and name != "__name__" or "_fn" not in self.__dict__:
            raise AttributeError(name)
        with _finishing:
            if "_signature" not in self.__dict__:
                finished = DiffFunction(self._fn, self._argnums, self._preaccumulate)
                finished._entry = codegen.transformed(self._fn, self._preaccumulate)
                state = dict(finished.__dict__)
                signature = state.pop("_signature")  # the mark of a finished one: set last
                self.__dict__.update(state)
                self._signature = signature
        return object.__getattribute__(self, name)

    def __reduce__(self):
        return pickling.reduce_machinery(self)

    def __dask_tokenize__(self):
        return pickling.diff_token(self)

    def _repr_html_(self):
        try:
            return display.html(self._fn)
        except Exception:  # noqa: BLE001 (a display must not raise: plain text instead)
            return None

    # -- what generated code calls (calls.rev) -----------------------------------------
    def _transformed(self):
        entry = self._entry  # (one call per recursion level: keep it short)
        if entry.code is self._fn.__code__ and (not entry.dependencies or entry.still_valid()):
            return entry.rev if self._super is None else self._super
        entry = self._entry = codegen.transformed(self._fn, self._preaccumulate)
        return self._rev(entry)

    def _rev(self, entry):
        """``entry.rev``; for a method using zero-argument ``super()`` (which finds the
        object in the first argument), its version taking the tape second, called with the
        tape first."""
        if "__class__" not in self._fn.__code__.co_freevars or \
                "super" not in self._fn.__code__.co_names:
            self._super = None
            return entry.rev
        method = codegen.transformed(self._fn, self._preaccumulate, as_method=True).rev
        self._super = lambda tape, obj, *args, **kwargs: method(obj, tape, *args, **kwargs)
        return self._super

    # -- gradients ---------------------------------------------------------------------
    def _check_call(self, args, kwargs) -> None:
        """Raise the TypeError Python would give for a call that does not fit ``fn``."""
        if kwargs or not self._min_args <= len(args) <= self._max_args:
            try:
                self._signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise SignatureError(f"{self.__name__}(): {exc}") from None

    def _positions(self, n_args: int) -> tuple:
        """Which positional arguments to differentiate (cached per argument count).

        As in JAX, only arguments passed positionally are differentiated; keyword
        arguments are passed through as constants.
        """
        cached = self._positions_cache.get(n_args)
        if cached is not None:
            return cached
        argnums = self._argnums
        if argnums is None:
            positions = tuple(range(n_args))
            single = len(self._positional) == 1 and not self._has_varargs
        else:
            positions, single = argnums_positions(argnums, n_args)
        others = tuple(k for k in range(n_args) if k not in positions)
        self._positions_cache[n_args] = (positions, others, single)
        return positions, others, single

    def _selection(self, n_args: int):
        """Which of the specialised code's gradients (one per argument) to return:
        ``_ALL``, one index (a single ``argnums``) or a tuple of indices."""
        positions, _, single = self._positions(n_args)
        select = positions[0] if single else (
            _ALL if positions == tuple(range(n_args)) else positions)
        self._select[n_args] = select
        return select

    def _no_float_error(self, args, positions):
        shown = ", ".join(repr(args[k]) for k in positions)
        hint = ""
        if len(positions) == 1 and isinstance(args[positions[0]], int) and \
                not isinstance(args[positions[0]], bool):
            hint = f"; pass {float(args[positions[0]])!r} instead of {args[positions[0]]!r}"
        return InputError(
            f"{self.__name__}: no argument chosen for differentiation holds a float "
            f"(got {shown or 'no positional arguments'}); astad differentiates with "
            f"respect to float values passed positionally{hint}")

    def _forward(self, args, kwargs) -> _Forward:
        plan = None if kwargs else self._positions_cache.get(len(args))
        if plan is None:  # (checked once per argument count, then cached)
            self._check_call(args, kwargs)
            plan = self._positions(len(args))
        positions, others, single = plan
        entry = self._entry
        if entry is None or entry.code is not self._fn.__code__ or not entry.still_valid():
            entry = self._entry = codegen.transformed(self._fn, self._preaccumulate)
        return reverse_pass(self._rev(entry), args, kwargs, positions, others, single,
                            self._no_float_error)

    def _specialised(self, args, kwargs):
        """``(value, gradient)`` by the specialised float code (straightline.py,
        scalarloops.py), or None where it does not apply: other kinds of arguments, a
        result that is not a float, an enclosing differentiation, an error (the
        transformed code then runs and raises it at the user's line)."""
        entry = self._entry
        if entry.floats is None or kwargs or len(args) != entry.arity or running.stack or \
                entry.code is not self._fn.__code__ or (
                    entry.dependencies and not unchanged(entry.dependencies, MISSING)):
            return None  # (entry.still_valid and is_nested, inline: this is per call)
        try:
            if entry.tapes:  # scalarloops.py: a tape of entries (see _pause_gc)
                with _pause_gc():
                    out = entry.floats(*args)
            else:  # straightline.py: no tape at all
                out = entry.floats(*args)
        except Exception:  # noqa: BLE001 (the specialised code only reads its arguments)
            return None
        if out is None:  # the arguments are not of the kinds it was written for
            return None
        select = self._select.get(len(args))
        if select is None:
            select = self._selection(len(args))
        if select is _ALL:
            return out
        if type(select) is int:
            if type(args[select]) not in _PLAIN:  # (else: the error no float gives)
                return out[0], out[1][select]
        elif not all(type(args[k]) in _PLAIN for k in select):
            return out[0], tuple([out[1][k] for k in select])
        return None

    def vjp(self, *args: Any, **kwargs: Any) -> tuple[Any, Pullback]:
        """Return ``(value, pullback)``; ``pullback(cotangent)`` gives the gradients."""
        out = self._specialised(args, kwargs)
        if out is not None and _scalable(out[1]):
            return out[0], ScaledPullback(self, tuple(map(_snapshot, args)), out[1])
        with _pause_gc():
            forward = self._forward(args, kwargs)
        refuse_functions(forward.result, self.__name__, FUNCTIONS + (DiffFunction,))
        return forward.value(), Pullback(forward)

    def value_and_grad(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """Return ``(value, gradient)`` of a float-valued function."""
        out = self._specialised(args, kwargs)
        if out is not None:
            return out
        return self._value_and_grad_general(*args, **kwargs)

    def _value_and_grad_general(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        paused = gc.isenabled()  # see _pause_gc
        if paused:
            gc.disable()
        try:
            return self._value_and_grad_taped(args, kwargs)
        finally:
            if paused:
                gc.enable()

    def _value_and_grad_taped(self, args, kwargs):
        forward = self._forward(args, kwargs)
        return float_result_gradient(forward, forward.result, self.__name__)

    def grad(self, *args: Any, **kwargs: Any) -> Any:
        """The gradient of a float-valued function with respect to ``argnums``."""
        return self.value_and_grad(*args, **kwargs)[1]

    def _grad_general(self, *args: Any, **kwargs: Any) -> Any:
        """``grad`` by the general path (what a SpecialisedCall runs when its checks fail)."""
        return self._value_and_grad_general(*args, **kwargs)[1]

    def jvp(self, primals: tuple, tangents: tuple, **kwargs: Any) -> tuple[Any, Any]:
        """``(value, tangent)`` by forward mode: the function at ``primals`` (its
        positional arguments) and its directional derivative along ``tangents`` (one per
        primal, the same structures; None is zero). Keyword arguments are constants."""
        function = functools.partial(self._fn, **kwargs) if kwargs else self._fn
        return transforms.jvp(function, primals, tangents)


def float_result_gradient(forward: _Forward, out, name: str):
    """``(value, gradient)`` for a float result ``out`` of the pass ``forward`` (its
    result, or the first part of it): seed 1.0, sweep, rebuild."""
    tape = forward.tape
    if type(out) not in SCALAR_DUALS and not _zero_dimensional(out) and (
            isinstance(out, bool) or not isinstance(out, float)):
        value = forward.primal_of(out)  # (what the user's function returns, not a dual)
        raise InputError(
            f"{name} returned {type(value).__name__} {_short(value)}; "
            f".grad needs a float result. Use {name}.vjp(...) and call the pullback with a "
            "cotangent shaped like the result")
    adjoint, arrays = [0.0] * len(tape), {}
    if type(out) is Dual and out.t is tape:
        adjoint[out.i] = 1.0
        value = out.v
    else:
        value = forward.primal_of(out)
        if type(out) in SCALAR_DUALS:
            seed(out, 1.0, adjoint, arrays, level=tape)  # (another level's: nothing)
        elif type(out) is ArrayDual and out.t is tape:  # a 0-d float array
            arrays[index_of(out)] = np.ones((), out.v.dtype)
    if is_nested():  # partials may be duals of an enclosing level: recorded there
        return value, forward.gradients(adjoint, arrays, sweep_general)
    return value, forward.gradients(adjoint, arrays, sweep_and_free)


def _zero_dimensional(result) -> bool:
    """A 0-d float array (differentiated or not) counts as a float result."""
    if type(result) is ArrayDual:
        return result.v.ndim == 0
    return type(result) is np.ndarray and result.ndim == 0 and result.dtype.kind == "f"


@contextlib.contextmanager
def _pause_gc():
    """No cyclic garbage collection while a tape is built or swept.

    A tape is millions of small objects (duals, entries) without cycles; every few
    hundred allocations the collector would walk the young ones, and from time to time
    every object in the process. Measured on dot n = 10^5: 1.5 us per element with the
    collector, 1.0 without; 2.1 against 0.95 with torch and jax imported. Cyclic garbage
    the user's code makes meanwhile is collected once the call returns. Nested calls
    leave the collector as the outermost found it."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def specialised_call(diff: DiffFunction, gradient_only: bool):
    """``f.grad`` (``gradient_only``) or ``f.value_and_grad`` of a decorated function:
    with the compiled runtime a ``SpecialisedCall`` (runtime/_specialised.c: the checks of
    ``DiffFunction._specialised``, compiled, around the specialised code, else the general
    path), else the DiffFunction's bound method. Pickles as this call."""
    if _native is None:
        return diff.grad if gradient_only else diff.value_and_grad
    general = diff._grad_general if gradient_only else diff._value_and_grad_general
    return _native.SpecialisedCall(diff, general, running, MISSING, specialised_call,
                                   gradient_only)


_ALL = "all"  # (a marker: every gradient, in argument order)
_PLAIN = frozenset({int, bool, str, type(None)})  # never differentiated: no float in them


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
                 preaccumulate: bool = True) -> GradientFunction[P, T]: ...


@overload
def reverse_diff(fn: None = None, *, argnums: int | tuple[int, ...] | None = None,
                 preaccumulate: bool = True) -> _Decorator: ...


def reverse_diff(fn: Any = None, *,
                 argnums: int | tuple[int, ...] | None = None,
                 preaccumulate: bool = True) -> Any:
    """Decorate ``fn`` so that ``fn.grad``, ``fn.value_and_grad``, ``fn.vjp`` and
    ``fn.source`` are available; calling ``fn`` still runs the original code.

    Use bare (``@reverse_diff``) or with options (``@reverse_diff(argnums=(0, 2))``).
    ``preaccumulate=False`` records one tape entry per primitive operation instead of one
    per float expression (slower; the paper's plain algorithm, useful for teaching).
    The function is transformed at decoration, so unsupported syntax is reported at once.
    On a method (also a classmethod or staticmethod, either side of ``@reverse_diff``),
    ``obj.f.grad(x)`` differentiates the arguments after ``obj`` (``methods.py``); a bound
    method ``obj.f`` is accepted too.
    """
    if fn is None:
        return functools.partial(reverse_diff, argnums=argnums, preaccumulate=preaccumulate)
    return methods.decorate(fn, argnums, preaccumulate)


from . import methods  # noqa: E402  (methods.py builds on DiffFunction)
from . import transforms  # noqa: E402  (transforms.py builds on this module)

pickling.register_refusals(Pullback, ScaledPullback)
