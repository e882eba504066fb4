"""Products beyond matmul: tensordot, kron, cross, vdot and linalg.multi_dot.

tensordot and kron are einsums (array_einsum.py gives their vjps and jvps); cross is
linear in each argument, its vjp a cross product with the cotangent; multi_dot's
cotangent of each matrix is the cotangent between the products on either side of it.
All vjps and jvps accept leading (direction) axes.
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, NEW_ARRAYS, register_jvp, register_vjp, result_kinds, set_rule,
                    set_vjps)
from .array_axes import align_core, lead_shape, negative_axis, sum_to_shape
from .array_einsum import einsum_partial, einsum_tangent
from .array_shapes import record_join
from ..runtime.array_dual import primal_of

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


# -- tensordot ---------------------------------------------------------------------------------
def _tensordot_subscripts(a, b, axes):
    na, nb = np.ndim(a), np.ndim(b)
    if np.ndim(axes) == 0:
        summed_a, summed_b = list(range(na - axes, na)), list(range(axes))
    else:
        summed_a, summed_b = ([axes[0]] if np.ndim(axes[0]) == 0 else list(axes[0]),
                              [axes[1]] if np.ndim(axes[1]) == 0 else list(axes[1]))
    summed_a = [x % na for x in summed_a]
    summed_b = [x % nb for x in summed_b]
    sa = _LETTERS[:na]
    rest = iter(_LETTERS[na:])
    sb = [None] * nb
    for x, y in zip(summed_a, summed_b):
        sb[y] = sa[x]
    sb = "".join(c if c is not None else next(rest) for c in sb)
    out = "".join(sa[k] for k in range(na) if k not in summed_a) + "".join(
        sb[k] for k in range(nb) if k not in summed_b)
    return [sa, sb], out


def _tensordot_rules(k):
    def vjp(g, r, a, b, axes=2):
        return einsum_partial(k, g, *_tensordot_subscripts(a, b, axes), (a, b))

    def jvp(t, r, a, b, axes=2):
        return einsum_tangent(k, t, *_tensordot_subscripts(a, b, axes), (a, b))
    return vjp, jvp


(_td_vjp_a, _td_jvp_a), (_td_vjp_b, _td_jvp_b) = _tensordot_rules(0), _tensordot_rules(1)
register_vjp(np.tensordot, _td_vjp_a, _td_vjp_b)
register_jvp(np.tensordot, _td_jvp_a, _td_jvp_b, batched=True)


# -- kron: an outer product with each axis of a interleaved with b's, then merged ------------
def _kron_layout(a, b):
    nd = max(np.ndim(a), np.ndim(b))
    shape_a = (1,) * (nd - np.ndim(a)) + np.shape(a)
    shape_b = (1,) * (nd - np.ndim(b)) + np.shape(b)
    sa, sb = _LETTERS[:nd], _LETTERS[nd:2 * nd]
    out = "".join(x + y for x, y in zip(sa, sb))
    interleaved = tuple(n for pair in zip(shape_a, shape_b) for n in pair)
    return shape_a, shape_b, [sa, sb], out, interleaved


def _kron_rules(k):
    def vjp(g, r, a, b):
        shape_a, shape_b, inputs, out, interleaved = _kron_layout(a, b)
        lead = lead_shape(g, np.ndim(r))
        operands = (np.reshape(a, shape_a), np.reshape(b, shape_b))
        partial = einsum_partial(k, np.reshape(g, lead + interleaved), inputs, out, operands)
        return np.reshape(partial, lead + np.shape((a, b)[k]))

    def jvp(t, r, a, b):
        shape_a, shape_b, inputs, out, interleaved = _kron_layout(a, b)
        lead = lead_shape(t, np.ndim((a, b)[k]))
        operands = [np.reshape(a, shape_a), np.reshape(b, shape_b)]
        operands[k] = np.reshape(t, lead + (shape_a, shape_b)[k])
        product = einsum_tangent(k, operands[k], inputs, out, operands)
        return np.reshape(product, lead + np.shape(r))
    return vjp, jvp


(_kron_vjp_a, _kron_jvp_a), (_kron_vjp_b, _kron_jvp_b) = _kron_rules(0), _kron_rules(1)
register_vjp(np.kron, _kron_vjp_a, _kron_vjp_b)
register_jvp(np.kron, _kron_jvp_a, _kron_jvp_b, batched=True)


# -- cross -----------------------------------------------------------------------------------
def _cross_axes(a, b, r, axisa, axisb, axisc, axis):
    if axis is not None:
        axisa = axisb = axisc = axis
    return (negative_axis(axisa, np.ndim(a)), negative_axis(axisb, np.ndim(b)),
            negative_axis(axisc, np.ndim(r)) if np.ndim(r) else None)


def _as_3(v):
    """A vector (last axis) of 2 components as 3, the third 0."""
    if np.shape(v)[-1] == 3:
        return v
    zero = np.zeros(np.shape(v)[:-1] + (1,), dtype=getattr(v, "dtype", float))
    return np.concatenate((v, zero), axis=-1)


def _cross_vjp(k):
    def vjp(g, r, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
        ax_a, ax_b, ax_c = _cross_axes(a, b, r, axisa, axisb, axisc, axis)
        am, bm = np.moveaxis(a, ax_a, -1), np.moveaxis(b, ax_b, -1)
        mine, other = (am, bm) if k == 0 else (bm, am)
        n = np.shape(mine)[-1]
        if np.shape(am)[-1] == 2 and np.shape(bm)[-1] == 2:  # a scalar: a0 b1 - a1 b0
            sign = 1.0 if k == 0 else -1.0
            grad = np.stack((g * other[..., 1], -(g * other[..., 0])), axis=-1) * sign
        else:
            gm = np.moveaxis(g, ax_c, -1)
            grad = (np.cross(_as_3(other), gm) if k == 0 else np.cross(gm, _as_3(other)))
            grad = grad[..., :n]
        grad = sum_to_shape(grad, np.shape(mine), np.ndim(grad) - (np.ndim(g) - np.ndim(r)))
        return np.moveaxis(grad, -1, ax_a if k == 0 else ax_b)
    return vjp


def _cross_jvp(k):
    def jvp(t, r, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
        ax_a, ax_b, ax_c = _cross_axes(a, b, r, axisa, axisb, axisc, axis)
        am, bm = np.moveaxis(a, ax_a, -1), np.moveaxis(b, ax_b, -1)
        tm = np.moveaxis(t, ax_a if k == 0 else ax_b, -1)
        tm = align_core(tm, np.ndim((a, b)[k]), max(np.ndim(a), np.ndim(b)))
        product = np.cross(tm, bm) if k == 0 else np.cross(am, tm)
        if np.shape(am)[-1] == 2 and np.shape(bm)[-1] == 2:  # no vector axis: z alone
            return product
        return np.moveaxis(product, -1, ax_c)
    return jvp


register_vjp(np.cross, _cross_vjp(0), _cross_vjp(1))
register_jvp(np.cross, _cross_jvp(0), _cross_jvp(1), batched=True)


# -- vdot --------------------------------------------------------------------------------------
def _vdot_vjp(k):
    def vjp(g, r, a, b):
        other = np.ravel(b if k == 0 else a)
        return np.reshape(np.expand_dims(g, -1) * other, np.shape(g) + np.shape((a, b)[k]))

    def jvp(t, r, a, b):
        other = np.ravel(b if k == 0 else a)
        flat = np.reshape(t, lead_shape(t, np.ndim((a, b)[k])) + (-1,))
        return np.sum(flat * other, axis=-1)
    return vjp, jvp


(_vdot_vjp_a, _vdot_jvp_a), (_vdot_vjp_b, _vdot_jvp_b) = _vdot_vjp(0), _vdot_vjp(1)
register_vjp(np.vdot, _vdot_vjp_a, _vdot_vjp_b)
register_jvp(np.vdot, _vdot_jvp_a, _vdot_jvp_b, batched=True)


# -- linalg.multi_dot ------------------------------------------------------------------------
def _chain(matrices):
    """The product of 2-d ``matrices`` (None for an empty product)."""
    product = None
    for m in matrices:
        product = m if product is None else product @ m
    return product


def _as_matrices(arrays_):
    """multi_dot's arrays as matrices: a 1-d first array is a row, a 1-d last a column."""
    matrices = list(arrays_)
    if np.ndim(matrices[0]) == 1:
        matrices[0] = np.reshape(matrices[0], (1, -1))
    if np.ndim(matrices[-1]) == 1:
        matrices[-1] = np.reshape(matrices[-1], (-1, 1))
    return matrices


def _multi_dot_vjp(g, r, arrays_, **kw):
    matrices = _as_matrices(arrays_)
    rows = np.shape(matrices[0])[0]
    cols = np.shape(matrices[-1])[1]
    lead = lead_shape(g, np.ndim(r))
    g2 = np.reshape(g, lead + (rows, cols))
    grads = []
    for k in range(len(matrices)):
        left, right = _chain(matrices[:k]), _chain(matrices[k + 1:])
        grad = g2 if right is None else g2 @ np.swapaxes(right, -1, -2)
        grad = grad if left is None else np.swapaxes(left, -1, -2) @ grad
        grads.append(np.reshape(grad, lead + np.shape(arrays_[k])))
    return grads


def _multi_dot_jvp(t, r, arrays_, **kw):
    matrices = _as_matrices(arrays_)
    total = 0.0
    for k, tk in enumerate(t):
        if tk is None:
            continue
        lead = lead_shape(tk, np.ndim(arrays_[k]))
        term = np.reshape(tk, lead + np.shape(matrices[k]))
        left, right = _chain(matrices[:k]), _chain(matrices[k + 1:])
        term = term if right is None else term @ right
        term = term if left is None else left @ term
        total = total + np.reshape(term, lead + np.shape(r))
    return total


def _multi_dot_rule(tape, arrays_, **kwargs):
    items = list(arrays_)
    values = [primal_of(x, tape) for x in items]  # (what the backward step computes with)
    rows = () if np.ndim(values[0]) == 1 else np.shape(values[0])[:1]
    cols = () if np.ndim(values[-1]) == 1 else np.shape(values[-1])[1:]
    result = np.broadcast_to(0.0, rows + cols)  # (only its shape is read)
    return record_join(tape, np.linalg.multi_dot,
                       lambda g: _multi_dot_vjp(g, result, values), items, **kwargs)


set_rule(np.linalg.multi_dot, _multi_dot_rule)
set_vjps(np.linalg.multi_dot, _multi_dot_vjp)
register_jvp(np.linalg.multi_dot, _multi_dot_jvp, batched=True)

result_kinds(NEW_ARRAYS, np.tensordot, np.kron, np.cross, np.vdot)
batched_vjps(np.tensordot, np.kron, np.cross, np.vdot, np.linalg.multi_dot)
