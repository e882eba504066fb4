"""numpy's functions that write into an argument (``np.add.at``, ``np.copyto``,
``np.put``, ``np.put_along_axis``: numpy's dispatch calls them instead of a rule), as
writes (array_writes.setitem); and numpy's functions making a new array inside
differentiated code (``np.zeros``, ``np.full``, ``np.copy``...), each a differentiated
constant that any value may be written into.
"""
from __future__ import annotations

import numpy as np

from ..errors import NotDifferentiableError, user_location
from ..registry import ad, define, record
from ..runtime.array_dual import ARRAY_DUALS, dispatch, made_array, plain_array
from ..runtime.duals import DUAL_TYPES
from .array_building import full, full_like
from .array_shapes import index_scatter
from .array_writes import setitem


# -- numpy functions that write into an argument ------------------------------------------------
def _add_at(a, index, b=None):
    """np.add.at(a, index, b): b added at index, repeated indices adding each time."""
    index = index if type(index) is tuple else (index,)
    total = a + index_scatter(b, index, np.shape(a), _dtype(a))
    primal = plain_array(total)  # (under every level: total is new)
    if type(total) in ARRAY_DUALS and type(primal) is np.ndarray:
        # numpy adds a repeated index's values one at a time, rounding after each: the
        # primal as numpy computes it (the derivative is the same linear map)
        exact = np.array(plain_array(a), dtype=primal.dtype)
        np.add.at(exact, index, plain_array(b))
        primal[...] = exact
    setitem(None, total, a, Ellipsis)


def _copyto(dst, src, casting="same_kind", where=True):
    if where is not True:
        raise NotDifferentiableError("astad differentiates np.copyto without where=",
                                     *user_location())
    setitem(None, src, dst, Ellipsis)


def _put_along_axis(arr, indices, values, axis):
    setitem(None, values, arr, _along_axis(np.shape(arr), np.asarray(indices), axis))


def _put(a, ind, v, mode="raise"):
    """np.put: ``v`` (repeated as needed) at the flat positions ``ind`` of ``a``, in any
    layout; a repeated position keeps its last value, as numpy's."""
    shape = np.shape(a)
    positions = np.asarray(ind, dtype=np.intp).ravel()
    size = int(np.prod(shape))
    if mode == "wrap":
        positions = positions % size
    elif mode == "clip":
        positions = np.clip(positions, 0, size - 1)
    positions = np.where(positions < 0, positions + size, positions)
    values = v if type(v) in ARRAY_DUALS else np.asarray(v) if type(v) not in DUAL_TYPES \
        else ad.np_asarray(None, v)
    if np.size(values) != positions.size:  # (numpy repeats the values in turn)
        values = np.reshape(values, (-1,))[np.arange(positions.size) % max(np.size(values), 1)]
    else:
        values = np.reshape(values, (-1,))
    setitem(None, values, a, np.unravel_index(positions, shape))


def _along_axis(shape, indices, axis) -> tuple:
    """The fancy index np.put_along_axis writes: ``indices`` along ``axis``, every other
    axis by position."""
    if axis is None:
        return (indices.ravel(),) if len(shape) == 1 else np.unravel_index(indices.ravel(),
                                                                              shape)
    axis %= len(shape)
    parts = []
    for k, n in enumerate(indices.shape):
        if k == axis:
            parts.append(indices)
        else:
            shape_k = [1] * indices.ndim
            shape_k[k] = n
            parts.append(np.arange(n).reshape(shape_k))
    return tuple(parts)


def _dtype(a):
    while type(a) in DUAL_TYPES:
        a = a.v
    return a.dtype


# numpy functions that write into an argument: dispatch calls them instead of a rule
for _fn, _writer in (((np.add, "at"), _add_at), (np.copyto, _copyto),
                     (np.put_along_axis, _put_along_axis), (np.put, _put)):
    record(_fn).writer = _writer


# -- arrays made inside differentiated code ------------------------------------------------------
def _creation(fn):
    """The rule of a function making a new array: a differentiated constant."""
    def rule(tape, *args, **kwargs):
        plain = [plain_array(a) for a in args]  # (zeros_like(x) of a differentiated x: x's shape)
        return made_array(fn(*plain, **{k: plain_array(v) for k, v in kwargs.items()}))
    rule.__name__ = f"np_{fn.__name__}"
    return rule


for _fn in (np.zeros, np.ones, np.empty, np.zeros_like, np.ones_like, np.empty_like, np.eye,
            np.identity):
    define(f"np_{_fn.__name__}", _creation(_fn), _fn)


def _made(rule):
    """A rule making a new array (np.full's, for a differentiated fill): what it gives for
    a plain fill, a differentiated constant."""
    def made(tape, *args, **kwargs):
        value = rule(tape, *args, **kwargs)
        return value if type(value) in DUAL_TYPES else made_array(value)
    return made


define("np_full", _made(full), np.full)  # (np.full dispatches on like= only)
define("np_full_like", _made(full_like), np.full_like)


def _copy(tape, a, *args, **kwargs):
    """np.copy: of a differentiated array, its rule (a copy is differentiated); of a
    plain one, a new differentiated constant."""
    if type(a) in DUAL_TYPES:
        return dispatch(np.copy, (a,) + args, kwargs)
    return made_array(np.copy(a, *args, **kwargs))


define("np_copy", _copy, np.copy)
