"""Phase 7, primitives: the table of differentiable operations and their local partials.

Each rule is a primal expression and one partial-derivative expression per argument
(in terms of the inputs ``x``, ``y`` and the result ``r``). From each rule astad writes
one small specialised function (paper section 8.2: compute the partials now, append one
tape entry holding parent indices and partials, return the new dual). The functions are
generated from text templates because a hand-inlined fast path is several times faster
in CPython than a generic one that calls a partials function per operation.

The same registry holds users' own rules (:func:`register_scalar`): astad extends
itself exactly as users extend it.
"""
from __future__ import annotations

import builtins
import itertools
import math
import numbers
import operator
import re
import types
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..errors import RULE_FILENAME, AstadError, NotDifferentiableError, user_location
from ..runtime.array_dual import ArrayDual
from ..runtime.tape import Dual, current as _current, gradient_of, new_dual

# The namespace generated code calls into, as ``ad.<name>``.
ad = types.ModuleType("ad", "astad's runtime rules, as called by generated code")

# callable object -> name of its rule in ``ad`` (math.sin -> "sin")
PRIMITIVES: dict = {}
# rule name -> (primal expression, partial expression(s)) in terms of x, y and result r;
# statement-level preaccumulation (fuse.py) reuses them to differentiate whole expressions.
UNARY_RULES: dict = {}
BINARY_RULES: dict = {}
# rules that never raise on floats (they give inf or nan instead)
TOTAL_RULES = {"add", "sub", "mul", "neg", "pos", "abs", "fabs", "sin", "cos", "tan", "atan",
               "tanh", "asinh", "erf", "erfc", "degrees", "radians"}

_INF = math.inf


def _inv(z):
    """1/z, with 1/0 = inf: the derivative at a vertical tangent (sqrt at 0, asin at 1)."""
    return 1.0 / z if z else _INF


def _sign(x):
    """Derivative of abs: 0 at 0 (the subgradient PyTorch also picks)."""
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


ARRAY = object()  # _number's answer for an array operand: numpy's dispatch takes over


def _number(value, op: str, other_is_first: bool, dual_primal):
    """Coerce the non-dual operand of a mixed operation to a number, or fail as Python would."""
    if (type(value) is ArrayDual or type(value) is np.ndarray) and op in OPERATORS:
        return ARRAY
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return value if type(value) is int else float(value)
    if isinstance(value, bool):
        return int(value)
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

_NAMESPACE = {
    "Dual": Dual, "new": new_dual, "_inv": _inv, "_sign": _sign, "_number": _number,
    "ARRAY": ARRAY, "OPERATORS": OPERATORS, "ARRAY_OPERATORS": ARRAY_OPERATORS,
    "math": math, "LN2": math.log(2.0), "LN10": math.log(10.0),
    "TWO_OVER_SQRTPI": 2.0 / math.sqrt(math.pi), "DEG": 180.0 / math.pi,
    "RAD": math.pi / 180.0, "operator": operator, "builtins": builtins,
    "PLAIN": frozenset({int, float, bool, complex, str, bytes, list, tuple, type(None)}),
}
_NAMESPACE.update({name: getattr(math, name) for name in dir(math) if not name.startswith("_")})
_NAMESPACE.update({"ad": ad, "NUMBER": (int, float), "gradient_of": gradient_of,
                   "accumulate": itertools.accumulate})


def rule_namespace() -> dict:
    """Globals for generated rules: math, Dual, the helpers, and ``ad`` itself."""
    return dict(_NAMESPACE)

_UNARY_TEMPLATE = '''
def rule_{name}(tape, a):
    if type(a) is Dual:
        x = a.v
        r = {primal}
        d = new(Dual)
        d.v = r
        d.i = len(tape)
        tape.append((a.i, {dx}))
        return d
    return {fallback}
'''

_BINARY_TEMPLATE = '''
def rule_{name}(tape, a, b):
    if type(a) is Dual:
        x = a.v
        if type(b) is Dual:
            y = b.v
            r = {primal}
            d = new(Dual)
            d.v = r
            d.i = len(tape)
            tape.append((a.i, {dx}, b.i, {dy}))
            return d
        y = b if type(b) is float else _number(b, {sym!r}, False, x)
        if y is ARRAY:
            return ARRAY_OPERATORS[{sym!r}](a, b)
        r = {primal}
        d = new(Dual)
        d.v = r
        d.i = len(tape)
        tape.append((a.i, {dx}))
        return d
    if type(b) is Dual:
        x = a if type(a) is float else _number(a, {sym!r}, True, b.v)
        if x is ARRAY:
            return ARRAY_OPERATORS[{sym!r}](a, b)
        y = b.v
        r = {primal}
        d = new(Dual)
        d.v = r
        d.i = len(tape)
        tape.append((b.i, {dy}))
        return d
    return {fallback}
'''


def _compile(template: str, **fields) -> types.FunctionType:
    namespace = dict(_NAMESPACE)
    # astad's own templates, never user data
    exec(compile(template.format(**fields), RULE_FILENAME, "exec"), namespace)
    rule = namespace["rule_" + fields["name"]]
    rule.__name__ = rule.__qualname__ = fields["name"]
    return rule


def _register(name: str, impl, *originals) -> None:
    setattr(ad, name, impl)
    for original in originals:
        PRIMITIVES[original] = name


def unique_rule_name(prefix: str, fn) -> str:
    """A name for ``fn``'s rule in the ``ad`` namespace, from its qualified name, numbered
    if taken: generated code shows it, so it must not depend on run-time ids."""
    base = prefix + (re.sub(r"\W+", "_", getattr(fn, "__qualname__", None)
                            or getattr(fn, "__name__", None) or "").strip("_") or "fn")
    name, k = base, 1
    while hasattr(ad, name):
        k += 1
        name = f"{base}_{k}"
    return name


def unary(name: str, primal: str, dx: str, *originals, fallback: str | None = None):
    impl = _compile(_UNARY_TEMPLATE, name=name, primal=primal, dx=dx,
                    fallback=fallback or f"math.{name}(a)")
    _register(name, impl, *originals)
    UNARY_RULES[name] = (primal, dx)


def binary(name: str, primal: str, dx: str, dy: str, *originals, sym: str = "",
           fallback: str | None = None, inplace: str | None = None):
    impl = _compile(_BINARY_TEMPLATE, name=name, primal=primal, dx=dx, dy=dy,
                    sym=sym or name, fallback=fallback or f"math.{name}(a, b)")
    _register(name, impl, *originals)
    BINARY_RULES[name] = (primal, dx, dy)
    if inplace:  # ``t op= v``: the same rule; Python's in-place operator when no dual
        setattr(ad, "i" + name, _compile(_BINARY_TEMPLATE, name="i" + name, primal=primal,
                                         dx=dx, dy=dy, sym=sym, fallback=inplace))


def _user_fallback(plain: str, dunder: str, rdunder: str, op: str) -> str:
    """The no-dual case of an operator: Python's own operator on numbers, lists and other
    builtins; for a user class (``Vec.__add__``), its method, transformed (calls.py)."""
    return (f"{plain} if type(a) in PLAIN and type(b) in PLAIN else "
            f"ad.user_binary(tape, a, b, {dunder!r}, {rdunder!r}, {op})")


# --- Operators (section 8.2's primitive operations) --------------------------------
binary("add", "x + y", "1.0", "1.0", operator.add, sym="+",
       fallback=_user_fallback("a + b", "__add__", "__radd__", "operator.add"),
       inplace="operator.iadd(a, b)")
binary("sub", "x - y", "1.0", "-1.0", operator.sub, sym="-",
       fallback=_user_fallback("a - b", "__sub__", "__rsub__", "operator.sub"),
       inplace="operator.isub(a, b)")
binary("mul", "x * y", "y", "x", operator.mul, sym="*",
       fallback=_user_fallback("a * b", "__mul__", "__rmul__", "operator.mul"),
       inplace="operator.imul(a, b)")
binary("truediv", "x / y", "1.0 / y", "-r / y", operator.truediv, sym="/",
       fallback=_user_fallback("a / b", "__truediv__", "__rtruediv__", "operator.truediv"),
       inplace="operator.itruediv(a, b)")
# x % y == x - y * floor(x / y): d/dx = 1, d/dy = -floor(x / y) = -(x // y)
binary("mod", "x % y", "1.0", "-float(x // y)", operator.mod, sym="%",
       fallback=_user_fallback("a % b", "__mod__", "__rmod__", "operator.mod"),
       inplace="operator.imod(a, b)")
unary("neg", "-x", "-1.0", operator.neg,
      fallback="-a if type(a) in PLAIN else ad.user_unary(tape, a, '__neg__', operator.neg)")
unary("pos", "+x", "1.0", operator.pos,
      fallback="+a if type(a) in PLAIN else ad.user_unary(tape, a, '__pos__', operator.pos)")
unary("abs", "abs(x)", "_sign(x)", builtins.abs, operator.abs,
      fallback="abs(a) if type(a) in PLAIN else ad.user_unary(tape, a, '__abs__', abs)")


def floordiv(tape, a, b):
    """x // y is piecewise constant: derivative 0, so the result is a constant (no entry)."""
    return (a.v if type(a) is Dual else a) // (b.v if type(b) is Dual else b)


_register("floordiv", floordiv, operator.floordiv)


def divmod_(tape, a, b):
    """divmod(x, y) is (x // y, x % y): a constant quotient and a differentiable rest."""
    if type(a) is not Dual and type(b) is not Dual:
        return builtins.divmod(a, b)
    return floordiv(tape, a, b), ad.mod(tape, a, b)


_register("divmod", divmod_, builtins.divmod)


def _pow_partials(x, y, r, need_y: bool):
    """Partials of x ** y. d/dx = y x^(y-1); d/dy = r log x (0 where r == 0)."""
    if x != 0.0:
        dx = y * r / x
    elif y == 1:
        dx = 1.0
    elif y > 1:
        dx = 0.0
    else:
        dx = _INF if y != 0 else 0.0
    if not need_y:
        return dx, 0.0
    if r == 0.0:
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


def pow(tape, a, b, mod=None):  # noqa: A001 - the rule for ** and builtins.pow
    if mod is not None:
        return builtins.pow(a, b, mod)
    ta, tb = type(a) is Dual, type(b) is Dual
    if not (ta or tb):
        return a ** b
    x = a.v if ta else _number(a, "**", True, b.v)
    y = b.v if tb else _number(b, "**", False, a.v)
    if x is ARRAY or y is ARRAY:
        return np.power(a, b)
    r = x ** y
    if type(r) is complex:
        _complex_result(x, y)
    dx, dy = _pow_partials(x, y, r, tb)
    d = new_dual(Dual)
    d.v = float(r)
    d.i = len(tape)
    if ta and tb:
        tape.append((a.i, dx, b.i, dy))
    elif ta:
        tape.append((a.i, dx))
    else:
        tape.append((b.i, dy))
    return d


_register("pow", pow, operator.pow, builtins.pow)


def math_pow(tape, a, b):
    """math.pow: like ** but always a float, and a ValueError where ** gives a complex."""
    ta, tb = type(a) is Dual, type(b) is Dual
    math.pow(a.v if ta else a, b.v if tb else b)  # raise exactly where math.pow raises
    if not (ta or tb):
        return math.pow(a, b)
    return pow(tape, a, b if tb else float(b))


_register("math_pow", math_pow, math.pow)

# --- math: every differentiable function ---------------------------------------------
unary("sin", "sin(x)", "cos(x)", math.sin)
unary("cos", "cos(x)", "-sin(x)", math.cos)
unary("tan", "tan(x)", "1.0 + r * r", math.tan)
unary("asin", "asin(x)", "_inv(sqrt(1.0 - x * x))", math.asin)
unary("acos", "acos(x)", "-_inv(sqrt(1.0 - x * x))", math.acos)
unary("atan", "atan(x)", "1.0 / (1.0 + x * x)", math.atan)
unary("sinh", "sinh(x)", "cosh(x)", math.sinh)
unary("cosh", "cosh(x)", "sinh(x)", math.cosh)
unary("tanh", "tanh(x)", "1.0 - r * r", math.tanh)
unary("asinh", "asinh(x)", "1.0 / sqrt(x * x + 1.0)", math.asinh)
unary("acosh", "acosh(x)", "_inv(sqrt(x * x - 1.0))", math.acosh)
unary("atanh", "atanh(x)", "1.0 / (1.0 - x * x)", math.atanh)
unary("exp", "exp(x)", "r", math.exp)
unary("expm1", "expm1(x)", "r + 1.0", math.expm1)
unary("log1p", "log1p(x)", "1.0 / (1.0 + x)", math.log1p)
unary("log2", "log2(x)", "1.0 / x / LN2", math.log2)
unary("log10", "log10(x)", "1.0 / x / LN10", math.log10)
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
binary("atan2", "atan2(x, y)", "y / (x * x + y * y) if x or y else 0.0",
       "-x / (x * x + y * y) if x or y else 0.0", math.atan2)
binary("hypot2", "hypot(x, y)", "x / r if r else 0.0", "y / r if r else 0.0",
       fallback="math.hypot(a, b)")
binary("copysign", "copysign(x, y)", "copysign(1.0, x) * copysign(1.0, y)", "0.0",
       math.copysign)
binary("fmod", "fmod(x, y)", "1.0", "-float(math.trunc(x / y))", math.fmod)
unary("log1", "log(x)", "1.0 / x", fallback="math.log(a)")
binary("log_base", "log(x, y)", "1.0 / x / log(y)", "-r / y / log(y)",
       fallback="math.log(a, b)")


def log(tape, x, base=None):
    return ad.log1(tape, x) if base is None else ad.log_base(tape, x, base)


_register("log", log, math.log)


def hypot(tape, *coordinates):
    if len(coordinates) == 2:
        return ad.hypot2(tape, *coordinates)
    # hypot(*xs) = sqrt(sum x^2): one entry whose partials are x_k / r
    values = [c.v if type(c) is Dual else c for c in coordinates]
    r = math.hypot(*values)
    return _entry(tape, r, coordinates, [v / r if r else 0.0 for v in values])


_register("hypot", hypot, math.hypot)


def _entry(tape, r, args, partials):
    """Append one entry with a parent per dual argument; a plain number if none is a dual."""
    pairs = []
    for a, p in zip(args, partials):
        pairs += (a, p)
    return record(tape, float(r), *pairs)


def primals(*args):
    """Primal values of a fused rule's leaves when each is a dual or a number, else None."""
    values = []
    for a in args:
        t = type(a)
        if t is Dual:
            values.append(a.v)
        elif t is float or t is int:
            values.append(a)
        else:
            return None
    return values


def record(tape, r, *pairs):
    """One entry for result ``r`` with a (parent, partial) pair per dual among ``pairs``."""
    entry = []
    for k in range(0, len(pairs), 2):
        a = pairs[k]
        if type(a) is Dual:
            entry.append(a.i)
            entry.append(pairs[k + 1])
    if not entry:
        return r
    d = new_dual(Dual)
    d.v = r
    d.i = len(tape)
    tape.append(tuple(entry))
    return d


def value(x):
    """The primal value of a dual, anything else as it is: what a comparison's operands
    need (a bool carries no derivative; transform.visit_Compare)."""
    return x.v if type(x) is Dual else x


ad.primals = primals
ad.record = record
ad.value = value


def sum(tape, iterable, start=0):  # noqa: A001 - the rule for builtins.sum
    """sum of numbers: one entry with partial 1 for each dual term."""
    items = list(iterable)
    if not all(type(x) is Dual or isinstance(x, numbers.Real) for x in items) or not (
            type(start) is Dual or isinstance(start, numbers.Real)):
        total = start  # lists, tuples, other types: Python's own left fold, rule by rule
        for x in items:
            total = ad.add(tape, total, x)
        return total
    terms = [start] + items
    values = [x.v if type(x) is Dual else x for x in terms]
    r = builtins.sum(values[1:], values[0])
    return _entry(tape, r, terms, [1.0] * len(terms))


_register("sum", sum, builtins.sum)


def fsum(tape, iterable):
    terms = list(iterable)
    r = math.fsum([x.v if type(x) is Dual else x for x in terms])
    return _entry(tape, r, terms, [1.0] * len(terms))


_register("fsum", fsum, math.fsum)


def prod(tape, iterable, start=1):
    terms = [start] + list(iterable)
    values = [x.v if type(x) is Dual else x for x in terms]
    r = math.prod(values)
    partials = []
    for k in range(len(values)):  # product of all the others (no division: zeros are fine)
        partials.append(math.prod(values[:k]) * math.prod(values[k + 1:]))
    return _entry(tape, r, terms, partials)


_register("prod", prod, math.prod)


# --- In-place operators (``t op= v``): Python's in-place semantics unless a dual is involved
def _inplace(rule, python_op):
    def call(tape, a, b):
        if type(a) is Dual or type(b) is Dual:
            return rule(tape, a, b)
        return python_op(a, b)
    return call


for _name, _op in (("floordiv", operator.ifloordiv), ("pow", operator.ipow)):
    setattr(ad, "i" + _name, _inplace(getattr(ad, _name), _op))


# --- Functions whose result is not differentiable: they see primal values ----------
def _primal_only(fn):
    def call(tape, *args, **kwargs):
        return fn(*[a.v if type(a) is Dual else a for a in args],
                  **{k: (v.v if type(v) is Dual else v) for k, v in kwargs.items()})
    call.__name__ = fn.__name__
    return call


for _fn in (math.floor, math.ceil, math.trunc, math.isnan, math.isinf, math.isfinite,
            math.isclose):
    _register(_fn.__name__, _primal_only(_fn), _fn)


# --- Builtins that astad rewrites (they need to see through a dual) ------------------
def float_(x=0.0):
    """float(dual) is the dual itself: converting a float to float changes nothing; of a
    one-element differentiated array, its element."""
    if type(x) is Dual:
        return x
    if type(x) is ArrayDual:
        return x.item()
    return builtins.float(x)


def isinstance_(obj, classinfo):
    return builtins.isinstance(obj.v if type(obj) is Dual else obj, classinfo)


def type_(obj, *rest):
    if rest:
        return builtins.type(obj, *rest)
    return builtins.float if builtins.type(obj) is Dual else builtins.type(obj)


ad.float = float_
ad.isinstance = isinstance_
ad.type = type_
# builtins rewritten without a tape argument
TAPELESS_BUILTINS = {builtins.float: "float", builtins.isinstance: "isinstance",
                     builtins.type: "type"}


# --- Operator overloading on Dual, for code astad did not transform -------------------
def _running_tape():
    tape = _current.tape
    if tape is None:
        raise NotDifferentiableError(
            "arithmetic on a differentiated value outside a gradient call: a dual escaped "
            "from the call that created it (stored in a global or an object kept after "
            "the call?)", *user_location())
    return tape


def _overload(rule, swap: bool = False):
    if swap:
        return lambda self, other: rule(_running_tape(), other, self)
    return lambda self, other: rule(_running_tape(), self, other)


for _rule_name, _forward_name, _reflected_name in (
        ("add", "__add__", "__radd__"), ("sub", "__sub__", "__rsub__"),
        ("mul", "__mul__", "__rmul__"), ("truediv", "__truediv__", "__rtruediv__"),
        ("floordiv", "__floordiv__", "__rfloordiv__"), ("mod", "__mod__", "__rmod__"),
        ("pow", "__pow__", "__rpow__")):
    setattr(Dual, _forward_name, _overload(getattr(ad, _rule_name)))
    setattr(Dual, _reflected_name, _overload(getattr(ad, _rule_name), swap=True))
Dual.__neg__ = lambda self: ad.neg(_running_tape(), self)
Dual.__pos__ = lambda self: ad.pos(_running_tape(), self)
Dual.__abs__ = lambda self: ad.abs(_running_tape(), self)


F = TypeVar("F", bound=Callable[..., Any])


def register_scalar(fn: F, *partials: Callable[..., float], name: str | None = None) -> F:
    """Register a scalar function with one partial-derivative function per argument.

    ``partials[k](*args)`` returns the derivative of ``fn`` with respect to argument ``k``
    at the given primal arguments (None: not differentiable in that argument, an error if
    a differentiated value reaches it). After this, differentiated code may call ``fn``
    on differentiated values.
    """
    rule_name = name or f"user_{getattr(fn, '__name__', 'fn')}_{len(PRIMITIVES)}"

    def rule(tape, *args):
        values = [a.v if type(a) is Dual else a for a in args]
        r = fn(*values)
        if not builtins.isinstance(r, numbers.Real):
            raise AstadError(f"{fn!r} returned {type(r).__name__}; register_scalar needs a "
                             "function returning a float")
        local = []
        for k, a in enumerate(args):
            if type(a) is not Dual:
                local.append(0.0)
            elif k < len(partials) and partials[k] is not None:
                local.append(partials[k](*values))
            else:  # never a silently dropped derivative
                raise NotDifferentiableError(
                    f"{getattr(fn, '__name__', fn)!r} has no registered derivative with "
                    f"respect to argument {k}", *user_location())
        return _entry(tape, r, args, local)

    rule.__name__ = rule_name
    _register(rule_name, rule, fn)
    return fn
