"""The table of scalar primitives and their local partials, for every mode.

Each rule is a primal expression and one partial-derivative expression per argument
(in terms of the inputs ``x``, ``y`` and the result ``r``). From each rule astad writes
one small specialised function (paper section 8.2: compute the partials now; in reverse
mode append one tape entry holding parent indices and partials, in forward mode (sections
2-3) combine them with the operands' tangents; return the new dual). The functions are
generated from text templates because a hand-inlined fast path is several times faster
in CPython than a generic one that calls a partials function per operation. The same
text, compiled once more in general form (rules/scalar_general.py), serves every other case:
nested derivatives, duals of other levels, vectors of tangents.

The same registry holds users' own rules (:func:`register_scalar`): astad extends
itself exactly as users extend it.
"""
from __future__ import annotations

import builtins
import functools
import itertools
import linecache
import math
import numbers
import operator
import types
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .. import registry
from ..errors import (RULE_FILENAME, AstadError, NotDifferentiableError, api_boundary,
                      user_location)
from ..registry import ad, define, publish
from ..runtime.array_dual import ArrayDual, FArrayDual
from ..runtime.duals import (DUAL_TYPES, SCALAR_DUALS, Dual, FDual, forward_dual, full_primal,
                             new_dual)
from ..runtime.tape import gradient_of
from . import polygamma
from .scalar_general import (Rule, add_term, inverse, numpy_divide, sign, apply as general,
                             apply2 as general2, apply_many, general_form, general_namespace,
                             is_dual)

# digamma for the general rules (gamma's partial, differentiated again at any order)
general_namespace()["_digamma"] = polygamma.general(general, Rule, is_dual)
# sech^2 x = 4 e / (1 + e)^2 with e = exp(-2|x|): tanh's partial where 1 - r^2 cancels
# (its text, compiled for the fast paths here and for the general rules' namespace)
_SECH2 = """
def _sech2(x):
    e = exp(-2.0 * abs(x))
    return 4.0 * e / ((1.0 + e) * (1.0 + e))
"""
exec(compile(_SECH2, RULE_FILENAME, "exec"), general_namespace())  # astad's own text

# Each scalar rule is a record of the registry (astad/registry.py), named as generated code
# calls it (``ad.sin``), with its formula: the primal expression and the partial
# expression(s) in terms of x, y and the result r, which statement-level preaccumulation
# (transform/preaccumulate.py) and the code specialised for floats write into their code.

_INF = math.inf


ARRAY = object()  # _number's answer for an array operand: numpy's dispatch takes over
_ARRAY_TYPES = (ArrayDual, FArrayDual, np.ndarray)


def _number(value, op: str, other_is_first: bool, dual_primal):
    """Coerce the non-dual operand of a mixed operation to a number, or fail as Python would."""
    if type(value) in _ARRAY_TYPES and op in OPERATORS:
        return ARRAY
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real) and \
            op in "+-*/**":  # (x * 1j: numpy's rule, which holds for complex values)
        return ARRAY
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return value  # (its own type: numpy.float64 * x is numpy.float64, as in the original)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, np.bool_):  # a numpy truth value: numpy's arithmetic, as given
        return value
    # Reproduce Python's own error for e.g. 1.5 * "a" or [1] * 2.5, with the primal.
    a, b = (value, dual_primal) if other_is_first else (dual_primal, value)
    OPERATORS[op](a, b)  # raises Python's own TypeError where the primal would
    raise NotDifferentiableError(
        f"astad cannot differentiate {op!r} between a float and "
        f"{type(value).__name__}", *user_location())


OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "%": operator.mod, "**": operator.pow, "//": operator.floordiv,
}
# a float dual with an array: numpy's ufunc (its dispatch finds the array rule; the
# Python operator would come back to Dual's own operator and recurse)
ARRAY_OPERATORS = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
    "%": np.remainder, "**": np.power, "//": np.floor_divide,
}


def mixed(rule, sym: str, a, b):
    """A binary rule with a dual and an operand the fast paths do not take: a dual of
    another level or a nested one (the general rule), an array (numpy's dispatch), a
    number of another type (converted), or anything else (Python's own error). ``sym``
    ending in ``=`` is the in-place operator (``v *= k``): an array is written in place."""
    if sym[-1] == "=":
        if type(a) in _ARRAY_TYPES:
            return IN_PLACE_OPERATORS[sym](a, b)
        sym = sym[:-1]
    x, y = a, b
    if sym == "%" and (type(a) is str or type(a) is bytes):  # text formatting: no derivative
        return format_text(a, b)
    if type(a) not in SCALAR_DUALS:
        if type(a) is not float and type(a) is not int:
            x = _number(a, sym, True, full_primal(b))
    elif type(b) not in SCALAR_DUALS:
        if type(b) is not float and type(b) is not int:
            y = _number(b, sym, False, full_primal(a))
    if x is ARRAY or y is ARRAY:
        return ARRAY_OPERATORS[sym](a, b)
    return general2(rule, x, y)


publish("mixed", mixed)


def format_text(text, values):
    """``"%.2f" % x``, ``"%s and %s" % (x, y)``: printf-style formatting reads the values'
    primals, as f-strings and format() do (text carries no derivative)."""
    if type(values) in SCALAR_DUALS:
        return text % full_primal(values)
    if type(values) is tuple:
        return text % tuple(full_primal(v) for v in values)
    if isinstance(values, dict):
        return text % {k: full_primal(v) for k, v in values.items()}
    return text % values


publish("format_text", format_text)

IN_PLACE_OPERATORS = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul,
                      "/=": operator.itruediv, "%=": operator.imod}

_NAMESPACE = {
    "Dual": Dual, "FDual": FDual, "SCALAR_DUALS": SCALAR_DUALS, "new": new_dual,
    "general": general, "_inv": inverse, "_sign": sign, "_np_div": numpy_divide, "np": np,
    "ARRAY": ARRAY, "OPERATORS": OPERATORS, "ARRAY_OPERATORS": ARRAY_OPERATORS,
    "math": math, "LN2": math.log(2.0), "LN10": math.log(10.0),
    "TWO_OVER_SQRTPI": 2.0 / math.sqrt(math.pi), "DEG": 180.0 / math.pi,
    "RAD": math.pi / 180.0, "operator": operator, "builtins": builtins,
    "_digamma": polygamma.digamma,
    "PLAIN": frozenset({int, float, bool, complex, str, bytes, list, tuple, type(None)}),
}
_NAMESPACE.update({name: getattr(math, name) for name in dir(math) if not name.startswith("_")})
_NAMESPACE.update({"ad": ad, "NUMBER": (int, float), "gradient_of": gradient_of,
                   "NDARRAY": np.ndarray,
                   "accumulate": itertools.accumulate})
# (plain math: the fast paths; its text readable, so code written for floats that is
# differentiated again, api/hvp.py, can inline it as it inlines a user's helper)
_SECH2_FILENAME = "<astad rule _sech2>"
linecache.cache[_SECH2_FILENAME] = (len(_SECH2), None, _SECH2.splitlines(True), _SECH2_FILENAME)
exec(compile(_SECH2, _SECH2_FILENAME, "exec"), _NAMESPACE)


def rule_namespace() -> dict:
    """Globals for generated rules: math, Dual, the helpers, and ``ad`` itself."""
    return dict(_NAMESPACE)


# The fast paths take duals of the level the generated code runs on (``tape``: the tape
# of a reverse call, or a forward call's ForwardLevel), whose primal and tangent are floats
# (runtime/duals.py); every other case (a dual of another level, a nested primal, a
# vector of tangents, a number of another type) is the general rule (rules/scalar_general.py).
_UNARY_TEMPLATE = '''
def rule_{name}(tape, a):
    if type(a) is Dual and a.t is tape:
        x = a.v
        r = {primal}
        d = new(Dual)
        d.v = r
        d.i = len(tape)
        d.t = tape
        tape.append((a.i, {dx}))
        return d
    if type(a) is FDual and a.t is tape:
        x = a.v
        r = {primal}
        s = a.d
        d = new(FDual)
        d.v = r
        d.d = ({dx}) * s if s else 0.0
        d.t = tape
        return d
    if type(a) in SCALAR_DUALS:
        return general(GENERAL, (a,))
    return {fallback}
'''

_BINARY_TEMPLATE = '''
def rule_{name}(tape, a, b):
    if type(a) is Dual and a.t is tape:
        x = a.v
        if type(b) is Dual and b.t is tape:
            y = b.v
            r = {primal}
            d = new(Dual)
            d.v = r
            d.i = len(tape)
            d.t = tape
            tape.append((a.i, {dx}, b.i, {dy}))
            return d
        if type(b) is float or type(b) is int:
            y = b
            r = {primal}
            d = new(Dual)
            d.v = r
            d.i = len(tape)
            d.t = tape
            tape.append((a.i, {dx}))
            return d
    elif type(b) is Dual and b.t is tape:
        if type(a) is float or type(a) is int:
            x = a
            y = b.v
            r = {primal}
            d = new(Dual)
            d.v = r
            d.i = len(tape)
            d.t = tape
            tape.append((b.i, {dy}))
            return d
    elif type(a) is FDual and a.t is tape:
        x = a.v
        if type(b) is FDual and b.t is tape:
            y = b.v
            r = {primal}
            s = a.d
            t = b.d
            d = new(FDual)
            d.v = r
            d.d = (({dx}) * s if s else 0.0) + (({dy}) * t if t else 0.0)
            d.t = tape
            return d
        if type(b) is float or type(b) is int:
            y = b
            r = {primal}
            s = a.d
            d = new(FDual)
            d.v = r
            d.d = ({dx}) * s if s else 0.0
            d.t = tape
            return d
    elif type(b) is FDual and b.t is tape:
        if type(a) is float or type(a) is int:
            x = a
            y = b.v
            r = {primal}
            t = b.d
            d = new(FDual)
            d.v = r
            d.d = ({dy}) * t if t else 0.0
            d.t = tape
            return d
    if type(a) in SCALAR_DUALS or type(b) in SCALAR_DUALS:
        return ad.mixed(GENERAL, {sym!r}, a, b)
    return {fallback}
'''


def _compile(template: str, **fields) -> types.FunctionType:
    namespace = dict(_NAMESPACE)
    namespace["GENERAL"] = registry.named(fields["general"]).general  # (its general form)
    # astad's own templates, never user data
    exec(compile(template.format(**fields), RULE_FILENAME, "exec"), namespace)
    rule = namespace["rule_" + fields["name"]]
    rule.__name__ = rule.__qualname__ = fields["name"]
    return rule




def unary(name: str, primal: str, dx: str, *originals, fallback: str | None = None,
          math_name: str | None = None):
    rule = registry.scalar_rule(name)
    rule.general = general_form(name, primal, (dx,), "x", math_name)
    rule.formula = (primal, (dx,), "x")
    impl = _compile(_UNARY_TEMPLATE, name=name, primal=primal, dx=dx, general=name,
                    fallback=fallback or f"math.{name}(a) if type(a) in NUMBER else "
                    f"ad.via_float(rule_{name}, tape, (a,), math.{name})")
    define(name, impl, *originals)


def binary(name: str, primal: str, dx: str, dy: str, *originals, sym: str = "",
           fallback: str | None = None, inplace: str | None = None,
           math_name: str | None = None):
    rule = registry.scalar_rule(name)
    rule.general = general_form(name, primal, (dx, dy), "x, y", math_name)
    rule.formula = (primal, (dx, dy), "x, y")
    impl = _compile(_BINARY_TEMPLATE, name=name, primal=primal, dx=dx, dy=dy, general=name,
                    sym=sym or name, fallback=fallback or f"math.{name}(a, b) if type(a) in "
                    f"NUMBER and type(b) in NUMBER else "
                    f"ad.via_float(rule_{name}, tape, (a, b), math.{name})")
    define(name, impl, *originals)
    if inplace:  # ``t op= v``: the same rule; Python's in-place operator when no dual
        # (into a plain array: logged, rules/array_writes.plain_change)
        publish("i" + name, _compile(
            _BINARY_TEMPLATE, name="i" + name, primal=primal, dx=dx, dy=dy, general=name,
            sym=sym + "=", fallback=f"operator.{inplace}(a, b) if type(a) is not NDARRAY "
            f"else ad.plain_change(a, operator.{inplace}, a, b)"))


def _user_fallback(plain: str, dunder: str, rdunder: str, op: str) -> str:
    """The no-dual case of an operator: Python's own operator on numbers, lists and other
    builtins; for a user class (``Vec.__add__``), its method, transformed (calls.py)."""
    return (f"{plain} if type(a) in PLAIN and type(b) in PLAIN else "
            f"ad.user_binary(tape, a, b, {dunder!r}, {rdunder!r}, {op})")


# --- Operators (section 8.2's primitive operations) --------------------------------
binary("add", "x + y", "1.0", "1.0", operator.add, sym="+",
       fallback=_user_fallback("a + b", "__add__", "__radd__", "operator.add"),
       inplace="iadd")
binary("sub", "x - y", "1.0", "-1.0", operator.sub, sym="-",
       fallback=_user_fallback("a - b", "__sub__", "__rsub__", "operator.sub"),
       inplace="isub")
binary("mul", "x * y", "y", "x", operator.mul, sym="*",
       fallback=_user_fallback("a * b", "__mul__", "__rmul__", "operator.mul"),
       inplace="imul")
binary("truediv", "x / y", "1.0 / y", "-r / y", operator.truediv, sym="/",
       fallback=_user_fallback("a / b", "__truediv__", "__rtruediv__", "operator.truediv"),
       inplace="itruediv")
# x % y == x - y * floor(x / y): d/dx = 1, d/dy = -floor(x / y) = -(x // y)
binary("mod", "x % y", "1.0", "-float(x // y)", operator.mod, sym="%",
       fallback="ad.format_text(a, b) if type(a) is str or type(a) is bytes else "
       + _user_fallback("a % b", "__mod__", "__rmod__", "operator.mod"),
       inplace="imod")
unary("neg", "-x", "-1.0", operator.neg,
      fallback="-a if type(a) in PLAIN else ad.user_unary(tape, a, '__neg__', operator.neg)")
unary("pos", "+x", "1.0", operator.pos,
      fallback="+a if type(a) in PLAIN else ad.user_unary(tape, a, '__pos__', operator.pos)")
unary("abs", "abs(x)", "_sign(x)", builtins.abs, operator.abs,
      fallback="abs(a) if type(a) in PLAIN else ad.user_unary(tape, a, '__abs__', abs)")


def floordiv(tape, a, b):
    """x // y is piecewise constant: derivative 0, so the result is a constant (no entry)."""
    return (a.v if type(a) in SCALAR_DUALS else a) // (b.v if type(b) in SCALAR_DUALS else b)


define("floordiv", floordiv, operator.floordiv)


def divmod_(tape, a, b):
    """divmod(x, y) is (x // y, x % y): a constant quotient and a differentiable rest."""
    if type(a) not in SCALAR_DUALS and type(b) not in SCALAR_DUALS:
        return builtins.divmod(a, b)
    return floordiv(tape, a, b), ad.mod(tape, a, b)


define("divmod", divmod_, builtins.divmod)


def _pow_partials(x, y, r, need_y: bool):
    """Partials of x ** y on floats. d/dx = y x^(y-1): for y >= 1 as written (y r / x
    would overflow or underflow where r does: x ** 2 at 1e154, x ** 3 at 1e-120), for
    y < 1 as y (r / x) (x ** (y - 1) would raise OverflowError where the derivative is
    merely infinite: x ** -1 at 1e-170), and 0 for y == 0 (x ** 0 is 1 everywhere);
    d/dy = r log x, 0 where r == 0 or x == 0 (JAX's choice: the y-partial of 0 ** y at
    y == 0 is 0, not log 0)."""
    if y == 0:
        dx = 0.0
    elif x != 0.0:
        dx = y * x ** (y - 1) if y >= 1 else y * (r / x)
    elif y == 1:
        dx = 1.0
    elif y > 1:
        dx = 0.0
    else:
        dx = _zero_base_dx(x, y)
    if not need_y:
        return dx, 0.0
    if r == 0.0 or x == 0.0:
        dy = 0.0
    elif x > 0.0:
        dy = r * math.log(x)
    else:
        dy = math.nan  # x < 0: r log x is complex, the real derivative does not exist
    return dx, dy


def _complex_result(base, exponent):
    raise NotDifferentiableError(
        f"{base!r} ** {exponent!r} is a complex number; astad differentiates real floats only",
        *user_location())


def _pow_primal(x, y):
    r = x ** y
    if type(r) is complex:
        _complex_result(full_primal(x), full_primal(y))
    return r


def _pow_dx(x, y, r):
    """d/dx x ** y in general form: written as y x^(y-1) (not y r / x), so that at x == 0
    its own derivative (a second derivative) is right too."""
    if y == 0:
        return 0.0
    if x == 0.0 and y < 1:
        if type(x) in SCALAR_DUALS or type(y) in SCALAR_DUALS:
            # (its own derivative follows: y x^(y-1) in numpy's floats, whose 0 ** -0.5 is
            # inf where Python's raises, so that the next derivative is infinite too)
            with np.errstate(divide="ignore", invalid="ignore"):
                return y * (x * _ONE) ** (y - 1)
        return _zero_base_dx(x, y)
    return y * x ** (y - 1) if y >= 1 else y * (r / x)  # (as _pow_partials)


_ONE = np.float64(1.0)


def _zero_base_dx(x, y):
    """y x^(y-1) at x == 0 for y < 1, y != 0: infinite, signed as y and as IEEE's pow signs
    x^(y-1) (negative only for x == -0.0 under an odd integer power): x ** -1 has -inf
    (numpy's scalars reach it; a Python float raises ZeroDivisionError first). A constant:
    under an enclosing differentiation, of the primals."""
    x, y = full_primal(x), full_primal(y)
    power = float(y) - 1.0
    negative = math.copysign(1.0, x) < 0 and power.is_integer() and int(power) % 2 == 1
    return math.copysign(_INF, -y if negative else y)


def _pow_dy(x, y, r):
    if r == 0.0 or x == 0.0:
        return 0.0
    if x > 0.0:
        return r * ad.log(None, x)
    return math.nan


_POW = registry.scalar_rule("pow").general = Rule("pow", _pow_primal, (_pow_dx, _pow_dy))


def pow(tape, a, b, mod=None):  # noqa: A001 - the rule for ** and builtins.pow
    if mod is not None:  # integers only, as Python says for floats (no derivative)
        return builtins.pow(full_primal(a), full_primal(b), full_primal(mod))
    ta, tb = type(a) is Dual and a.t is tape, type(b) is Dual and b.t is tape
    if (ta or tb) and type(a.v if ta else a) is not bool and type(b.v if tb else b) in (
            float, int):  # the fast path: floats and ints on this tape, reverse mode
        x = a.v if ta else a
        y = b.v if tb else b
        if type(x) in (float, int):
            r = x ** y
            if type(r) is complex:
                _complex_result(x, y)
            dx, dy = _pow_partials(x, y, r, tb)
            d = new_dual(Dual)
            d.v = float(r)
            d.i = len(tape)
            d.t = tape
            if ta and tb:
                tape.append((a.i, dx, b.i, dy))
            elif ta:
                tape.append((a.i, dx))
            else:
                tape.append((b.i, dy))
            return d
    if type(a) not in SCALAR_DUALS and type(b) not in SCALAR_DUALS:
        return a ** b
    return mixed(_POW, "**", a, b)


define("pow", pow, operator.pow, builtins.pow)


def math_pow(tape, a, b):
    """math.pow: like ** but always a float, and a ValueError where ** gives a complex."""
    math.pow(full_primal(a), full_primal(b))  # raise exactly where math.pow raises
    if type(a) not in SCALAR_DUALS and type(b) not in SCALAR_DUALS:
        return math.pow(a, b)
    return pow(tape, a, b if type(b) in SCALAR_DUALS else float(b))


define("math_pow", math_pow, math.pow)

# --- math: every differentiable function ---------------------------------------------
unary("sin", "sin(x)", "cos(x)", math.sin)
unary("cos", "cos(x)", "-sin(x)", math.cos)
unary("tan", "tan(x)", "1.0 + r * r", math.tan)
# Every partial is written in a form that neither overflows, underflows nor cancels where
# the function itself is fine (checked against high-precision finite differences at
# special and extreme arguments: tests/test_rule_edges.py): (1 - x)(1 + x) rather than
# 1 - x x near 1, hypot rather than x x + 1, sech^2 from exp(-2|x|) rather than 1 - r r.
unary("asin", "asin(x)", "_inv(sqrt((1.0 - x) * (1.0 + x)))", math.asin)
unary("acos", "acos(x)", "-_inv(sqrt((1.0 - x) * (1.0 + x)))", math.acos)
unary("atan", "atan(x)", "1.0 / (1.0 + x * x) if -1e150 < x < 1e150 else 1.0 / x / x",
      math.atan)
unary("sinh", "sinh(x)", "cosh(x)", math.sinh)
unary("cosh", "cosh(x)", "sinh(x)", math.cosh)
# (1 - r r is accurate to 3e-14 relative for |x| < 3: numpy's element-wise rule and the
# compiled one (TANH_NEAR in runtime/_elementwise.c) compute exp only beyond, where it
# cancels; few elements of a model's arrays are that far out)
unary("tanh", "tanh(x)", "1.0 - r * r if -3.0 < x < 3.0 else _sech2(x)", math.tanh)
unary("asinh", "asinh(x)", "1.0 / sqrt(1.0 + x * x) if -1e150 < x < 1e150 else 1.0 / abs(x)",
      math.asinh)
unary("acosh", "acosh(x)", "_inv(sqrt((x - 1.0) * (x + 1.0))) if x < 1e150 else 1.0 / x",
      math.acosh)
unary("atanh", "atanh(x)", "1.0 / ((1.0 - x) * (1.0 + x))", math.atanh)
unary("exp", "exp(x)", "r", math.exp)
unary("expm1", "expm1(x)", "exp(x)", math.expm1)
unary("log1p", "log1p(x)", "1.0 / (1.0 + x)", math.log1p)
unary("log2", "log2(x)", "1.0 / (x * LN2)", math.log2)
unary("log10", "log10(x)", "1.0 / (x * LN10)", math.log10)
unary("sqrt", "sqrt(x)", "_inv(2.0 * r)", math.sqrt)
unary("fabs", "fabs(x)", "_sign(x)", math.fabs)
unary("erf", "erf(x)", "TWO_OVER_SQRTPI * exp(-x * x)", math.erf)
unary("erfc", "erfc(x)", "-TWO_OVER_SQRTPI * exp(-x * x)", math.erfc)
unary("degrees", "degrees(x)", "DEG", math.degrees)
unary("radians", "radians(x)", "RAD", math.radians)
if hasattr(math, "exp2"):  # Python >= 3.11
    unary("exp2", "exp2(x)", "r * LN2", math.exp2)
if hasattr(math, "cbrt"):
    unary("cbrt", "cbrt(x)", "_inv(3.0 * r * r)", math.cbrt)
binary("atan2", "atan2(x, y)", "y / hypot(x, y) / hypot(x, y) if x or y else 0.0",
       "-x / hypot(x, y) / hypot(x, y) if x or y else 0.0", math.atan2)
binary("hypot2", "hypot(x, y)", "x / r if r else 0.0", "y / r if r else 0.0",
       fallback="math.hypot(a, b)", math_name="hypot")
binary("copysign", "copysign(x, y)", "copysign(1.0, x * y)", "0.0",
       math.copysign)
# fmod(x, y) = x - q y with the integer q = (x - fmod(x, y)) / y exactly (not trunc(x / y),
# which rounds: 1.0 / 0.1 is 10.000000000000002, the quotient fmod used is 9)
binary("fmod", "fmod(x, y)", "1.0", "-float(round((x - r) / y))", math.fmod)
unary("gamma", "gamma(x)", "r * _digamma(x)", math.gamma)
unary("log1", "log(x)", "1.0 / x", fallback="math.log(a)")
binary("log_base", "log(x, y)", "1.0 / x / log(y)", "-r / y / log(y)",
       fallback="math.log(a, b)")


def log(tape, x, base=None):
    return ad.log1(tape, x) if base is None else ad.log_base(tape, x, base)


define("log", log, math.log)
# the general math namespace's log: one or two arguments, like math.log
general_namespace()["log"] = lambda x, base=None: log(None, x, base)


# --- Functions of any number of arguments: one entry, a parent per dual argument -------
def _many(tape, args, primal, partials, plain):
    """The rule of an n-ary function: ``plain(args)`` when no dual is among them (Python's
    own result, an int for ints); one entry with ``partials(values, r)`` when every dual
    is a float dual of ``tape`` (the fast path); else the general rule."""
    on_tape = False
    for a in args:
        ta = type(a)
        if ta in SCALAR_DUALS:
            if ta is not Dual or a.t is not tape:
                return apply_many(primal, partials, args)
            on_tape = True
    if not on_tape:
        return plain(args)
    values = [a.v if type(a) is Dual else a for a in args]
    r = primal(values)
    entry = []
    for a, p in zip(args, partials(values, r)):
        if type(a) is Dual:
            entry += (a.i, p)
    return record_entry(tape, builtins.float(r), entry)


def record_entry(tape, r: float, entry: list):
    d = new_dual(Dual)
    d.v = r
    d.i = len(tape)
    d.t = tape
    tape.append(tuple(entry))
    return d


def _hypot_partials(xs, r):
    return [x / r if r else 0.0 for x in xs]


def hypot(tape, *coordinates):
    if len(coordinates) == 2:
        return ad.hypot2(tape, *coordinates)
    # hypot(*xs) = sqrt(sum x^2): one entry whose partials are x_k / r
    return _many(tape, coordinates, lambda xs: hypot(None, *xs) if any(
        type(x) in SCALAR_DUALS for x in xs) else math.hypot(*xs), _hypot_partials,
        lambda xs: math.hypot(*xs))


define("hypot", hypot, math.hypot)
# the general math namespace's hypot: any number of coordinates, like math.hypot
general_namespace()["hypot"] = lambda *coordinates: hypot(None, *coordinates)


def _ones(xs, r):
    return [1.0] * len(xs)


def primals(tape, *args):
    """Primal values of a fused rule's leaves when each is a float dual of ``tape`` (either
    mode) or a number, else None (the fused rule then composes the ordinary rules)."""
    values = []
    for a in args:
        t = type(a)
        if (t is Dual or t is FDual) and a.t is tape:
            values.append(a.v)
        elif t is float or t is int:
            values.append(a)
        else:
            return None
    return values


def record(tape, r, *pairs):
    """The result ``r`` of a fused rule whose leaves ``primals`` accepted: one entry with a
    (parent, partial) pair per dual among ``pairs`` (reverse mode), or the sum of partial
    times tangent (forward mode); ``r`` itself if no leaf is a dual."""
    if type(tape) is list:
        entry = []
        for k in range(0, len(pairs), 2):
            a = pairs[k]
            if type(a) is Dual:
                entry.append(a.i)
                entry.append(pairs[k + 1])
        return record_entry(tape, r, entry) if entry else r
    tangent, found = 0.0, False
    for k in range(0, len(pairs), 2):
        a = pairs[k]
        if type(a) is FDual:
            tangent = add_term(tangent, pairs[k + 1], a.d)
            found = True
    return forward_dual(r, tangent, tape) if found else r


def value(x):
    """The primal value of a dual, anything else as it is: what a comparison's operands
    need (a bool carries no derivative; transform.visit_Compare)."""
    return full_primal(x)


publish("primals", primals)
publish("record", record)
publish("value", value)


def _sum_primal(xs):
    return builtins.sum(xs[1:], xs[0])


def sum(tape, iterable, start=0):  # noqa: A001 - the rule for builtins.sum
    """sum of numbers: one entry with partial 1 for each dual term."""
    items = list(iterable)
    if not all(type(x) in SCALAR_DUALS or isinstance(x, numbers.Real) for x in items) or not (
            type(start) in SCALAR_DUALS or isinstance(start, numbers.Real)):
        total = start  # lists, tuples, other types: Python's own left fold, rule by rule
        for x in items:
            total = ad.add(tape, total, x)
        return total
    return _many(tape, [start] + items, _sum_primal, _ones, _sum_primal)


define("sum", sum, builtins.sum)


def _fsum_primal(xs):
    if any(type(x) in SCALAR_DUALS for x in xs):
        return fsum(None, xs)
    return math.fsum(xs)


def fsum(tape, iterable):
    return _many(tape, list(iterable), _fsum_primal, _ones, _fsum_primal)


define("fsum", fsum, math.fsum)


def _prod_primal(xs):
    return math.prod(xs[1:], start=xs[0])


def _prod_partials(xs, r):
    # the product of all the others (no division: zeros are fine)
    return [math.prod(xs[:k]) * math.prod(xs[k + 1:]) for k in range(len(xs))]


def prod(tape, iterable, start=1):
    return _many(tape, [start] + list(iterable), _prod_primal, _prod_partials, _prod_primal)


define("prod", prod, math.prod)


if hasattr(math, "sumprod"):  # Python >= 3.12
    def sumprod(tape, p, q):
        """math.sumprod(p, q) = sum of p[k] q[k] (computed as math does, in extended
        precision, on floats): one entry, the partial of p[k] is q[k] and of q[k] p[k]."""
        p, q = list(p), list(q)
        n = len(p)
        if len(q) != n:  # math's own error
            math.sumprod([full_primal(v) for v in p], [full_primal(v) for v in q])

        def primal(xs):
            a, b = xs[:n], xs[n:]
            if any(type(x) in SCALAR_DUALS for x in xs):  # a dual of an enclosing level
                return builtins.sum([x * y for x, y in zip(a, b)])
            return math.sumprod(a, b)
        return _many(tape, p + q, primal, lambda xs, r: xs[n:] + xs[:n], primal)

    define("sumprod", sumprod, math.sumprod)

if hasattr(math, "fma"):  # Python >= 3.13
    def fma(tape, x, y, z):
        """math.fma(x, y, z) = x y + z, rounded once: partials y, x, 1."""
        def primal(xs):
            if any(type(v) in SCALAR_DUALS for v in xs):
                return xs[0] * xs[1] + xs[2]
            return math.fma(*xs)
        return _many(tape, [x, y, z], primal, lambda xs, r: [xs[1], xs[0], 1.0], primal)

    define("fma", fma, math.fma)


# rules that never raise on floats (they give inf or nan instead): fusing may reorder them
for _name in ("add", "sub", "mul", "neg", "pos", "abs", "fabs", "sin", "cos", "tan", "atan",
              "tanh", "asinh", "erf", "erfc", "degrees", "radians"):
    registry.named(_name).total = True


# --- In-place operators (``t op= v``): Python's in-place semantics unless a dual is involved
def _inplace(rule, python_op):
    def call(tape, a, b):
        if type(a) in SCALAR_DUALS or type(b) in SCALAR_DUALS:
            return rule(tape, a, b)
        if type(a) is np.ndarray:  # (logged: rules/array_writes.plain_change)
            return ad.plain_change(a, python_op, a, b)
        return python_op(a, b)
    return call


for _name, _op in (("floordiv", operator.ifloordiv), ("pow", operator.ipow)):
    publish("i" + _name, _inplace(getattr(ad, _name), _op))


# --- Functions whose result is not differentiable: they see primal values ----------
def _primal_only(fn):
    def call(tape, *args, **kwargs):
        return fn(*[full_primal(a) for a in args],
                  **{k: full_primal(v) for k, v in kwargs.items()})
    call.__name__ = fn.__name__
    return call


PRIMAL_ONLY_FUNCTIONS = (math.floor, math.ceil, math.trunc, math.isnan, math.isinf,
                         math.isfinite, math.isclose)
for _fn in PRIMAL_ONLY_FUNCTIONS:
    define(_fn.__name__, _primal_only(_fn), _fn)


# --- Builtins that astad rewrites (they need to see through a dual) ------------------
def float_(x=0.0):
    """float(dual) is the dual itself when its primal is a float: converting a float to
    float changes nothing; of a numpy float or a float subclass, the same slot with a
    float primal; of a one-element differentiated array, its element (as a float); of an
    object whose ``__float__`` is Python code, that code, transformed."""
    t = type(x)
    if t in SCALAR_DUALS:
        if type(x.v) is builtins.float:
            return x
        return ad.with_primal(x, builtins.float)
    if t is ArrayDual or t is FArrayDual:
        return float_(x.item())
    if t not in _PLAIN_FLOAT_ARGUMENTS:
        method = ad.python_method(t, "__float__")
        if method is not None:  # a user class: its __float__ may return a dual
            r = ad.rev(method)(None, x)
            if type(r) in SCALAR_DUALS:
                return float_(r)
    return builtins.float(x)


_PLAIN_FLOAT_ARGUMENTS = frozenset({builtins.float, int, str, bool, bytes})


def isinstance_(obj, classinfo):
    """isinstance: a dual answers as its primal value does (its ``__class__``)."""
    return builtins.isinstance(obj, classinfo)


def type_(obj, *rest):
    """type(x): a dual's type is its primal value's (float, numpy.float64, ndarray)."""
    if rest:
        return builtins.type(obj, *rest)
    t = builtins.type(obj)
    return obj.__class__ if t in DUAL_TYPES else t


def via_float(rule, tape, args, plain):
    """A math function's rule given an object of a user's class (no dual among the
    arguments as they are): where its ``__float__`` (Python code, transformed) gives a
    differentiated value, the rule on that value; otherwise the math function itself,
    Python's own behaviour (its result, or its error for a string)."""
    converted = [float_(a) if builtins.type(a) not in _PLAIN_FLOAT_ARGUMENTS and
                 ad.python_method(builtins.type(a), "__float__") is not None else a
                 for a in args]
    if any(builtins.type(a) in SCALAR_DUALS for a in converted):
        return rule(tape, *converted)
    return plain(*args)


publish("via_float", via_float)
publish("float", float_)
publish("isinstance", isinstance_)
publish("type", type_)
# builtins rewritten without a tape argument
TAPELESS_BUILTINS = {builtins.float: "float", builtins.isinstance: "isinstance",
                     builtins.type: "type"}


# --- Operators of duals, for code astad did not transform (runtime/duals.py) -------------
# A dual is always among the operands there, so the rule's fast paths (which need a tape)
# do not apply: the general rule records at the level of the operands.
for _name, _sym in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("mod", "%")):
    publish("operator_" + _name, functools.partial(mixed, registry.named(_name).general, _sym))
for _name in ("floordiv", "pow"):
    publish("operator_" + _name, functools.partial(getattr(ad, _name), None))


F = TypeVar("F", bound=Callable[..., Any])


def call_on_duals(fn, *args):
    """``fn(*args)`` for a function the user gave astad (a partial derivative, a custom
    rule's fwd or bwd): run transformed when a dual is among the arguments (a derivative
    of a derivative), so that what it computes is differentiated too."""
    if any(type(a) in SCALAR_DUALS for a in args):
        return ad.rev(fn)(None, *args)
    return fn(*args)


@api_boundary
def register_scalar(fn: F, *partials: Callable[..., float], name: str | None = None) -> F:
    """Register a scalar function with one partial-derivative function per argument.

    ``partials[k](*args)`` returns the derivative of ``fn`` with respect to argument ``k``
    at the given primal arguments (None: not differentiable in that argument, an error if
    a differentiated value reaches it). After this, differentiated code may call ``fn``
    on differentiated values, in either mode and nested: the partials are then called on
    differentiated values themselves (transformed, like any Python function), so give
    them as Python functions or registered ones for derivatives of higher order.
    """
    rule_name = name or registry.unique_name("user_", fn)

    def primal(xs):
        if any(type(x) in SCALAR_DUALS for x in xs):
            return rule(None, *xs)  # the same rule, one level out
        r = fn(*xs)
        if not builtins.isinstance(r, numbers.Real):
            raise AstadError(f"{fn!r} returned {type(r).__name__}; register_scalar needs a "
                             "function returning a float")
        return r

    def rule(tape, *args, **kwargs):
        if kwargs:  # f(x, y=2.0): the arguments in fn's positional order
            args = _positional(fn, args, kwargs)
        for k, a in enumerate(args):
            if type(a) in SCALAR_DUALS:
                if k >= len(partials) or partials[k] is None:  # never a dropped derivative
                    raise NotDifferentiableError(
                        f"{getattr(fn, '__name__', fn)!r} has no registered derivative with "
                        f"respect to argument {k}", *user_location())
        which = [type(a) in SCALAR_DUALS for a in args]
        return _many(tape, args, primal, lambda xs, r: [
            call_on_duals(partials[k], *xs) if which[k] else 0.0 for k in range(len(xs))],
            primal)

    rule.__name__ = rule_name
    define(rule_name, rule, fn)
    return fn


def _positional(fn, args, kwargs) -> tuple:
    """``args`` and ``kwargs`` of a call of ``fn`` as positional arguments (a registered
    function's partials are given per position)."""
    import inspect
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except ValueError:  # no signature (a C function)
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is registered by its partials per "
                        "positional argument; call it with positional arguments") from None
    if bound.kwargs:  # keyword-only arguments given: no partial is registered for them
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is registered by its partials per "
                        f"positional argument; its keyword-only arguments {sorted(bound.kwargs)}"
                        " cannot be given: register a wrapper that takes them positionally")
    bound.apply_defaults()
    return bound.args
