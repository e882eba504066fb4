"""A forward-mode dual-number oracle, independent of astad.

``Fwd(value, tangent)`` is a float-like number carrying one directional derivative.
It overloads every arithmetic operator; comparisons, truth tests, ``int``/``round``/
``math.floor`` look at the primal value only (so control flow follows the primal, as in
astad). ``fmath`` is a module-like namespace mirroring the differentiable part of
``math`` (sin, cos, exp, log, sqrt, hypot, pow, ...); a program written against a name
``math`` can be run in forward mode by binding that name to ``fmath`` instead of the
real module. With plain numbers every ``fmath`` function gives exactly what ``math``
gives.

Run a program with ``Fwd`` inputs (tangent 1 on one input leaf, 0 elsewhere) and the
tangent of the result is the partial derivative of the result with respect to that leaf,
exact up to rounding: the second oracle beside central finite differences.

Instrumentation for the fuzzer: while a :class:`Trace` is active (``with Trace(h) as
tr:``), every ``Fwd`` made records its magnitude (and whether it is finite), and every
decision taken on a primal value (a comparison, a truth test, an ``int``/``floor``/
``round``, the side of a kink of ``abs``, ``%``, ``copysign``) is appended to
``tr.events``; a decision (or a singularity of ``sqrt``, ``log``, ``hypot``, ...) whose
margin could be crossed by a perturbation of size ``FLIP * h`` along the seeded direction
(first order: ``|margin| <= FLIP * h * |d margin|``) sets ``tr.near``. Two runs taking
the same decisions have equal ``events``.

The derivative conventions at non-smooth points are astad's documented ones (``abs`` has
derivative 0 at 0, ``hypot`` 0 at the origin); the fuzzer never relies on them, it
rejects inputs near such points.
"""
from __future__ import annotations

import math
import types

__all__ = ["Fwd", "fmath", "Trace", "primal", "tangent", "ftype", "refusing"]

FLIP = 100.0        # a decision is "near" when FLIP finite-difference steps can flip it
_TINY = 1e-300


class Trace:
    """Records what a forward run did (see the module docstring)."""

    current = None

    def __init__(self, h=0.0):
        self.h = h                  # the finite-difference step along the seeded direction
        self.events = []            # decisions taken on primal values, in order
        self.near = False           # some decision or singularity within FLIP * h
        self.near_what = None
        self.max_value = 0.0        # largest |value| of any Fwd made
        self.max_tangent = 0.0      # largest |tangent| of any Fwd made
        self.finite = True          # no Fwd had a non-finite value or tangent
        self.ops = 0                # Fwd values made
        self.refused = False        # a differentiated value reached a refusing function

    def __enter__(self):
        self._saved = Trace.current
        Trace.current = self
        return self

    def __exit__(self, *exc):
        Trace.current = self._saved
        return False

    def margin(self, what, m, dm):
        """A decision or singularity at distance ``m`` (first-order rate ``dm``)."""
        if abs(m) <= FLIP * self.h * abs(dm) + 1e-12 * (abs(m) + _TINY) or m != m:
            if not self.near:
                self.near_what = (what, m, dm)
            self.near = True


def _decide(what, outcome, m=None, dm=0.0):
    tr = Trace.current
    if tr is not None:
        tr.events.append((what, outcome))
        if m is not None:
            tr.margin(what, m, dm)
    return outcome


def _singular(what, m, dm):
    tr = Trace.current
    if tr is not None:
        tr.margin(what, m, dm)


def _make(v, t):
    d = Fwd.__new__(Fwd)
    d.v = v
    d.t = t
    tr = Trace.current
    if tr is not None:
        tr.ops += 1
        av, at = abs(v), abs(t)
        if av == math.inf or at == math.inf or v != v or t != t:
            tr.finite = False
        if av > tr.max_value:
            tr.max_value = av
        if at > tr.max_tangent:
            tr.max_tangent = at
    return d


def primal(x):
    return x.v if type(x) is Fwd else x


def tangent(x):
    return x.t if type(x) is Fwd else 0.0


def _split(x):
    if type(x) is Fwd:
        return x.v, x.t
    if isinstance(x, (int, float)):
        return x, 0.0
    return None, None


class Fwd:
    """A float with one tangent. Arithmetic propagates tangents; decisions see primals."""

    __slots__ = ("v", "t")

    def __init__(self, v, t=0.0):
        self.v = float(v)
        self.t = float(t)

    def __repr__(self):
        return f"Fwd({self.v!r}, {self.t!r})"

    # -- arithmetic --------------------------------------------------------------------
    def __add__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _make(self.v + ov, self.t + ot)

    def __radd__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _make(ov + self.v, ot + self.t)

    def __sub__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _make(self.v - ov, self.t - ot)

    def __rsub__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _make(ov - self.v, ot - self.t)

    def __mul__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _make(self.v * ov, self.t * ov + self.v * ot)

    def __rmul__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _make(ov * self.v, ot * self.v + ov * self.t)

    def __truediv__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        if type(o) is Fwd:
            _singular("divisor", ov, ot)
        r = self.v / ov
        return _make(r, (self.t - r * ot) / ov)

    def __rtruediv__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        _singular("divisor", self.v, self.t)
        r = ov / self.v
        return _make(r, (ot - r * self.t) / self.v)

    def __neg__(self):
        return _make(-self.v, -self.t)

    def __pos__(self):
        return _make(+self.v, self.t)

    def __abs__(self):
        x = self.v
        s = _decide("abs", (x > 0.0) - (x < 0.0), x, self.t)
        return _make(abs(x), s * self.t)

    def __pow__(self, o, mod=None):
        if mod is not None:
            return NotImplemented
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _pow(self.v, self.t, ov, ot, type(o) is Fwd)

    def __rpow__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _pow(ov, ot, self.v, self.t, True)

    # x % y = x - y * floor(x / y); x // y is piecewise constant (a plain float)
    def __mod__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _mod(self.v, self.t, ov, ot)

    def __rmod__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _mod(ov, ot, self.v, self.t)

    def __floordiv__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _floordiv(self.v, self.t, ov, ot)

    def __rfloordiv__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _floordiv(ov, ot, self.v, self.t)

    # -- decisions on the primal ---------------------------------------------------------
    def _cmp(self, o, op, name):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _decide(name, op(self.v, ov), self.v - ov, self.t - ot)

    def __lt__(self, o):
        return self._cmp(o, lambda a, b: a < b, "<")

    def __le__(self, o):
        return self._cmp(o, lambda a, b: a <= b, "<=")

    def __gt__(self, o):
        return self._cmp(o, lambda a, b: a > b, ">")

    def __ge__(self, o):
        return self._cmp(o, lambda a, b: a >= b, ">=")

    def __eq__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _decide("==", self.v == ov, self.v - ov, self.t - ot)

    def __ne__(self, o):
        ov, ot = _split(o)
        if ov is None:
            return NotImplemented
        return _decide("!=", self.v != ov, self.v - ov, self.t - ot)

    def __hash__(self):
        return hash(self.v)

    def __bool__(self):
        return _decide("bool", bool(self.v), self.v, self.t)

    def __int__(self):
        return _to_int("int", self.v, self.t, int(self.v))

    def __trunc__(self):
        return _to_int("trunc", self.v, self.t, math.trunc(self.v))

    def __floor__(self):
        return _to_int("floor", self.v, self.t, math.floor(self.v))

    def __ceil__(self):
        return _to_int("ceil", self.v, self.t, math.ceil(self.v))

    def __round__(self, ndigits=None):
        r = round(self.v, ndigits)
        scale = 10.0 ** (ndigits or 0)
        y = self.v * scale
        # round jumps half-way between integers (of the scaled value)
        _decide("round", r, abs(y - math.floor(y) - 0.5), self.t * scale)
        return r

    def __float__(self):
        raise TypeError("float() of a forward-mode dual would drop its tangent")

    def __index__(self):
        raise TypeError("a forward-mode dual is not an index")

    # what type a float is: isinstance(x, float), x.__class__, functools.singledispatch
    # and match class patterns see a float (``ftype`` answers type(x) in programs)
    @property
    def __class__(self):
        return float

    # numpy's object-array loops call the element's method of a ufunc's name
    def exp(self):
        return fmath.exp(self)

    def log(self):
        return fmath.log(self)

    def sin(self):
        return fmath.sin(self)

    def cos(self):
        return fmath.cos(self)

    def tanh(self):
        return fmath.tanh(self)

    def sqrt(self):
        return fmath.sqrt(self)


def ftype(x, *rest):
    """type() for programs run in forward mode: a Fwd's type is float."""
    if rest:
        return type(x, *rest)
    return float if type(x) is Fwd else type(x)


def refusing(plain):
    """A function with no derivative (a C function): with a Fwd it records that a
    differentiated value reached it (astad then refuses: the fuzzer expects the error) and
    raises, as astad's refusal would inside the program."""
    def call(x):
        if type(x) is Fwd:
            if Trace.current is not None:
                Trace.current.refused = True
            raise RuntimeError("a differentiated value reached a refusing function")
        return plain(x)
    return call


def _to_int(what, x, dx, result):
    # int/trunc/floor/ceil jump at integers
    frac = x - math.floor(x)
    _decide(what, result, min(frac, 1.0 - frac), dx)
    return result


def _pow(x, dx, y, dy, y_active):
    r = x ** y
    if type(r) is complex:
        raise ValueError("complex result of ** in the forward-mode oracle")
    r = float(r)
    if x != 0.0:  # (as astad: x ** (y - 1) overflows where r / x is just infinite)
        tx = y * x ** (y - 1) if y >= 1 else y * (r / x)
    else:
        tx = 0.0 if y > 1 or y == 0 else (1.0 if y == 1 else math.inf)
        _singular("pow base at 0", x, dx)
    t = tx * dx if dx else 0.0
    if y_active and dy:
        _singular("pow base with a differentiated exponent", x, dx)
        if r != 0.0:
            t += r * math.log(x) * dy
    return _make(r, t)


def _mod(x, dx, y, dy):
    r = x % y
    q = x // y
    frac = x / y - math.floor(x / y)
    dq = (dx * y - x * dy) / (y * y)
    _decide("mod", q, min(frac, 1.0 - frac), dq)
    return _make(r, dx - q * dy)


def _floordiv(x, dx, y, dy):
    q = x // y
    frac = x / y - math.floor(x / y)
    _decide("floordiv", q, min(frac, 1.0 - frac), (dx * y - x * dy) / (y * y))
    return q  # piecewise constant: a plain number


# ---------------------------------------------------------------------------------------
# fmath: the math module, forward mode


def _unary(fn, deriv, check=None):
    """``deriv(x, r)`` is the derivative at x (r = fn(x)); ``check(x, dx)`` notes margins."""
    def f(x):
        if type(x) is not Fwd:
            return fn(x)
        r = fn(x.v)
        if check is not None:
            check(x.v, x.t)
        return _make(r, deriv(x.v, r) * x.t if x.t else 0.0)
    f.__name__ = fn.__name__
    return f


def _near_zero(what):
    return lambda x, dx: _singular(what, x, dx)


def _near_one(what):
    # singular at |x| = 1
    return lambda x, dx: _singular(what, 1.0 - abs(x), dx)


def _sign(x):
    return (x > 0.0) - (x < 0.0)


def _abs_check(what):
    return lambda x, dx: _decide(what, _sign(x), x, dx)


fmath = types.ModuleType("fmath", "math, in forward mode (see forward_mode.py)")
for _name in ("pi", "e", "tau", "inf", "nan", "isnan", "isinf", "isfinite", "factorial",
              "comb", "perm", "gcd"):
    setattr(fmath, _name, getattr(math, _name))

_UNARY = {
    "sin": (lambda x, r: math.cos(x), None),
    "cos": (lambda x, r: -math.sin(x), None),
    "tan": (lambda x, r: 1.0 / math.cos(x) ** 2, None),
    "asin": (lambda x, r: 1.0 / math.sqrt(1.0 - x * x), _near_one("asin")),
    "acos": (lambda x, r: -1.0 / math.sqrt(1.0 - x * x), _near_one("acos")),
    "atan": (lambda x, r: 1.0 / (1.0 + x * x), None),
    "sinh": (lambda x, r: math.cosh(x), None),
    "cosh": (lambda x, r: math.sinh(x), None),
    # sech^2 x = 4 e^(-2|x|) / (1 + e^(-2|x|))^2, which cannot overflow
    "tanh": (lambda x, r: 4.0 * math.exp(-2.0 * abs(x)) / (1.0 + math.exp(-2.0 * abs(x))) ** 2,
             None),
    "asinh": (lambda x, r: 1.0 / math.sqrt(x * x + 1.0), None),
    "acosh": (lambda x, r: 1.0 / math.sqrt((x - 1.0) * (x + 1.0)),
              lambda x, dx: _singular("acosh", x - 1.0, dx)),
    "atanh": (lambda x, r: 1.0 / ((1.0 - x) * (1.0 + x)), _near_one("atanh")),
    "exp": (lambda x, r: r, None),
    "expm1": (lambda x, r: math.exp(x), None),
    "exp2": (lambda x, r: r * math.log(2.0), None),
    "log1p": (lambda x, r: 1.0 / (1.0 + x), lambda x, dx: _singular("log1p", 1.0 + x, dx)),
    "log2": (lambda x, r: 1.0 / (x * math.log(2.0)), _near_zero("log2")),
    "log10": (lambda x, r: 1.0 / (x * math.log(10.0)), _near_zero("log10")),
    "sqrt": (lambda x, r: 0.5 / r, _near_zero("sqrt")),
    "cbrt": (lambda x, r: 1.0 / (3.0 * r * r), _abs_check("cbrt")),
    "fabs": (lambda x, r: float(_sign(x)), _abs_check("fabs")),
    "erf": (lambda x, r: 2.0 / math.sqrt(math.pi) * math.exp(-x * x), None),
    "erfc": (lambda x, r: -2.0 / math.sqrt(math.pi) * math.exp(-x * x), None),
    "degrees": (lambda x, r: 180.0 / math.pi, None),
    "radians": (lambda x, r: math.pi / 180.0, None),
}
for _name, (_d, _check) in _UNARY.items():
    if hasattr(math, _name):
        setattr(fmath, _name, _unary(getattr(math, _name), _d, _check))


def _log(x, base=None):
    if base is None:
        if type(x) is not Fwd:
            return math.log(x)
        _singular("log", x.v, x.t)
        return _make(math.log(x.v), x.t / x.v)
    if type(x) is not Fwd and type(base) is not Fwd:
        return math.log(x, base)
    xv, xt = _split(x)
    bv, bt = _split(base)
    if type(x) is Fwd:
        _singular("log", xv, xt)
    lb = math.log(bv)
    r = math.log(xv, bv)
    # log_b x = ln x / ln b
    return _make(r, xt / (xv * lb) - r * bt / (bv * lb))


def _hypot(*coords):
    if not any(type(c) is Fwd for c in coords):
        return math.hypot(*coords)
    vals = [primal(c) for c in coords]
    r = math.hypot(*vals)
    dr = sum(v * tangent(c) for v, c in zip(vals, coords)) / r if r else 0.0
    # singular at the origin: its distance is r itself
    _singular("hypot", r, math.hypot(*[tangent(c) for c in coords]))
    return _make(r, dr)


def _atan2(y, x):
    if type(y) is not Fwd and type(x) is not Fwd:
        return math.atan2(y, x)
    yv, yt = _split(y)
    xv, xt = _split(x)
    r = math.atan2(yv, xv)
    h = math.hypot(xv, yv)  # (x^2 + y^2 underflows at 1e-200)
    _singular("atan2 origin", h, math.hypot(xt, yt))
    if xv < 0.0:  # the branch cut along the negative x axis
        _decide("atan2 cut", _sign(yv), yv, yt)
    return _make(r, (xv / h * yt - yv / h * xt) / h)


def _pow_fn(x, y):
    # math.pow: always a float; ValueError where ** would give a complex
    if type(x) is not Fwd and type(y) is not Fwd:
        return math.pow(x, y)
    math.pow(primal(x), primal(y))  # raise exactly where math.pow raises
    xv, xt = _split(x)
    yv, yt = _split(y)
    return _pow(xv, xt, float(yv), yt, type(y) is Fwd)


def _copysign(x, y):
    if type(x) is not Fwd and type(y) is not Fwd:
        return math.copysign(x, y)
    xv, xt = _split(x)
    yv, yt = _split(y)
    sx = _decide("copysign x", _sign(xv), xv, xt)
    sy = _decide("copysign y", math.copysign(1.0, yv), yv, yt)
    return _make(math.copysign(xv, yv), sx * sy * xt)


def _fmod(x, y):
    if type(x) is not Fwd and type(y) is not Fwd:
        return math.fmod(x, y)
    xv, xt = _split(x)
    yv, yt = _split(y)
    r = math.fmod(xv, yv)
    q = round((xv - r) / yv)  # the quotient fmod used (trunc(x / y) may round past it)
    frac = abs(xv / yv) - math.floor(abs(xv / yv))
    _decide("fmod", q, min(frac, 1.0 - frac), (xt * yv - xv * yt) / (yv * yv))
    return _make(r, xt - q * yt)


def _fsum(items):
    items = list(items)
    if not any(type(c) is Fwd for c in items):
        return math.fsum(items)
    return _make(math.fsum(primal(c) for c in items), math.fsum(tangent(c) for c in items))


def builtin_sum(items, start=0):
    """builtins.sum for programs run in forward mode: the primal as Python sums the primal
    values (from 3.12, floats with a compensated sum, not a left fold of additions), the
    tangent the sum of the tangents."""
    items = list(items)
    if not any(type(c) is Fwd for c in items + [start]) or \
            not all(type(c) is Fwd or isinstance(c, (int, float)) for c in items + [start]):
        return sum(items, start)
    return _make(sum([primal(c) for c in items], primal(start)),
                 sum([tangent(c) for c in items], tangent(start)))


def _prod(items, *, start=1):
    r = start
    for c in items:
        r = r * c
    return r


def _floor(x):
    return math.floor(x) if type(x) is not Fwd else x.__floor__()


def _ceil(x):
    return math.ceil(x) if type(x) is not Fwd else x.__ceil__()


def _trunc(x):
    return math.trunc(x) if type(x) is not Fwd else x.__trunc__()


def _isclose(a, b, **kw):
    return math.isclose(primal(a), primal(b), **kw)


for _name, _fn in {"log": _log, "hypot": _hypot, "atan2": _atan2, "pow": _pow_fn,
                   "copysign": _copysign, "fmod": _fmod, "fsum": _fsum, "prod": _prod,
                   "floor": _floor, "ceil": _ceil, "trunc": _trunc,
                   "isclose": _isclose}.items():
    setattr(fmath, _name, _fn)

# Python's own isnan/isinf/isfinite call __float__; look at the primal instead.
fmath.isnan = lambda x: math.isnan(primal(x))
fmath.isinf = lambda x: math.isinf(primal(x))
fmath.isfinite = lambda x: math.isfinite(primal(x))
