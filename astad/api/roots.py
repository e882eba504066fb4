"""scipy.optimize's root finders differentiated by the implicit function theorem: the
root's derivative in the function's extra arguments ``args``, whatever steps found it.

For ``f(r, *args) = 0`` the root moves with the arguments as ``dr = -f_x^-1 f_args dargs``:

- the scalar finders (``brentq``, ``brenth``, ``ridder``, ``bisect``, ``toms748`` and
  ``newton``, also ``newton`` on an array of independent equations, ``f`` then taken
  element-wise in ``x``): ``f_x`` is one derivative (one jvp or pullback of ``f`` at the
  root), the argument's cotangent the pullback of ``-g / f_x``;
- ``fsolve``, a system ``F(x, *args) = 0``: ``F_x`` is the Jacobian at the root
  (``astad.jacrev``), the cotangent the pullback of ``-F_x^-T g``, the tangent
  ``-F_x^-1 (F_args dargs)``.

The brackets, the starting point and a given derivative (``fprime``) get no derivative:
the root does not depend on them. ``full_output=True`` is refused (a tuple, not the
root). The values are scipy's own. Registered on first use of scipy.optimize
(rules/scipy_loader.py).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from ..compile.calls import transformed_as_users
from ..core.boundary import contains_dual
from ..data.tree import find
from ..errors import NotDifferentiableError, user_location
from ..registry import has_rule
from ..rules import scipy_loader
from ..rules.custom import custom_vjp
from ..runtime.duals import DUAL_TYPES
from .jacobians import jacrev
from .transforms import jvp, vjp

SCALAR_FINDERS = ("brentq", "brenth", "ridder", "bisect", "toms748", "newton")


@transformed_as_users
def _equation(f, x, *args):
    return f(x, *args)


def call_arguments(fn, args, kwargs, name: str, result: str) -> dict:
    """The arguments of a call of scipy's ``fn`` by name, its defaults filled in, ``args``
    a tuple; ``full_output=True`` refused (``name`` gives ``result`` alone)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    if values.get("full_output"):
        raise NotDifferentiableError(f"astad differentiates {name}'s {result}, not the "
                                     "tuple full_output=True gives", *user_location())
    if not isinstance(values["args"], tuple):
        values["args"] = (values["args"],)
    return values


def _bound(fn, args, kwargs):
    values = call_arguments(fn, args, kwargs, f"scipy.optimize.{fn.__name__}", "root")
    for name in ("fprime", "fprime2", "jac"):  # (True: f gives its derivatives too)
        if values.get(name) is True:
            raise NotDifferentiableError(
                f"astad differentiates scipy.optimize.{fn.__name__} with a function giving "
                f"the equation's value alone, not with {name}=True", *user_location())
    return next(values[name] for name in ("f", "func", "fun") if name in values), \
        values["args"]


def closed_over_duals(name: str, what: str):
    """A call's ``check`` with nothing differentiated among its arguments: the function
    it solves (its first argument) must not close over a differentiated value, which
    scipy's code would turn into a float (its derivative lost)."""
    def check(args, kwargs):
        f = args[0] if args else next(iter(kwargs.values()), None)
        if find(f, lambda value: type(value) in DUAL_TYPES, functions=True) is not None:
            raise NotDifferentiableError(
                f"the function given to {name} reads a differentiated value from its "
                f"closure or defaults; pass that value through args=(...), so that {what} "
                "accounts for it", *user_location())
    return check


def _rules(fn, system: bool, key=None):
    """The custom rule's three parts for the finder ``fn``; ``key``: the root's name in
    the result object ``fn`` returns (``root``'s ``x``, ``root_scalar``'s ``root``), whose
    other entries are constants (the residual's derivative is zero at a root)."""
    at = list(inspect.signature(fn).parameters).index("args")  # (3, fsolve's 2)

    closure = closed_over_duals(f"scipy.optimize.{fn.__name__}", "the root's derivative")

    def forward(*args, **kwargs):
        closure(args, kwargs)
        if contains_dual((args, kwargs)):  # (a root's derivative's derivative)
            raise NotDifferentiableError(
                f"astad differentiates scipy.optimize.{fn.__name__} once, not a "
                "derivative of its derivative", *user_location())
        f, extra = _bound(fn, args, kwargs)
        result = fn(*args, **kwargs)
        root = result if key is None else np.asarray(result[key], dtype=float)
        return result, (f, root, extra, len(args))

    def backward(residuals, g):
        f, root, extra, count = residuals
        if key is not None:
            g = np.zeros_like(root) if g is None or g[key] is None else g[key]
        equation = functools.partial(_equation, f)
        _, pullback = vjp(equation, root, *extra)
        if system:
            slope = jacrev(equation)(root, *extra)
            w = -np.linalg.solve(np.transpose(slope), np.asarray(g, dtype=float))
        else:
            w = -np.asarray(g, dtype=float) / pullback(np.ones_like(root))[0]
        cotangents = (None,) * at + (pullback(w if np.ndim(root) else float(w))[1:],)
        return (cotangents + (None,) * count)[:count]

    def tangent(primals, tangents):
        root, tangent_out = solved_tangent(primals, tangents)
        if key is None:
            return root, tangent_out
        result = fn(*primals)
        out = {name: None for name in result}  # (the result's entries: its tangent)
        out[key] = tangent_out
        return result, out

    def solved_tangent(primals, tangents):
        f, extra = _bound(fn, primals, {})
        extra_dot = tangents[at] if len(tangents) > at and isinstance(tangents[at], tuple) \
            else tuple(0.0 * np.asarray(a, dtype=float) for a in extra)
        root = fn(*primals)
        if key is not None:
            root = np.asarray(root[key], dtype=float)
        equation = functools.partial(_equation, f)
        zero = 0.0 * np.asarray(root, dtype=float)
        if system:
            slope = jacrev(equation)(root, *extra)

            def solve(shift):
                return -np.linalg.solve(slope, shift)
        else:
            slope = jvp(equation, (root, *extra), (np.ones_like(zero) if np.ndim(root)
                                                   else 1.0, *(0.0 * np.asarray(a, dtype=float)
                                                               for a in extra)))[1]

            def solve(shift):
                return -shift / slope
        rows = [np.ndim(d) > np.ndim(a) for a, d in zip(extra, extra_dot)]
        if not any(rows):
            return root, solve(jvp(equation, (root, *extra), (zero, *extra_dot))[1])
        width = len(next(d for d, batched in zip(extra_dot, rows) if batched))
        return root, np.stack([solve(jvp(equation, (root, *extra), (zero, *(
            d[j] if batched else d for d, batched in zip(extra_dot, rows))))[1])
            for j in range(width)])
    return forward, backward, tangent


def register() -> None:
    """Give scipy.optimize's root finders these rules (unless the user gave one)."""
    import scipy.optimize
    for name, system, key in [(name, False, None) for name in SCALAR_FINDERS] + [
            ("fsolve", True, None), ("root", True, "x"), ("root_scalar", False, "root")]:
        fn = getattr(scipy.optimize, name)
        if has_rule(fn):
            continue
        forward, backward, tangent = _rules(fn, system, key)
        rule = custom_vjp(fn)
        rule.defvjp(forward, backward)
        rule.defjvp(tangent)
        rule.plain_check = closed_over_duals(f"scipy.optimize.{name}",
                                             "the root's derivative")  # (as forward's)


scipy_loader.ABOVE["scipy.optimize"] = register  # (its loaders: rules/scipy_loader.py)
