"""The derivative rules of numpy's products and linear algebra: matmul, dot, inner, outer,
einsum (explicit subscripts), linalg.solve, linalg.inv, linalg.det.

Each is given by one vector-Jacobian product per argument (``register_vjp``, in
array_rules.py), computed only for the arguments that are differentiated: a matrix
product whose right operand is a constant computes one product in its backward step.
"""
from __future__ import annotations

import numpy as np

from .array import NEW_ARRAYS, RESULT_KIND, refuse_keywords, register_vjp
from ..runtime.array_dual import (ARRAY_RULES, cotangent, accumulate, is_active, new_array,
    new_scalar, parent_of, primal_of, unbroadcast)
from ..errors import NotDifferentiableError, user_location


def _swap(a):
    return np.swapaxes(a, -1, -2)


# -- matmul: a (..., n, k) or (k,), b (..., k, m) or (k,) ---------------------------------
def _matmul_cotangent(g, a, b):
    """``g`` with the axes numpy drops for a 1-d operand put back as size-1 axes."""
    g = np.asarray(g)
    if np.ndim(b) == 1:
        g = g[..., None]
    if np.ndim(a) == 1:
        g = g[..., None, :]
    return g


def _matmul_a(g, r, a, b, **kw):
    if np.ndim(b) == 1:  # an outer product: a broadcast multiply (matmul with k = 1 is slow)
        ga = np.multiply(g, b) if np.ndim(a) == 1 else np.multiply(np.asarray(g)[..., None], b)
        return unbroadcast(ga, np.shape(a))
    ga = _matmul_cotangent(g, a, b) @ _swap(b)
    if np.ndim(a) == 1:
        ga = ga[..., 0, :]
    return unbroadcast(ga, np.shape(a))


def _matmul_b(g, r, a, b, **kw):
    if np.ndim(a) == 1:
        gb = np.multiply(a, g) if np.ndim(b) == 1 else np.multiply(
            a[:, None], np.asarray(g)[..., None, :])
        return unbroadcast(gb, np.shape(b))
    gb = _swap(a) @ _matmul_cotangent(g, a, b)
    if np.ndim(b) == 1:
        gb = gb[..., 0]
    return unbroadcast(gb, np.shape(b))


register_vjp(np.matmul, _matmul_a, _matmul_b)
refuse_keywords(np.matmul, ("axes", "axis"), "only the last two axes multiply")


# -- dot: matmul for 1- and 2-d operands, a product with a 0-d one ------------------------
def _dot_check(a, b):
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise NotDifferentiableError("astad differentiates np.dot of 0-, 1- and 2-d arrays; "
                                     "use np.matmul or np.einsum", *user_location())


def _dot_a(g, r, a, b, out=None):
    _dot_check(a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * b, np.shape(a))
    return _matmul_a(g, r, a, b)


def _dot_b(g, r, a, b, out=None):
    _dot_check(a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, np.shape(b))
    return _matmul_b(g, r, a, b)


register_vjp(np.dot, _dot_a, _dot_b)


# -- inner: a sum over the last axis of both; the result's axes are a's then b's ----------
def _inner_a(g, r, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * b, np.shape(a))
    lead = np.ndim(a) - 1
    return np.tensordot(g, b, axes=(list(range(lead, np.ndim(r))),
                                    list(range(np.ndim(b) - 1))))


def _inner_b(g, r, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(g * a, np.shape(b))
    lead = list(range(np.ndim(a) - 1))
    return np.moveaxis(np.tensordot(a, g, axes=(lead, lead)), 0, -1)


register_vjp(np.inner, _inner_a, _inner_b)
register_vjp(np.outer, lambda g, r, a, b, out=None: (g @ np.ravel(b)).reshape(np.shape(a)),
             lambda g, r, a, b, out=None: (np.ravel(a) @ g).reshape(np.shape(b)))


# -- linalg -------------------------------------------------------------------------------
def _solve_a(g, r, a, b):
    gb = np.linalg.solve(_swap(a), g)
    if np.ndim(r) == 1:
        return -np.outer(gb, r)
    return -gb @ _swap(r)


register_vjp(np.linalg.solve, _solve_a, lambda g, r, a, b: np.linalg.solve(_swap(a), g))
register_vjp(np.linalg.inv, lambda g, r, a: -_swap(r) @ g @ _swap(r))
register_vjp(np.linalg.det, lambda g, r, a: (np.asarray(g) * r)[..., None, None]
             * _swap(np.linalg.inv(a)))
RESULT_KIND.update(dict.fromkeys((np.matmul, np.dot, np.inner, np.outer, np.linalg.solve,
                                  np.linalg.inv, np.linalg.det), NEW_ARRAYS))


# -- einsum, with explicit subscripts -----------------------------------------------------
def _einsum_partial(k, g, subscripts, operands):
    """The cotangent of operand ``k``: an einsum of ``g`` with the other operands."""
    inputs, output = subscripts.replace(" ", "").split("->")
    inputs = inputs.split(",")
    target = inputs[k]
    others = [(s, op) for j, (s, op) in enumerate(zip(inputs, operands)) if j != k]
    available = set(output).union(*[set(s) for s, _ in others])
    kept = "".join(c for c in target if c in available)
    partial = np.einsum(",".join([output] + [s for s, _ in others]) + "->" + kept, g,
                        *[op for _, op in others])
    if kept != target:  # an index summed inside this operand alone: broadcast it back
        shape = [np.shape(operands[k])[target.index(c)] if c in kept else 1 for c in target]
        partial = np.broadcast_to(partial.reshape(shape), np.shape(operands[k]))
    return partial


def _einsum_backward(adjoint, arrays, k, parents, context):
    subscripts, values = context
    g = cotangent(adjoint, arrays, k)
    for j, parent in parents:
        accumulate(adjoint, arrays, parent, _einsum_partial(j, g, subscripts, values))


def _einsum_rule(tape, subscripts, *operands, **kwargs):
    if not isinstance(subscripts, str) or "->" not in subscripts or "." in subscripts or any(
            len(set(s)) != len(s) for s in subscripts.split("->")[0].split(",")):
        raise NotDifferentiableError(
            "astad differentiates einsum with explicit '->' subscripts, no '...' and no "
            "index repeated within one operand", *user_location())
    values = [primal_of(op, tape) for op in operands]
    result = np.einsum(subscripts, *values, **kwargs)
    parents = tuple((j, parent_of(op)) for j, op in enumerate(operands) if is_active(op, tape))
    record = new_array if np.ndim(result) else new_scalar
    return record(tape, result, _einsum_backward, parents, (subscripts, values))


ARRAY_RULES[np.einsum] = _einsum_rule
