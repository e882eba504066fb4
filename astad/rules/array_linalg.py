"""The derivative rules of numpy's products and linear algebra: matmul, dot, inner, outer,
einsum (in every form: array_einsum.py), linalg.solve, linalg.inv, linalg.det.

Each is given by one vector-Jacobian product per argument (``register_vjp``, in
array.py), computed only for the arguments that are differentiated: a matrix product
whose right operand is a constant computes one product in its backward step; and by one
Jacobian-vector product per argument (``register_jvp``). Both accept leading (direction)
axes on the cotangent (tangent).
"""
from __future__ import annotations

import numpy as np

from .array import (batched_vjps, NEW_ARRAYS, recorder, refuse_keywords, register_jvp,
                    register_vjp, result_kinds, set_rule, set_vjps)
from .array_axes import align_core, sum_to_shape
from .array_einsum import (EINSUM_JVPS, EINSUM_VJPS, einsum_partial, einsum_tangent, normalize,
    split_arguments)
from ..runtime.array_dual import (cotangent, accumulate, is_active, parent_of,
    primal_of)
from ..runtime.array_rows import add_rows
from ..runtime.duals import DUAL_TYPES
from ..runtime.tape import BATCHED_BACKWARDS


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _core_ndim(g, r, value):
    """The number of axes of ``value`` behind the leading (direction) axes ``g`` has
    beyond the result ``r``."""
    return np.ndim(value) - (np.ndim(g) - np.ndim(r))


# -- matmul: a (..., n, k) or (k,), b (..., k, m) or (k,) ---------------------------------
# The vjps and jvps accept leading (direction) axes on the cotangent (tangent).
def _matmul_cotangent(g, a, b):
    """``g`` with the axes numpy drops for a 1-d operand put back as size-1 axes."""
    if np.ndim(b) == 1:
        g = np.expand_dims(g, -1)
    if np.ndim(a) == 1:
        g = np.expand_dims(g, -2)
    return g


def _matmul_a(g, r, a, b, **kw):
    if np.ndim(b) == 1:  # an outer product: a broadcast multiply (matmul with k = 1 is slow)
        ga = np.multiply(np.expand_dims(g, -1), b)
        return sum_to_shape(ga, np.shape(a), _core_ndim(g, r, ga))
    ga = _matmul_cotangent(g, a, b) @ _swap(b)
    if np.ndim(a) == 1:
        ga = ga[..., 0, :]
    return sum_to_shape(ga, np.shape(a), _core_ndim(g, r, ga))


def _matmul_b(g, r, a, b, **kw):
    if np.ndim(a) == 1:
        gb = np.multiply(np.expand_dims(g, -1), a) if np.ndim(b) == 1 else np.multiply(
            np.expand_dims(a, -1), np.expand_dims(g, -2))
        return sum_to_shape(gb, np.shape(b), _core_ndim(g, r, gb))
    gb = _swap(a) @ _matmul_cotangent(g, a, b)
    if np.ndim(b) == 1:
        gb = gb[..., 0]
    return sum_to_shape(gb, np.shape(b), _core_ndim(g, r, gb))


def _matmul_jvp_a(t, r, a, b, **kw):
    na, nb = np.ndim(a), np.ndim(b)
    if na == 1 and nb == 1:
        return np.sum(t * b, axis=-1)
    if na == 1:  # a row: behind b's stack axes
        lead = np.shape(t)[:np.ndim(t) - 1]
        row = np.reshape(t, lead + (1,) * (nb - 2) + (1, np.shape(a)[0]))
        return np.matmul(row, b)[..., 0, :]
    return np.matmul(align_core(t, na, max(na, nb)), b)


def _matmul_jvp_b(t, r, a, b, **kw):
    na, nb = np.ndim(a), np.ndim(b)
    if nb == 1:
        if na == 1:
            return np.sum(a * t, axis=-1)
        lead = np.shape(t)[:np.ndim(t) - 1]
        column = np.reshape(t, lead + (1,) * (na - 2) + (np.shape(b)[0], 1))
        return np.matmul(a, column)[..., 0]
    return np.matmul(a, align_core(t, nb, max(na, nb)))


register_vjp(np.matmul, _matmul_a, _matmul_b)
register_jvp(np.matmul, _matmul_jvp_a, _matmul_jvp_b, batched=True)
refuse_keywords(np.matmul, ("axes", "axis"), "only the last two axes multiply")


# -- dot: matmul for 1- and 2-d operands, a product with a 0-d one, an einsum above -------
def _dot_subscripts(a, b):
    """dot(a, b) as explicit einsum subscripts: a's last axis with b's second to last."""
    na, nb = np.ndim(a), np.ndim(b)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = "".join(next(letters) for _ in range(na - 1))
    sb = "".join(next(letters) for _ in range(nb))
    shared = "z"
    if nb == 1:  # (a 1-d b: its only axis is the one summed)
        return [sa + shared, shared], sa
    b_in = sb[:nb - 2] + shared + sb[nb - 1:]
    return [sa + shared, b_in], sa + sb[:nb - 2] + sb[nb - 1:]


def _dot_a(g, r, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return sum_to_shape(g * b, np.shape(a), _core_ndim(g, r, g))
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        return einsum_partial(0, g, *_dot_subscripts(a, b), (a, b))
    return _matmul_a(g, r, a, b)


def _dot_b(g, r, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return sum_to_shape(g * a, np.shape(b), _core_ndim(g, r, g))
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        return einsum_partial(1, g, *_dot_subscripts(a, b), (a, b))
    return _matmul_b(g, r, a, b)


def _dot_jvp(k):
    def jvp(t, r, a, b, out=None):
        other = b if k == 0 else a
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            return align_core(t, np.ndim(a if k == 0 else b), np.ndim(r)) * other
        if np.ndim(a) > 2 or np.ndim(b) > 2:
            return einsum_tangent(k, t, *_dot_subscripts(a, b), (a, b))
        return (_matmul_jvp_a if k == 0 else _matmul_jvp_b)(t, r, a, b)
    return jvp


register_vjp(np.dot, _dot_a, _dot_b)
register_jvp(np.dot, _dot_jvp(0), _dot_jvp(1), batched=True)


# -- inner: a sum over the last axis of both; the result's axes are a's then b's ----------
def _inner_subscripts(a, b):
    na, nb = np.ndim(a), np.ndim(b)
    sa = "abcdefghijklm"[:na - 1]
    sb = "nopqrstuvwxy"[:nb - 1]
    return [sa + "z", sb + "z"], sa + sb


def _inner_vjp(k):
    def vjp(g, r, a, b):
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            return sum_to_shape(g * (b if k == 0 else a), np.shape(a if k == 0 else b),
                                _core_ndim(g, r, g))
        return einsum_partial(k, g, *_inner_subscripts(a, b), (a, b))
    return vjp


def _inner_jvp(k):
    def jvp(t, r, a, b):
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            return align_core(t, np.ndim(a if k == 0 else b), np.ndim(r)) * (b if k == 0
                                                                               else a)
        return einsum_tangent(k, t, *_inner_subscripts(a, b), (a, b))
    return jvp


def _outer_a(g, r, a, b, out=None):
    return np.reshape(g @ np.ravel(b), np.shape(g)[:-2] + np.shape(a))


def _outer_b(g, r, a, b, out=None):
    return np.reshape(np.ravel(a) @ g, np.shape(g)[:-2] + np.shape(b))


def _outer_jvp_a(t, r, a, b, out=None):
    flat = np.reshape(t, np.shape(t)[:np.ndim(t) - np.ndim(a)] + (-1,))
    return np.expand_dims(flat, -1) * np.ravel(b)


def _outer_jvp_b(t, r, a, b, out=None):
    flat = np.reshape(t, np.shape(t)[:np.ndim(t) - np.ndim(b)] + (-1,))
    return np.expand_dims(np.ravel(a), -1) * np.expand_dims(flat, -2)


register_vjp(np.inner, _inner_vjp(0), _inner_vjp(1))
register_jvp(np.inner, _inner_jvp(0), _inner_jvp(1), batched=True)
register_vjp(np.outer, _outer_a, _outer_b)
register_jvp(np.outer, _outer_jvp_a, _outer_jvp_b, batched=True)


# -- linalg -------------------------------------------------------------------------------
def _as_matrix(x, vector):
    """A vector right-hand side (or its cotangent) as a one-column matrix."""
    return np.expand_dims(x, -1) if vector else x


def _from_matrix(x, vector):
    return x[..., 0] if vector else x


def _solve_vector(a, r):
    return np.ndim(r) == np.ndim(a) - 1  # (b, and so the result, a stack of vectors)


def _solve_a(g, r, a, b):
    vector = _solve_vector(a, r)
    gb = np.linalg.solve(_swap(a), _as_matrix(g, vector))
    ga = -(gb @ _swap(_as_matrix(r, vector)))
    return sum_to_shape(ga, np.shape(a), _core_ndim(g, r, ga))


def _solve_b(g, r, a, b):
    vector = _solve_vector(a, r)
    gb = _from_matrix(np.linalg.solve(_swap(a), _as_matrix(g, vector)), vector)
    return sum_to_shape(gb, np.shape(b), _core_ndim(g, r, gb))


def _solve_jvp_a(t, r, a, b):
    vector = _solve_vector(a, r)
    return _from_matrix(-np.linalg.solve(a, t @ _as_matrix(r, vector)), vector)


def _solve_jvp_b(t, r, a, b):
    vector = _solve_vector(a, r)
    return _from_matrix(np.linalg.solve(a, _as_matrix(align_core(t, np.ndim(b), np.ndim(r)),
                                                      vector)), vector)


def _cofactors(a, r):
    """d det(a) / d a: the cofactor matrix (the adjugate's transpose), det(a) inv(a)^T
    where a is invertible; by the SVD where it is singular (a = U S V^T, the cofactors
    det(U) det(V) U diag(product of the other singular values) V^T), as numpy's det of a
    singular matrix is 0.0 rather than an error."""
    try:
        return np.expand_dims(r, (-2, -1)) * _swap(np.linalg.inv(a))
    except np.linalg.LinAlgError:
        pass
    u, s, vt = np.linalg.svd(a)
    ones = np.ones(np.shape(s)[:-1] + (1,))
    before = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(s, -1)[..., :-1]], axis=-1),
                               axis=-1), -1)
    signs = np.linalg.det(u) * np.linalg.det(vt)
    if np.iscomplexobj(u):  # (a = U S V^H: the cofactors conj(U) adj(S) conj(V^H))
        u, vt = np.conj(u), np.conj(vt)
    return np.expand_dims(signs, (-2, -1)) * ((u * np.expand_dims(before * after, -2)) @ vt)


def _det_a(g, r, a):
    return np.expand_dims(g, (-2, -1)) * _cofactors(a, r)


def _det_jvp(t, r, a):
    return np.sum(_cofactors(a, r) * t, axis=(-2, -1))


register_vjp(np.linalg.solve, _solve_a, _solve_b)
register_jvp(np.linalg.solve, _solve_jvp_a, _solve_jvp_b, batched=True)
register_vjp(np.linalg.inv, lambda g, r, a: -(_swap(r) @ g @ _swap(r)))
register_jvp(np.linalg.inv, lambda t, r, a: -(r @ t @ r), batched=True)
register_vjp(np.linalg.det, _det_a)
register_jvp(np.linalg.det, _det_jvp, batched=True)
result_kinds(NEW_ARRAYS, np.matmul, np.dot, np.inner, np.outer, np.linalg.solve, np.linalg.inv,
             np.linalg.det)
batched_vjps(np.matmul, np.dot, np.inner, np.outer, np.linalg.solve, np.linalg.inv,
             np.linalg.det)


# -- einsum, in every form (array_einsum.py normalises the subscripts) ---------------------
def _einsum_partial(k, g, subscripts, operands):
    """The cotangent of operand ``k``: an einsum of ``g`` with the other operands."""
    return einsum_partial(k, g, *subscripts, operands)


def _einsum_backward(adjoint, arrays, k, parents, context):
    subscripts, values = context
    g = cotangent(adjoint, arrays, k)
    for j, parent in parents:
        accumulate(adjoint, arrays, parent, _einsum_partial(j, g, subscripts, values))


def _einsum_rows(adjoint, arrays, k, parents, context, width) -> bool:
    """_einsum_backward on all rows at once: an einsum's partials take the cotangent
    with leading axes (its ``...``)."""
    subscripts, values = context
    if any(type(v) in DUAL_TYPES for v in values):  # (a derivative of a derivative)
        return False
    return add_rows(adjoint, arrays, k, parents, width, lambda g: {
        j: _einsum_partial(j, g, subscripts, values) for j, _ in parents}, fresh=True)


BATCHED_BACKWARDS[_einsum_backward] = _einsum_rows


def _einsum_rule(tape, *args, **kwargs):
    subscripts, operands, _ = split_arguments(args)
    values = [primal_of(op, tape) for op in operands]
    result = np.einsum(subscripts, *values, **kwargs)
    subscripts = normalize(subscripts, [np.shape(v) for v in values])
    parents = tuple((j, parent_of(op)) for j, op in enumerate(operands) if is_active(op, tape))
    return recorder(result)(tape, result, _einsum_backward, parents, (subscripts, values))


set_rule(np.einsum, _einsum_rule)
set_vjps(np.einsum, *EINSUM_VJPS)
register_jvp(np.einsum, *EINSUM_JVPS, batched=True)
batched_vjps(np.einsum)
