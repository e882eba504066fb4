"""Float numpy arrays as differentiable values: one dual and one tape entry per array op.

D of a float array is the array plus one tape index (an extension beyond the paper: its
duals are per scalar). An array operation appends ONE tape entry whose backward step is
an array operation, ``(backward, parents, context)``; the sweep (runtime.py) calls it
with the cotangents. Scalar duals and array duals mix freely (``w * x``, ``x[i]``,
``np.array([a, b])``).

Array cotangents live in a dict beside the scalar adjoint list (``arrays``, slot ->
ndarray), so the scalar sweep is untouched. An array stored there is owned by the sweep
(copied when first stored, unless the rule that made it keeps no other reference), so
rules may add into it in place.

numpy calls need no rewriting: ``ArrayDual`` (and ``Dual``) implement numpy's dispatch
protocols (``__array_ufunc__``, ``__array_function__``), so ``np.sin(x)``, ``np.sum(x)``,
``x @ w`` find their rules in ``ARRAY_RULES`` and record on the tape of the gradient call
running in this thread. A numpy function without a rule raises an error naming it.
The rules themselves are in ``rules/array.py`` (how rules are given; element-wise
functions, reductions), ``rules/array_shapes.py`` (shapes, joining, indexing, the operators
and methods of ArrayDual) and ``rules/array_linalg.py`` (products, linear algebra, einsum);
users add their own with ``astad.register_vjp`` or ``astad.register_elementwise``.
"""
from __future__ import annotations

import numpy as np

from ..errors import AstadError, NotDifferentiableError, user_location
from ..rules.lazy import rule_for as lazy_rule_for
from .tape import Dual, PrimalView, current, new_dual

# numpy callable (ufunc or function) -> rule(tape, *args, **kwargs)
ARRAY_RULES: dict = {}


class ArrayDual(PrimalView):
    """A differentiated float array: its value ``v`` (an ndarray) and tape index ``i``."""

    __slots__ = ("v", "i")
    __array_priority__ = 100.0

    def __init__(self, v, i):
        self.v = v
        self.i = i

    # shape and friends: from the primal
    shape = property(lambda self: self.v.shape)
    ndim = property(lambda self: self.v.ndim)
    size = property(lambda self: self.v.size)
    dtype = property(lambda self: self.v.dtype)

    def __len__(self):
        return len(self.v)

    def __bool__(self):
        return bool(self.v)

    def __iter__(self):
        for k in range(len(self.v)):
            yield self[k]

    def __array__(self, dtype=None, copy=None):
        raise AstadError(
            "a differentiated array was converted to a plain array by code astad cannot "
            "follow (np.asarray, or a C function), which would lose its derivative")

    def __float__(self):
        raise AstadError("float() of a differentiated array in code astad did not transform "
                         "would lose its derivative; use x.item() or x[()] in your function")

    # numpy's dispatch protocols: every numpy call on an array dual comes here
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return dispatch(ufunc if method == "__call__" else (ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return dispatch(func, args, kwargs)

    # comparisons give plain bool arrays: control flow and masks follow the primal
    def __lt__(self, other):
        return self.v < primal_of(other)

    def __le__(self, other):
        return self.v <= primal_of(other)

    def __gt__(self, other):
        return self.v > primal_of(other)

    def __ge__(self, other):
        return self.v >= primal_of(other)

    def __eq__(self, other):
        return self.v == primal_of(other)

    def __ne__(self, other):
        return self.v != primal_of(other)

    __hash__ = None

    def __setitem__(self, index, value):
        raise AstadError(
            "assigning into a differentiated array (x[i] = ...) is not supported: build a "
            "new array instead (np.where, np.concatenate, np.stack or x + mask * value)")


def primal_of(value):
    t = type(value)
    if t is ArrayDual or t is Dual:
        return value.v
    return value


def running_tape():
    tape = current.tape
    if tape is None:
        raise AstadError("a differentiated array was used after its gradient call returned")
    return tape


def dispatch(func, args, kwargs):
    """Run numpy ``func`` on arguments holding duals through its rule."""
    if kwargs.get("out") is not None:
        # y += x or np.add(a, x, out=y) writes a differentiated value into an array that
        # cannot hold its derivative (and that other names may alias): refused, not lost
        raise NotDifferentiableError(
            "an in-place numpy operation (y += x, y *= x, or out=) with a differentiated "
            "operand would write a derivative into a plain array; write y = y + x instead",
            *user_location())
    if kwargs.get("where", True) is not True:
        raise NotDifferentiableError(
            "astad does not differentiate numpy's where= argument; select with np.where "
            "or multiply by the mask instead", *user_location())
    rule = ARRAY_RULES.get(func) or lazy_rule_for(func)  # (scipy.special: on first use)
    if rule is None:
        name = getattr(func, "__name__", None) or repr(func)
        if isinstance(func, tuple):
            name = f"{func[0].__name__}.{func[1]}"
        raise NotDifferentiableError(
            f"astad has no derivative for numpy's {name!r} on differentiated arrays; "
            "register one with astad.register_vjp", *user_location())
    return rule(running_tape(), *args, **kwargs)


def _dual_ufunc(self, ufunc, method, *inputs, **kwargs):
    return dispatch(ufunc if method == "__call__" else (ufunc, method), inputs, kwargs)


def _dual_function(self, func, types, args, kwargs):
    return dispatch(func, args, kwargs)


# scalar duals take part in numpy calls too (np.exp(x) for a float x)
Dual.__array_ufunc__ = _dual_ufunc
Dual.__array_function__ = _dual_function


# -- recording ----------------------------------------------------------------------------
def is_active(value) -> bool:
    t = type(value)
    return t is ArrayDual or t is Dual


def new_array(tape, value, backward, parents, context):
    """Record an array-valued result: one entry, one new ArrayDual (or a plain value)."""
    if not parents:
        return value
    d = ArrayDual(value, len(tape))
    tape.append((backward, parents, context))
    return d


def new_scalar(tape, value, backward, parents, context):
    """Record a scalar result of an array operation (a reduction, an element)."""
    if not parents:
        return value
    d = new_dual(Dual)
    d.v = float(value) if type(value) is np.float64 else value  # float arithmetic is faster
    d.i = len(tape)
    tape.append((backward, parents, context))
    return d


def cotangent(adjoint, arrays, k):
    """The cotangent of entry ``k``: an array, or a float for a scalar result."""
    g = arrays.pop(k, None)
    return adjoint[k] if g is None else g


def accumulate(adjoint, arrays, parent, value, fresh=False) -> None:
    """Add cotangent ``value`` into ``parent``'s slot: a float slot for a scalar dual
    (summed), an owned array for an array dual (shaped by the caller).

    ``fresh``: the caller made ``value`` and keeps no other reference to it, so the
    first contribution is stored as it is instead of copied (one pass and one
    allocation fewer per operation on large arrays)."""
    index, shape, dtype = parent
    if shape is None:  # a scalar dual
        adjoint[index] += float(np.sum(value))
        return
    existing = arrays.get(index)
    if existing is None:
        if type(value) is np.ndarray and value.shape == shape:
            arrays[index] = value if fresh and value.dtype == dtype and \
                value.flags.writeable else value.astype(dtype)  # a copy
        else:  # a broadcast copy
            owned = arrays[index] = np.empty(shape, dtype)
            owned[...] = value
    else:
        existing += value


def parent_of(value):
    """(slot, shape, dtype) of a dual operand: shape None for a scalar dual."""
    if type(value) is ArrayDual:
        return (value.i, value.v.shape, value.v.dtype)
    return (value.i, None, None)


def unbroadcast(g, shape):
    """Sum ``g`` over the axes numpy broadcast to reach it from ``shape`` (one pass)."""
    if shape is None or (g.shape if type(g) is np.ndarray else np.shape(g)) == shape:
        return g
    g = np.asarray(g)
    lead = g.ndim - len(shape)
    if lead < 0:  # g is a scalar or has fewer axes: numpy broadcasts it on use
        return g
    axes = tuple(range(lead)) + tuple(lead + axis for axis, size in enumerate(shape)
                                      if size == 1 and g.shape[lead + axis] != 1)
    return g.sum(axis=axes).reshape(shape) if axes else g


def interleave_array(value, tape):
    """D of a float array argument: an ArrayDual with one input slot."""
    d = ArrayDual(value, len(tape))
    tape.append(())
    return d


def is_float_array(value) -> bool:
    return type(value) is np.ndarray and value.dtype.kind == "f"
