"""The general case of every scalar rule: any mix of modes and levels.

A rule's fast path (rules/scalar.py, transform/preaccumulate.py) takes duals of the level the
generated code runs on, with float primals. Everything else comes here: a dual of another
level (a value of an enclosing differentiation reaching an inner one, through an argument,
a closure, a global or an object), a nested primal (a dual of a dual), a forward dual with
a vector of tangents, or operator overloading from code astad did not transform.

``apply(rule, args)`` finds the innermost running level among the operands, takes one
level off each operand of that level (its primal, which may itself be a dual of an
enclosing level), computes the primal and the local partials with these same general
rules, and records the result at that level: one tape entry (reverse) or the tangent
``sum(partial * tangent)`` (forward). Every other operand is a constant of that level,
and its own level still sees how it was used, since the primal and the partials were
computed with it by the general rules (Siskind & Pearlmutter's perturbation tags). So
each rule is written once, as text in terms of ``x``, ``y`` and the result ``r``
(rules/scalar.py), and differentiated again at every level by the same code.
"""
from __future__ import annotations

import math

import numpy as np

from .. import registry
from ..runtime.duals import (DUAL_TYPES, FDual, forward_dual, innermost, reverse_dual,
                             running, stale)

_INF = math.inf


class Rule:
    """A scalar primitive in its general form: ``primal(*xs)`` and ``partials[k](*xs, r)``,
    functions of plain numbers or duals (they call the general rules themselves)."""

    __slots__ = ("name", "primal", "partials")

    def __init__(self, name, primal, partials):
        self.name = name
        self.primal = primal
        self.partials = partials


def apply(rule: Rule, args: tuple):
    """``rule`` applied to ``args`` (numbers and duals of any levels), recorded at the
    innermost level among them; a plain number when no dual is among them."""
    if len(args) == 2:
        return apply2(rule, args[0], args[1])
    level = innermost(args)
    if level is None:
        return rule.primal(*args)
    xs = [a.v if type(a) in DUAL_TYPES and a.t is level else a for a in args]
    r = rule.primal(*xs)
    if type(level) is list:  # reverse: one entry of (parent, partial) pairs
        entry = []
        for k, a in enumerate(args):
            if type(a) in DUAL_TYPES and a.t is level:
                entry += (a.i, rule.partials[k](*xs, r))
        d = reverse_dual(r, len(level), level)
        level.append(tuple(entry))
        return d
    tangent = 0.0  # forward: the sum of partial times tangent
    for k, a in enumerate(args):
        if type(a) in DUAL_TYPES and a.t is level:
            tangent = add_term(tangent, rule.partials[k](*xs, r), a.d)
    return forward_dual(r, tangent, level)


def apply2(rule: Rule, a, b):
    """``apply`` for two operands, written out (a derivative of a derivative runs every
    operation through here)."""
    da, db = type(a) in DUAL_TYPES, type(b) in DUAL_TYPES
    depths = running.depth
    if da:
        level, depth = a.t, depths.get(id(a.t))
        if depth is None:
            raise stale(a)
        if db and b.t is not level:
            other = depths.get(id(b.t))
            if other is None:
                raise stale(b)
            if other > depth:
                level = b.t
    elif db:
        level = b.t
        if id(level) not in depths:
            raise stale(b)
    else:
        return rule.primal(a, b)
    ours_a = da and a.t is level
    ours_b = db and b.t is level
    x = a.v if ours_a else a
    y = b.v if ours_b else b
    r = rule.primal(x, y)
    dx, dy = rule.partials
    if type(level) is list:  # reverse: one entry of (parent, partial) pairs
        if ours_a and ours_b:
            entry = (a.i, dx(x, y, r), b.i, dy(x, y, r))
        elif ours_a:
            entry = (a.i, dx(x, y, r))
        else:
            entry = (b.i, dy(x, y, r))
        d = reverse_dual(r, len(level), level)
        level.append(entry)
        return d
    tangent = 0.0
    if ours_a:
        tangent = add_term(tangent, dx(x, y, r), a.d)
    if ours_b:
        tangent = add_term(tangent, dy(x, y, r), b.d)
    return forward_dual(r, tangent, level)


def apply_many(primal, partials, args):
    """``apply`` for a function of any number of arguments (sum, hypot, prod, a
    registered function): ``primal(xs)`` and ``partials(xs, r)`` -> one partial per
    argument, computed on the arguments with one level taken off."""
    level = innermost(args)
    if level is None:
        return primal(list(args))
    xs = [a.v if type(a) in DUAL_TYPES and a.t is level else a for a in args]
    r = primal(xs)
    local = partials(xs, r)
    if type(level) is list:
        entry = []
        for a, p in zip(args, local):
            if type(a) in DUAL_TYPES and a.t is level:
                entry += (a.i, p)
        d = reverse_dual(r, len(level), level)
        level.append(tuple(entry))
        return d
    tangent = 0.0
    for a, p in zip(args, local):
        if type(a) in DUAL_TYPES and a.t is level:
            tangent = add_term(tangent, p, a.d)
    return forward_dual(r, tangent, level)


def add_term(total, partial, tangent):
    """``total + partial * tangent``, where a zero tangent adds nothing, even through an
    infinite or NaN partial (forward mode's counterpart of the sweep skipping a zero
    adjoint, so that ``jvp`` and ``grad`` agree at such points)."""
    if type(tangent) is float:
        if tangent == 0.0:
            return total
        term = partial * tangent
    elif type(tangent) is np.ndarray and type(partial) is float and partial - partial != 0.0:
        term = np.where(tangent != 0, partial * tangent, 0.0)
    else:
        term = partial * tangent
    if type(total) is float and total == 0.0:
        return term
    return total + term


# -- the general math namespace: what the rules' text calls -----------------------------
_NUMBER = (float, int)


def _general(rule_name: str, plain):
    """A math function that works on plain numbers (``plain``) and on duals (the rule)."""
    def call(*args):
        for a in args:
            if type(a) in DUAL_TYPES:
                return apply(registry.named(rule_name).general, args)
        return plain(*args)
    call.__name__ = getattr(plain, "__name__", rule_name)
    return call


def inverse(z):
    """1/z, with 1/0 = inf: the derivative at a vertical tangent (sqrt at 0, asin at 1)."""
    return 1.0 / z if z else _INF


def numpy_divide(a, b):
    """a / b as numpy divides: inf or nan, with numpy's warning, at a float or int zero
    divisor, where Python raises (a partial at its function's singular point). The
    division of numpy's formulas: element-wise (rules/from_scalar.py) and for floats
    (rules/numpy_floats.py)."""
    if (type(b) is float or type(b) is int) and not b:
        return np.true_divide(a, b)
    return a / b


def sign(x):
    """Derivative of abs: 0 at 0 (the subgradient PyTorch also picks), nan at nan (as
    numpy's sign, which the element-wise rules use)."""
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else (0.0 if x == 0.0 else x))


NAMESPACE = {
    "_inv": inverse, "_sign": sign, "LN2": math.log(2.0), "LN10": math.log(10.0),
    "TWO_OVER_SQRTPI": 2.0 / math.sqrt(math.pi), "DEG": 180.0 / math.pi,
    "RAD": math.pi / 180.0, "math": math, "float": float,
}


def general_namespace() -> dict:
    return NAMESPACE


def general_form(name: str, primal: str, partials: tuple, arguments: str, math_name=None):
    """The general form of a rule given as text (rules/scalar.py), compiled; and the math
    function of the same name in the namespace the texts are compiled in made to work on
    duals (``sin`` in ``cos(x)``, the partial of ``sin``)."""
    fn = eval(f"lambda {arguments}: {primal}", NAMESPACE)  # astad's own rule text
    derivatives = tuple(eval(f"lambda {arguments}, r: {p}", NAMESPACE) for p in partials)
    rule = Rule(name, fn, derivatives)
    plain = getattr(math, math_name or name, None)
    if plain is not None and (math_name or name) not in NAMESPACE:
        NAMESPACE[math_name or name] = _general(name, plain)
    return rule


def is_dual(value) -> bool:
    return type(value) in DUAL_TYPES


def fast_forward(value) -> bool:
    return type(value) is FDual
