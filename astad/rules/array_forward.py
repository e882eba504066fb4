"""Forward mode on numpy: the tangent of an array operation, from the records reverse
mode reads (astad/registry.py).

- an element-wise function, registered by its partials: the sum of partial times tangent;
- a function registered with ``register_jvp``: its jvps;
- a linear function (reshape, sum, concatenate, indexing, ...): itself, applied to the
  tangents (zeros for the constants among its data arguments);
- a multilinear one (matmul, dot, einsum, ...): the sum over its differentiated operands
  of itself with that operand replaced by its tangent;
- a function whose result carries no derivative (argmax, floor, comparisons): its value.
Anything else is an error naming the function, never a tangent dropped.

A vector of tangents (a Jacobian's columns) has one leading axis per direction; rules not
written for it are called once per direction.
"""
from __future__ import annotations

import operator

import numpy as np

from ..errors import NotDifferentiableError, user_location
from ..registry import RECORDS, publish, record
from .array import (NonFinite, all_finite, call_at_enclosing_levels, complex_result, is_numpy,
                    not_differentiable, quietly)
from .array_shapes import take_index
from ..runtime.array_dual import FArrayDual, dispatch, is_complex, plain_array
from ..runtime.duals import DUAL_TYPES, forward_dual

# linear functions: the positions of their data arguments (a sequence there: each item)
for _fn in (np.transpose, np.reshape, np.ravel, np.moveaxis, np.swapaxes, np.squeeze,
            np.expand_dims, np.broadcast_to, np.copy, np.flip, np.cumsum, np.asarray, np.take,
            np.repeat, np.diff, np.sum, np.mean, np.trace, np.concatenate, np.stack, np.vstack,
            np.hstack, take_index):
    record(_fn).linear = (0,)
# multilinear functions: the positions of their operands (() : every argument after the
# first, einsum's subscripts)
for _fn, _positions in ((np.matmul, (0, 1)), (np.dot, (0, 1)), (np.inner, (0, 1)),
                        (np.outer, (0, 1)), (np.einsum, ())):
    record(_fn).multilinear = _positions


def _strip(value, handle):
    if type(value) in DUAL_TYPES and value.t is handle:
        return value.v
    if type(value) in (list, tuple):
        return type(value)(_strip(x, handle) for x in value)
    return value


def _is_ours(value, handle) -> bool:
    return type(value) in DUAL_TYPES and value.t is handle


def _holds_ours(value, handle) -> bool:
    if _is_ours(value, handle):
        return True
    return type(value) in (list, tuple) and any(_holds_ours(x, handle) for x in value)


def _tangent_or_zero(arg, value, handle, direction):
    """The tangent of a data argument (one direction of it, or with ``direction=None`` all
    of a vector's directions along a leading axis), zeros for a constant; item by item for
    a sequence."""
    if _is_ours(arg, handle):
        return arg.d if direction is None else arg.d[direction]
    if type(arg) in (list, tuple):
        return type(arg)(_tangent_or_zero(a, v, handle, direction)
                         for a, v in zip(arg, value))
    lead = (handle.width,) if direction is None and handle.width is not None else ()
    return np.zeros(lead + np.shape(value))


def _directions(handle, call):
    """``call(direction)`` for one direction, or stacked over a vector's directions."""
    if handle.width is None:
        return call(None)
    return np.stack([call(j) for j in range(handle.width)])


def _lift(tangent, arg_ndim: int, result_ndim: int, width):
    """A vector of tangents' leading axis kept in front of the axes an argument of fewer
    dimensions is broadcast along."""
    if width is None or arg_ndim >= result_ndim:
        return tangent
    return np.reshape(tangent, (width,) + (1,) * (result_ndim - arg_ndim)
                      + np.shape(tangent)[1:])


def _times(partial, tangent):
    """partial * tangent, with 0 where the tangent is 0 even against an infinite or NaN
    partial (as the sweep skips a zero cotangent)."""
    if type(partial) is NonFinite:
        partial = partial.partial
    if type(partial) is np.ndarray and not all_finite(partial):
        with np.errstate(invalid="ignore"):  # (0 * inf: replaced by 0 here)
            return np.where(tangent != 0, partial * tangent, 0.0)
    return partial * tangent


def _selected(partial, tangent):
    """partial * tangent for a function that selects (np.where, np.maximum...: partials 0
    or 1), with 0 where the partial is 0 whatever the tangent there: the tangent of
    ``np.where(x > 0, np.sqrt(x), 0.0)`` at x = 0 is the 0 of the branch taken, not
    0 * inf (as JAX's select, and as the sweep gives in reverse mode)."""
    return np.where(partial != 0, tangent, 0.0) * partial


for _fn in (np.where, np.maximum, np.minimum, np.fmax, np.fmin):
    record(_fn).selects = True


def _elementwise(func, found, handle, args, values, result, kwargs):
    partials = found.partials
    width, result_ndim = handle.width, np.ndim(result)
    total = None
    for k, a in enumerate(args):
        if not _is_ours(a, handle):
            continue
        if k >= len(partials) or partials[k] is None:
            raise not_differentiable(func, k)
        partial = quietly(partials[k], *values, result)
        tangent = _lift(a.d, np.ndim(values[k]), result_ndim, width)
        term = quietly(_selected if found.selects else operator.mul if found.finite
                       else _times, partial, tangent)
        total = term if total is None else total + term
    return total


def _by_jvps(func, found, handle, args, values, result, kwargs):
    jvps = found.jvps
    batched = found.batched_jvps
    total = None
    for k, a in enumerate(args):
        if not _holds_ours(a, handle):
            continue
        if k >= len(jvps) or jvps[k] is None:
            raise not_differentiable(func, k)
        if handle.width is None or batched:
            term = jvps[k](_tangent_or_zero(a, values[k], handle, None), result, *values,
                           **kwargs)
        else:  # one direction at a time (a sequence's items each give theirs)
            term = _stacked([jvps[k](_tangent_or_zero(a, values[k], handle, j), result,
                                     *values, **kwargs) for j in range(handle.width)])
        total = term if total is None else _plus(total, term)
    return total


# several results (np.split, linalg.eigh, svd, qr): a tangent each, None for a result with
# no derivative (a sign, a rank)
def _stacked(terms):
    if isinstance(terms[0], (tuple, list)):
        return type(terms[0])(None if terms[0][j] is None else np.stack([t[j] for t in terms])
                              for j in range(len(terms[0])))
    return np.stack(terms)


def _plus(a, b):
    if isinstance(a, (tuple, list)):
        return type(a)(y if x is None else x if y is None else x + y for x, y in zip(a, b))
    return a + b


def _linear(func, found, handle, args, values, result, kwargs):
    positions = found.linear

    def call(direction):
        data = list(values)
        for p in positions:
            data[p] = _tangent_or_zero(args[p], values[p], handle, direction)
        return func(*data, **kwargs)
    return _directions(handle, call)


def _multilinear(func, found, handle, args, values, result, kwargs):
    positions = found.multilinear or range(1, len(args))

    def call(direction):
        total = None
        for p in positions:
            if _is_ours(args[p], handle):
                data = list(values)
                data[p] = args[p].d if direction is None else args[p].d[direction]
                term = func(*data, **kwargs)
                total = term if total is None else total + term
        return total
    return _directions(handle, call)


def apply(func, rule, handle, args, kwargs):
    """numpy's ``func`` on arguments holding forward duals of ``handle`` (the hook
    runtime/array_dual.py's dispatch calls for a forward level)."""
    found = RECORDS.get(func)
    if found is not None and found.primal_only:
        return rule(handle, *args, **kwargs)
    values = [_strip(a, handle) for a in args]
    kw = {name: _strip(v, handle) for name, v in kwargs.items()}
    if any(_holds_ours(v, handle) for v in kwargs.values()):
        raise NotDifferentiableError(
            f"astad differentiates {getattr(func, '__name__', func)!r} in its positional "
            "arguments only; pass the differentiated value positionally", *user_location())
    if found is not None and (found.jvps is not None or found.partials is not None):
        _refuse_arguments_with_no_derivative(func, found, handle, args)
    call = getattr(func[0], func[1]) if type(func) is tuple else func  # (np.add.reduce)
    result = call_at_enclosing_levels(call, values, kw, not is_numpy(call))
    kind = getattr(getattr(result, "dtype", None), "kind", "f")
    if kind in "biu":  # integers and truth values carry no derivative
        return result
    if kind == "c" and (found is None or found.complex is not True):
        raise complex_result(func)
    if found is not None and found.jvps is not None:
        tangent = _by_jvps(func, found, handle, args, values, result, kw)
    elif found is not None and found.partials is not None:
        tangent = _elementwise(func, found, handle, args, values, result, kw)
    elif found is not None and found.linear is not None:
        tangent = _linear(func, found, handle, args, values, result, kw)
    elif found is not None and found.multilinear is not None:
        tangent = _multilinear(func, found, handle, args, values, result, kw)
    else:
        name = getattr(func, "__name__", None) or repr(func)
        raise NotDifferentiableError(
            f"astad has no forward-mode rule for numpy's {name!r}; register one with "
            "astad.register_jvp", *user_location())
    return _result(result, _not_aliased(tangent, args, handle), handle)


def _refuse_arguments_with_no_derivative(func, found, handle, args):
    """A tangent reaching an argument with no derivative is refused before the call (as
    in reverse mode: the error names the argument, whatever the function says of it)."""
    derivatives = found.jvps if found.jvps is not None else found.partials
    for k, a in enumerate(args):
        if (k >= len(derivatives) or derivatives[k] is None) and _holds_ours(a, handle):
            raise not_differentiable(func, k)


def _not_aliased(tangent, args, handle):
    """A tangent that is an operand's own tangent array (a jvp giving ``t`` back, as
    np.copy's) copied: arrays are written in place (rules/array_writes.py), and the
    result's tangent must not change with the operand's. (A view shares on purpose: it
    is made before any rule, in dispatch.)"""
    memory = plain_array(tangent)  # (a tangent may be a dual of an enclosing level)
    if type(memory) is not np.ndarray:
        return tangent
    for a in args:
        for x in (a if type(a) in (list, tuple) else (a,)):
            if _is_ours(x, handle) and type(x) is FArrayDual and \
                    np.may_share_memory(memory, plain_array(x.d)):
                return tangent.copy() if type(tangent) is np.ndarray else \
                    dispatch(np.copy, (tangent,), {})
    return tangent


def _result(result, tangent, handle):
    """A forward dual for the result, its tangent shaped like it (numpy broadcasts a
    constant operand; the tangent of the other operand is broadcast the same way)."""
    if isinstance(result, (tuple, list)):  # several results: a dual for each with a tangent
        items = [r if t is None else _result(r, t, handle) for r, t in zip(result, tangent)]
        return type(result)._make(items) if hasattr(result, "_make") else type(result)(items)
    shape = np.shape(result)
    expected = shape if handle.width is None else (handle.width,) + shape
    if np.shape(tangent) != expected:
        tangent = np.broadcast_to(tangent, expected) * 1.0
    if np.ndim(result) == 0 and type(result) is not np.ndarray and \
            not is_complex(result):  # (a complex scalar: a 0-d array dual, as in reverse)
        value = result  # (numpy's float64 stays, as in reverse mode: its type is seen)
        if handle.width is None and type(tangent) not in DUAL_TYPES:
            tangent = float(tangent)
        return forward_dual(value, tangent, handle)
    if type(result) is complex:  # (cmath's: numpy's type, which has a dtype)
        result = np.complex128(result)
    return FArrayDual(result, tangent, handle)


publish("forward_array_rule", apply)  # (numpy's dispatch, runtime/array_dual.py)
