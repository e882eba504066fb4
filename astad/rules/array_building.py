"""Building arrays from values: select, linspace, gradient, full, full_like, and the index
tricks ``np.r_`` and ``np.c_`` (``np.r_[a, b]``: transform/reverse.py routes a subscript
of either to ``index_trick`` here).

select is a chain of np.where (the same choices numpy makes); linspace is linear in its
endpoints; gradient is linear in its array, a banded matrix along each axis whose
transpose the vjp applies. Every vjp and jvp accepts leading (direction) axes.
"""
from __future__ import annotations

import numpy as np

from ..registry import RECORDS, publish
from .array import (batched_vjps, differentiate_by_keyword, is_dual, register_jvp, register_vjp,
                    set_rule, set_vjps)
from .array_axes import align_core, lead_shape, sum_to_shape
from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import plain_array


# -- select ----------------------------------------------------------------------------------------
def _select_masks(condlist):
    """For each condition, where it is the first true one; and where none is."""
    taken = np.zeros(np.broadcast_shapes(*[np.shape(c) for c in condlist]), dtype=bool)
    masks = []
    for c in condlist:
        c = np.asarray(c, dtype=bool)
        masks.append(c & ~taken)
        taken = taken | c
    return masks, ~taken


def _select_rule(tape, condlist, choicelist, default=0):
    if not any(is_dual(x) for x in list(choicelist) + [default]):
        return np.select(condlist, choicelist, default)
    result = default
    for condition, choice in zip(reversed(list(condlist)), reversed(list(choicelist))):
        result = np.where(condition, choice, result)  # (the where rule, on duals)
    return result


def _select_vjp_choices(g, r, condlist, choicelist, default=0):
    masks, _ = _select_masks(condlist)
    return [sum_to_shape(g * m, np.shape(c), np.ndim(r)) for m, c in zip(masks, choicelist)]


def _select_vjp_default(g, r, condlist, choicelist, default=0):
    _, none = _select_masks(condlist)
    return sum_to_shape(g * none, np.shape(default), np.ndim(r))


def _select_jvp_choices(t, r, condlist, choicelist, default=0):
    masks, _ = _select_masks(condlist)
    total = 0.0
    for tk, m, c in zip(t, masks, choicelist):
        if tk is not None:
            total = total + align_core(tk, np.ndim(c), np.ndim(r)) * m
    return total


def _select_jvp_default(t, r, condlist, choicelist, default=0):
    _, none = _select_masks(condlist)
    return align_core(t, np.ndim(default), np.ndim(r)) * none


set_rule(np.select, _select_rule)
set_vjps(np.select, None, _select_vjp_choices, _select_vjp_default)
register_jvp(np.select, None, _select_jvp_choices, _select_jvp_default, batched=True)


# -- linspace: start * (1 - w) + stop * w along the new axis ----------------------------------
def _linspace_weights(r, num, endpoint, axis, core_ndim):
    """(weight of start, weight of stop), shaped to lie along ``axis`` of the result."""
    divisions = (num - 1 if endpoint else num) if num > 1 or not endpoint else 0
    w = np.arange(num) / divisions if divisions > 0 else np.zeros(num)
    shape = [1] * core_ndim
    shape[axis] = num
    w = w.reshape(shape)
    return 1.0 - w, w


def _linspace_rules(k):
    def vjp(g, r, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
            **kw):
        core = np.ndim(r)
        axis = axis % core
        weight = _linspace_weights(r, num, endpoint, axis, core)[k]
        summed = np.sum(g * weight, axis=axis - core)
        return sum_to_shape(summed, np.shape((start, stop)[k]), core - 1)

    def jvp(t, r, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
            **kw):
        core = np.ndim(r)
        axis = axis % core
        weight = _linspace_weights(r, num, endpoint, axis, core)[k]
        t = align_core(t, np.ndim((start, stop)[k]), core - 1)
        return np.expand_dims(t, axis - core) * weight
    return vjp, jvp


(_ls_vjp_start, _ls_jvp_start), (_ls_vjp_stop, _ls_jvp_stop) = (_linspace_rules(0),
                                                                  _linspace_rules(1))
register_vjp(np.linspace, _ls_vjp_start, _ls_vjp_stop)
register_jvp(np.linspace, _ls_jvp_start, _ls_jvp_stop, batched=True)


def _linspace_without_step(start, stop, num=50, endpoint=True, retstep=False, **kwargs):
    if retstep:
        raise NotDifferentiableError("astad differentiates np.linspace(..., retstep=False) "
                                     "only; compute the step as (stop - start) / (num - 1)",
                                     *user_location())


differentiate_by_keyword(np.linspace, ("start", "stop", "num", "endpoint", "retstep"),
                         _linspace_without_step)


# -- gradient: along each axis a banded matrix (central differences, one-sided edges) ------
def _band(n, spacing, edge_order):
    """{d: c}: c[j] = G[j + d, j], the gradient matrix G along an axis of length n, read off
    np.gradient of five combs (G has at most 5 diagonals)."""
    columns = {}
    for residue in range(5):
        comb = (np.arange(n) % 5 == residue) * 1.0
        columns[residue] = np.gradient(comb, *spacing, edge_order=edge_order)
    band = {}
    for d in range(-2, 3):
        j = np.arange(n)
        i = j + d
        inside = (i >= 0) & (i < n)
        values = np.zeros(n)
        for residue in range(5):
            pick = inside & (j % 5 == residue)
            values[pick] = columns[residue][i[pick]]
        band[d] = values
    return band


def _shift(x, d):
    """y[..., j] = x[..., j + d] (zero outside), along the last axis."""
    n = np.shape(x)[-1]
    if d == 0:
        return x
    zeros = np.zeros(np.shape(x)[:-1] + (min(abs(d), n),), dtype=getattr(x, "dtype", float))
    if d > 0:
        return np.concatenate((x[..., d:], zeros), axis=-1)
    return np.concatenate((zeros, x[..., :d]), axis=-1)


def _gradient_axes(f, axis):
    ndim = np.ndim(f)
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in ((axis,) if np.ndim(axis) == 0 else axis))


def _spacing(varargs, k, count):
    if not varargs:
        return ()
    return (varargs[0],) if len(varargs) == 1 else (varargs[k],)


def _gradient_vjp(g, r, f, *varargs, axis=None, edge_order=1):
    axes = _gradient_axes(f, axis)
    gs = g if isinstance(g, (list, tuple)) else [g]
    total = 0.0
    for k, (a, gk) in enumerate(zip(axes, gs)):
        if gk is None:
            continue
        a = a - np.ndim(f)
        band = _band(np.shape(f)[a], _spacing(varargs, k, len(axes)), edge_order)
        moved = np.moveaxis(gk, a, -1)
        back = sum(_shift(moved, d) * c for d, c in band.items())
        total = total + np.moveaxis(back, -1, a)
    return total


def _gradient_jvp(t, r, f, *varargs, axis=None, edge_order=1):
    axes = tuple(a - np.ndim(f) for a in _gradient_axes(f, axis))
    return np.gradient(t, *varargs, axis=axes if len(axes) > 1 else axes[0],
                       edge_order=edge_order)


register_vjp(np.gradient, _gradient_vjp)
register_jvp(np.gradient, _gradient_jvp, batched=True)
_gradient_one_axis = RECORDS[np.gradient].array
_SEVERAL_AS_TUPLE = isinstance(np.gradient(np.zeros((3, 3))), tuple)  # (a list before 2.0)


def _gradient_rule(tape, f, *varargs, axis=None, edge_order=1):
    """One recorded gradient per axis (numpy computes each alone, so the values agree)."""
    axes = _gradient_axes(plain_array(f), axis)
    for v in varargs:
        if is_dual(v):
            raise NotDifferentiableError("astad differentiates np.gradient in its array, not "
                                         "in the spacing", *user_location())
    if np.ndim(axis) == 0 and axis is not None or len(axes) == 1:
        return _gradient_one_axis(tape, f, *_spacing(varargs, 0, 1), axis=axes[0],
                                  edge_order=edge_order)
    results = [_gradient_one_axis(tape, f, *_spacing(varargs, k, len(axes)), axis=a,
                                  edge_order=edge_order) for k, a in enumerate(axes)]
    return tuple(results) if _SEVERAL_AS_TUPLE else results


set_rule(np.gradient, _gradient_rule)


# -- full, full_like: a differentiated fill value, broadcast ----------------------------------
def _broadcast_fill(fill_value, shape, dtype):
    """np.full's value for a differentiated fill: broadcast and copied (by numpy's
    dispatch, at the fill value's level)."""
    filled = np.copy(np.broadcast_to(fill_value, shape))
    return filled if dtype is None else filled.astype(dtype)


def full(tape, shape, fill_value, dtype=None, **kwargs):
    if not is_dual(fill_value):
        return np.full(shape, fill_value, dtype, **kwargs)
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    return _broadcast_fill(fill_value, shape, dtype)


def full_like(tape, a, fill_value, dtype=None, *args, **kwargs):
    if not is_dual(fill_value):
        return np.full_like(plain_array(a), fill_value, dtype, *args, **kwargs)
    return _broadcast_fill(fill_value, np.shape(a),
                           dtype if dtype is not None else plain_array(a).dtype)


def _full_vjp(g, r, shape, fill_value, dtype=None, **kw):
    return sum_to_shape(g, np.shape(fill_value), np.ndim(r))


def _full_jvp(t, r, shape, fill_value, dtype=None, **kw):
    lead = lead_shape(t, np.ndim(fill_value))
    return np.broadcast_to(align_core(t, np.ndim(fill_value), np.ndim(r)), lead + np.shape(r))


set_rule(np.full_like, full_like)  # (np.full dispatches on like= only: array_writes.py
                                   # makes ``full`` the rule calls of it are resolved to)
set_vjps(np.full, None, _full_vjp)
set_vjps(np.full_like, None, _full_vjp)
register_jvp(np.full, None, _full_jvp, batched=True)
register_jvp(np.full_like, None, _full_jvp, batched=True)


# -- np.r_ and np.c_ ---------------------------------------------------------------------------
def _trick_pieces(tape, trick, items):
    pieces = []
    for item in items:
        if isinstance(item, str):
            raise NotDifferentiableError(f"astad differentiates {_trick_name(trick)}[...] "
                                         "without string directives", *user_location())
        if not is_dual(item):
            pieces.append(trick[item] if isinstance(item, slice) else item)
            continue
        shape = np.shape(item)
        if trick is np.c_:
            new = {0: (1, 1), 1: (shape[0] if shape else 1, 1)}.get(len(shape), shape)
        else:
            new = (1,) if not shape else shape
        pieces.append(item if new == shape else np.reshape(item, new))
    return pieces


def _trick_name(trick):
    return "np.c_" if trick is np.c_ else "np.r_"


def index_trick(tape, trick, items):
    """``np.r_[items]`` or ``np.c_[items]`` holding differentiated values: concatenations."""
    items = items if isinstance(items, tuple) else (items,)
    if not any(is_dual(x) for x in items):
        return trick[items]
    pieces = _trick_pieces(tape, trick, items)  # (joined by numpy's dispatch, at their level)
    if trick is np.c_:
        pieces = [np.asarray(p).reshape(-1, 1) if not is_dual(p) and np.ndim(p) < 2 else p
                  for p in pieces]
        return np.concatenate(pieces, axis=-1)
    pieces = [np.atleast_1d(p) if not is_dual(p) else p for p in pieces]
    return np.concatenate(pieces, axis=0)


def _trick_vjp(trick):
    def vjp(g, r, items):
        items = items if isinstance(items, (tuple, list)) else (items,)
        sizes, shapes = [], []
        for item in items:
            shape = np.shape(trick[item] if isinstance(item, slice) else item)
            shapes.append(shape)
            if trick is np.c_:
                sizes.append(1 if len(shape) < 2 else shape[-1])
            else:
                sizes.append(1 if not shape else shape[0])
        axis = -1 if trick is np.c_ else -np.ndim(r)
        pieces = np.split(g, np.cumsum(sizes)[:-1], axis=axis)
        lead = lead_shape(g, np.ndim(r))
        return tuple(np.reshape(p, lead + s) for p, s in zip(pieces, shapes))
    return vjp


def _trick_jvp(trick):
    def jvp(t, r, items):
        items = items if isinstance(items, (tuple, list)) else (items,)
        lead = next((lead_shape(tk, np.ndim(x)) for tk, x in zip(t, items) if tk is not None),
                    ())
        pieces = []
        for tk, item in zip(t, items):
            value = trick[item] if isinstance(item, slice) else item
            shape = np.shape(value)
            tk = np.zeros(lead + shape) if tk is None else tk
            if trick is np.c_:
                new = {0: (1, 1), 1: (shape[0] if shape else 1, 1)}.get(len(shape), shape)
            else:
                new = (1,) if not shape else shape
            pieces.append(np.reshape(tk, lead + tuple(new)))
        return np.concatenate(pieces, axis=-1 if trick is np.c_ else -np.ndim(r))
    return jvp


publish("index_trick", index_trick)
publish("slice", slice)  # (the slices of np.r_[0:3, x], as generated code builds them)
for _trick in (np.r_, np.c_):
    set_vjps(_trick, _trick_vjp(_trick))
    register_jvp(_trick, _trick_jvp(_trick), batched=True)
batched_vjps(np.select, np.linspace, np.gradient, np.full, np.full_like, np.r_,
             np.c_)
INDEX_TRICKS = (np.r_, np.c_)
