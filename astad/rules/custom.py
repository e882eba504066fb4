"""Custom derivatives: ``custom_vjp`` (in the style of ``jax.custom_vjp``) and
``stop_gradient``.

A function with a custom derivative is a primitive like ``math.sin``: it is registered in
the same registry (astad/registry.py: a record, its rule in the ``ad`` namespace), so generated
code calls its rule directly, and ``calls.rev`` finds it wherever the function is passed
around. Astad defines some of its own primitives this way (``math.dist``, ``math.lgamma``
and others at the end of this module), with the same two calls users make.

The rule runs the user's ``fwd`` on primal values (no duals reach user code), gives every
float leaf of the result a tape slot (interleave, as for a gradient's arguments), and
records one entry whose backward step rebuilds the result's cotangent, calls the user's
``bwd`` and adds the cotangents it returns into the arguments' slots (seed). Arguments and
results may be any structure astad walks: floats, lists, tuples, dicts, named tuples,
dataclasses, float numpy arrays.

Tape layout for a call at index ``c``: a float result is the entry ``c`` itself. A
structured result has the entry at ``c`` and one slot per float leaf after it; those
slots' entries only note (in ``arrays``) that entry ``c`` must run, so the sweep reaches
it even when the result's cotangents sum to zero. Every consumer of the result comes
later on the tape, so its cotangents are complete when the sweep reaches ``c``.
"""
from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..errors import AstadError, NotDifferentiableError, user_location
from .scalar_general import general_namespace
from ..registry import define, unique_name
from .scalar import ad, full_primal, register_scalar
from ..core.forward_pass import ForwardInterleaving, tangent_of
from ..runtime.duals import (DUAL_TYPES, SCALAR_DUALS, is_forward, is_nested, level as
                             running_level, outside_levels, reverse_dual)
from ..runtime.tape import BATCHED_BACKWARDS, sweep, sweep_general
from ..core.boundary import (Interleaving, build_gradient, contains_dual, duals_in, level_in,
                         primal, seed)


class _Trigger:
    """Marks in ``arrays`` that a custom entry has a non-zero cotangent to pull back."""

    __slots__ = ()


_TRIGGER = _Trigger()


def _holds_level(value, level) -> bool:
    """Does ``value`` hold a dual of ``level``?"""
    if type(value) in DUAL_TYPES:
        return value.t is level
    return type(value) is not float and any(d.t is level for d in duals_in(value))


def call_user(fn, *args, **kwargs):
    """``fn(*args)`` for a function the user gave (fwd, bwd): transformed when a dual is
    among the arguments (a derivative of a derivative), so that it is differentiated;
    on plain arguments, outside the levels running (a differentiation it starts itself,
    an ``astad.vjp`` in it, is then an outermost one, with plain results)."""
    if contains_dual(args) or contains_dual(kwargs):
        return ad.rev(fn)(None, *args, **kwargs)
    if not is_nested():
        return fn(*args, **kwargs)
    with outside_levels():
        return fn(*args, **kwargs)


class _CustomRule:
    """A function with a derivative of the user's own (see custom_vjp and custom_jvp).

    It may have a reverse rule (``defvjp``), a forward rule (``defjvp``/``defjvps``), or
    both (an astad extension: JAX allows one of the two). Reverse mode uses the reverse
    rule, or else linearises the forward rule and transposes it by a sweep of its own;
    forward mode needs the forward rule and says so if there is none."""

    kind = ""

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise AstadError(f"{self.kind} needs a callable, got {fn!r}")
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.fwd = self.bwd = self.jvp = None
        # ``check(args, kwargs)`` of a call with nothing differentiated among its
        # arguments, before ``fn`` runs (a root finder's function closing over a
        # differentiated value: api/roots.py)
        self.plain_check = None
        # astad's own rules only: the jvp takes the call's keywords too (solve_ivp's
        # tolerances), as jvp(primals, tangents, kwargs)
        self.jvp_keywords = False
        try:
            self._signature = inspect.signature(fn)
        except (TypeError, ValueError):  # some C functions have none
            self._signature = None
        self._name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        self._rule = functools.partial(_custom_rule, self)
        self._rule_name = unique_name("custom_", fn)
        define(self._rule_name, self._rule, self)

    def _defined(self):
        try:  # the wrapped callable itself, wherever differentiated code calls it
            define(self._rule_name, self._rule, self.fn)
        except TypeError:  # unhashable: only the wrapper is registered
            pass
        return self

    def defvjp(self, fwd: Callable[..., tuple[Any, Any]], bwd: Callable[..., Any]):
        """Set the forward (``fwd(*args) -> (result, residuals)``) and backward
        (``bwd(residuals, g) -> tuple of cotangents``) halves; returns ``self``."""
        if not (callable(fwd) and callable(bwd)):
            raise AstadError(f"{self._name}.defvjp needs two callables (fwd, bwd)")
        self.fwd, self.bwd = fwd, bwd
        return self._defined()

    def defjvp(self, jvp: Callable[..., tuple[Any, Any]]):
        """Set the forward rule: ``jvp(primals, tangents) -> (primal_out, tangent_out)``
        (two tuples in, one per positional argument, as in JAX); returns ``jvp``, so it
        can be used as a decorator."""
        if not callable(jvp):
            raise AstadError(f"{self._name}.defjvp needs a callable")
        self.jvp = jvp
        self._defined()
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None):
        """Set the forward rule by one function per positional argument,
        ``jvps[k](tangent_k, primal_out, *primals)`` (None: not differentiable there),
        as JAX's ``defjvps``."""
        fn, name = self.fn, self._name

        def jvp(primals, tangents):
            out = fn(*primals)
            total = None
            for k, t in enumerate(tangents):
                if _is_zero(t):
                    continue
                if k >= len(jvps) or jvps[k] is None:
                    raise NotDifferentiableError(f"{name!r} has no jvp for argument {k}",
                                                 *user_location())
                term = jvps[k](t, out, *primals)
                total = term if total is None else total + term
            return out, 0.0 if total is None else total
        self.jvp = jvp
        return self._defined()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if contains_dual(args) or contains_dual(kwargs):
            return self._rule(None, *args, **kwargs)  # reached from untransformed code
        return self.fn(*args, **kwargs)

    def __get__(self, obj, owner=None):
        """As a method: bound to the object, which is the first argument (``self`` gets a
        cotangent from ``bwd`` like any other argument)."""
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"<astad.{self.kind} of {self._name}>"

    # -- the rule's steps --------------------------------------------------------------
    def _positional(self, args, kwargs):
        """Keyword arguments moved to their positions (defaults filled in, as in JAX)."""
        if not kwargs or self._signature is None:
            return args, kwargs
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args, {name: value for name, value in bound.kwargs.items()
                            if name in kwargs}  # keyword-only arguments as given

    def _forward(self, args, kwargs, level):
        if self.fwd is None and self.jvp is not None:
            return self._linearize(args, kwargs, level)
        if self.fwd is None:
            raise NotDifferentiableError(
                f"{self._name} is a {self.kind} function without a derivative yet: call "
                f"{getattr(self.fn, '__name__', 'f')}."
                f"{'defvjp(fwd, bwd)' if self.kind == 'custom_vjp' else 'defjvp(jvp)'} "
                "before differentiating it", *user_location())
        out = call_user(self.fwd, *args, **kwargs)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise AstadError(f"the fwd of {self._name} must return a pair (result, "
                             f"residuals), got {type(out).__name__}")
        result, residuals = out
        if _holds_level(result, level) or _holds_level(residuals, level):
            raise NotDifferentiableError(
                f"the fwd of {self._name} computed with a differentiated value that is not "
                "one of its arguments (read from an enclosing scope?): pass that value as "
                "an argument so its derivative is accounted for", *user_location())
        return result, residuals

    def _linearize(self, values, kwargs, level):
        """Reverse mode from the forward rule (JAX linearises and transposes too): run it
        with the tangents as the inputs of a tape of their own, so that the tangent out is
        recorded as a linear function of them; ``_cotangents`` transposes it by a sweep."""
        if kwargs:
            raise NotDifferentiableError(
                f"{self._name}: a custom_jvp rule takes positional arguments only (as in "
                "JAX); pass the keyword arguments positionally", *user_location())
        tape: list = []
        state = Interleaving(tape)
        tangents, plans = [], []
        for k, value in enumerate(values):
            tangent, plan = state.interleave(value, f"argument {k} of {self._name}")
            tangents.append(tangent)
            plans.append(plan)
        n_inputs = len(tape)
        with running_level(tape):
            primal_out, tangent_out = self._run_jvp(tuple(values), tuple(tangents))
        if _holds_level(primal_out, tape):
            raise NotDifferentiableError(
                f"the jvp rule of {self._name} computed its primal output from the "
                "tangents; the output must depend on the primals only", *user_location())
        return primal_out, _Linearized(tape, tangent_out, plans, n_inputs)

    def _run_jvp(self, primals: tuple, tangents: tuple, kwargs=None):
        out = call_user(self.jvp, primals, tangents, kwargs) if self.jvp_keywords else \
            call_user(self.jvp, primals, tangents)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise AstadError(f"the jvp rule of {self._name} must return a pair (primal_out, "
                             f"tangent_out), got {type(out).__name__}")
        return out

    def _cotangents(self, residuals, g, n: int):
        if type(residuals) is _Linearized:
            return residuals.transpose(g)
        cotangents = call_user(self.bwd, residuals, g)
        if not isinstance(cotangents, tuple) or len(cotangents) != n:
            got = (f"a tuple of {len(cotangents)}" if isinstance(cotangents, tuple)
                   else type(cotangents).__name__)
            raise AstadError(
                f"the bwd of {self._name} must return a tuple with one cotangent per "
                f"positional argument ({n}), got {got}")
        return cotangents


class _Linearized:
    """A forward rule's tangent map, recorded on a tape of its own (_CustomRule._linearize)."""

    __slots__ = ("tape", "tangent_out", "plans", "n_inputs")

    def __init__(self, tape, tangent_out, plans, n_inputs):
        self.tape, self.tangent_out, self.plans = tape, tangent_out, plans
        self.n_inputs = n_inputs

    def transpose(self, g) -> tuple:
        """The cotangents of the arguments for the output's cotangent ``g``."""
        adjoint, arrays = [0.0] * len(self.tape), {}
        seed(self.tangent_out, g, adjoint, arrays, "the tangent out", self.tape)
        (sweep_general if is_nested() else sweep)(self.tape, adjoint, self.n_inputs, arrays)
        return tuple(build_gradient(plan, adjoint, arrays) for plan in self.plans)


def _is_zero(tangent) -> bool:
    return (type(tangent) is float and tangent == 0.0) or (
        type(tangent) is np.ndarray and not tangent.any())


class custom_vjp(_CustomRule):  # noqa: N801 - named like the decorator it is (jax.custom_vjp)
    """Give ``fn`` a derivative of your own: astad calls it instead of transforming ``fn``.

        @astad.custom_vjp
        def f(x, y): ...

        def f_fwd(x, y):              # same arguments as f
            return f(x, y), residuals   # the result, and what bwd needs

        def f_bwd(residuals, g):      # g: the cotangent of the result, shaped like it
            return (g_x, g_y)         # one cotangent per positional argument

        f.defvjp(f_fwd, f_bwd)

    ``fn`` may be any callable, also one without Python source (a C function,
    ``scipy.special.gammaln``): ``custom_vjp(fn)`` returns a wrapper, and after
    ``defvjp`` differentiated code that calls ``fn`` itself uses the rule too.
    ``fwd`` and ``bwd`` see plain values, never astad's duals. Arguments passed by
    keyword are matched to their parameters first (as JAX does); keyword-only arguments
    are constants. A cotangent of ``None`` (for an argument, a leaf or a subtree) means
    zero; cotangents of arguments that hold no float are ignored. Forward mode needs a
    forward rule as well (``f.defjvp``, see custom_jvp).
    """

    kind = "custom_vjp"


class custom_jvp(_CustomRule):  # noqa: N801 - named like the decorator it is (jax.custom_jvp)
    """Give ``fn`` a forward-mode derivative of your own, as ``jax.custom_jvp``:

        @astad.custom_jvp
        def f(x, y): ...

        @f.defjvp
        def f_jvp(primals, tangents):   # two tuples, one entry per positional argument
            x, y = primals
            x_dot, y_dot = tangents
            return f(x, y), tangent_out  # tangent_out linear in the tangents

    Forward mode calls the rule; reverse mode records its linear map (the tangents become
    values of a small tape of their own) and transposes it with a sweep, so one rule
    serves both modes and every nesting of them. ``f.defjvps(jvp_x, jvp_y)`` gives it
    argument by argument. A tangent of an argument that is not differentiated is zero.
    """

    kind = "custom_jvp"


def _custom_rule(custom: custom_vjp, tape, *args, **kwargs):
    """D of a call to a custom_vjp function (see the module docstring), at the innermost
    level among its arguments."""
    args, kwargs = custom._positional(args, kwargs)
    for name, value in kwargs.items():
        if contains_dual(value):
            raise NotDifferentiableError(
                f"keyword-only argument {name!r} of {custom._name} holds a differentiated "
                "value; custom derivatives are taken with respect to positional arguments",
                *user_location())
    level = level_in(args)
    if level is None:
        if custom.plain_check is not None:
            custom.plain_check(args, kwargs)
        return custom.fn(*args, **kwargs)
    if is_forward(level):
        return _forward_rule(custom, level, args, kwargs)
    tape = level
    active = [k for k, a in enumerate(args) if _holds_level(a, tape)]
    values = [primal(a, level=tape) for a in args]
    result, residuals = custom._forward(values, kwargs, tape)
    # a snapshot of each structured argument's duals: later mutation of a list the
    # function was given must not change where the cotangents go
    snapshot = Interleaving(tape)
    inputs = tuple(snapshot.copy_constant(a) if k in active and type(a) not in SCALAR_DUALS
                   else a for k, a in enumerate(args))
    c = len(tape)
    if isinstance(result, float) or type(result) in SCALAR_DUALS:
        d = reverse_dual(result if type(result) is not float else float(result), c, tape)
        tape.append((_backward, tuple(active), (custom, residuals, None, inputs, tape)))
        return d
    tape.append(None)  # the entry, filled in once the result's slots are known
    out, plan = Interleaving(tape).interleave(result, f"the result of {custom._name}")
    if len(tape) == c + 1:  # no float in the result: nothing to differentiate
        del tape[c]
        return result
    for slot in range(c + 1, len(tape)):
        tape[slot] = (_note, c, None)
    tape[c] = (_backward, tuple(active), (custom, residuals, plan, inputs, tape))
    return out


def _forward_rule(custom: _CustomRule, level, args, kwargs):
    """Forward mode of a custom function: its forward rule on the primals and tangents."""
    if custom.jvp is None:
        raise NotDifferentiableError(
            f"{custom._name} has a custom_vjp rule only, which reverse mode uses; forward "
            "mode (jvp, jacfwd, hessian) needs a forward rule: give it one with "
            f"{getattr(custom.fn, '__name__', 'f')}.defjvp(...), or define the function "
            "with astad.custom_jvp", *user_location())
    if kwargs and not custom.jvp_keywords:
        raise NotDifferentiableError(
            f"{custom._name}: a custom_jvp rule takes positional arguments only (as in "
            "JAX); pass the keyword arguments positionally", *user_location())
    primals = tuple(primal(a, level=level) for a in args)
    tangents = tuple(tangent_of(a, level) for a in args)
    primal_out, tangent_out = custom._run_jvp(primals, tangents, kwargs)
    state = ForwardInterleaving(level)
    out, plan = state.interleave(primal_out, f"the result of {custom._name}")
    state.set_tangents(plan, tangent_out, f"the tangent out of {custom._name}")
    state.zero_missing()
    return out


def _note(adjoint, arrays, k, entry, _):
    """A slot of a structured custom result has a cotangent: entry ``entry`` must run."""
    arrays[entry] = _TRIGGER


def _note_rows(adjoint, arrays, k, entry, _, width) -> bool:
    arrays[entry] = _TRIGGER  # (the same marker for every row)
    return True


BATCHED_BACKWARDS[_note] = _note_rows


def _backward(adjoint, arrays, k, active, context):
    custom, residuals, plan, inputs, tape = context
    if plan is None:
        g = adjoint[k]
    else:
        arrays.pop(k, None)
        g = build_gradient(plan, adjoint, arrays)
    cotangents = custom._cotangents(residuals, g, len(inputs))
    for position in active:
        seed(inputs[position], cotangents[position], adjoint, arrays,
             f"argument {position} of {custom._name} (as its bwd returned it)", tape)


# -- stop_gradient ------------------------------------------------------------------------
T = TypeVar("T")


def stop_gradient(x: T) -> T:
    """``x`` as a constant: its value, with no derivative flowing back through it.

    Works on floats, arrays and any structure astad walks; outside a gradient call (or on
    values that are not differentiated) it returns ``x`` itself.
    """
    return primal(x) if contains_dual(x) else x  # (every level's duals: a constant to all)


define("stop_gradient", lambda tape, x: stop_gradient(x), stop_gradient)


# -- astad's own primitives, defined the way users define theirs ---------------------------
def _distance(p, q):
    """math.dist, also of duals of an enclosing level (a derivative of a derivative):
    the same operations through the general rules."""
    if not contains_dual(p) and not contains_dual(q):
        return math.dist(p, q)
    total = 0.0
    for a, b in zip(p, q):
        total = total + (a - b) * (a - b)
    return _GENERAL["sqrt"](total)


_GENERAL = general_namespace()


def _dist_fwd(p, q):
    r = _distance(p, q)
    return r, (p, q, r)


def _dist_bwd(residuals, g):
    # d|p - q| / dp = (p - q) / |p - q|; at p == q, 0 (the subgradient abs also picks)
    p, q, r = residuals
    scale = g / r if r else 0.0
    gp = [(a - b) * scale for a, b in zip(p, q)]
    return gp, [-x for x in gp]


def _dist_jvp(primals, tangents):
    p, q = primals
    r = _distance(p, q)
    dp, dq = tangents
    if not r:
        return r, 0.0
    return r, sum((a - b) * (da - db) for a, b, da, db in zip(p, q, dp, dq)) / r


custom_vjp(math.dist).defvjp(_dist_fwd, _dist_bwd).defjvp(_dist_jvp)


# (digamma of a differentiated value, for derivatives of derivatives: rules/polygamma.py)
register_scalar(math.lgamma, general_namespace()["_digamma"], name="lgamma")
# ldexp(x, i) = x 2**i (i an int); remainder(x, y) = x - n y with n = round(x / y), read
# from the primals (n is piecewise constant: a plain number at every level)
register_scalar(math.ldexp, lambda x, i: math.ldexp(1.0, i), None, name="ldexp")
register_scalar(math.remainder, lambda x, y: 1.0, lambda x, y: -round(
    (full_primal(x) - math.remainder(full_primal(x), full_primal(y))) / full_primal(y)),
    name="remainder")


# modf and frexp of a dual of an enclosing level (a derivative of a derivative): the
# integer part and the exponent are read from the primal (piecewise constant), the rest
# computed from x with operators, so that the enclosing levels see it
def _modf(x):
    whole = math.modf(full_primal(x))[1]
    return (x - whole if type(x) in DUAL_TYPES else math.modf(x)[0]), whole


def _frexp(x):
    mantissa, exponent = math.frexp(full_primal(x))
    return (x * 2.0 ** -exponent if type(x) in DUAL_TYPES else mantissa), exponent


def _modf_bwd(residuals, g):
    return (g[0] if g[0] is not None else 0.0,)  # the fraction moves with x, the integer not


def _frexp_bwd(exponent, g):
    return (g[0] * 2.0 ** -exponent if g[0] is not None else 0.0,)  # m = x 2**-e


def _frexp_fwd(x):
    out = _frexp(x)
    return out, out[1]


def _frexp_jvp(primals, tangents):
    mantissa, exponent = _frexp(primals[0])
    return (mantissa, exponent), (2.0 ** -exponent * tangents[0], exponent)


custom_vjp(math.modf).defvjp(lambda x: (_modf(x), None), _modf_bwd).defjvp(
    lambda primals, tangents: (_modf(primals[0]), (tangents[0], 0.0)))
custom_vjp(math.frexp).defvjp(_frexp_fwd, _frexp_bwd).defjvp(_frexp_jvp)
