"""Duals, and the differentiation (the level) each one belongs to.

A dual is a value being differentiated. Every running differentiation is a *level*: a
reverse-mode call (``.grad``, ``.vjp``, ``astad.grad``...) whose handle is its tape, or a
forward-mode call (``astad.jvp``...) whose handle is a ``ForwardLevel``. Every dual
carries the handle of its level in ``t``, so derivatives compose (Siskind & Pearlmutter's
perturbation tags; autograd's nested boxes and JAX's trace levels are two other
implementations of the same idea):

- inside an inner differentiation, a dual of an outer one is a *constant* of the inner
  level, and its use is still recorded at the outer level: the inner dual's primal ``v``
  is then itself an outer dual (``NestedDual``), and the local partials the inner rules
  compute are outer duals too, so the outer level sees how they were used;
- a dual whose level is not running (kept from a finished call in a global, a default
  argument, an object) raises ``StaleDualError`` where it is used.

The rules' fast paths (rules/scalar.py, transform/preaccumulate.py) take a ``Dual`` or ``FDual`` of
the level the generated code runs on, whose primal (and tangent) are plain floats, so
they compute with floats only; every other case (a nested primal, a dual of another
level, a vector of tangents) goes through the general rules of rules/scalar_general.py, which
find the innermost level among the operands.

Representations (paper sections 2-3 and 7-8; measured in docs/design-log.md section 3):
- ``Dual``: reverse mode, primal float ``v``, tape index ``i``, level ``t`` (the tape);
- ``FDual``: forward mode, primal float ``v``, tangent float ``d``, level ``t``;
- ``NestedDual`` / ``NestedFDual``: the same with a primal (or tangent) that is not a
  float: a dual of an enclosing level, or a numpy vector of tangents (Jacobians);
- array duals are in array_dual.py.
"""
from __future__ import annotations

import dis
import math
import os
import sys
import threading

import numpy as np

from .. import errors
from ..errors import ASTAD_DIR, NotDifferentiableError, user_location
from ..registry import ad


class StaleDualError(NotDifferentiableError):
    """A differentiated value was used after the differentiation it belongs to ended."""


_set_class = object.__dict__["__class__"].__set__


class PrimalView:
    """What a differentiated value shows of itself: its primal value's text and class, so
    output of the user's code reads as it does without astad, and every way Python code
    asks "what type is this?" answers as for the original value."""

    __slots__ = ()

    # ``isinstance(x, float)``, ``isinstance(x, np.ndarray)``, ``x.__class__ is float``,
    # ``functools.singledispatch`` and ``match x: case numbers.Real():`` read
    # ``__class__`` when the real type does not match (CPython's object_isinstance and
    # abc's __instancecheck__), so a dual answers as its primal value does: float,
    # numpy.float64, numpy.ndarray... ``type(x)`` still gives the dual's own class, which
    # astad's checks use (generated code reads ``type(x)`` through ad.type).
    @property
    def __class__(self):
        return self.v.__class__

    @__class__.setter
    def __class__(self, cls):
        _set_class(self, cls)

    def __repr__(self):
        return repr(self.v)

    def __str__(self):
        return str(self.v)

    def __format__(self, spec):
        return format(self.v, spec)


def _operators(name: str):
    """``__name__`` and ``__rname__`` of a scalar dual: the rule's general form, which
    rules/scalar.py publishes as ``ad.operator_<name>(a, b)`` (looked up at the call: the
    rules sit above this module)."""
    published = "operator_" + name

    def forward(self, other):
        return getattr(ad, published)(self, other)

    def reflected(self, other):
        return getattr(ad, published)(other, self)
    forward.__name__, reflected.__name__ = f"__{name}__", f"__r{name}__"
    return forward, reflected


class ScalarDual(PrimalView):
    """What every scalar dual does, whatever its mode: it behaves as its primal float.

    Comparisons, truth tests, hashing and formatting use the primal value, so control
    flow follows the primal (paper section 3) and untransformed code that only compares,
    sorts, prints or hashes values keeps working. Arithmetic reached from code astad did
    not transform (a property getter, a user class's ``__add__``, ``operator.mul`` passed
    to ``functools.reduce``) goes through the general rules by operator overloading, at
    the level of its operands; numpy functions of it go through numpy's dispatch
    (runtime/array_dual.py). Anything that would silently drop the derivative
    (``float(dual)`` in a C function) raises. The methods that need a rule call it
    through ``ad``, the registry's namespace, when they run.
    """

    __slots__ = ()

    # -- arithmetic from code astad did not transform (transformed code calls the rules)
    __add__, __radd__ = _operators("add")
    __sub__, __rsub__ = _operators("sub")
    __mul__, __rmul__ = _operators("mul")
    __truediv__, __rtruediv__ = _operators("truediv")
    __mod__, __rmod__ = _operators("mod")
    __floordiv__, __rfloordiv__ = _operators("floordiv")
    __pow__, __rpow__ = _operators("pow")

    def __neg__(self):
        return ad.neg(None, self)

    def __pos__(self):
        return ad.pos(None, self)

    def __abs__(self):
        return ad.abs(None, self)

    # -- numpy's protocols: a numpy function of a scalar dual is numpy's dispatch
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return ad.dispatch(ufunc if method == "__call__" else (ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return ad.dispatch(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        """numpy converting a scalar dual to a plain array (np.asarray(x), np.array([x, y])
        in code astad did not transform) would lose its derivative, or make an object array
        of duals that no rule follows: refused. (Generated code converts with the rule of
        np.array instead: rules/numpy_values.py.)"""
        raise conversion_error(
            self, "a differentiated value was converted to a numpy array by code astad did "
            "not transform (np.asarray, np.array of a list), which would lose its derivative")

    def __lt__(self, other):
        return self.v < (other.v if type(other) is type(self) else other)

    def __le__(self, other):
        return self.v <= (other.v if type(other) is type(self) else other)

    def __gt__(self, other):
        return self.v > (other.v if type(other) is type(self) else other)

    def __ge__(self, other):
        return self.v >= (other.v if type(other) is type(self) else other)

    def __eq__(self, other):
        return self.v == (other.v if type(other) is type(self) else other)

    def __ne__(self, other):
        return self.v != (other.v if type(other) is type(self) else other)

    def __hash__(self):
        return hash(self.v)

    def __bool__(self):
        return bool(self.v != 0.0)

    def __copy__(self):  # copy.copy, copy.deepcopy: immutable, as a float
        return self

    def __deepcopy__(self, memo):
        return self

    # Not differentiable: these give ints, exactly as for the primal float.
    def __int__(self):
        return int(self.v)

    def __trunc__(self):
        return math.trunc(self.v)

    def __floor__(self):
        return math.floor(self.v)

    def __ceil__(self):
        return math.ceil(self.v)

    def __round__(self, ndigits=None):
        return round(self.v, ndigits)

    # float's own attributes: the real part of a real number is itself
    @property
    def real(self):
        return self

    @property
    def imag(self):
        return 0.0

    def conjugate(self):
        return self

    def is_integer(self):
        return self.v.is_integer()

    def item(self, *args):
        """x.item() of a dual standing for a numpy scalar (a reduction's result): its value
        as a Python float, in the same slot; of any other scalar dual, itself."""
        primal = full_primal(self)
        if isinstance(primal, np.generic) and type(primal) is not float:
            return ad.with_primal(self, float)
        return self

    def __getitem__(self, index):
        """x[()] of a dual standing for a numpy scalar is itself, x[...] a 0-d array (as
        numpy's); a float is not subscriptable."""
        primal = full_primal(self)
        if not isinstance(primal, np.generic) or type(primal) is float:
            raise TypeError(f"{type(primal).__name__!r} object is not subscriptable")
        if type(index) is tuple and not index:
            return self
        if index is Ellipsis:
            return ad.np_asarray(None, self)
        raise IndexError("invalid index to scalar variable.")

    def __getattr__(self, name):
        if not name.startswith("__") and isinstance(full_primal(self), np.generic):
            return ad.numpy_scalar_attribute(self, name)  # numpy's, for a numpy scalar
        if hasattr(float, name):  # a float method with no rule (x.hex(), ...): refuse
            raise NotDifferentiableError(
                f"float attribute {name!r} of a differentiated value is not supported by "
                "astad", *user_location())
        # what a float says, so that hasattr() and duck typing see a float
        raise AttributeError(f"'float' object has no attribute {name!r}")

    def __float__(self):
        raise conversion_error(
            self, "a differentiated value was converted to a plain float by code astad did not "
            "transform, which would lose its derivative. Call that function on values that "
            "are not differentiated, or register a derivative for it with "
            "astad.register_scalar")

    def __complex__(self):
        raise NotDifferentiableError("complex() of a differentiated value: astad "
                                     "differentiates real floats only", *user_location())


_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]
_INDEX_TRICKS = f"{os.sep}numpy{os.sep}lib{os.sep}_index_tricks"


def conversion_error(value, otherwise: str) -> NotDifferentiableError:
    """The refusal of a dual ``value`` converted to a plain number or array by code astad
    did not transform (numpy's C code, a library), naming the construct where it can be
    seen: an assignment into a plain numpy array, ``np.r_[...]``/``np.c_[...]``; else
    ``otherwise``. A dual of a call that has returned is stale: that is what is wrong
    with it. Located at the user's line."""
    if id(value.t) not in running.depth:
        return stale(value)
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(ASTAD_DIR):
        frame = frame.f_back
    if frame is not None and _INDEX_TRICKS in frame.f_code.co_filename:
        return NotDifferentiableError(
            "np.r_[...] and np.c_[...] make plain arrays of differentiated ones, which would "
            "lose their derivative: join them with np.concatenate, np.hstack, np.stack or "
            "np.column_stack instead", *user_location())
    if frame is not None and frame.f_lasti >= 0 and \
            frame.f_code.co_code[frame.f_lasti] == _STORE_SUBSCR:
        return NotDifferentiableError(
            "a differentiated value assigned into a plain numpy array (y[i] = x) would lose "
            "its derivative: a numpy array holds plain floats. Build the array from the "
            "values instead (np.array([...]) of them, np.stack, np.concatenate, np.where, or "
            "a mask: y + mask * x)", *user_location())
    return NotDifferentiableError(otherwise, *user_location())


class Dual(ScalarDual):
    """Reverse mode: primal ``v`` (a float), tape index ``i``, level ``t`` (its tape)."""

    __slots__ = ("v", "i", "t")

    def __init__(self, v, i: int, t: list):
        self.v = v
        self.i = i
        self.t = t


class NestedDual(Dual):
    """A reverse dual whose primal is not a float (a dual of an enclosing level): the
    rules' float fast paths never take it (they test ``type(a) is Dual``)."""

    __slots__ = ()


class FDual(ScalarDual):
    """Forward mode: primal ``v`` and tangent ``d`` (floats), level ``t``."""

    __slots__ = ("v", "d", "t")

    def __init__(self, v, d, t):
        self.v = v
        self.d = d
        self.t = t


class NestedFDual(FDual):
    """A forward dual whose primal or tangent is not a float: a dual of an enclosing
    level, or a numpy vector of tangents (several directions at once)."""

    __slots__ = ()


new_dual = object.__new__  # dual creation without __init__: measurably faster in hot paths

# The primals the rules' fast paths compute with: a float, or numpy's float64 (a float
# subclass with numpy's own arithmetic: an element of a float array, np.sum(x), a
# numpy.float64 argument), kept so that the value is the original's, of its type.
FAST_PRIMALS = frozenset({float, np.float64})


def reverse_dual(v, i: int, tape: list) -> Dual:
    """A reverse dual of the right class for its primal."""
    d = new_dual(Dual if type(v) in FAST_PRIMALS else NestedDual)
    d.v = v
    d.i = i
    d.t = tape
    return d


def forward_dual(v, d, level) -> FDual:
    """A forward dual of the right class for its primal and tangent."""
    x = new_dual(FDual if type(v) in FAST_PRIMALS and type(d) in FAST_PRIMALS else NestedFDual)
    x.v = v
    x.d = d
    x.t = level
    return x


# ---------------------------------------------------------------------------------------
# Levels

class ForwardLevel:
    """The handle of one forward-mode differentiation (a reverse one's is its tape).

    ``width``: None for one direction (float tangents), else the number of directions of
    a vector of tangents."""

    __slots__ = ("width", "__weakref__")

    def __init__(self, width=None):
        self.width = width


class _Running(threading.local):
    """The differentiations running in this thread, outermost first."""

    def __init__(self):
        self.stack: list = []
        # id(handle) -> 1 + its position in stack (changed in place, never replaced: the
        # compiled element-wise rules hold it, runtime/_elementwise.c)
        self.depth: dict = {}
        # astad's refusals (NotDifferentiableError) made while a differentiation runs, in
        # order: each ends every differentiation running when it was made, even if the
        # user's code caught it (``except Exception:`` around a refused call)
        self.refusals: list = []
        self.writes: dict = {}  # id(handle) -> [(entry index, Write)] (array_writes.py)
        self.hidden: list = []  # the levels outside_levels hides (to name their values)


running = _Running()


def _note_refusal(error) -> None:
    state = running
    if state.stack or state.hidden:  # (hidden: a rule's own code, outside_levels)
        state.refusals.append(error)


errors.note_refusal = _note_refusal


class level:
    """``with level(handle):`` the differentiation ``handle`` runs inside the block.
    ``writes`` then lists the writes into arrays it recorded (array_writes.py). A
    refusal made inside it ends it with that refusal, whatever the code inside caught:
    a caught refusal would otherwise let the function compute a fallback, a silently
    different result (``try: math.gamma(x) except Exception: x * x``)."""

    __slots__ = ("handle", "mark", "writes")

    def __init__(self, handle):
        self.handle = handle
        self.writes: list = []

    def __enter__(self):
        state = running
        key = id(self.handle)
        state.depth[key] = len(state.stack) + 1
        state.stack.append(self.handle)
        state.writes[key] = self.writes
        _IN_SOME_THREAD[key] = self.handle
        self.mark = len(state.refusals)
        return self.handle

    def __exit__(self, exc_type, exc, traceback):
        state = running
        state.stack.pop()
        key = id(self.handle)
        del state.depth[key]
        del state.writes[key]
        _IN_SOME_THREAD.pop(key, None)
        refusals = state.refusals
        if len(refusals) > self.mark:
            refusal = refusals[self.mark]
            if not state.stack:
                refusals.clear()
            if exc is not refusal:  # caught, or replaced by another exception
                raise refusal
        return False


class outside_levels:
    """``with outside_levels():`` code on plain values that runs while differentiations
    are running but is no part of them (a custom rule's own body): inside, none is
    running, so a differentiation it starts itself is the outermost (its arguments are
    not made constants of the others, its results are plain). The state is emptied and
    restored in place (the compiled rules hold its dicts). A refusal made inside is
    raised when it ends, even if the code caught it, as ``level`` does."""

    __slots__ = ("stack", "depth", "writes", "hidden", "mark")

    def __enter__(self):
        state = running
        self.stack, self.depth, self.writes = list(state.stack), dict(state.depth), \
            dict(state.writes)
        self.hidden, self.mark = len(state.hidden), len(state.refusals)
        state.hidden.extend(self.stack)
        state.stack.clear()
        state.depth.clear()
        state.writes.clear()
        return self

    def __exit__(self, exc_type, exc, traceback):
        state = running
        state.stack[:] = self.stack
        state.depth.clear()
        state.depth.update(self.depth)
        state.writes.clear()
        state.writes.update(self.writes)
        del state.hidden[self.hidden:]
        if len(state.refusals) > self.mark and exc is not state.refusals[self.mark]:
            raise state.refusals[self.mark]  # (caught by the rule's code: raised again)
        return False


def is_running(handle) -> bool:
    return id(handle) in running.depth


def is_nested() -> bool:
    """Is any differentiation running in this thread?"""
    return bool(running.stack)


# id(handle) -> handle of every differentiation running in any thread: only to say, of a
# value that is not of this thread's levels, that its call has not returned
_IN_SOME_THREAD: dict = {}


def stale(value):
    if any(value.t is handle for handle in running.hidden):
        return StaleDualError(
            f"a differentiated value ({value!r}) reaches the code of a rule (a custom_vjp's "
            "fwd or bwd, a custom_jvp's rule, the function given to odeint or a root "
            "finder) from a closure, a default or a global, not through the rule's "
            "arguments: its derivative would not be accounted for. Pass it as an argument",
            *user_location())
    if _IN_SOME_THREAD.get(id(value.t)) is value.t:
        return StaleDualError(
            f"a differentiated value ({value!r}) of a gradient or derivative call running in "
            "another thread is used in this one (shared through a global, an object or a "
            "queue?): a call records only what its own thread computes. Pass plain values "
            "between threads (astad.stop_gradient(value), or float(value) of a float)",
            *user_location())
    return StaleDualError(
        f"a differentiated value ({value!r}) is used after the gradient or derivative call "
        "it belongs to has returned (kept in a global, a default argument, an object or a "
        "closure?); its derivative can no longer be recorded. Compute it inside the call, "
        "or use its value with astad.stop_gradient", *user_location())


def depth_of(value) -> int:
    """The depth of ``value``'s level (1 = outermost), or raise if it is not running."""
    depth = running.depth.get(id(value.t))
    if depth is None:
        raise stale(value)
    return depth


SCALAR_DUALS = frozenset({Dual, NestedDual, FDual, NestedFDual})
DUAL_TYPES: set = set(SCALAR_DUALS)  # array duals join it (array_dual.py)


def full_primal(x):
    """The plain value under every level of a dual (what comparisons, ``int()`` and
    ``math.floor`` see of a scalar dual); anything else as it is."""
    while type(x) in DUAL_TYPES:
        x = x.v
    return x


def innermost(values):
    """The handle of the innermost level among the duals in ``values`` (a flat sequence;
    lists and tuples among them are looked into, nested as np.block takes them), or None
    if there is none. A stale dual raises."""
    best, best_depth = None, 0
    depths = running.depth
    for value in values:
        if type(value) in DUAL_TYPES:
            found = [value]
        elif type(value) in (list, tuple):
            found = _duals_in(value)
        else:
            continue
        for dual in found:
            depth = depths.get(id(dual.t))
            if depth is None:
                raise stale(dual)
            if depth > best_depth:
                best, best_depth = dual.t, depth
    return best


def _duals_in(sequence) -> list:
    found = []
    for x in sequence:
        if type(x) in DUAL_TYPES:
            found.append(x)
        elif type(x) in (list, tuple):
            found += _duals_in(x)
    return found


def is_forward(handle) -> bool:
    return type(handle) is ForwardLevel
