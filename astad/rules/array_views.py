"""Views: arrays sharing memory with a differentiated array, as numpy decides it.

A view (``x[1:]``, ``x.T``, ``np.flip(x)``, ``np.diagonal(x)``, ``np.asarray(x)``...) of
a differentiated array is a differentiated view: its *root* (the array dual owning the
memory) and the steps (``View``) from the root to it. Reading a view reads the root's
current version (runtime/array_dual.index_of); writing through it writes the root's
region under it (rules/array_writes.py); its cotangent is added into the root's region.

Which results are views is numpy's answer, not a table: every rule's result whose
memory overlaps a differentiated argument's (``numpy_memory``, called by
runtime/array_dual.dispatch) is the argument itself where numpy returned the argument,
else a view of it whose step is read off the two arrays' data pointers and strides
(``strided``: the result's element ``j`` is the argument's element ``start + columns j``).
The common views (indexing, transposes, reshapes) have steps of their own, cheaper to
find; a view that may repeat elements (np.broadcast_to, sliding windows) adds its
cotangent with np.add.at, so repeated elements sum.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import (ARRAY_DUALS, ArrayDual, FArrayDual, accumulate, dispatch,
                                  plain_array)
from ..runtime.duals import DUAL_TYPES
from .array import batched_vjps, register_jvp, register_vjp
from .array_shapes import as_dtype, take_index
from ..registry import publish, record
from ..runtime.array_rows import broadcast_rows, each_leading_row, on_leading_rows
from ..runtime.tape import BATCHED_BACKWARDS


class View:
    """The numpy operations taking a root array to a view of it, replayable on any array
    shaped like the root (a cotangent, a tangent with leading direction axes).
    ``repeats``: may the view show one element of the root at several places?"""

    __slots__ = ("steps", "repeats")

    def __init__(self, steps=(), repeats=False):
        self.steps = tuple(steps)
        self.repeats = repeats

    def then(self, kind: str, *args) -> View:
        repeats = self.repeats or (kind == "strided" and args[3])
        return View(self.steps + ((kind, args),), repeats)

    def __call__(self, a, batched: bool = False):
        for kind, args in self.steps:
            a = _STEPS[kind](a, batched, *args)
        return a

    def add_into(self, a, g, batched: bool = False) -> None:
        """Add ``g`` into the view's region of ``a`` (an ndarray shaped like the root), in
        place; an element the view shows at several places gets the sum. ``batched``: ``a``
        and ``g`` have a leading axis of rows, each row of ``g`` broadcast into its region."""
        region = self(a, batched)
        if batched:
            g = broadcast_rows(g, np.ndim(region) - 1)
        if self.repeats:
            np.add.at(region, Ellipsis, g)
        else:
            region[...] += g


def _index_step(a, batched, index):
    return a[(slice(None),) + index] if batched else a[index]


def _transpose_step(a, batched, axes):
    return np.transpose(a, (0,) + tuple(k + 1 for k in axes)) if batched else \
        np.transpose(a, axes)


def _reshape_step(a, batched, shape, order):
    return np.reshape(a, (np.shape(a)[0],) + shape if batched else shape, order=order)


def _strided_step(a, batched, start, columns, shape, repeats):
    """The view whose element ``j`` is ``a``'s element ``start + columns j`` (an affine
    map of indices: any strided view numpy makes), as a view of ``a`` whatever its
    layout; of an array dual (a derivative of a derivative), a view dual of it."""
    if type(a) in ARRAY_DUALS:
        return as_numpy_made(a, _strided_step(a.v, batched, start, columns, shape, repeats))
    lead = 1 if batched else 0
    inner = a.strides[lead:]
    origin = a[(slice(None),) * lead + tuple(slice(i, None) for i in start)] if start \
        else a[...]
    strides = tuple(sum(c * s for c, s in zip(column, inner)) for column in columns)
    return as_strided(origin, a.shape[:lead] + shape, a.strides[:lead] + strides)


_STEPS = {"index": _index_step, "transpose": _transpose_step, "reshape": _reshape_step,
          "strided": _strided_step}


def is_basic_index(index) -> bool:
    """Does ``index`` (a tuple) select a view (ints, slices, None, Ellipsis only)?"""
    return all(type(part) in (int, slice, type(None), type(Ellipsis)) or
               isinstance(part, (int, np.integer)) and not isinstance(part, bool)
               for part in index)


def view_of(x, value, kind: str, *args):
    """``value`` (numpy's result of a view operation on ``x``'s primal) as a view dual of
    ``x``'s level: its root and the steps from the root; None when ``value`` does not
    share ``x``'s memory (a copy: the ordinary rule records it)."""
    plain, base = plain_array(value), plain_array(x.v)  # (under every level: the memory)
    if type(plain) is not np.ndarray or type(base) is not np.ndarray or \
            plain.base is None or not np.may_share_memory(plain, base):
        return None
    root = x.root if x.root is not None else x
    view = (x.from_root or View()).then(kind, *args)
    if type(x) is FArrayDual:
        return FArrayDual(value, None, x.t, root, view)
    d = ArrayDual(value, -1, x.t, root, view, None)
    refresh_view(d)
    return d


def _index_view(args, kwargs):
    x, index = args
    index = index if type(index) is tuple else (index,)
    if not is_basic_index(index):
        return None
    return view_of(x, x.v[index], "index", index)


def _transpose_view(args, kwargs):
    x = args[0]
    axes = args[1] if len(args) > 1 else kwargs.get("axes")
    ndim = np.ndim(x.v)
    axes = tuple(range(ndim))[::-1] if axes is None else tuple(a % ndim for a in axes)
    return view_of(x, np.transpose(x.v, axes), "transpose", axes)


def _reshaping_view(fn):
    def view(args, kwargs):  # a view of the same elements in a new shape, in this order
        x = args[0]
        order = kwargs.get("order", "C")
        if order not in ("C", "F"):
            return None
        return view_of(x, fn(x.v, *args[1:], **kwargs), "reshape",
                       np.shape(fn(x.v, *args[1:], **kwargs)), order)
    return view


def _axes_view(fn):
    def view(args, kwargs):
        x = args[0]
        return view_of(x, fn(x.v, *args[1:], **kwargs), "transpose",
                       _permutation(fn, np.ndim(x.v), args, kwargs))
    return view


def _permutation(fn, ndim: int, args, kwargs) -> tuple:
    """The permutation of axes ``fn`` (swapaxes, moveaxis) applies: read off what it does
    to an array whose axis k has length k + 2 (and no memory: zero strides)."""
    probe = np.lib.stride_tricks.as_strided(np.zeros(1), tuple(range(2, ndim + 2)),
                                            (0,) * ndim)
    return tuple(size - 2 for size in fn(probe, *args[1:], **kwargs).shape)


# -- numpy's answer: which results share an argument's memory -------------------------------
def numpy_memory(result, args, kwargs, level):
    """``result`` (what a rule made of ``args``, at ``level``) as numpy made it: the
    argument itself where numpy returned the argument (np.asarray of an array), a view
    of the argument where it shares the argument's memory, else ``result``.
    runtime/array_dual.dispatch calls it on every result whose memory is not its own."""
    t = type(result)
    if t is tuple or t is list:
        return t(numpy_memory(r, args, kwargs, level) for r in result)
    if t not in ARRAY_DUALS or result.root is not None:
        return result
    for a in (*args, *kwargs.values()):
        if type(a) in ARRAY_DUALS and a.t is level:
            found = as_numpy_made(a, result.v)
            if found is not None:
                return found
    return result


publish("numpy_memory", numpy_memory)


def as_numpy_made(x, value):
    """``value`` (numpy's result of an operation on ``x``'s primal) as numpy made it from
    ``x``: ``x`` itself, a view dual of ``x`` (its step read off the two arrays' data
    pointers and strides), or None where ``value`` has memory of its own."""
    if value is x.v:
        return x
    plain, memory = plain_array(value), plain_array(x.v)  # (under every level: the memory)
    if type(plain) is not np.ndarray or type(memory) is not np.ndarray or \
            plain.base is None or not np.may_share_memory(plain, memory):
        return None
    found = _affine_index(memory, plain)
    if found is None:
        if not np.shares_memory(plain, memory):
            return None
        raise NotDifferentiableError(
            "this numpy call returns an array sharing memory with a differentiated array "
            "in a way astad cannot follow (another dtype, or a layout that is not a "
            "strided view); make a copy first (np.copy)", *user_location())
    start, columns, repeats = found
    return view_of(x, value, "strided", start, columns, plain.shape, repeats)


def _as_array(fn):
    """The ``view`` of np.asarray, np.asanyarray, np.ascontiguousarray,
    np.asfortranarray and np.require, which return their argument or a copy: numpy's
    answer on the memory decides which (its copy in numpy's layout, dtype and shape)."""
    def view(args, kwargs):
        x, memory = args[0], plain_array(args[0])
        probe = fn(memory, *args[1:], **kwargs)
        if probe is memory:
            return x
        order = "F" if probe.flags.f_contiguous and not probe.flags.c_contiguous else "C"
        out = dispatch(np.copy, (x,), {"order": order})
        if probe.dtype != memory.dtype:
            out = as_dtype(out, probe.dtype)
        return out if probe.shape == memory.shape else dispatch(np.reshape, (out, probe.shape),
                                                                {})
    return view


def _memory_view(fn):
    """The ``view`` of a record for numpy function ``fn``, whose result is a view of its
    first argument (or the argument itself) whenever numpy makes it one."""
    def view(args, kwargs):
        return as_numpy_made(args[0], fn(args[0].v, *args[1:], **kwargs))
    return view


def _affine_index(x, value):
    """``(start, columns, repeats)`` such that ``value``'s element ``j`` is ``x``'s
    element ``start + sum_k j[k] * columns[k]`` for every ``j``, read off the two arrays'
    data pointers and strides (``repeats``: the map may reach one element twice); None
    where there is no such map (another dtype, memory outside ``x``'s elements)."""
    if value.dtype != x.dtype:
        return None
    first = value.__array_interface__["data"][0] - x.__array_interface__["data"][0]
    start = _index_at(x, first)
    if start is None:
        return None
    columns = []
    for size, stride in zip(value.shape, value.strides):
        step = _index_at(x, first + stride) if size > 1 else start
        if step is None:
            return None
        columns.append(tuple(b - a for a, b in zip(start, step)))
    for m, n in enumerate(x.shape):  # (affine: its extremes are at the corners)
        reach = [c[m] * (size - 1) for c, size in zip(columns, value.shape)]
        if start[m] + sum(r for r in reach if r < 0) < 0 or \
                start[m] + sum(r for r in reach if r > 0) >= n:
            return None
    return tuple(start), tuple(columns), _may_repeat(value)


def _index_at(x, offset: int):
    """The index of ``x``'s element ``offset`` bytes from its first one, or None."""
    shape, strides = x.shape, x.strides
    rest = offset - sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    index = [0] * x.ndim  # (counted from the lowest address, largest stride first)
    for m in sorted(range(x.ndim), key=lambda m: -abs(strides[m])):
        s, n = abs(strides[m]), shape[m]
        if s == 0 or n == 1:
            continue
        q = min(rest // s, n - 1)
        if q < 0:
            return None
        rest -= q * s
        index[m] = q if strides[m] > 0 else n - 1 - q
    return index if rest == 0 else None


def _may_repeat(value) -> bool:
    """Does some element of ``value``'s memory appear at two of its indices? (Exact for
    nested strides, the layouts slicing and transposing make; otherwise decided by
    counting.)"""
    axes = sorted((abs(s), n) for s, n in zip(value.strides, value.shape) if n > 1)
    reach = value.itemsize
    for stride, n in axes:
        if stride < reach:
            break
        reach = stride * (n - 1) + reach
    else:
        return False
    if value.size == 0:
        return False
    origin = value.__array_interface__["data"][0]
    addresses = sum(np.arange(n).reshape((-1,) + (1,) * (value.ndim - 1 - k)) * s
                    for k, (s, n) in enumerate(zip(value.strides, value.shape)))
    return np.unique(np.ravel(addresses + origin)).size < value.size


def refresh_view(d: ArrayDual) -> None:
    """Record a view's entry reading its root's current version (array_dual.index_of)."""
    tape, root = d.t, d.root
    d.i = len(tape)
    d.synced = root.i
    tape.append((_view_backward, (root.i, root.v.shape, root.v.dtype), d.from_root))


publish("refresh_view", refresh_view)


def _view_backward(adjoint, arrays, k, parent, view):
    """A view's cotangent added into the region of its root's (the root's version it
    read), in place: work proportional to the view."""
    g = arrays.pop(k, None)
    if g is None:  # (a view is an array: its cotangent is one, or there is none)
        return
    slot, shape, dtype = parent
    existing = arrays.get(slot)
    if type(g) in DUAL_TYPES or (existing is not None and type(existing) is not np.ndarray):
        accumulate(adjoint, arrays, parent, region_add(None, view, g, shape, dtype))
        return
    if existing is None:
        existing = arrays[slot] = np.zeros(shape, dtype)
    view.add_into(existing, g)


def _view_rows(adjoint, arrays, k, parent, view, width) -> bool:
    """_view_backward on all rows of a Jacobian at once (tape.BATCHED_BACKWARDS): the
    view's steps taken with a leading axis."""
    g = arrays.get(k)
    if g is None:
        return True  # (no cotangent: nothing to add, in any row)
    slot, shape, dtype = parent
    existing = arrays.get(slot)
    if type(g) is not np.ndarray or g.shape[:1] != (width,) or (
            existing is not None and (type(existing) is not np.ndarray or
                                      existing.shape != (width,) + shape)):
        return False
    arrays.pop(k)
    if existing is None:
        existing = arrays[slot] = np.zeros((width,) + shape, dtype)
    view.add_into(existing, g, True)
    return True


BATCHED_BACKWARDS[_view_backward] = _view_rows


def region_add(base, view, g, shape, dtype):
    """``base`` (zeros when None) plus ``g`` added into its region ``view``: a primitive
    of its own, so that the backward step of a view can be differentiated again."""
    if type(g) in DUAL_TYPES or type(base) in DUAL_TYPES:
        return dispatch(region_add, (base, view, g, shape, dtype), {})
    out = np.zeros(shape, dtype) if base is None else np.array(base, dtype)
    view.add_into(out, g)
    return out




# -- the primitives the backward steps use: differentiable again -------------------------------
register_vjp(region_add, lambda g, r, base, view, value, shape, dtype: g,
             None, lambda g, r, base, view, value, shape, dtype: on_leading_rows(
                 g, len(shape), view))
batched_vjps(region_add)
register_jvp(region_add, lambda t, r, base, view, value, shape, dtype: t,
             None, lambda t, r, base, view, value, shape, dtype: each_leading_row(
                 t, np.ndim(value), lambda a: region_add(None, view, a, shape, dtype),
                 lambda rows: _region_rows(view, rows, shape, dtype)), batched=True)


def _region_rows(view, rows, shape, dtype):
    """region_add(None, view, row, shape, dtype) of each of ``rows`` (plain) at once."""
    out = np.zeros((len(rows),) + tuple(shape), dtype)
    view.add_into(out, rows, True)
    return out

# numpy functions whose result may share the array's memory: view(args, kwargs) gives it
# as a view dual when it does (None: the rule runs)
for _fn, _view in ((take_index, _index_view), (np.transpose, _transpose_view),
                   (np.reshape, _reshaping_view(np.reshape)),
                   (np.ravel, _reshaping_view(np.ravel)),
                   (np.squeeze, _reshaping_view(np.squeeze)),
                   (np.expand_dims, _reshaping_view(np.expand_dims)),
                   (np.swapaxes, _axes_view(np.swapaxes)),
                   (np.moveaxis, _axes_view(np.moveaxis))):
    record(_fn).view = _view
for _fn in (np.flip, np.flipud, np.fliplr, np.rot90, np.diagonal, np.broadcast_to, np.real,
            np.real_if_close, np.atleast_1d, np.atleast_2d, np.atleast_3d, np.trim_zeros,
            np.lib.stride_tricks.sliding_window_view, np.lib.stride_tricks.as_strided,
            *[getattr(np, name) for name in ("matrix_transpose", "permute_dims")
              if hasattr(np, name)]):  # (numpy 2)
    record(_fn).view = _memory_view(_fn)
for _fn in (np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray, np.require):
    record(_fn).view = _as_array(_fn)


def _unstack_view(args, kwargs):
    """np.unstack (numpy 2.1): the array's slices along an axis, each a view."""
    x = args[0]
    axis = kwargs.get("axis", args[1] if len(args) > 1 else 0) % np.ndim(x.v)
    return tuple(x[(slice(None),) * axis + (k,)] for k in range(np.shape(x.v)[axis]))


if hasattr(np, "unstack"):
    record(np.unstack).view = _unstack_view
