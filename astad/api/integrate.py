"""scipy.integrate.odeint differentiated by the adjoint method (reverse mode) and by
forward sensitivities (forward mode), as autograd's ``odeint`` is: in the initial state
``y0``, the times ``t`` and the extra arguments ``args``.

With ``y' = f(y, t, *args)`` and the outputs ``Y[i] = y(t[i])`` (``Y[0] = y0``):

- reverse: the adjoint ``lam`` starts at the last output's cotangent and is integrated
  backwards with the state, ``lam' = -lam^T f_y`` and ``args_bar' = -lam^T f_args``,
  taking each output's cotangent as it passes its time; ``y0_bar = lam(t0) + G[0]``; a
  time's cotangent is ``G[i] . f(Y[i], t[i])``, the first time's ``-lam(t0) . f(y0, t0)``.
  Each step of the integrator asks one pullback of ``f`` (one reverse pass).
- forward: the tangent ``s`` of the state is integrated with it, ``s' = f_y s +
  f_args args_dot`` from ``s(t0) = y0_dot - f(y0, t0) t0_dot``, plus ``f(Y[i], t[i])
  t_dot[i]`` at each output. Each step asks one jvp of ``f``.

The value is scipy's own (the same call). Both derivatives are integrated with the
tolerances the call gives (``rtol``, ``atol``, scipy's defaults otherwise), so they are
as accurate as the solution. ``full_output=True`` is refused (a pair, not the states).
A derivative of these derivatives (a Hessian through odeint) is refused by name.
Registered on first use of scipy.integrate (rules/scipy_loader.py).
"""
from __future__ import annotations

import functools

import numpy as np

from ..compile.calls import transformed_as_users
from ..core.boundary import contains_dual
from ..errors import NotDifferentiableError, user_location
from ..registry import has_rule
from ..rules import scipy_loader
from ..rules.custom import custom_vjp
from .roots import call_arguments, closed_over_duals
from .transforms import jvp, vjp

_SOLVER_OPTIONS = ("rtol", "atol", "h0", "hmax", "hmin", "mxstep", "tcrit", "mxordn",
                   "mxords", "ml", "mu", "Dfun", "col_deriv")


def _scipy():
    """scipy.integrate, imported by the user's code before any of these rules runs."""
    import scipy.integrate
    return scipy.integrate


def _options(bound) -> dict:
    return {name: bound[name] for name in _SOLVER_OPTIONS if name in bound}


def _parts(args, kwargs):
    """The call's arguments by name, scipy's defaults filled in."""
    return call_arguments(_scipy().odeint, args, kwargs, "scipy.integrate.odeint",
                          "states")


@transformed_as_users
def _rhs(func, tfirst, y, t, *args):
    """The right-hand side as ``f(y, t, *args)``, whichever order the call uses."""
    return func(t, y, *args) if tfirst else func(y, t, *args)


def _numeric(value) -> bool:
    """Is the extra argument a float or an array of numbers (one with a derivative)?"""
    return isinstance(value, (float, np.floating, np.ndarray)) and \
        np.asarray(value).dtype.kind == "f"


def _flat(values, like) -> np.ndarray:
    """The cotangents (or values) of the numeric ones among ``like``, as one vector (a
    missing one as zeros)."""
    pieces = [np.zeros(np.size(v)) if c is None else np.ravel(np.asarray(c, dtype=float))
              for c, v in zip(values, like) if _numeric(v)]
    return np.concatenate(pieces) if pieces else np.zeros(0)


def _unflat(flat, like) -> tuple:
    out, at = [], 0
    for v in like:
        if not _numeric(v):
            out.append(None)
            continue
        size = int(np.size(v))
        piece = flat[at:at + size]
        out.append(float(piece[0]) if np.ndim(v) == 0 else piece.reshape(np.shape(v)))
        at += size
    return tuple(out)


def _forward(*args, **kwargs):
    _CLOSURE(args, kwargs)
    _no_second_order(args, kwargs)
    values = _parts(args, kwargs)
    ys = _scipy().odeint(*args, **kwargs)
    return ys, (values, ys, len(args))


_CLOSURE = closed_over_duals("scipy.integrate.odeint", "the solution's derivative")


def _no_second_order(*values) -> None:
    if contains_dual(values):
        raise NotDifferentiableError(
            "astad differentiates scipy.integrate.odeint once (in either mode), not a "
            "derivative of its derivative (a Hessian through it)", *user_location())


def _backward(residuals, g):
    _no_second_order(residuals, g)
    values, ys, count = residuals
    func, tfirst, t, extra = values["func"], values["tfirst"], values["t"], values["args"]
    y0 = np.asarray(values["y0"], dtype=float)
    n, g = y0.size, np.asarray(g, dtype=float).reshape(len(t), -1)
    f = functools.partial(_rhs, func, tfirst)

    def augmented(state, time):
        value, pullback = vjp(f, state[:n].reshape(y0.shape), time, *extra)
        cotangents = pullback(state[n:2 * n].reshape(np.shape(value)))
        return np.concatenate([np.ravel(value), -np.ravel(cotangents[0]),
                               -_flat(cotangents[2:], extra)])

    times_bar = np.zeros(len(t))
    lam, args_bar = g[-1].copy(), np.zeros(_flat(extra, extra).size)
    options = _options(values)
    for i in range(len(t) - 1, 0, -1):
        times_bar[i] = g[i] @ _rates(f, ys[i], t[i], extra, y0.shape)
        state = np.concatenate([ys[i], lam, args_bar])
        state = _scipy().odeint(augmented, state, [t[i], t[i - 1]], **options)[-1]
        lam, args_bar = state[n:2 * n] + (g[i - 1] if i > 1 else 0.0), state[2 * n:]
    times_bar[0] = -lam @ _rates(f, y0, t[0], extra, y0.shape)
    cotangents = (None, (lam + g[0]).reshape(y0.shape), times_bar, _unflat(args_bar, extra))
    return (cotangents + (None,) * count)[:count]


def _rates(f, y, time, extra, shape) -> np.ndarray:
    return np.ravel(f(np.reshape(y, shape), time, *extra))


def _tangent(primals, tangents):
    _no_second_order(primals, tangents)
    values = _parts(primals, {})
    t, extra = np.asarray(values["t"], dtype=float), values["args"]
    y0 = np.asarray(values["y0"], dtype=float)
    given = list(tangents) + [None] * (4 - len(tangents))
    y0_dot, t_dot, extra_dot = given[1], given[2], given[3]
    if not isinstance(extra_dot, tuple):  # (no tangent: zeros)
        extra_dot = tuple(np.zeros(np.shape(a)) if _numeric(a) else None for a in extra)
    y0_dot = np.zeros(y0.shape) if y0_dot is None else np.asarray(y0_dot, dtype=float)
    t_dot = np.zeros(t.shape) if t_dot is None else np.asarray(t_dot, dtype=float)
    batched = [np.ndim(y0_dot) > y0.ndim, np.ndim(t_dot) > t.ndim] + [
        np.ndim(d) > np.ndim(a) for a, d in zip(extra, extra_dot)]
    ys = _scipy().odeint(*primals)  # (scipy's own values)
    if not any(batched):
        return ys, _sensitivity(values, y0, t, extra, y0_dot, t_dot, extra_dot)
    width = len(next(d for d, b in zip([y0_dot, t_dot, *extra_dot], batched) if b))
    row = (lambda d, b, j: d[j] if b else d)  # (several directions: one at a time)
    return ys, np.stack([_sensitivity(
        values, y0, t, extra, row(y0_dot, batched[0], j), row(t_dot, batched[1], j),
        tuple(row(d, b, j) for d, b in zip(extra_dot, batched[2:]))) for j in range(width)])


def _sensitivity(values, y0, t, extra, y0_dot, t_dot, extra_dot) -> np.ndarray:
    """The outputs' tangent along one direction: the state's tangent integrated with
    it, plus each output time's own."""
    f, n = functools.partial(_rhs, values["func"], values["tfirst"]), y0.size
    t_dot = np.broadcast_to(t_dot, t.shape)

    def augmented(state, time):
        value, tangent = jvp(f, (state[:n].reshape(y0.shape), time, *extra),
                             (state[n:].reshape(y0.shape), 0.0, *extra_dot))
        return np.concatenate([np.ravel(value), np.ravel(tangent)])
    start = np.ravel(np.broadcast_to(y0_dot, y0.shape)) - \
        _rates(f, y0, t[0], extra, y0.shape) * t_dot[0]
    solved = _scipy().odeint(augmented, np.concatenate([np.ravel(y0), start]), t,
                       **_options(values))
    out = solved[:, n:].copy()
    out[0] = np.ravel(np.broadcast_to(y0_dot, y0.shape))
    for i in range(1, len(t)):
        out[i] += _rates(f, solved[i, :n], t[i], extra, y0.shape) * t_dot[i]
    return out.reshape((len(t),) + y0.shape)


def register() -> None:
    """Give scipy.integrate.odeint these rules (unless the user gave it one)."""
    odeint = _scipy().odeint
    if has_rule(odeint):
        return
    rule = custom_vjp(odeint)
    rule.defvjp(_forward, _backward)
    rule.defjvp(_tangent)
    rule.plain_check = _CLOSURE


scipy_loader.ABOVE["scipy.integrate"] = register  # (its loaders: astad/rules/scipy_loader.py)
