"""scipy.integrate.odeint differentiated by the adjoint method (reverse mode) and by
forward sensitivities (forward mode), as autograd's ``odeint`` is: in the initial state
``y0``, the times ``t`` and the extra arguments ``args``; scipy.integrate.solve_ivp the
same way in ``y0`` and ``args`` (its solution ``.y`` at its times ``.t``), each piece
integrated by solve_ivp with the call's method and tolerances.

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
import inspect

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


def _no_second_order(*values, name="scipy.integrate.odeint") -> None:
    if contains_dual(values):
        raise NotDifferentiableError(
            f"astad differentiates {name} once (in either mode), not a derivative of its "
            "derivative (a Hessian through it)", *user_location())


def _backward(residuals, g):
    _no_second_order(residuals, g)
    values, ys, count = residuals
    func, tfirst, t, extra = values["func"], values["tfirst"], values["t"], values["args"]
    y0 = np.asarray(values["y0"], dtype=float)
    n, g = y0.size, np.asarray(g, dtype=float).reshape(len(t), -1)
    f = functools.partial(_rhs, func, tfirst)
    augmented = _adjoint(func, tfirst, y0.shape, n, extra)
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


def _adjoint(func, tfirst, shape, n, extra):
    """The adjoint system's right-hand side, of ``(state, time)``: the state (``n``
    numbers, shaped ``shape``), its adjoint ``lam`` and the arguments' cotangent, with
    ``lam' = -lam^T f_y`` and ``args_bar' = -lam^T f_args``. The user's ``func`` itself
    is pulled back (its order of ``y`` and ``t`` as it takes them), so that a function of
    floats and arrays read by element runs the code written for them."""
    def augmented(state, time):
        y = state[:n].reshape(shape)
        value, pullback = vjp(func, *((time, y) if tfirst else (y, time)), *extra)
        cotangents = pullback(state[n:2 * n].reshape(np.shape(value)))
        return np.concatenate([np.ravel(value), -np.ravel(cotangents[1 if tfirst else 0]),
                               -_flat(cotangents[2:], extra)])
    return augmented


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


# -- solve_ivp ---------------------------------------------------------------------------
# The same adjoint and sensitivity equations, with the right-hand side as fun(t, y, *args)
# and each piece integrated by solve_ivp itself with the call's method and tolerances.
_IVP = "scipy.integrate.solve_ivp"
_IVP_CLOSURE = closed_over_duals(_IVP, "the solution's derivative")
_IVP_KEPT = ("rtol", "atol", "max_step", "min_step", "first_step")  # (jac: the original's)


def _ivp_parts(args, kwargs) -> dict:
    """The call's arguments by name, scipy's defaults filled in, ``args`` a tuple."""
    bound = inspect.signature(_scipy().solve_ivp).bind(*args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    values["args"] = () if values["args"] is None else tuple(values["args"])
    return values


def _ivp_solver(values, n_state: int) -> dict:
    """solve_ivp's keywords for the adjoint or the sensitivities (a state of ``n_state``
    numbers): the call's method and tolerances (an absolute tolerance per component
    taken at its smallest, for the longer state)."""
    options = {name: value for name, value in values["options"].items() if name in _IVP_KEPT}
    if np.ndim(options.get("atol", 0.0)) > 0:
        options["atol"] = float(np.min(options["atol"]))
    return dict(options, method=values["method"])


def _ivp_forward(*args, **kwargs):
    _IVP_CLOSURE(args, kwargs)
    _no_second_order(args, kwargs, name=_IVP)
    values = _ivp_parts(args, kwargs)
    for name, why in (("dense_output", "a continuous solution (dense_output=True)"),
                      ("events", "events")):
        if values[name]:
            raise NotDifferentiableError(
                f"astad differentiates {_IVP}'s solution at its times (.y), not {why}",
                *user_location())
    result = _scipy().solve_ivp(*args, **kwargs)
    return result, (values, result.t.copy(), result.y.copy(), len(args))


def _ivp_backward(residuals, g):
    _no_second_order(residuals, g, name=_IVP)
    values, times, ys, count = residuals
    extra = values["args"]
    y0 = np.asarray(values["y0"], dtype=float)
    n, m = y0.size, len(times)
    gy = g["y"] if g is not None else None
    g = np.zeros((n, m)) if gy is None else np.asarray(gy, dtype=float).reshape(n, m)
    adjoint = _adjoint(values["fun"], True, y0.shape, n, extra)
    solver = _ivp_solver(values, 2 * n + _flat(extra, extra).size)
    lam, args_bar = g[:, -1].copy(), np.zeros(_flat(extra, extra).size)
    # back through the output times, then to the start when the first is later
    stops = list(times[::-1]) + ([values["t_span"][0]] if times[0] != values["t_span"][0]
                                 else [])
    for i in range(1, len(stops)):
        start = np.concatenate([ys[:, m - i] if i <= m else ys[:, 0], lam, args_bar])
        state = _scipy().solve_ivp(lambda t, s: adjoint(s, t), (stops[i - 1], stops[i]),
                                   start, **solver).y[:, -1]
        lam, args_bar = state[n:2 * n] + (g[:, m - i - 1] if i < m else 0.0), state[2 * n:]
    positional = {"y0": lam.reshape(y0.shape), "args": _unflat(args_bar, extra)}
    names = list(inspect.signature(_scipy().solve_ivp).parameters)
    return tuple(positional.get(names[k]) for k in range(count))


def _ivp_tangent(primals, tangents, kwargs):
    _no_second_order(primals, tangents, name=_IVP)
    values = _ivp_parts(primals, kwargs)
    names = list(inspect.signature(_scipy().solve_ivp).parameters)
    given = dict(zip(names, tangents))
    for name in ("t_span", "t_eval"):
        if given.get(name) is not None and np.any(given[name]):
            raise NotDifferentiableError(
                f"astad differentiates {_IVP} in y0 and args, not in {name}",
                *user_location())
    extra = values["args"]
    y0 = np.asarray(values["y0"], dtype=float)
    y0_dot = given.get("y0")
    extra_dot = given.get("args")
    if not isinstance(extra_dot, tuple):  # (no tangent: zeros)
        extra_dot = tuple(np.zeros(np.shape(a)) if _numeric(a) else None for a in extra)
    y0_dot = np.zeros(y0.shape) if y0_dot is None else np.asarray(y0_dot, dtype=float)
    result = _scipy().solve_ivp(*primals, **kwargs)
    batched = [np.ndim(y0_dot) > y0.ndim] + [
        d is not None and np.ndim(d) > np.ndim(a) for a, d in zip(extra, extra_dot)]
    if not any(batched):
        tangent = _ivp_sensitivity(values, result.t, y0, extra, y0_dot, extra_dot)
    else:  # several directions: one at a time
        width = len(next(d for d, b in zip([y0_dot, *extra_dot], batched) if b))
        tangent = np.stack([_ivp_sensitivity(
            values, result.t, y0, extra, y0_dot[j] if batched[0] else y0_dot,
            tuple(d[j] if b else d for d, b in zip(extra_dot, batched[1:])))
            for j in range(width)])
    out = {name: None for name in result}  # (the result's entries: its tangent)
    out["y"] = tangent
    return result, out


def _ivp_sensitivity(values, times, y0, extra, y0_dot, extra_dot) -> np.ndarray:
    """The solution's tangent at ``times`` along one direction: the state's tangent
    integrated with it."""
    f, n = functools.partial(_rhs, values["fun"], True), y0.size

    def augmented(time, state):
        value, tangent = jvp(f, (state[:n].reshape(y0.shape), time, *extra),
                             (state[n:].reshape(y0.shape), 0.0, *extra_dot))
        return np.concatenate([np.ravel(value), np.ravel(tangent)])
    start = np.concatenate([np.ravel(y0), np.ravel(np.broadcast_to(y0_dot, y0.shape))])
    solved = _scipy().solve_ivp(augmented, values["t_span"], start, t_eval=times,
                                **_ivp_solver(values, 2 * n))
    return solved.y[n:]


def register() -> None:
    """Give scipy.integrate.odeint and solve_ivp these rules (unless the user gave them
    one)."""
    odeint, solve_ivp = _scipy().odeint, _scipy().solve_ivp
    if not has_rule(odeint):
        rule = custom_vjp(odeint)
        rule.defvjp(_forward, _backward)
        rule.defjvp(_tangent)
        rule.plain_check = _CLOSURE
    if not has_rule(solve_ivp):
        rule = custom_vjp(solve_ivp)
        rule.defvjp(_ivp_forward, _ivp_backward)
        rule.defjvp(_ivp_tangent)
        rule.jvp_keywords = True  # (its tolerances are keywords: rtol=, atol=)
        rule.plain_check = _IVP_CLOSURE


scipy_loader.ABOVE["scipy.integrate"] = register  # (its loaders: astad/rules/scipy_loader.py)
