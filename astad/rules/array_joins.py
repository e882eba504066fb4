"""Building arrays from pieces: vstack, hstack, dstack, column_stack (each a
concatenation of reshaped arrays), and the vjps and jvps of the hand-written rules of
concatenate, stack and np.array of differentiated values (array_shapes.py).
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, register_jvp, set_rule, set_vjps)
from .array_axes import lead_shape, negative_axis
from .array_shapes import cast


# vstack, hstack, dstack, column_stack: each array reshaped (promoted to more axes), then
# concatenated along one axis
def _promoted(ndim, place):
    """The shape numpy gives an array of fewer than ``ndim`` axes: its axes at ``place``."""
    def promote(shape):
        if len(shape) >= ndim:
            return tuple(shape)
        full = [1] * ndim
        for k, size in zip(place[len(shape)], shape):
            full[k] = size
        return tuple(full)
    return promote


_JOINS = {  # function: (promote a shape, the concatenation axis for the promoted shapes)
    np.vstack: (_promoted(2, {0: (), 1: (1,)}), lambda shapes: 0),
    np.hstack: (_promoted(1, {0: ()}), lambda shapes: 0 if all(
        len(s) == 1 for s in shapes) else 1),
    np.dstack: (_promoted(3, {0: (), 1: (1,), 2: (0, 1)}), lambda shapes: 2),
    np.column_stack: (_promoted(2, {0: (), 1: (0,)}), lambda shapes: 1),
}
if hasattr(np, "row_stack"):  # (deprecated in numpy 2: the same function as vstack)
    _JOINS[np.row_stack] = _JOINS[np.vstack]


def _join_rule(fn):
    promote, axis_of = _JOINS[fn]

    def rule(tape, tup, **kwargs):  # (reshaped and joined by numpy's dispatch, at the
        items = list(tup)            # arrays' level)
        shapes = [np.shape(x) for x in items]
        promoted = [np.reshape(x, promote(shape)) for x, shape in zip(items, shapes)]
        return np.concatenate(promoted, axis=axis_of([promote(s) for s in shapes]), **kwargs)
    return rule


for _fn in _JOINS:
    set_rule(_fn, _join_rule(_fn))


# np.block: numpy's nesting of lists as concatenations (the innermost lists along the last
# axis, the next along the one before, every array first given as many axes as the result)
def _block_depth(arrays) -> int:
    return 1 + _block_depth(arrays[0]) if type(arrays) is list and arrays else 0


def _block_rule(tape, arrays):  # (joined by numpy's dispatch, at the arrays' level)
    depth = _block_depth(arrays)
    ndim = max([depth] + [np.ndim(x) for x in _leaves(arrays)])

    def join(item, level):
        if type(item) is not list:
            return np.reshape(item, (1,) * (ndim - np.ndim(item)) + np.shape(item))
        return np.concatenate([join(x, level + 1) for x in item], axis=level - depth)
    return join(arrays, 0) if depth else np.copy(arrays)


def _leaves(arrays):
    return [y for x in arrays for y in _leaves(x)] if type(arrays) is list else [arrays]


def _block_jvp(t, r, arrays):  # (linear; one direction at a time)
    return _block_rule(None, t)


set_rule(np.block, _block_rule)
register_jvp(np.block, _block_jvp)


# -- the vjps and jvps of the rules written by hand above ----------------------------------
# A list argument's cotangent is a list (one per item); its tangent is a list with None for
# the items that are not differentiated. All accept leading (direction) axes.
def _filled(tangents, items):
    """The tangents with None replaced by zeros, behind the same leading axes."""
    lead = ()
    for t, x in zip(tangents, items):
        if t is not None:
            lead = lead_shape(t, np.ndim(x))
            break
    return [np.zeros(lead + np.shape(x)) if t is None else t for t, x in zip(tangents, items)]


def _split_joined(g, core_ndim, shapes, promoted, axis):
    """The cotangents of arrays of ``shapes`` joined (as ``promoted``) along ``axis``."""
    axis = negative_axis(axis, core_ndim)
    lead = lead_shape(g, core_ndim)
    bounds = np.cumsum([shape[axis] for shape in promoted])[:-1]
    return [np.reshape(piece, lead + tuple(shape))
            for piece, shape in zip(np.split(g, bounds, axis=axis), shapes)]


def _concatenate_layout(arrays_, axis):
    shapes = [np.shape(x) for x in arrays_]
    if axis is None:
        return shapes, [(int(np.prod(s, dtype=np.int64)),) for s in shapes], 0
    return shapes, shapes, axis


def _concatenate_vjp(g, r, arrays_, axis=0, **kw):
    shapes, promoted, axis = _concatenate_layout(arrays_, axis)
    return _split_joined(g, np.ndim(r), shapes, promoted, axis)


def _concatenate_jvp(t, r, arrays_, axis=0, **kw):
    shapes, promoted, axis = _concatenate_layout(arrays_, axis)
    pieces = [np.reshape(piece, lead_shape(piece, len(shape)) + tuple(new)) for piece, shape,
              new in zip(_filled(t, arrays_), shapes, promoted)]
    return np.concatenate(pieces, axis=negative_axis(axis, np.ndim(r)))


def _stack_vjp(g, r, arrays_, axis=0, **kw):
    axis = negative_axis(axis, np.ndim(r))
    return [np.take(g, j, axis=axis) for j in range(len(arrays_))]


def _stack_jvp(t, r, arrays_, axis=0, **kw):
    return np.stack(_filled(t, arrays_), axis=negative_axis(axis, np.ndim(r)))


def _join_derivatives(fn):
    promote, axis_of = _JOINS[fn]

    def vjp(g, r, tup, **kw):
        shapes = [np.shape(x) for x in tup]
        promoted = [promote(s) for s in shapes]
        return _split_joined(g, np.ndim(r), shapes, promoted, axis_of(promoted))

    def jvp(t, r, tup, **kw):
        shapes = [np.shape(x) for x in tup]
        promoted = [promote(s) for s in shapes]
        pieces = [np.reshape(piece, lead_shape(piece, len(shape)) + new) for piece, shape, new
                  in zip(_filled(t, tup), shapes, promoted)]
        return np.concatenate(pieces, axis=negative_axis(axis_of(promoted), np.ndim(r)))
    return vjp, jvp


def _array_vjp(g, r, obj, *args, **kw):
    """np.array / np.asarray: a nested list's cotangents, as the same nested lists."""
    if not isinstance(obj, (list, tuple)):
        return g
    item = np.broadcast_to(0.0, np.shape(r)[1:])  # (only its shape is read)
    return [_array_vjp(np.take(g, j, axis=-np.ndim(r)), item, x) for j, x in enumerate(obj)]


def _array_jvp(t, r, obj, dtype=None, *args, **kw):
    if not isinstance(obj, (list, tuple)):
        return cast(t, dtype)
    item = np.broadcast_to(0.0, np.shape(r)[1:])
    parts = [None if x is None else _array_jvp(x, item, piece) for x, piece in zip(t, obj)]
    return cast(np.stack(_filled(parts, [item] * len(obj)), axis=-np.ndim(r)), dtype)


set_vjps(np.concatenate, _concatenate_vjp)
register_jvp(np.concatenate, _concatenate_jvp, batched=True)
set_vjps(np.stack, _stack_vjp)
register_jvp(np.stack, _stack_jvp, batched=True)
for _fn in _JOINS:
    _vjp, _jvp = _join_derivatives(_fn)
    set_vjps(_fn, _vjp)
    register_jvp(_fn, _jvp, batched=True)
set_vjps(np.array, _array_vjp)
set_vjps(np.asarray, _array_vjp)
register_jvp(np.array, _array_jvp, batched=True)
register_jvp(np.asarray, _array_jvp, batched=True)
batched_vjps(np.concatenate, np.stack, *_JOINS, np.array, np.asarray)
