"""One reverse pass (the paper's Figure 7): interleave the arguments, run the transformed
function on a tape, and from the tape, for any cotangent of the result, one sweep and
the gradients rebuilt (Appendix A). ``reverse_pass`` runs the forward half; its
``ReversePass`` keeps what the backward half needs; ``Pullback`` is that backward half
as users get it from ``.vjp``, called any number of times.
"""
from __future__ import annotations

import dataclasses
import gc
import math
from typing import Any

import numpy as np

from ..data.tree import new_object, short, slot_names
from ..errors import InputError, api_boundary
from ..runtime.array_dual import ArrayDual, index_of
from ..runtime.duals import SCALAR_DUALS, Dual, is_nested, level, new_dual
from ..runtime.tape import UNDO, sweep, sweep_and_free, sweep_general
from .boundary import (Interleaving, argument_gradient, contains_float, float_gradient,
                       primal, seed)
from .escape import run

_ARG_PATHS = [f"args[{k}]" for k in range(8)]
PLAIN = frozenset({int, bool, str, type(None)})  # never differentiated: no float in them


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

    @api_boundary
    def __call__(self, cotangent: Any) -> Any:
        forward = self._forward
        with pause_gc():
            adjoint, arrays = [0.0] * len(forward.tape), {}
            seed(forward.result, cotangent, adjoint, arrays, level=forward.tape)
            return forward.gradients(adjoint, arrays, sweep_general if is_nested() else sweep)


class ScaledPullback(Pullback):
    """The pullback of a float result whose gradient the specialised code gave
    (specialise/straight_line.py, specialise/loops.py): a pullback is linear in its cotangent, so
    ``pullback(c)`` is ``c`` times the gradient at 1.0, and no tape is kept. A cotangent
    that is not a finite float or int (nan, inf, a dual of an enclosing level, an array)
    takes the tape as ``Pullback`` does: the forward pass runs on the arguments as they
    were at the call (copied then), once, as does ``tape_length``."""

    def __init__(self, function, args, gradient):
        self._function, self._args, self._gradient = function, args, gradient
        self._taped = None

    @api_boundary
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
            with pause_gc():
                self._taped = Pullback(function._forward(args, {}))
        return self._taped

    @property
    def tape_length(self) -> int:  # type: ignore[override]
        return self._tape().tape_length


class RowsPullback(ScaledPullback):
    """The pullback of a tuple (or list) of floats whose every output's gradient the
    specialised code gave (its rows): ``pullback(c)`` is the sum of ``c[k]`` times row
    ``k``, a None or zero cotangent adding nothing, and no tape is kept. A cotangent of
    another kind (another container, a number that is not finite, an array, a dual of an
    enclosing level) takes the tape, as ``ScaledPullback``'s does."""

    def __init__(self, function, args, values, rows):
        super().__init__(function, args, None)
        self._kind, self._rows = type(values), rows
        # (a vector's cotangent is a float array: its elements numpy.float64)
        self._numbers = (float, int, np.float64) if self._kind is np.ndarray else (float, int)

    @api_boundary
    def __call__(self, cotangent: Any) -> Any:
        rows, numbers = self._rows, self._numbers
        if type(cotangent) is self._kind and len(cotangent) == len(rows) and (
                self._kind is not np.ndarray or cotangent.shape == (len(rows),) and
                cotangent.dtype == np.float64):
            total = None
            for c, row in zip(cotangent, rows):
                t = type(c)
                if c is None or t in numbers and c == 0:
                    continue
                if t not in numbers or not -math.inf < c < math.inf:
                    break  # (not a finite number: the tape)
                term = _scaled(row, float(c), {})
                total = term if total is None else _added(total, term)
                if total is None:
                    break  # (a structure the sum does not take: the tape)
            else:
                if total is None and rows:  # (every output's cotangent zero or None:
                    return _zeroed(rows[0], {})  # the tape's zeros, no tape)
                if total is not None:
                    return total
        return self._tape()(cotangent)


def _zeroed(gradient, memo: dict):
    """A gradient of ``gradient``'s structure and aliasing, every float 0.0: what the
    sweep gives for a zero cotangent (it skips a zero adjoint, an infinite partial
    too)."""
    t = type(gradient)
    if t is float or t is np.float64:
        return 0.0 if t is float else np.float64(0.0)
    if t is np.ndarray:
        return np.zeros_like(gradient)
    if t in PLAIN:
        return gradient
    if t is tuple:
        return tuple([_zeroed(g, memo) for g in gradient])
    made = memo.get(id(gradient))
    if made is not None:
        return made
    if t is list:
        made = memo[id(gradient)] = []
        made.extend([_zeroed(g, memo) for g in gradient])
        return made
    made = memo[id(gradient)] = new_object(t)  # a record (scalable)
    made.__dict__.update({name: _zeroed(g, memo) for name, g in gradient.__dict__.items()})
    return made


def _added(a, b):
    """The sum of two gradients of one structure (floats in lists and tuples, None or a
    constant elsewhere), or None for any other structure."""
    t = type(a)
    if t is not type(b):
        return None
    if t is float or t is np.float64 or t is np.ndarray and a.shape == b.shape:
        return a + b
    if a is None or t in PLAIN:
        return a
    if (t is list or t is tuple) and len(a) == len(b):
        items = [_added(x, y) for x, y in zip(a, b)]
        if any(item is None and x is not None for item, x in zip(items, a)):
            return None
        return items if t is list else tuple(items)
    return None


def _scaled(gradient, c: float, memo: dict):
    """``gradient`` (floats in lists, tuples and records, constants elsewhere) times
    ``c``, with the same structure and aliasing."""
    t = type(gradient)
    if t is float or t is np.float64 or t is np.ndarray:  # (an array: a vector's rows)
        return gradient * c
    if t in PLAIN:
        return gradient
    if t is tuple:  # (the gradients of a call's floats, the common case)
        return tuple([g * c if type(g) is float else _scaled(g, c, memo)
                      for g in gradient])
    made = memo.get(id(gradient))
    if made is not None:
        return made
    if t is list:
        made = memo[id(gradient)] = []
        made.extend([g * c if type(g) is float else _scaled(g, c, memo) for g in gradient])
        return made
    made = memo[id(gradient)] = new_object(t)  # a record (scalable)
    made.__dict__.update({name: _scaled(g, c, memo) for name, g in gradient.__dict__.items()})
    return made


def scalable(gradient) -> bool:
    """Whether ``_scaled`` takes ``gradient``: floats, numpy.float64, float64 arrays,
    plain constants, lists, tuples, and records kept in a ``__dict__`` alone (no
    slots)."""
    t = type(gradient)
    if t is tuple:
        return all(type(g) is float or scalable(g) for g in gradient)
    if t is float or t is np.float64 or t in PLAIN:
        return True
    if t is np.ndarray:  # (an array read by element: its gradient, of float64)
        return gradient.dtype == np.float64
    if t is list:
        return all(type(g) is float for g in gradient) or all(map(scalable, gradient))
    return dataclasses.is_dataclass(gradient) and not slot_names(t) and \
        all(map(scalable, gradient.__dict__.values()))


def snapshot(value):
    """A copy of an argument of the specialised code (floats, lists, tuples, dataclasses
    in a ``__dict__``) for a later forward pass: its containers copied, its values not."""
    t = type(value)
    if t is float or t is int:
        return value
    if t is list:
        return value[:] if all(type(v) is float for v in value) else list(map(snapshot,
                                                                               value))
    if t is tuple:
        return tuple(map(snapshot, value))
    if dataclasses.is_dataclass(value) and hasattr(value, "__dict__") and \
            not isinstance(value, type):
        made = new_object(t)
        made.__dict__.update({name: snapshot(v) for name, v in value.__dict__.items()})
        return made
    return value  # (a float, an int, a string, None: nothing to copy)


class ReversePass:
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
        """Sweep the tape (``sweep_and_free`` when it is not needed again, runtime/tape.py).
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
            return argument_gradient(self.plans[0], adjoint, arrays)
        return tuple([float_gradient(adjoint[plan]) if type(plan) is int else
                      argument_gradient(plan, adjoint, arrays) for plan in self.plans])


def reverse_pass(rev, args, kwargs, positions, others, single, no_float_error) -> ReversePass:
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
    # afterwards the caller's objects hold none of them (core/escape.py)
    running_level = level(tape)
    result = run(rev, tape, state, dual_args, kwargs, running_level)
    return ReversePass(tape, n_inputs, result, plans, single,
                    state if state is not None and state.copies else None,
                    running_level.writes)


def float_result_gradient(forward: ReversePass, out, name: str, call: str):
    """``(value, gradient)`` for a float result ``out`` of the pass ``forward`` (its
    result, or the first part of it): seed 1.0, sweep, rebuild. ``call`` is how the user
    asked (``astad.grad``, ``f.value_and_grad``), for the error a result that is not a
    float gets."""
    tape = forward.tape
    if type(out) not in SCALAR_DUALS and not _zero_dimensional(out) and (
            isinstance(out, bool) or not isinstance(out, float)):
        value = forward.primal_of(out)  # (what the user's function returns, not a dual)
        raise not_a_float_result(value, name, call)
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


def not_a_float_result(value, name: str, call: str) -> InputError:
    """The error for a result ``call`` (``f.grad``, ``astad.value_and_grad``) cannot take,
    with the advice that fits the value, in the terms of the API the user called."""
    ref = name if name.isidentifier() else "f"  # (a lambda: <lambda> is no name to write)
    if np.iscomplexobj(value):
        advice = ("a complex result has no gradient (as in JAX): return a real value "
                  "(np.real, np.abs of it), or take its vjp with a complex cotangent")
    elif isinstance(value, (int, np.integer, np.bool_)):  # (bool is an int)
        advice = ("an int or a bool has no derivative (round, len, a comparison, int() "
                  "make one): return a float computed from the arguments")
    elif _one_number(value):
        advice = (f"it holds a single number: return that number ({_the_number(value)}) "
                  "for a float result")
    else:  # (the pullback of the API called: the transforms', or the decorated function's)
        pullback = f"astad.vjp({ref}, *args)" if call.startswith("astad.") else \
            f"{ref}.vjp(*args)"
        advice = (f"for a result that is not a float, {pullback} gives a pullback to call "
                  f"with a cotangent shaped like the result, and astad.jacrev({ref}) the "
                  "Jacobian")
    return InputError(f"{name} returned {type(value).__name__} {short(value)}; {call} needs "
                      f"a float result: {advice}")


def _one_number(value) -> bool:
    if isinstance(value, np.ndarray):
        return value.size == 1 and value.dtype.kind == "f"
    return type(value) in (list, tuple) and len(value) == 1 and isinstance(value[0], float)


def _the_number(value) -> str:
    if isinstance(value, np.ndarray):
        return "result.item(), or result[0] of a 1-element vector" if value.ndim <= 1 else \
            "result.item()"
    return "result[0]"


def _zero_dimensional(result) -> bool:
    """A 0-d float array (differentiated or not) counts as a float result."""
    if type(result) is ArrayDual:
        return result.v.ndim == 0 and not np.iscomplexobj(result.v)
    return type(result) is np.ndarray and result.ndim == 0 and result.dtype.kind == "f"


class pause_gc:  # noqa: N801 - used as a function: ``with pause_gc():``
    """No cyclic garbage collection while a tape is built or swept.

    A tape is millions of small objects (duals, entries) without cycles; every few
    hundred allocations the collector would walk the young ones, and from time to time
    every object in the process. Measured on dot n = 10^5: 1.5 us per element with the
    collector, 1.0 without; 2.1 against 0.95 with torch and jax imported. Cyclic garbage
    the user's code makes meanwhile is collected once the call returns. Nested calls
    leave the collector as the outermost found it. (A class, not a generator's context
    manager: that cost 1.3 us a call, more than a tiny function's whole gradient.)"""

    __slots__ = ("paused",)

    def __enter__(self):
        self.paused = gc.isenabled()
        if self.paused:
            gc.disable()

    def __exit__(self, *exc):
        if self.paused:
            gc.enable()
