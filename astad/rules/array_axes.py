"""Axis bookkeeping shared by the array rules' vjps and jvps.

A vjp (jvp) declared batched receives a cotangent (tangent) with extra LEADING axes, one
per direction, and must give a result with the same leading axes. The helpers here let a
rule compute on the trailing "core" axes only: axes as negative numbers (counted from the
end, so leading axes do not shift them), reductions re-expanded behind any leading axes,
broadcasting undone without summing the leading axes away.

Everything here computes with numpy functions astad differentiates (no ``np.asarray`` of
a cotangent), so the rules that use it can be differentiated again.
"""
from __future__ import annotations

import math
import struct

import numpy as np


def axes_of(axis, ndim: int) -> tuple:
    """``axis`` (None, an int or a sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if np.ndim(axis) == 0:
        return (int(axis) % ndim if ndim else 0,)
    return tuple(sorted(int(a) % ndim for a in axis))


def negative_axes(axis, ndim: int):
    """``axis`` counted from the end, in the order given (None: every axis), valid behind
    leading axes."""
    if axis is None:
        return tuple(range(-ndim, 0))
    if np.ndim(axis) == 0:
        return int(axis) % ndim - ndim if ndim else -1
    return tuple(int(a) % ndim - ndim for a in axis)


def negative_axis(axis: int, ndim: int) -> int:
    return int(axis) % ndim - ndim


def lead_ndim(value, core_ndim: int) -> int:
    """How many leading (direction) axes ``value`` has beyond its ``core_ndim`` axes."""
    return np.ndim(value) - core_ndim


def lead_shape(value, core_ndim: int) -> tuple:
    shape = np.shape(value)
    return shape[:len(shape) - core_ndim]


def reduced_ndim(ndim: int, axis, keepdims) -> int:
    """The number of axes a reduction over ``axis`` leaves of ``ndim``."""
    if keepdims:
        return ndim
    return ndim - len(axes_of(axis, ndim))


def expand_reduced(g, shape: tuple, axis, keepdims):
    """The cotangent ``g`` of a reduction over ``axis`` of an array of ``shape`` (with any
    leading axes) broadcast back to ``shape``: a read-only view, no copy."""
    if axis is None and not keepdims:  # (the common case, quickly)
        if type(g) is float or type(g) is np.float64:
            return _filled_view(g, shape)
        if np.ndim(g) == 0:
            return np.broadcast_to(g, shape)
    ndim = len(shape)
    axes = axes_of(axis, ndim)
    lead = lead_shape(g, ndim if keepdims else ndim - len(axes))
    if not keepdims and ndim:
        g = np.reshape(g, lead + tuple(1 if k in axes else n for k, n in enumerate(shape)))
    return _broadcast_view(g, lead + tuple(shape))


_DOUBLE = struct.Struct("d")


def _filled_view(g, shape: tuple):
    """``np.broadcast_to(g, shape)`` of a float ``g``: a read-only float64 array of zero
    strides over its 8 bytes (a fraction of broadcast_to's cost, paid per reduction)."""
    return np.ndarray(shape, np.float64, _DOUBLE.pack(g), 0, (0,) * len(shape))


def _broadcast_view(g, shape: tuple):
    """``np.broadcast_to(g, shape)``, read-only; for a C-contiguous array ``g`` of as many
    axes, made directly (zero strides where ``g`` has 1), a fraction of broadcast_to's
    cost (a reduction's cotangent has that form: a fresh array, its reduced axes kept)."""
    if type(g) is np.ndarray and g.ndim == len(shape) and g.dtype.kind in "fc" and \
            g.flags.c_contiguous and \
            all(m == n or m == 1 for m, n in zip(g.shape, shape)):
        strides = tuple(0 if m != n else stride for m, n, stride in
                        zip(g.shape, shape, g.strides))
        view = np.ndarray(shape, g.dtype, g, 0, strides)
        view.flags.writeable = False
        return view
    return np.broadcast_to(g, shape)


def count(shape: tuple, axis) -> int:
    """How many elements a reduction over ``axis`` combines into each result."""
    return math.prod(shape[a] for a in axes_of(axis, len(shape)))


def sum_to_shape(g, shape, core_ndim: int | None = None):
    """``g`` (a broadcast result of ``core_ndim`` axes, with any leading axes) summed over
    the axes numpy broadcast to reach it from ``shape``. Without ``core_ndim``, ``g`` has
    no leading axes (every extra axis was broadcast)."""
    gshape = np.shape(g)
    if core_ndim is None:
        core_ndim = len(gshape)
    if shape is None or gshape[len(gshape) - core_ndim:] == tuple(shape):
        return g
    nlead = len(gshape) - core_ndim
    extra = core_ndim - len(shape)
    if extra < 0:  # fewer axes than the target: numpy broadcasts it on use
        return np.broadcast_to(g, gshape[:nlead] + tuple(shape))
    axes = tuple(range(nlead, nlead + extra)) + tuple(
        nlead + extra + k for k, size in enumerate(shape)
        if size == 1 and gshape[nlead + extra + k] != 1)
    if not axes:
        return g
    summed = np.sum(g, axis=axes)
    return np.reshape(summed, gshape[:nlead] + tuple(shape))


def move_core_axes(value, core_ndim: int, perm) -> tuple:
    """Axis numbers of ``value`` for a permutation ``perm`` of its core axes."""
    nlead = np.ndim(value) - core_ndim
    return tuple(range(nlead)) + tuple(nlead + p for p in perm)


def swap_last(a):
    return np.swapaxes(a, -1, -2)


def zeros_for(value, shape, dtype=float):
    """A plain zero array of ``shape`` with ``value``'s float dtype (not a result of it)."""
    return np.zeros(shape, dtype=np.result_type(getattr(value, "dtype", float), dtype))


def align_core(t, core_ndim: int, target_ndim: int):
    """``t`` (any leading axes, then ``core_ndim`` core axes) with size-1 axes inserted
    before its core, so its core broadcasts against ``target_ndim`` core axes."""
    extra = target_ndim - core_ndim
    if extra <= 0:
        return t
    shape = np.shape(t)
    split = len(shape) - core_ndim
    return np.reshape(t, shape[:split] + (1,) * extra + shape[split:])
