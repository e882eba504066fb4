"""Moving elements, written so it can be differentiated again: a gather (each result
element is one input element, or zero) and its transpose, a scatter-add; and numpy's
ufunc methods (``np.add.reduce``, ``np.add.reduceat``, ``np.multiply.accumulate``, ...).

Any function that only moves or copies elements (pad, roll, take, indexing) is a gather
at the *positions* its result takes its elements from: the same function applied to
``np.arange(size).reshape(shape)`` gives them. Its jvp gathers the tangent there, its vjp
scatters the cotangent back (repeated positions add). On plain arrays the scatter is
numpy's ``np.add.at`` (or ``np.bincount``); on differentiated values it is a sort and an
``np.add.reduceat``, whose own rule is a gather, so derivatives of any order follow.
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, register_jvp, register_vjp)
from .array_axes import expand_reduced, lead_shape, negative_axes, negative_axis
from .array_reductions import extreme_share, others_product


def positions_of(shape, move) -> np.ndarray:
    """Where each element of ``move(x)`` comes from in ``x`` (flat positions), for any
    function ``move`` that only moves elements of an array of ``shape``."""
    return move(np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape))


def gather(t, positions, core_ndim: int):
    """``t``'s elements (its last ``core_ndim`` axes, flattened) at ``positions``, behind
    any leading axes of ``t``; a negative position gives 0."""
    flat = np.reshape(t, lead_shape(t, core_ndim) + (-1,))
    if np.size(positions) and np.min(positions) < 0:
        valid = positions >= 0
        return np.where(valid, np.take(flat, np.where(valid, positions, 0), axis=-1), 0.0)
    return np.take(flat, positions, axis=-1)


def scatter_add(values, positions, size: int):
    """The transpose of ``gather``: zeros of ``size`` (behind ``values``' leading axes)
    with each value added at its position (repeated positions add, negative ones drop)."""
    pos = np.ravel(positions)
    lead = lead_shape(values, np.ndim(positions))
    flat = np.reshape(values, lead + (pos.size,))
    keep = pos >= 0
    if not np.all(keep):
        flat, pos = np.take(flat, np.flatnonzero(keep), axis=-1), pos[keep]
    dtype = np.result_type(getattr(flat, "dtype", np.float64), np.float32)
    if type(flat) is np.ndarray:  # plain values: numpy's own scatter-add, in place
        if not lead and flat.dtype == np.float64:
            return np.bincount(pos, weights=flat, minlength=size)
        out = np.zeros(lead + (size,), dtype=dtype)
        np.add.at(out, (Ellipsis, pos), flat)
        return out
    if pos.size == 0:
        return np.zeros(lead + (size,), dtype=dtype)
    # differentiated values: sum each run of equal positions, then place the sums
    order = np.argsort(pos, kind="stable")
    ordered = pos[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sums = np.add.reduceat(np.take(flat, order, axis=-1), starts, axis=-1)
    slot = np.full(size, len(starts))
    slot[ordered[starts]] = np.arange(len(starts))
    padded = np.concatenate((sums, np.zeros(lead + (1,), dtype=dtype)), axis=-1)
    return np.take(padded, slot, axis=-1)


# -- ufunc methods --------------------------------------------------------------------------
class UfuncMethod(tuple):
    """A ufunc method as numpy's dispatch names it, ``(ufunc, method)``, made callable so the
    rule table holds it like a function: ``np.add.reduceat`` is ``UfuncMethod(np.add,
    "reduceat")`` (equal to, and hashed as, the pair numpy's dispatch looks up)."""

    def __new__(cls, ufunc, method):
        return super().__new__(cls, (ufunc, method))

    @property
    def __name__(self):
        return f"{self[0].__name__}.{self[1]}"

    def __call__(self, *args, **kwargs):
        return getattr(self[0], self[1])(*args, **kwargs)


ADD_REDUCE = UfuncMethod(np.add, "reduce")
ADD_ACCUMULATE = UfuncMethod(np.add, "accumulate")
ADD_REDUCEAT = UfuncMethod(np.add, "reduceat")
MULTIPLY_REDUCE = UfuncMethod(np.multiply, "reduce")
MULTIPLY_ACCUMULATE = UfuncMethod(np.multiply, "accumulate")
MAXIMUM_REDUCE = UfuncMethod(np.maximum, "reduce")
MINIMUM_REDUCE = UfuncMethod(np.minimum, "reduce")
OUTERS = {ufunc: UfuncMethod(ufunc, "outer") for ufunc in (np.add, np.subtract, np.multiply)}


def _segments(indices, n: int):
    """For np.add.reduceat's ``indices`` over ``n`` elements: (output, input) index pairs,
    one per element each output sums (numpy: indices[i] >= indices[i+1] takes one)."""
    indices = np.asarray(indices) % max(n, 1)
    ends = np.append(indices[1:], n)
    ends = np.where(ends > indices, ends, indices + 1)
    lengths = ends - indices
    outputs = np.repeat(np.arange(len(indices)), lengths)
    inputs = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths) + \
        np.repeat(indices, lengths)
    return outputs, inputs


def _reduceat_vjp(g, r, a, indices, axis=0, dtype=None, out=None):
    ndim = np.ndim(a)
    axis = negative_axis(axis, ndim)
    n = np.shape(a)[axis]
    outputs, inputs = _segments(indices, n)
    moved = np.moveaxis(np.take(g, outputs, axis=axis), axis, -1)
    if np.array_equal(inputs, np.arange(inputs[0] if len(inputs) else 0, n)):
        # disjoint increasing segments from inputs[0] on: a gather, zeros before
        front = np.zeros(np.shape(moved)[:-1] + (n - len(inputs),), dtype=moved.dtype)
        return np.moveaxis(np.concatenate((front, moved), axis=-1), -1, axis)
    return np.moveaxis(scatter_add(moved, inputs, n), -1, axis)


def _reduceat_jvp(t, r, a, indices, axis=0, dtype=None, out=None):
    return np.add.reduceat(t, indices, axis=negative_axis(axis, np.ndim(a)))


register_vjp(ADD_REDUCEAT, _reduceat_vjp)
register_jvp(ADD_REDUCEAT, _reduceat_jvp, batched=True)


register_vjp(ADD_REDUCE, lambda g, r, a, axis=0, dtype=None, out=None, keepdims=False, **kw:
             expand_reduced(g, np.shape(a), axis, keepdims))
register_jvp(ADD_REDUCE, lambda t, r, a, axis=0, dtype=None, out=None, keepdims=False, **kw:
             np.sum(t, axis=negative_axes(axis, np.ndim(a)), keepdims=keepdims),
             batched=True)


def _accumulate_vjp(g, r, a, axis=0, dtype=None, out=None):
    axis = negative_axis(axis, np.ndim(a))
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


register_vjp(ADD_ACCUMULATE, _accumulate_vjp)
register_jvp(ADD_ACCUMULATE, lambda t, r, a, axis=0, dtype=None, out=None: np.cumsum(
    t, axis=negative_axis(axis, np.ndim(a))), batched=True)


def _multiply_reduce_vjp(g, r, a, axis=0, dtype=None, out=None, keepdims=False, **kw):
    return expand_reduced(g, np.shape(a), axis, keepdims) * others_product(a, axis)


def _multiply_reduce_jvp(t, r, a, axis=0, dtype=None, out=None, keepdims=False, **kw):
    return np.sum(t * others_product(a, axis), axis=negative_axes(axis, np.ndim(a)),
                  keepdims=keepdims)


register_vjp(MULTIPLY_REDUCE, _multiply_reduce_vjp)
register_jvp(MULTIPLY_REDUCE, _multiply_reduce_jvp, batched=True)


def _extreme_reduce_vjp(g, r, a, axis=0, dtype=None, out=None, keepdims=False, **kw):
    return expand_reduced(g, np.shape(a), axis, keepdims) * extreme_share(a, r, axis,
                                                                            keepdims)


def _extreme_reduce_jvp(t, r, a, axis=0, dtype=None, out=None, keepdims=False, **kw):
    return np.sum(t * extreme_share(a, r, axis, keepdims), axis=negative_axes(
        axis, np.ndim(a)), keepdims=keepdims)


for _method in (MAXIMUM_REDUCE, MINIMUM_REDUCE):
    register_vjp(_method, _extreme_reduce_vjp)
    register_jvp(_method, _extreme_reduce_jvp, batched=True)


def _outer_partials(ufunc, a, b):
    """The partials of ufunc.outer(a, b) in each argument, shaped like the result."""
    a_full = np.reshape(a, np.shape(a) + (1,) * np.ndim(b))
    if ufunc is np.multiply:
        return b, a_full
    return 1.0, (-1.0 if ufunc is np.subtract else 1.0)


def _outer_rules(ufunc):
    def vjp_a(g, r, a, b, **kw):
        partial = _outer_partials(ufunc, a, b)[0]
        axes = tuple(range(-np.ndim(b), 0))
        return np.sum(g * partial, axis=axes) if axes else g * partial

    def vjp_b(g, r, a, b, **kw):
        partial = _outer_partials(ufunc, a, b)[1]
        nb = np.ndim(g) - np.ndim(r)
        axes = tuple(range(nb, nb + np.ndim(a)))
        return np.sum(g * partial, axis=axes) if axes else g * partial

    def jvp_a(t, r, a, b, **kw):
        partial = _outer_partials(ufunc, a, b)[0]
        return np.reshape(t, np.shape(t) + (1,) * np.ndim(b)) * partial

    def jvp_b(t, r, a, b, **kw):
        partial = _outer_partials(ufunc, a, b)[1]
        lead = lead_shape(t, np.ndim(b))
        full = np.reshape(t, lead + (1,) * np.ndim(a) + np.shape(b))
        return full * partial
    return vjp_a, vjp_b, jvp_a, jvp_b


for _ufunc, _method in OUTERS.items():
    _vjp_a, _vjp_b, _jvp_a, _jvp_b = _outer_rules(_ufunc)
    register_vjp(_method, _vjp_a, _vjp_b)
    register_jvp(_method, _jvp_a, _jvp_b, batched=True)

batched_vjps(ADD_REDUCEAT, ADD_REDUCE, ADD_ACCUMULATE, MULTIPLY_REDUCE, MAXIMUM_REDUCE,
             MINIMUM_REDUCE, *OUTERS.values())
