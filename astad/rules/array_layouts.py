"""Functions laying the same elements out anew: the split family, roll, rollaxis,
tril/triu, diag, diagonal, diagflat, fliplr/flipud, rot90, append, atleast_1d/2d/3d, tile
and pad.

All move elements linearly, so each jvp is the function applied to the tangent (with axes
counted from the end, so leading direction axes pass through) and each vjp its
transpose. Every vjp and jvp accepts leading (direction) axes.
"""
from __future__ import annotations

import numpy as np

from ..registry import RECORDS
from .array import (batched_vjps, differentiate_by_keyword, is_dual, NEW_ARRAYS, register_jvp,
                    register_vjp, result_kinds, set_rule, set_vjps)
from .array_axes import lead_shape, move_core_axes, negative_axes, negative_axis
from .array_gather import gather, positions_of, scatter_add
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import plain_array


# -- split, array_split, hsplit, vsplit, dsplit: one indexed piece each -----------------------
def _split_axis(fn, ary, args, kwargs):
    if fn is np.hsplit:
        return 1 if np.ndim(ary) > 1 else 0
    if fn is np.vsplit:
        return 0
    if fn is np.dsplit:
        return 2
    return kwargs.get("axis", args[2] if len(args) > 2 else 0)  # (args: ary, sections, axis)


def _split_bounds(pieces, axis):
    return np.cumsum([np.shape(p)[axis] for p in pieces])[:-1]


def _split_rule(fn):
    def rule(tape, ary, *args, **kwargs):  # (each piece indexed by numpy's dispatch)
        value = plain_array(ary)
        pieces = fn(value, *args, **kwargs)
        if not is_dual(ary):
            return pieces
        axis = _split_axis(fn, value, (value,) + args, kwargs) % value.ndim
        starts = np.concatenate(([0], _split_bounds(pieces, axis)))
        index = [slice(None)] * value.ndim
        duals = []
        for start, piece in zip(starts, pieces):
            index[axis] = slice(int(start), int(start) + piece.shape[axis])
            duals.append(ary[tuple(index)])
        return duals
    return rule


def _split_derivatives(fn):
    def vjp(gs, r, ary, *args, **kwargs):
        axis = negative_axis(_split_axis(fn, ary, (ary,) + args, kwargs), np.ndim(ary))
        lead = ()
        for g, piece in zip(gs, r):
            if g is not None:
                lead = lead_shape(g, np.ndim(piece))
                break
        filled = [np.zeros(lead + np.shape(piece)) if g is None else g for g, piece in zip(gs, r)]
        return np.concatenate(filled, axis=axis)

    def jvp(t, r, ary, *args, **kwargs):
        axis = _split_axis(fn, ary, (ary,) + args, kwargs) % np.ndim(ary)
        return np.split(t, _split_bounds(r, axis), axis=axis - np.ndim(ary))
    return vjp, jvp


for _fn in (np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit):
    set_rule(_fn, _split_rule(_fn))
    _vjp, _jvp = _split_derivatives(_fn)
    set_vjps(_fn, _vjp)
    register_jvp(_fn, _jvp, batched=True)
    batched_vjps(_fn)


# -- roll, rollaxis ------------------------------------------------------------------------------
def _roll(x, shift, axis, core_ndim):
    if axis is None:  # numpy rolls the flattened array
        lead = lead_shape(x, core_ndim)
        flat = np.roll(np.reshape(x, lead + (-1,)), shift, axis=-1)
        return np.reshape(flat, np.shape(x))
    return np.roll(x, shift, axis=negative_axes(axis, core_ndim))


def _negated(shift):
    return -shift if np.ndim(shift) == 0 else tuple(-s for s in shift)


register_vjp(np.roll, lambda g, r, a, shift, axis=None: _roll(g, _negated(shift), axis,
                                                              np.ndim(a)))
register_jvp(np.roll, lambda t, r, a, shift, axis=None: _roll(t, shift, axis, np.ndim(a)),
             batched=True)


def _rollaxis_perm(ndim, axis, start):
    """rollaxis as a permutation of the axes (read off a view with distinct sizes)."""
    probe = np.broadcast_to(0.0, tuple(range(2, ndim + 2)))
    return tuple(n - 2 for n in np.rollaxis(probe, axis, start).shape)


def _rollaxis_vjp(g, r, a, axis, start=0):
    perm = _rollaxis_perm(np.ndim(a), axis, start)
    return np.transpose(g, move_core_axes(g, np.ndim(a), tuple(np.argsort(perm))))


def _rollaxis_jvp(t, r, a, axis, start=0):
    return np.transpose(t, move_core_axes(t, np.ndim(a), _rollaxis_perm(np.ndim(a), axis,
                                                                        start)))


register_vjp(np.rollaxis, _rollaxis_vjp)
register_jvp(np.rollaxis, _rollaxis_jvp, batched=True)


# -- triangles and diagonals ---------------------------------------------------------------------
def _triangle(fn):
    def vjp(g, r, m, k=0):
        masked = fn(g, k)
        return np.sum(masked, axis=-2) if np.ndim(m) == 1 else masked

    def jvp(t, r, m, k=0):
        if np.ndim(m) == 1:  # numpy repeats a vector as the rows of a matrix
            n = np.shape(m)[0]
            t = np.broadcast_to(np.expand_dims(t, -2), lead_shape(t, 1) + (n, n))
        return fn(t, k)
    return vjp, jvp


for _fn in (np.tril, np.triu):
    _vjp, _jvp = _triangle(_fn)
    register_vjp(_fn, _vjp)
    register_jvp(_fn, _jvp, batched=True)


def embed_diagonal(d, rows, cols, k=0):
    """Matrices (rows x cols) with the vectors ``d`` (last axis, any leading axes) on their
    k-th diagonal and zeros elsewhere."""
    length = np.shape(d)[-1]
    size = rows if k >= 0 else cols
    if length < size:
        pad = np.zeros(np.shape(d)[:-1] + (size - length,), dtype=getattr(d, "dtype", float))
        d = np.concatenate((d, pad), axis=-1)
    eye = np.eye(rows, cols, k)
    return np.expand_dims(d, -1 if k >= 0 else -2) * eye


def _diag_vjp(g, r, v, k=0):
    if np.ndim(v) == 1:
        return np.diagonal(g, k, axis1=-2, axis2=-1)
    return embed_diagonal(g, *np.shape(v), k)


def _diag_jvp(t, r, v, k=0):
    if np.ndim(v) == 1:
        n = np.shape(v)[0] + abs(k)
        return embed_diagonal(t, n, n, k)
    return np.diagonal(t, k, axis1=-2, axis2=-1)


def _diagonal_vjp(g, r, a, offset=0, axis1=0, axis2=1):
    ndim = np.ndim(a)
    ax1, ax2 = negative_axis(axis1, ndim), negative_axis(axis2, ndim)
    full = embed_diagonal(g, np.shape(a)[ax1], np.shape(a)[ax2], offset)
    return np.moveaxis(full, (-2, -1), (ax1, ax2))


def _diagonal_jvp(t, r, a, offset=0, axis1=0, axis2=1):
    ndim = np.ndim(a)
    return np.diagonal(t, offset, negative_axis(axis1, ndim), negative_axis(axis2, ndim))


def _diagflat_vjp(g, r, v, k=0):
    return np.reshape(np.diagonal(g, k, axis1=-2, axis2=-1), lead_shape(g, 2) + np.shape(v))


def _diagflat_jvp(t, r, v, k=0):
    n = int(np.size(v)) + abs(k)
    return embed_diagonal(np.reshape(t, lead_shape(t, np.ndim(v)) + (-1,)), n, n, k)


register_vjp(np.diag, _diag_vjp)
register_jvp(np.diag, _diag_jvp, batched=True)
register_vjp(np.diagonal, _diagonal_vjp)
register_jvp(np.diagonal, _diagonal_jvp, batched=True)
register_vjp(np.diagflat, _diagflat_vjp)
register_jvp(np.diagflat, _diagflat_jvp, batched=True)


# -- flips and rotations -------------------------------------------------------------------------
register_vjp(np.fliplr, lambda g, r, m: np.flip(g, 1 - np.ndim(m)))
register_jvp(np.fliplr, lambda t, r, m: np.flip(t, 1 - np.ndim(m)), batched=True)
register_vjp(np.flipud, lambda g, r, m: np.flip(g, -np.ndim(m)))
register_jvp(np.flipud, lambda t, r, m: np.flip(t, -np.ndim(m)), batched=True)
register_vjp(np.rot90, lambda g, r, m, k=1, axes=(0, 1): np.rot90(
    g, -k, axes=tuple(negative_axis(x, np.ndim(m)) for x in axes)))
register_jvp(np.rot90, lambda t, r, m, k=1, axes=(0, 1): np.rot90(
    t, k, axes=tuple(negative_axis(x, np.ndim(m)) for x in axes)), batched=True)


# -- append, atleast_*d, tile --------------------------------------------------------------------
def _append_parts(g, r, arr, values, axis):
    """The cotangents of ``arr`` and ``values`` in ``g``."""
    if axis is None:
        flat = np.reshape(g, lead_shape(g, 1) + (-1,))
        n = int(np.size(arr))
        lead = lead_shape(g, 1)
        return (np.reshape(flat[..., :n], lead + np.shape(arr)),
                np.reshape(flat[..., n:], lead + np.shape(values)))
    axis = negative_axis(axis, np.ndim(r))
    first, second = np.split(g, [np.shape(arr)[axis]], axis=axis)
    return first, second


def _append_jvp(k):
    def jvp(t, r, arr, values, axis=None):
        parts = [arr, values]
        lead = lead_shape(t, np.ndim(parts[k]))
        zeros = np.zeros(lead + np.shape(parts[1 - k]))
        pieces = [t, zeros] if k == 0 else [zeros, t]
        if axis is None:
            pieces = [np.reshape(p, lead + (-1,)) for p in pieces]
            return np.concatenate(pieces, axis=-1)
        return np.concatenate(pieces, axis=negative_axis(axis, np.ndim(r)))
    return jvp


register_vjp(np.append, lambda g, r, arr, values, axis=None: _append_parts(
    g, r, arr, values, axis)[0], lambda g, r, arr, values, axis=None: _append_parts(
    g, r, arr, values, axis)[1])
register_jvp(np.append, _append_jvp(0), _append_jvp(1), batched=True)
differentiate_by_keyword(np.append, ("arr", "values"))

_SEVERAL_AS_TUPLE = isinstance(np.atleast_1d(0.0, 0.0), tuple)  # (numpy 2; a list before)
_ATLEAST = {np.atleast_1d: {0: (1,)}, np.atleast_2d: {0: (1, 1), 1: (1, None)},
            np.atleast_3d: {0: (1, 1, 1), 1: (1, None, 1), 2: (None, None, 1)}}


def _atleast_shape(fn, shape):
    layout = _ATLEAST[fn].get(len(shape))
    if layout is None:
        return tuple(shape)
    sizes = iter(shape)
    return tuple(next(sizes) if n is None else n for n in layout)


def _atleast(fn):
    rule = None

    def vjp(g, r, a):
        return np.reshape(g, lead_shape(g, len(_atleast_shape(fn, np.shape(a)))) + np.shape(a))

    def jvp(t, r, a):
        return np.reshape(t, lead_shape(t, np.ndim(a)) + _atleast_shape(fn, np.shape(a)))

    def several(tape, *arys):
        if len(arys) == 1:
            return rule(tape, arys[0])
        results = [fn(a) for a in arys]
        return tuple(results) if _SEVERAL_AS_TUPLE else results
    register_vjp(fn, vjp)
    register_jvp(fn, jvp, batched=True)
    rule = RECORDS[fn].array
    set_rule(fn, several)


for _fn in _ATLEAST:
    _atleast(_fn)


def _tile_layout(a, reps):
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    ndim = max(np.ndim(a), len(reps))
    shape = (1,) * (ndim - np.ndim(a)) + np.shape(a)
    reps = (1,) * (ndim - len(reps)) + reps
    return shape, reps


def _tile_vjp(g, r, a, reps):
    shape, reps = _tile_layout(a, reps)
    lead = lead_shape(g, len(shape))
    split = np.reshape(g, lead + tuple(n for pair in zip(reps, shape) for n in pair))
    summed = np.sum(split, axis=tuple(2 * k - 2 * len(shape) for k in range(len(shape))))
    return np.reshape(summed, lead + np.shape(a))


def _tile_jvp(t, r, a, reps):
    shape, reps = _tile_layout(a, reps)
    lead = lead_shape(t, np.ndim(a))
    return np.tile(np.reshape(t, lead + shape), (1,) * len(lead) + reps)


register_vjp(np.tile, _tile_vjp)
register_jvp(np.tile, _tile_jvp, batched=True)


# -- pad: a gather for the modes that copy elements --------------------------------------------
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_checks(mode, kwargs):
    if mode not in _PAD_MODES or kwargs.get("reflect_type", "even") != "even":
        raise NotDifferentiableError(
            f"astad differentiates np.pad in modes {_PAD_MODES} (reflect_type='even'), not "
            f"{mode!r}", *user_location())


def _pad_widths(a, pad_width):
    return np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (np.ndim(a), 2))


def _pad_positions(a, pad_width, mode, kwargs):
    def move(p):
        if mode == "constant":
            return np.pad(p, pad_width, mode="constant", constant_values=-1)
        return np.pad(p, pad_width, mode=mode, **kwargs)
    return positions_of(np.shape(a), move)


def _pad_vjp(g, r, array, pad_width, mode="constant", **kwargs):
    _pad_checks(mode, kwargs)
    widths = _pad_widths(array, pad_width)
    if mode == "constant":  # the array is a block of the result
        return g[(Ellipsis,) + tuple(slice(int(lo), int(lo) + n) for (lo, _), n in
                                     zip(widths, np.shape(array)))]
    positions = _pad_positions(array, pad_width, mode, kwargs)
    back = scatter_add(g, positions, int(np.size(array)))
    return np.reshape(back, lead_shape(g, np.ndim(positions)) + np.shape(array))


def _pad_jvp(t, r, array, pad_width, mode="constant", **kwargs):
    _pad_checks(mode, kwargs)
    if mode == "constant":
        lead = lead_shape(t, np.ndim(array))
        widths = [(0, 0)] * len(lead) + [tuple(w) for w in _pad_widths(array, pad_width)]
        return np.pad(t, widths)
    return gather(t, _pad_positions(array, pad_width, mode, kwargs), np.ndim(array))


def _pad_modes(array, pad_width, mode="constant", **kwargs):
    _pad_checks(mode, kwargs)


register_vjp(np.pad, _pad_vjp)
differentiate_by_keyword(np.pad, ("array", "pad_width", "mode"), _pad_modes)
register_jvp(np.pad, _pad_jvp, batched=True)

result_kinds(NEW_ARRAYS, np.tile)
batched_vjps(np.roll, np.rollaxis, np.tril, np.triu, np.diag, np.diagonal,
             np.diagflat, np.fliplr, np.flipud, np.rot90, np.append, *_ATLEAST,
             np.tile, np.pad)
