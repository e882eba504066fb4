"""The derivative rules of numpy's shape functions, of building arrays from pieces
(concatenate, stack, np.array of scalar duals) and of indexing (``x[i]``, ``take_index``).

Shape functions and indexing move cotangents without arithmetic; reading one element
(``x[i]``) gives a scalar dual whose backward step adds into that one element.
"""
from __future__ import annotations

import numpy as np

from ..registry import RECORDS, publish
from .array import (batched_vjps, NEW_ARRAYS, register_jvp, register_vjp, result_kinds, set_rule,
                    shapes_only, VIEWS_OF_G)
from .array_axes import (align_core, axes_of, lead_shape, move_core_axes, negative_axes,
    negative_axis, sum_to_shape)
from ..runtime.array_dual import (accumulate, add_check, made_array, cotangent, dispatch,
                                  index_of, is_active, new_array, new_scalar, parent_of,
                                  plain_array, primal_of, take_index)
from ..runtime.array_rows import (add_rows, each_leading_row, gather_rows, on_leading_rows,
                                  rows_accept, rows_at, rows_cotangent, rows_index,
                                  scatter_rows)
from ..errors import NotDifferentiableError, user_location
from ..runtime.duals import DUAL_TYPES, ScalarDual, running
from ..runtime.tape import BATCHED_BACKWARDS


# -- shape --------------------------------------------------------------------------------
# The vjps and jvps accept leading (direction) axes on the cotangent (tangent): axes are
# counted from the end, shapes are given behind lead_shape(...).
def _transpose_vjp(g, r, a, axes=None):
    ndim = np.ndim(a)
    if axes is None:
        inverse = tuple(range(ndim))[::-1]
    else:
        inverse = [0] * ndim
        for k, x in enumerate(axes):
            inverse[x % ndim] = k
    if np.ndim(g) == ndim:  # (no leading axes: the common case)
        return np.transpose(g, inverse)
    return np.transpose(g, move_core_axes(g, ndim, inverse))


def _transpose_jvp(t, r, a, axes=None):
    ndim = np.ndim(a)
    perm = tuple(range(ndim))[::-1] if axes is None else tuple(x % ndim for x in axes)
    return np.transpose(t, move_core_axes(t, ndim, perm))


def _reshape_core(x, core_ndim, shape, order="C"):
    """``x``'s last ``core_ndim`` axes reshaped to ``shape`` in ``order``, behind its
    leading axes."""
    lead = lead_shape(x, core_ndim)
    if order != "F" or not lead:
        return np.reshape(x, lead + tuple(shape), order=order)
    nlead = len(lead)  # F order runs over the leading axes too: move them last first
    moved = np.moveaxis(x, tuple(range(nlead)), tuple(range(-nlead, 0)))
    reshaped = np.reshape(moved, tuple(shape) + lead, order="F")
    return np.moveaxis(reshaped, tuple(range(-nlead, 0)), tuple(range(nlead)))


def _new_shape(shape, kw):
    shape = kw.get("newshape", shape)
    return (shape,) if np.ndim(shape) == 0 else tuple(shape)


def _reshaped_size(a, shape):
    """``shape`` with its -1 resolved for an array like ``a``."""
    if -1 not in shape:
        return shape
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    return tuple(np.size(a) // max(known, 1) if s == -1 else s for s in shape)


def _squeezed(shape, axis):
    if axis is None:
        return tuple(s for s in shape if s != 1)
    drop = axes_of(axis, len(shape))
    return tuple(s for k, s in enumerate(shape) if k not in drop)


def _expanded(shape, axis):
    ndim = len(shape) + (1 if np.ndim(axis) == 0 else len(axis))
    new = set(axes_of(axis, ndim))
    rest = iter(shape)
    return tuple(1 if k in new else next(rest) for k in range(ndim))


register_vjp(np.transpose, _transpose_vjp)
register_jvp(np.transpose, _transpose_jvp, batched=True)
# reshape and ravel read and write elements in C or F order; the cotangent goes back in
# the same order (the rules below pass it resolved, as a keyword)
register_vjp(np.reshape, lambda g, r, a, shape=None, order="C", **kw: _reshape_core(
    g, len(_new_shape(shape, kw)), np.shape(a), order))
register_jvp(np.reshape, lambda t, r, a, shape=None, order="C", **kw: _reshape_core(
    t, np.ndim(a), _reshaped_size(a, _new_shape(shape, kw)), order), batched=True)
register_vjp(np.ravel, lambda g, r, a, order="C": _reshape_core(g, 1, np.shape(a), order))
register_jvp(np.ravel, lambda t, r, a, order="C": _reshape_core(t, np.ndim(a), (np.size(a),),
                                                                order), batched=True)
register_vjp(np.moveaxis, lambda g, r, a, source, destination: np.moveaxis(
    g, negative_axes(destination, np.ndim(a)), negative_axes(source, np.ndim(a))))
register_jvp(np.moveaxis, lambda t, r, a, source, destination: np.moveaxis(
    t, negative_axes(source, np.ndim(a)), negative_axes(destination, np.ndim(a))),
    batched=True)
register_vjp(np.swapaxes, lambda g, r, a, axis1, axis2: np.swapaxes(
    g, negative_axis(axis1, np.ndim(a)), negative_axis(axis2, np.ndim(a))))
register_jvp(np.swapaxes, lambda t, r, a, axis1, axis2: np.swapaxes(
    t, negative_axis(axis1, np.ndim(a)), negative_axis(axis2, np.ndim(a))), batched=True)
register_vjp(np.squeeze, lambda g, r, a, axis=None: _reshape_core(
    g, len(_squeezed(np.shape(a), axis)), np.shape(a)))
register_jvp(np.squeeze, lambda t, r, a, axis=None: _reshape_core(
    t, np.ndim(a), _squeezed(np.shape(a), axis)), batched=True)
register_vjp(np.expand_dims, lambda g, r, a, axis: _reshape_core(
    g, len(_expanded(np.shape(a), axis)), np.shape(a)))
register_jvp(np.expand_dims, lambda t, r, a, axis: _reshape_core(
    t, np.ndim(a), _expanded(np.shape(a), axis)), batched=True)
register_vjp(np.broadcast_to, lambda g, r, a, shape, *args, **kw: sum_to_shape(
    g, np.shape(a), len(_new_shape(shape, {}))))
register_jvp(np.broadcast_to, lambda t, r, a, shape, *args, **kw: np.broadcast_to(
    align_core(t, np.ndim(a), len(_new_shape(shape, {}))),
    lead_shape(t, np.ndim(a)) + _new_shape(shape, {})), batched=True)
register_vjp(np.copy, lambda g, r, a, *args, **kw: g)
register_jvp(np.copy, lambda t, r, a, *args, **kw: t, batched=True)
register_vjp(np.flip, lambda g, r, m, axis=None: np.flip(g, negative_axes(axis, np.ndim(m))))
register_jvp(np.flip, lambda t, r, m, axis=None: np.flip(t, negative_axes(axis, np.ndim(m))),
             batched=True)


def _cumsum_vjp(g, r, a, axis=None, dtype=None, out=None):
    # each input reaches every later output: a cumulative sum from the end
    if axis is None:
        reversed_sum = np.flip(np.cumsum(np.flip(g, -1), axis=-1), -1)
        return np.reshape(reversed_sum, lead_shape(g, 1) + np.shape(a))
    axis = negative_axis(axis, np.ndim(a))
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


def _cumsum_jvp(t, r, a, axis=None, dtype=None, out=None):
    if axis is None:
        return np.cumsum(np.reshape(t, lead_shape(t, np.ndim(a)) + (-1,)), axis=-1,
                         dtype=dtype)
    return np.cumsum(t, axis=negative_axis(axis, np.ndim(a)), dtype=dtype)


def cast(t, dtype):
    """``t`` converted to a float ``dtype`` (a differentiated value through its rule)."""
    if dtype is None or np.dtype(dtype) == getattr(t, "dtype", None):
        return t
    return t.astype(dtype) if hasattr(t, "astype") else np.dtype(dtype).type(t)


register_vjp(np.cumsum, _cumsum_vjp)
register_jvp(np.cumsum, _cumsum_jvp, batched=True)
register_vjp(np.asarray, lambda g, r, a, *args, **kw: g)
register_jvp(np.asarray, lambda t, r, a, dtype=None, *args, **kw: cast(t, dtype), batched=True)
for _fn in (np.asanyarray, np.require):  # (their result, the array itself or a copy, is
    register_vjp(_fn, lambda g, r, a, *args, **kw: g)  # decided by rules/array_views.py)
    register_jvp(_fn, lambda t, r, a, dtype=None, *args, **kw: cast(t, dtype), batched=True)
for _fn in (np.ascontiguousarray, np.asfortranarray):  # (a 0-d array: shape (1,))
    register_vjp(_fn, lambda g, r, a, *args, **kw: np.reshape(
        g, lead_shape(g, np.ndim(r)) + np.shape(a)))
    register_jvp(_fn, lambda t, r, a, dtype=None, *args, **kw: cast(np.reshape(
        t, lead_shape(t, np.ndim(a)) + np.shape(r)), dtype), batched=True)
result_kinds(NEW_ARRAYS, np.cumsum)
result_kinds(VIEWS_OF_G, np.transpose, np.reshape, np.ravel, np.squeeze, np.expand_dims,
             np.broadcast_to, np.copy, np.flip, np.asarray, np.moveaxis, np.swapaxes)
shapes_only(np.cumsum, np.transpose, np.reshape, np.ravel, np.squeeze,
            np.expand_dims, np.broadcast_to, np.copy, np.flip, np.asarray,
            np.moveaxis, np.swapaxes)
batched_vjps(np.cumsum, np.transpose, np.reshape, np.ravel, np.squeeze,
             np.expand_dims, np.broadcast_to, np.copy, np.flip, np.asarray,
             np.moveaxis, np.swapaxes, np.asanyarray, np.require, np.ascontiguousarray,
             np.asfortranarray)


def _resolve_order(value, order):
    """numpy's order 'A' and 'K' as the 'C' or 'F' they mean for this array."""
    if order not in ("A", "K"):
        return order
    if value.flags.c_contiguous:
        return "C"
    if value.flags.f_contiguous:
        return "F"
    if order == "A":
        return "C"
    raise NotDifferentiableError("astad differentiates ravel(order='K') of a C- or "
                                 "F-contiguous array only", *user_location())


def _reshape_order(args, kwargs):
    # (resolved from the primal array: a cotangent or tangent has a layout of its own)
    a, shape, *rest = args if len(args) > 1 else (args[0], kwargs.pop("shape", None))
    order = rest[0] if rest else kwargs.pop("order", "C")
    return (a, shape), {**kwargs, "order": _resolve_order(plain_array(a), order)}


def _ravel_order(args, kwargs):
    a, *rest = args
    order = rest[0] if rest else kwargs.pop("order", "C")
    return (a,), {**kwargs, "order": _resolve_order(plain_array(a), order)}


add_check(np.reshape, _reshape_order)
add_check(np.ravel, _ravel_order)


# -- building arrays from pieces ----------------------------------------------------------
def _pieces_backward(adjoint, arrays, k, parents, context):
    split, = context
    g = cotangent(adjoint, arrays, k)
    pieces = split(g)
    for position, parent in parents:
        accumulate(adjoint, arrays, parent, pieces[position])


def _pieces_rows(adjoint, arrays, k, parents, context, width) -> bool:
    """_pieces_backward on all rows at once: the split's axes count from the end, so it
    splits a cotangent with a leading axis of rows as it splits one row."""
    split, = context
    return add_rows(adjoint, arrays, k, parents, width, split)


BATCHED_BACKWARDS[_pieces_backward] = _pieces_rows


def record_join(tape, join, split, items, *args, **kwargs):
    """Record ``join(items)``; ``split(g)`` gives each item's cotangent, reading axes
    from the end (so that it also splits ``g`` with leading axes: _pieces_rows)."""
    items = list(items)
    values = [primal_of(x, tape) for x in items]
    result = join(values, *args, **kwargs)
    parents = tuple((j, parent_of(x)) for j, x in enumerate(items) if is_active(x, tape))
    return new_array(tape, result, _pieces_backward, parents, (split,))


def _concatenate_rule(tape, arrays_, axis=0, **kwargs):
    items = list(arrays_)
    if axis is None:  # numpy flattens every array first
        items = [RECORDS[np.ravel].array(tape, x) if is_active(x, tape) else np.ravel(x)
                 for x in items]
        axis = 0
    sizes = [np.shape(x)[axis] for x in items]
    bounds = np.cumsum(sizes)[:-1]
    end = _from_end(axis, np.ndim(items[0]))
    return record_join(tape, np.concatenate, lambda g: np.split(g, bounds, axis=end), items,
                       axis=axis, **kwargs)


def _stack_rule(tape, arrays_, axis=0, **kwargs):
    items = list(arrays_)
    end = _from_end(axis, np.ndim(items[0]) + 1)
    return record_join(tape, np.stack,
                       lambda g: [np.take(g, j, axis=end) for j in range(len(items))], items,
                       axis=axis, **kwargs)


def _from_end(axis, ndim) -> int:
    """``axis`` of an array of ``ndim`` axes, counted from the end (negative); numpy's
    error for an axis out of range is raised by the join itself."""
    return axis - ndim if 0 <= axis < ndim else axis


set_rule(np.concatenate, _concatenate_rule)
set_rule(np.stack, _stack_rule)


def _reshape(tape, x, shape):
    return RECORDS[np.reshape].array(tape, x, shape)


def new_or_same(obj, result):
    """numpy's ``result`` of making an array of the plain ``obj``: a new array may be
    written into (a differentiated constant), memory shared with ``obj`` stays as plain as
    ``obj``, so that a write through it is refused (``obj`` may be an argument not
    differentiated, a global...)."""
    if type(obj) is np.ndarray and np.may_share_memory(result, obj):
        return result
    return made_array(result)


def array_from(tape, obj, dtype=None, **kwargs):
    """np.array / np.asarray of (nested lists of) scalar and array duals: one entry that
    scatters the cotangent back to each piece (np.stack of the pieces, at their level)."""
    if type(obj) in DUAL_TYPES and not isinstance(obj, ScalarDual):
        result = obj if dtype is None else dispatch(np.asarray, (obj, dtype), {})
        # np.array copies (copy=True, its default; copy=None copies unless it need not)
        copies = kwargs.get("copy", True) is True and result is obj
        return dispatch(np.copy, (result,), {}) if copies else result
    if not isinstance(obj, (list, tuple)) or not _holds_dual(obj):
        return new_or_same(obj, np.array(obj, dtype=dtype, **kwargs))
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise NotDifferentiableError("np.array of differentiated values needs a float dtype",
                                     *user_location())
    return np.stack([array_from(tape, x, dtype) if isinstance(x, (list, tuple)) else x
                     for x in obj])


def asarray_from(tape, obj, dtype=None, **kwargs):
    """np.asarray: an array is itself (no copy, as numpy), anything else as np.array."""
    if type(obj) is np.ndarray and (dtype is None or np.dtype(dtype) == obj.dtype):
        return obj
    if type(obj) in DUAL_TYPES and not isinstance(obj, ScalarDual):
        return obj if dtype is None else dispatch(np.asarray, (obj, dtype), {})
    return array_from(tape, obj, dtype, **kwargs)


def _holds_dual(obj) -> bool:
    return any(type(x) in DUAL_TYPES or (isinstance(x, (list, tuple)) and _holds_dual(x))
               for x in obj)


# -- indexing -----------------------------------------------------------------------------
def _index_backward(adjoint, arrays, k, parents, context):
    index, = context
    g = cotangent(adjoint, arrays, k)
    (parent,) = parents
    slot, shape, dtype = parent
    existing = arrays.get(slot)
    if type(g) in DUAL_TYPES or (existing is not None and type(existing) is not np.ndarray):
        # a derivative of a derivative: the scatter is itself a differentiated operation
        accumulate(adjoint, arrays, parent, index_scatter(g, index, shape, dtype))
        return
    if existing is None:
        existing = arrays[slot] = np.zeros(shape, dtype=dtype)
    if may_repeat(index):
        np.add.at(existing, index, g)  # x[[0, 0]]: each repetition adds
    else:
        existing[index] += g  # ints, slices, None, masks: each element once (faster)


def _index_rows(adjoint, arrays, k, parents, context, width) -> bool:
    """_index_backward (and _scalar_index_backward) on all rows of a Jacobian at once:
    the index with a leading ``:`` (array_rows.rows_index: where numpy puts the rows)."""
    index, = context
    (parent,) = parents
    slot, shape, dtype = parent
    g = rows_cotangent(adjoint, arrays, k, width)
    if g is None or shape is None or not rows_accept(arrays, parents, width):
        return False
    arrays.pop(k, None)
    existing = arrays.get(slot)
    if existing is None:
        existing = arrays[slot] = np.zeros((width,) + shape, dtype=dtype)
    rows, axis = rows_index(index)
    if may_repeat(index):
        np.add.at(existing, rows, rows_at(g, axis))
    else:
        existing[rows] += rows_at(g, axis)
    return True


BATCHED_BACKWARDS[_index_backward] = _index_rows


def may_repeat(index) -> bool:
    """Does ``index`` hold an integer array or list (fancy indexing may repeat)?"""
    for part in index if type(index) is tuple else (index,):
        if isinstance(part, (list, np.ndarray)) and np.asarray(part).dtype.kind != "b":
            return True
    return False


def _scalar_index_backward(adjoint, arrays, k, parents, context):
    index, = context
    (parent,) = parents
    slot, shape, dtype = parent
    existing = arrays.get(slot)
    g = cotangent(adjoint, arrays, k)  # (a complex element: a 0-d array dual)
    if type(g) in DUAL_TYPES or (existing is not None and type(existing) is not np.ndarray):
        accumulate(adjoint, arrays, parent, index_scatter(g, index, shape, dtype))
        return
    if existing is None:
        existing = arrays[slot] = np.zeros(shape, dtype=dtype)
    existing[index] += g  # O(1): no one-hot array


BATCHED_BACKWARDS[_scalar_index_backward] = _index_rows


def index_scatter(g, index, shape, dtype):
    """An array of ``shape`` holding ``g`` added at ``index`` (zeros elsewhere): the
    cotangent of ``x[index]``. A primitive of its own (its vjp is indexing, its jvp
    itself), so that the backward step of indexing can be differentiated again."""
    if type(g) in DUAL_TYPES:
        return dispatch(index_scatter, (g, index, shape, dtype), {})
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, index, g)
    return out


register_vjp(index_scatter, lambda g, r, c, index, shape, dtype: on_leading_rows(
    g, len(shape), lambda a, rows: gather_rows(a, index) if rows else a[index]))
batched_vjps(index_scatter)
register_jvp(index_scatter, lambda t, r, c, index, shape, dtype: each_leading_row(
    t, np.ndim(c), lambda a: index_scatter(a, index, shape, dtype),
    lambda rows: scatter_rows(rows, index, shape, dtype)), batched=True)


def getitem(tape, x, index):
    if type(index) in DUAL_TYPES:
        raise NotDifferentiableError("an index must not be a differentiated value",
                                     *user_location())
    if type(index) is tuple:
        index = tuple(primal_of(i) for i in index)
    value = x.v[index]
    parent = (parent_of(x),)
    if np.ndim(value) == 0:  # one element: a scalar dual
        return new_scalar(tape, value, _scalar_index_backward, parent, (index,))
    return new_array(tape, value, _index_backward, parent, (index,))


set_rule(take_index, getitem)


def element(x, index: int):
    """``x[i]`` of a 1-d array dual of a running reverse level (a loop reading elements):
    getitem's scalar case at once, without dispatch's steps (lists, levels, views, which
    an int index of a 1-d array needs none of); NotImplemented where dispatch decides."""
    v, tape = x.v, x.t
    if type(v) is not np.ndarray or v.ndim != 1 or id(tape) not in running.depth:
        return NotImplemented
    return new_scalar(tape, v[index], _scalar_index_backward,
                      ((index_of(x), v.shape, v.dtype),), (index,))


publish("element", element)  # (ArrayDual.__getitem__, runtime/array_dual.py)


def _real_dtype(args, kwargs):
    """np.asarray(x, dtype) and x.astype(dtype): to an int or bool dtype the result is
    piecewise constant (derivative 0, as for int() of a float dual: the rules see an
    integer result); a complex dtype is refused."""
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    if dtype is not None and np.dtype(dtype).kind == "c":
        raise NotDifferentiableError("astad differentiates real float arrays only, not "
                                     f"a conversion to {np.dtype(dtype)}", *user_location())
    return args, kwargs


add_check(np.asarray, _real_dtype)


def as_dtype(a, dtype=None, *args, **kwargs):
    """np.asarray(a, dtype) as a primitive that dispatches on duals (np.asarray does not:
    it would read a dual of an enclosing level as a plain array in nested derivatives)."""
    if type(a) in DUAL_TYPES:
        return dispatch(as_dtype, (a, dtype) + args, kwargs)
    return np.asarray(a, dtype, *args, **kwargs)


register_vjp(as_dtype, lambda g, r, a, *args, **kw: g)
register_jvp(as_dtype, lambda t, r, a, dtype=None, *args, **kw: cast(t, dtype), batched=True)
result_kinds(VIEWS_OF_G, as_dtype)
shapes_only(as_dtype)
batched_vjps(as_dtype)
set_rule(np.asarray, RECORDS[as_dtype].array)  # (its vjp and jvp stay np.asarray's)
