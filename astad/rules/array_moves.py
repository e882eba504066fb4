"""Rules of functions that move elements: sort, partition, take, take_along_axis, repeat,
diff, and indexing's vjp and jvp (its recording rule is ``getitem`` in array_shapes.py).

Each result element is one input element (or a difference of two, for diff), so the
jvp moves the tangent the same way and the vjp sends each cotangent back where its element
came from (array_gather.scatter_add where elements may repeat). All accept leading
(direction) axes.
"""
from __future__ import annotations

import math

import numpy as np

from .array import (batched_vjps, NEW_ARRAYS, refuse_keywords, register_jvp, register_vjp,
                    result_kinds, set_vjps)
from .array_axes import lead_shape, negative_axis
from .array_gather import gather, positions_of, scatter_add
from .array_shapes import may_repeat, take_index
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import add_check, plain_array


# -- moving elements: sort, take, repeat, diff ---------------------------------------------
def inverse_permutation(perm, axis):
    """The permutation undoing ``perm`` along ``axis`` (plain int arrays)."""
    inverse = np.empty_like(perm)
    shape = [1] * perm.ndim
    shape[axis] = perm.shape[axis]
    np.put_along_axis(inverse, perm, np.arange(perm.shape[axis]).reshape(shape), axis=axis)
    return inverse


def along_axis(t, indices, axis, core_ndim):
    """np.take_along_axis of ``t`` (with leading axes) by core-shaped ``indices``."""
    nlead = np.ndim(t) - core_ndim
    return np.take_along_axis(t, np.reshape(indices, (1,) * nlead + np.shape(indices)),
                              axis=negative_axis(axis, core_ndim))


def _sort_order(a, axis):
    # ties: the stable order numpy's sort gives them
    return np.argsort(np.ravel(a) if axis is None else a, axis=-1 if axis is None else axis,
                      kind="stable")


def _sort_vjp(g, r, a, axis=-1, kind=None, order=None, **kw):
    # each sorted element came from one place: its cotangent goes back there
    perm = _sort_order(a, axis)
    if type(g) is np.ndarray and g.ndim == np.ndim(r):  # plain values: scatter in place
        grad = np.zeros(np.shape(perm), dtype=np.result_type(a, 1.0))
        np.put_along_axis(grad, perm, g if axis is not None else np.ravel(g),
                          axis=-1 if axis is None else axis)
        return grad.reshape(np.shape(a))
    if axis is None:
        back = along_axis(g, inverse_permutation(perm, 0), 0, 1)
        return np.reshape(back, lead_shape(g, 1) + np.shape(a))
    return along_axis(g, inverse_permutation(perm, axis), axis, np.ndim(a))


def _sort_jvp(t, r, a, axis=-1, kind=None, order=None, **kw):
    perm = _sort_order(a, axis)
    if axis is None:
        return along_axis(np.reshape(t, lead_shape(t, np.ndim(a)) + (-1,)), perm, 0, 1)
    return along_axis(t, perm, axis, np.ndim(a))


def _take_positions(a, indices, axis):
    return positions_of(np.shape(a), lambda p: np.take(p, indices, axis=axis))


def _take_vjp(g, r, a, indices, axis=None, out=None, mode="raise"):
    if type(g) is np.ndarray and g.ndim == np.ndim(r):  # plain values: add in place
        grad = np.zeros(np.shape(a), dtype=np.result_type(a, 1.0))
        if axis is None:
            np.add.at(grad.reshape(-1), indices, g)  # (a repeated index adds)
        else:
            np.add.at(grad, (slice(None),) * (axis % grad.ndim) + (indices,), g)
        return grad
    positions = _take_positions(a, indices, axis)
    back = scatter_add(g, positions, int(np.size(a)))
    return np.reshape(back, lead_shape(g, np.ndim(positions)) + np.shape(a))


def _take_jvp(t, r, a, indices, axis=None, out=None, mode="raise"):
    if axis is not None:
        return np.take(t, indices, axis=negative_axis(axis, np.ndim(a)))
    return gather(t, _take_positions(a, indices, axis), np.ndim(a))


def _repeat_vjp(g, r, a, repeats, axis=None):
    # the copies of each element are consecutive: sum them back (one int repeats only)
    shape = np.shape(a)
    if axis is None:
        lead = lead_shape(g, 1)
        # (the size, not -1: np.repeat(x, 0) gives an empty g)
        summed = np.sum(np.reshape(g, lead + (math.prod(shape), repeats)), axis=-1)
        return np.reshape(summed, lead + shape)
    ndim = len(shape)
    axis %= ndim
    lead = lead_shape(g, ndim)
    split = np.reshape(g, lead + shape[:axis] + (shape[axis], repeats) + shape[axis + 1:])
    return np.sum(split, axis=axis - ndim)


def _repeat_jvp(t, r, a, repeats, axis=None):
    if axis is None:
        return np.repeat(np.reshape(t, lead_shape(t, np.ndim(a)) + (-1,)), repeats, axis=-1)
    return np.repeat(t, repeats, axis=negative_axis(axis, np.ndim(a)))


def _diff_vjp(g, r, a, n=1, axis=-1, **kw):
    # diff is x[1:] - x[:-1] along the axis, n times: its transpose, n times
    axis = negative_axis(axis, np.ndim(a))
    for _ in range(n):
        edge = list(np.shape(g))
        edge[axis] = 1
        zero = np.zeros(edge, dtype=getattr(g, "dtype", float))
        g = -np.diff(np.concatenate((zero, g, zero), axis=axis), axis=axis)
    return g


register_vjp(np.sort, _sort_vjp)
register_jvp(np.sort, _sort_jvp, batched=True)
register_vjp(np.take, _take_vjp)
register_jvp(np.take, _take_jvp, batched=True)
register_vjp(np.repeat, _repeat_vjp)
register_jvp(np.repeat, _repeat_jvp, batched=True)
register_vjp(np.diff, _diff_vjp)
register_jvp(np.diff, lambda t, r, a, n=1, axis=-1, **kw: np.diff(
    t, n, axis=negative_axis(axis, np.ndim(a))), batched=True)
result_kinds(NEW_ARRAYS, np.sort, np.take, np.repeat, np.diff)
batched_vjps(np.sort, np.take, np.repeat, np.diff)
refuse_keywords(np.take, ("mode",), "an index out of range must raise")
refuse_keywords(np.diff, ("prepend", "append"), "pad the array with np.concatenate")


def _one_repeats_count(args, kwargs):
    a, repeats, *rest = args if len(args) > 1 else (args[0], kwargs.pop("repeats"))
    if np.ndim(repeats) != 0:
        raise NotDifferentiableError("astad differentiates np.repeat with one int repeats "
                                     "count", *user_location())
    return (a, int(repeats), *rest), kwargs


add_check(np.repeat, _one_repeats_count)


# -- indexing: x[index] -------------------------------------------------------------------
def _index_positions(x, index):
    return positions_of(np.shape(x), lambda p: p[index])


def _getitem_vjp(g, r, x, index):
    """x[index]'s cotangent: zeros with g added at the indexed elements (repeats add)."""
    if type(g) is np.ndarray and g.ndim == np.ndim(r) or type(g) is float or \
            type(g) is complex:
        grad = np.zeros(np.shape(x), dtype=np.result_type(getattr(x, "dtype", float), g))
        if may_repeat(index):
            np.add.at(grad, index, g)
        else:
            grad[index] += g
        return grad
    positions = _index_positions(x, index)
    back = scatter_add(g, positions, int(np.size(x)))
    return np.reshape(back, lead_shape(g, np.ndim(positions)) + np.shape(x))


def _getitem_jvp(t, r, x, index):
    if np.ndim(t) == np.ndim(x):
        return t[index]
    return gather(t, _index_positions(x, index), np.ndim(x))


set_vjps(take_index, _getitem_vjp, None)
register_jvp(take_index, _getitem_jvp, None, batched=True)
batched_vjps(take_index)


# -- partition: a permutation found by matching the result's elements to the input's --------
def _matching_permutation(a, r, axis):
    """``perm`` with r == take_along_axis(a, perm, axis): equal values matched in order."""
    from_a = np.argsort(a, axis=axis, kind="stable")
    from_r = np.argsort(r, axis=axis, kind="stable")
    return np.take_along_axis(from_a, inverse_permutation(from_r, axis), axis=axis)


def _partition_permutation(a, r, axis):
    a, r = plain_array(a), plain_array(r)
    if axis is None:
        return _matching_permutation(np.ravel(a), r, 0)
    return _matching_permutation(a, r, axis)


def _partition_vjp(g, r, a, kth, axis=-1, kind="introselect", order=None):
    perm = _partition_permutation(a, r, axis)
    if axis is None:
        back = along_axis(g, inverse_permutation(perm, 0), 0, 1)
        return np.reshape(back, lead_shape(g, 1) + np.shape(a))
    return along_axis(g, inverse_permutation(perm, axis % np.ndim(a)), axis, np.ndim(a))


def _partition_jvp(t, r, a, kth, axis=-1, kind="introselect", order=None):
    perm = _partition_permutation(a, r, axis)
    if axis is None:
        return along_axis(np.reshape(t, lead_shape(t, np.ndim(a)) + (-1,)), perm, 0, 1)
    return along_axis(t, perm, axis, np.ndim(a))


register_vjp(np.partition, _partition_vjp, None)
register_jvp(np.partition, _partition_jvp, None, batched=True)


# -- take_along_axis ---------------------------------------------------------------------------
def _along_positions(arr, indices, axis):
    return positions_of(np.shape(arr), lambda p: np.take_along_axis(p, indices, axis=axis))


def _take_along_axis_vjp(g, r, arr, indices, axis=-1):
    positions = _along_positions(arr, indices, axis)
    back = scatter_add(g, positions, int(np.size(arr)))
    return np.reshape(back, lead_shape(g, np.ndim(positions)) + np.shape(arr))


def _take_along_axis_jvp(t, r, arr, indices, axis=-1):
    if axis is None:
        return along_axis(np.reshape(t, lead_shape(t, np.ndim(arr)) + (-1,)), indices, 0, 1)
    return along_axis(t, indices, axis, np.ndim(arr))


register_vjp(np.take_along_axis, _take_along_axis_vjp, None)
register_jvp(np.take_along_axis, _take_along_axis_jvp, None, batched=True)
result_kinds(NEW_ARRAYS, np.partition, np.take_along_axis)
batched_vjps(np.partition, np.take_along_axis)
