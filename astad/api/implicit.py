"""Solutions defined implicitly, differentiated by the implicit function theorem rather
than through the iterations that find them: ``fixed_point``.

``fixed_point(f, a, x0, distance, tol)`` takes autograd's arguments
(``autograd.misc.fixed_points.fixed_point``): ``f(a)`` is the step ``x -> x'``; from
``x0`` it steps until ``distance(x, x_previous) <= tol`` and returns ``x``. With
``F(a, x) = f(a)(x)`` and ``x*`` the fixed point, ``x* = F(a, x*)`` gives

    dx* = F_a da + F_x dx*,   so   dx* = (I - F_x)^-1 F_a da,

which is what the solution's derivative is, however many steps found it (differentiating
the loop gives the derivative of the last iterate instead: off by the iteration's error).
Both derivatives are found by the same iteration as the value, which converges wherever
that one does (the same ``F_x``, transposed for reverse mode):

- forward mode steps ``t <- F_a da + F_x t`` (one jvp of ``F`` per step);
- reverse mode steps ``v <- g + F_x^T v`` (one pullback per step, of one ``vjp`` of
  ``F`` at ``(a, x*)``), then gives ``a`` the cotangent ``F_a^T v``.

``x0`` gets no derivative (the solution does not depend on it). ``x`` is a float or a
float array; ``a`` anything astad differentiates. A derivative of a derivative runs these
rules differentiated in turn (rules/custom.py).
"""
from __future__ import annotations

import functools

import numpy as np

from ..compile.calls import transformed_as_users
from ..data.tree import tree_leaves, tree_map
from ..errors import InputError
from ..rules.custom import custom_vjp
from .transforms import jvp, vjp

MAX_STEPS = 100_000  # (a step count no convergent iteration reaches: say it diverged)


def _solve(step, x, distance, tol, what: str):
    """Step from ``x`` until two iterates are within ``tol`` (autograd's loop)."""
    x_next, steps = step(x), 1
    while steps < MAX_STEPS:
        gap = distance(x_next, x)
        if gap <= tol:
            return x_next
        if not gap > tol:  # (nan: the iterates overflowed)
            break
        x, x_next, steps = x_next, step(x_next), steps + 1
    raise InputError(f"astad.fixed_point: {what} did not converge in {steps} steps "
                     f"(distance {gap!r}, tol {tol!r}): the step must be a contraction "
                     "near the fixed point")


def fixed_point(f, a, x0, distance, tol):
    """The ``x`` with ``x = f(a)(x)``, stepping from ``x0`` until ``distance(x,
    x_previous) <= tol``; differentiable in ``a`` by the implicit function theorem (see
    the module's docstring)."""
    return _solve(f(a), x0, distance, tol, "the iteration")


@transformed_as_users
def _step(f, a, x):
    """``F(a, x) = f(a)(x)``, the step as a function of both."""
    return f(a)(x)


def _forward(f, a, x0, distance, tol):
    x = fixed_point.fn(f, a, x0, distance, tol)
    return x, (f, a, x, distance, tol)


def _backward(residuals, g):
    f, a, x, distance, tol = residuals
    _, pullback = vjp(functools.partial(_step, f), a, x)
    v = _solve(lambda v: g + pullback(v)[1], g, distance, tol, "the adjoint iteration")
    return None, pullback(v)[0], None, None, None


def _tangent(primals, tangents):
    f, a, x0, distance, tol = primals
    x = fixed_point.fn(f, a, x0, distance, tol)

    step_of = functools.partial(_step, f)

    def tangent(da):
        def step(t):
            return jvp(step_of, (a, x), (da, t))[1]
        return _solve(step, step(0.0 * x), distance, tol, "the tangent iteration")
    da = tangents[1]
    given, taken = tree_leaves(da), tree_leaves(a)
    if given and taken and np.ndim(given[0]) > np.ndim(taken[0]):  # several directions
        # at once (jacfwd): one by one
        rows = len(given[0])
        return x, np.stack([tangent(tree_map(lambda leaf, j=j: leaf[j], da))
                            for j in range(rows)])
    return x, tangent(da)


fixed_point = custom_vjp(fixed_point)
fixed_point.defvjp(_forward, _backward)
fixed_point.defjvp(_tangent)
