"""Values that are not differentiated arrays meeting numpy: lists and floats passed to
numpy functions, numpy's scalar types, and the numpy scalar a dual may stand for.

- A list or tuple holding differentiated values, passed to a numpy function, is made a
  differentiated array first (the rule of ``np.array``), so the function follows the
  array rules, as numpy itself converts the list (``np.exp(xs)``,
  ``np.concatenate([xs, ys])``, ``x.dot(ws)``); a scalar dual is made a 0-d array where
  numpy would not dispatch on it (``np.full(3, x)``). numpy never builds an object
  array of duals silently: a result holding duals in an object array is refused.
- numpy's scalar types applied to differentiated values convert them as numpy does
  (``np.float64(x)``, ``np.float32(W)``: a differentiable conversion; ``np.int64(W[:,
  -1])``: integers, no derivative).
- A scalar dual whose primal is a numpy scalar (an element of a float array, a
  reduction, a ``numpy.float64`` argument) has numpy's scalar attributes: ``dtype``,
  ``item()``, ``tolist()``, ``astype``, ``round``, and numpy's functions as methods.
"""
from __future__ import annotations

import types

import numpy as np

from ..errors import NotDifferentiableError, user_location
from ..registry import define, publish, record
from ..runtime.array_dual import (ARRAY_DUALS, accumulate, cotangent, dispatch,
                                  new_array, parent_of, primal_of, ufunc_at_once,
                                  compiled_elementwise)
from ..runtime.array_rows import add_rows
from ..runtime.duals import (DUAL_TYPES, SCALAR_DUALS, Dual, NestedDual, forward_dual,
                             full_primal, reverse_dual, running)
from .array_shapes import array_from, new_or_same
from .array_writes import plain_change
from ..runtime.tape import BATCHED_BACKWARDS


# -- a scalar dual as a 0-d array --------------------------------------------------------
def as_array(x):
    """``np.asarray(x)`` of a scalar: a 0-d array (numpy's own conversion); of a dual of
    an enclosing level (forward mode's linear rule calls it on the primal), through its
    rule at that level."""
    if type(x) in SCALAR_DUALS:
        return dispatch(as_array, (x,), {})
    return np.asarray(x)


def _as_array_backward(adjoint, arrays, k, parents, context):
    (parent,) = parents
    accumulate(adjoint, arrays, parent, cotangent(adjoint, arrays, k))


def _as_array_rows(adjoint, arrays, k, parents, context, width) -> bool:
    (parent,) = parents  # (the rows of a 0-d array: a vector, the scalar's adjoint)
    return add_rows(adjoint, arrays, k, ((0, parent),), width, lambda g: (g,))


BATCHED_BACKWARDS[_as_array_backward] = _as_array_rows


def _as_array_rule(tape, x):
    value = primal_of(x, tape)  # (a dual of an enclosing level: a 0-d array at its level)
    value = to_array(value) if type(value) in SCALAR_DUALS else np.asarray(value)
    return new_array(tape, value, _as_array_backward, (parent_of(x),), None)


record(as_array).array = _as_array_rule
record(as_array).linear = (0,)  # (forward mode: the conversion is linear)


def to_array(value):
    """A scalar dual as a 0-d array dual; anything else as it is."""
    if type(value) in SCALAR_DUALS:
        return dispatch(as_array, (value,), {})
    return value


# -- lists holding duals ------------------------------------------------------------------
def holds_dual(value) -> bool:
    """Does the list or tuple ``value`` hold a dual, at any depth?"""
    for x in value:
        t = type(x)
        if t in DUAL_TYPES or ((t is list or t is tuple) and holds_dual(x)):
            return True
    return False


# functions whose first argument is a sequence of arrays: each item is an array-like
JOINING = {np.concatenate, np.stack, np.vstack, np.hstack, np.dstack, np.column_stack,
           np.block}
if hasattr(np, "row_stack"):  # (removed in numpy 2.5)
    JOINING.add(np.row_stack)
_ATLEAST_1D = {np.hstack, np.vstack, np.dstack, np.column_stack} | (JOINING - {
    np.concatenate, np.stack, np.block})
# other functions taking sequences of arrays: the positions (and keyword names) of those
# sequences, each item converted on its own (the arrays may differ in shape)
SEQUENCES = {np.select: {0: "condlist", 1: "choicelist"},
             np.linalg.multi_dot: {0: "arrays"}}


def _array_like(value):
    """A list or tuple holding duals as one differentiated array (numpy's conversion)."""
    t = type(value)
    if (t is list or t is tuple) and holds_dual(value):
        return array_from(None, value)
    return value


def _block_items(value):
    """np.block's nested lists as they are, each scalar dual in them a 0-d array (the
    arrays of one list may differ in shape: no list is made one array)."""
    t = type(value)
    if t is list or t is tuple:
        return t(_block_items(x) for x in value)
    return to_array(value)


def _items(func, sequence):
    """The items of a joining function's sequence, each an array (or as it was)."""
    if func is np.block:
        return _block_items(sequence)
    if type(sequence) in ARRAY_DUALS and func in JOINING:  # np.hstack(x): the rows of the
        # array are the items
        sequence = [sequence[k] for k in range(len(sequence))]
    elif not isinstance(sequence, (list, tuple)):
        return sequence
    items = [_array_like(x) for x in sequence]
    if func in _ATLEAST_1D:
        items = [dispatch(np.reshape, (to_array(x), (1,)), {})
                 if type(x) in SCALAR_DUALS else x for x in items]
    return items


def arrays_for(func, args, kwargs):
    """``args`` and ``kwargs`` with each list or tuple holding duals made a differentiated
    array (for a joining function, each item of its sequence), so numpy's dispatch and the
    array rules see arrays, never object arrays of duals."""
    convert = False
    for a in args:
        t = type(a)
        if t is list or t is tuple or (t in ARRAY_DUALS and func in JOINING):
            convert = True
            break
    else:
        for a in kwargs.values():
            if type(a) is list or type(a) is tuple:
                convert = True
                break
    if not convert:
        return args, kwargs
    args = list(args)
    sequences = SEQUENCES.get(func, {})
    if func in JOINING and args:
        sequences = {0: None}
    for k in range(len(args)):
        args[k] = _items(func, args[k]) if k in sequences else _array_like(args[k])
    names = set(sequences.values())
    kwargs = {name: _items(func, v) if name in names else _array_like(v)
              for name, v in kwargs.items()}
    return tuple(args), kwargs


publish("arrays_for", arrays_for)  # (numpy's dispatch, runtime/array_dual.py)


def array_of(tape, obj, dtype=None, **kwargs):
    """``np.array`` / ``np.asarray`` of differentiated values: of a scalar dual, a 0-d
    differentiated array (numpy gives a 0-d array); of lists holding duals, one array
    (rules/array_shapes.array_from)."""
    if type(obj) in SCALAR_DUALS:
        if dtype is not None and np.dtype(dtype).kind != "f":
            return np.array(full_primal(obj), dtype, **kwargs)
        array = to_array(obj)
        return array if dtype is None else array.astype(dtype)
    return array_from(tape, obj, dtype, **kwargs)


def asarray_of(tape, obj, dtype=None, **kwargs):
    """``np.asarray`` (and ``np.asanyarray``, ``np.ascontiguousarray``, ``np.require``) of
    differentiated values: of an array dual, numpy's answer (the array itself, a view of
    it, or a copy: rules/array_views.numpy_memory); else as ``np.array``."""
    if type(obj) in ARRAY_DUALS:
        return dispatch(np.asarray, (obj,) if dtype is None else (obj, dtype), kwargs)
    if isinstance(obj, np.ndarray):  # numpy's answer: the array itself (writes reach it)
        return new_or_same(obj, np.asarray(obj, dtype, **kwargs))
    return array_of(tape, obj, dtype, **kwargs)


# -- calls of numpy callables from differentiated code ---------------------------------------
def _full(shape, fill_value, dtype=None, order="C", **kwargs):
    if type(fill_value) not in SCALAR_DUALS and type(fill_value) not in ARRAY_DUALS:
        return np.full(shape, fill_value, dtype, order, **kwargs)
    if dtype is not None and np.dtype(dtype).kind != "f":
        return np.full(shape, full_primal(fill_value), dtype, order, **kwargs)
    zeros = np.zeros(shape, dtype=dtype or np.result_type(full_primal(fill_value), 0.0))
    return np.add(zeros, fill_value)


def _full_like(a, fill_value, dtype=None, *args, **kwargs):
    if type(fill_value) not in SCALAR_DUALS and type(fill_value) not in ARRAY_DUALS:
        return np.full_like(a, fill_value, dtype, *args, **kwargs)
    shape = kwargs.get("shape")
    return _full(np.shape(full_primal(a)) if shape is None else shape, fill_value,
                 dtype or np.result_type(full_primal(a)))


def _numpy_answer(fn):
    """numpy functions that dispatch on ``like=`` only (np.ascontiguousarray...): on an
    array dual, numpy's answer through their rules (rules/array_views.numpy_memory)."""
    def call(a, *args, **kwargs):
        if type(a) in SCALAR_DUALS:
            a = to_array(a)  # (a 0-d differentiated array, as numpy makes of a scalar)
        if type(a) in ARRAY_DUALS:
            return dispatch(fn, (a,) + args, kwargs)
        return new_or_same(a, fn(a, *args, **kwargs))
    return call


SPECIAL = {np.full: _full, np.full_like: _full_like}
for _fn in (np.asanyarray, np.ascontiguousarray, np.asfortranarray, np.require,
            np.lib.stride_tricks.as_strided):
    SPECIAL[_fn] = _numpy_answer(_fn)  # (ad.numpy(np.f, ...)); called as a value: ad.rev
    define(f"np_{_fn.__name__}", lambda tape, *args, _call=SPECIAL[_fn], **kwargs:
           _call(*args, **kwargs), _fn)


def numpy_call(func, /, *args, **kwargs):
    """``func(*args, **kwargs)`` for a numpy callable called from differentiated code:
    lists holding duals made arrays, numpy's scalar types converting duals, and never an
    object array of duals returned."""
    if type(func) is np.ufunc and len(args) > func.nin:  # outputs given by position
        args, kwargs = args[:func.nin], {**kwargs, "out": tuple(args[func.nin:])}
    if type(func) is np.ufunc and not kwargs:
        if compiled_elementwise is not None:  # (its commonest cases, one call fewer)
            result = compiled_elementwise(func, args)
            if result is not NotImplemented:
                return result
        result = ufunc_at_once(func, args)
        if result is not NotImplemented:
            return result
    elif type(func) is type and issubclass(func, np.generic):
        return scalar_type(func, args, kwargs)
    special = SPECIAL.get(func)
    if special is not None:
        return special(*args, **kwargs)
    if type(func) is _DISPATCHED and not kwargs and args and type(args[0]) in ARRAY_DUALS:
        # numpy would hand this call to the array dual's __array_function__, which is
        # dispatch (lists converted there): called at once, without numpy's protocol
        return dispatch(func, args, kwargs)
    args, kwargs = arrays_for(func, args, kwargs)
    written = plain_targets(func, args, kwargs) if running.stack and (
        kwargs or func in WRITE_FIRST or type(func) is types.BuiltinMethodType) else None
    if written:  # (logged for the sweep: rules/array_writes.plain_change)
        result = plain_change(written[0], _writing(written[1:], func), *args, **kwargs)
    else:
        result = func(*args, **kwargs)
    if type(result) is np.ndarray and result.dtype == object:
        refuse_object_array(func, result)
    return result


_DISPATCHED = type(np.sum)  # numpy's functions that take __array_function__

# numpy functions writing into their first argument
WRITE_FIRST = frozenset({np.put, np.place, np.putmask, np.copyto, np.fill_diagonal,
                         np.put_along_axis, np.random.shuffle})


def plain_targets(func, args, kwargs) -> list:
    """The plain arrays a call of numpy's ``func`` writes into: ``out=``, the first
    argument of np.put, np.copyto, ufunc.at...."""
    out = kwargs.get("out")
    found = list(out) if type(out) is tuple else [out] if out is not None else []
    if args and (func in WRITE_FIRST or getattr(func, "__name__", "") == "at" and
                   type(getattr(func, "__self__", None)) is np.ufunc):
        found.append(args[0])
    return [a for a in found if type(a) is np.ndarray]


def _writing(others, func):
    """``func``, logging its writes into the plain arrays ``others`` as well."""
    if not others:
        return func
    return lambda *args, **kwargs: plain_change(others[0], _writing(others[1:], func),
                                                *args, **kwargs)


def refuse_object_array(func, result) -> None:
    for x in result.flat:
        if type(x) in DUAL_TYPES:
            name = getattr(func, "__name__", None) or repr(func)
            raise NotDifferentiableError(
                f"numpy's {name!r} made an object array holding differentiated values, "
                "whose derivative astad cannot follow; pass it float arrays (np.array(xs) of "
                "the values), or register a derivative with astad.register_vjp",
                *user_location())


# -- numpy's scalar types -----------------------------------------------------------------
def scalar_type(cls, args, kwargs):
    """``np.float64(x)``, ``np.float32(W)``, ``np.int64(W[:, -1])`` on differentiated
    values: a float type converts with derivative 1 (as ``astype``); an integer or bool
    type gives integers (no derivative, as ``int()``); complex is refused."""
    if len(args) != 1 or kwargs or type(args[0]) not in DUAL_TYPES:
        if args and isinstance(args[0], (list, tuple)) and holds_dual(args[0]):
            args = (array_from(None, args[0]),) + tuple(args[1:])
        else:
            return cls(*args, **kwargs)
    value = args[0]
    kind = np.dtype(cls).kind
    if kind == "c":
        raise NotDifferentiableError(f"{cls.__name__}() of a differentiated value: astad "
                                     "differentiates real floats only", *user_location())
    if kind != "f":
        return cls(full_primal(value))
    if type(value) in ARRAY_DUALS:
        return value.astype(cls)
    return with_primal(value, cls)


def with_primal(dual, cls):
    """The scalar dual ``dual`` with its primal converted to the float class ``cls``
    (float, numpy.float64, numpy.float32): the same value as the original's conversion,
    in the same slot (the conversion's derivative is 1, so no tape entry is needed)."""
    inner = dual.v
    v = with_primal(inner, cls) if type(inner) in SCALAR_DUALS else cls(inner)
    if type(dual) is Dual or type(dual) is NestedDual:
        return reverse_dual(v, dual.i, dual.t)
    return forward_dual(v, dual.d, dual.t)


# -- a scalar dual standing for a numpy scalar --------------------------------------------
_NO_DERIVATIVE = {"dtype", "shape", "ndim", "size", "itemsize", "nbytes", "strides",
                  "flags"}


def numpy_scalar_attribute(dual, name):
    """``dual.name`` for a scalar dual whose primal is a numpy scalar, as numpy gives it;
    raises AttributeError where the numpy scalar has no such attribute."""
    primal = full_primal(dual)
    if name in _NO_DERIVATIVE:
        return getattr(primal, name)
    if name == "tolist":
        return lambda: with_primal(dual, float)
    if name == "astype":
        return lambda dtype, *args, **kwargs: scalar_type(np.dtype(dtype).type, (dual,), {})
    if name == "T":
        return dual
    fn = getattr(np, name, None)
    if callable(fn) and hasattr(primal, name):  # x.round(1), x.sum(), x.clip(0, 1)...
        return lambda *args, **kwargs: numpy_call(fn, dual, *args, **kwargs)
    raise AttributeError(f"{type(primal).__name__!r} object has no attribute {name!r}")


publish("numpy_scalar_attribute", numpy_scalar_attribute)  # (ScalarDual.__getattr__)
publish("with_primal", with_primal)
publish("numpy", numpy_call)  # generated code: ad.numpy(np.f, ...) where a dual may reach np.f
# np.array / np.asarray of lists holding duals (numpy cannot dispatch on a list), or of a
# scalar dual: generated code calls these
define("np_array", array_of, np.array)
define("np_asarray", asarray_of, np.asarray)
