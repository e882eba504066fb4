"""What compiled code (compile/numba_backend.py) calls, written for numba: Python's own
semantics where numba's differ, and the flat tape's sweep.

numba computes in fixed-width ints and IEEE floats and raises for fewer conditions than
Python. Every function here either gives Python's value or raises; a raise sends the call
to the Python code, which then gives Python's answer (a value, or the user's error at the
user's line). So a raise may be conservative (any result that is not finite), never late:

- int ``+``, ``-``, ``*``, ``<<``, ``**`` check for overflow past 64 bits at run time;
- ``**`` of floats is ``math.pow``, as CPython's ``float.__pow__`` (numba multiplies
  for an int exponent, which rounds otherwise);
- a math function whose result is not finite raises (Python raises for a domain or range
  error, numba gives nan or inf);
- ``max`` and ``min`` of two values compare as Python's do (nan included);
- ``sum`` of a list of floats adds as CPython does: in order, and with Neumaier's
  compensation from Python 3.12.

This module imports numba; only a function asked to compile imports it.
"""
from __future__ import annotations

import math
import sys

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ..registry import float_rules
from ..rules.scalar import rule_namespace
from ..rules.scalar_general import inverse, sign

# (no bounds checked by numba: the kernel's reads and writes of the user's values go
# through checked_get and checked_set, its own of the tape are within what it counted)
JIT = {"error_model": "python", "boundscheck": False, "nogil": True}
njit = numba.njit(**JIT)

_INT = types.Integer
_NUMBER = (types.Integer, types.Float, types.Boolean)


def _both_ints(a, b) -> bool:
    return isinstance(a, (_INT, types.Boolean)) and isinstance(b, (_INT, types.Boolean))


def checked_add(a, b):
    """``a + b`` (what the generated kernel calls for ``+``)."""


def checked_sub(a, b):
    """``a - b``."""


def checked_mul(a, b):
    """``a * b``."""


def checked_pow(a, b):
    """``a ** b``."""


def checked_lshift(a, b):
    """``a << b``."""


def checked_get(a, i):
    """``a[i]``: an index past either end raises IndexError, a negative one counts from
    the end, as Python's."""


def checked_set(a, i, value):
    """``a[i] = value``, checked as ``checked_get``."""


def _indexable(a, i) -> bool:
    return isinstance(a, (types.Array, types.List)) and \
        isinstance(i, (types.Integer, types.Boolean))


@overload(checked_get, inline="never")
def _get(a, i):
    if not _indexable(a, i):
        return None

    def impl(a, i):
        n = len(a)
        k = np.int64(i)
        if k < 0:
            k += n
        if k < 0 or k >= n:
            raise IndexError("index out of range")
        return a[k]
    return impl


@overload(checked_set, inline="never")
def _set(a, i, value):
    if not _indexable(a, i):
        return None

    def impl(a, i, value):
        n = len(a)
        k = np.int64(i)
        if k < 0:
            k += n
        if k < 0 or k >= n:
            raise IndexError("assignment index out of range")
        a[k] = value
    return impl


# (each checks before it computes: a signed overflow is undefined to LLVM, which may
# fold a check made after it)
_MAX = np.int64(2 ** 63 - 1)
_MIN = np.int64(-2 ** 63)


@overload(checked_add, inline="never")
def _add(a, b):
    if _both_ints(a, b):
        def impl(a, b):
            if (b > 0 and a > _MAX - b) or (b < 0 and a < _MIN - b):
                raise OverflowError("an int past 64 bits")
            return np.int64(a) + np.int64(b)
        return impl
    if isinstance(a, _NUMBER) and isinstance(b, _NUMBER):
        return lambda a, b: a + b
    return None


@overload(checked_sub, inline="never")
def _sub(a, b):
    if _both_ints(a, b):
        def impl(a, b):
            if (b < 0 and a > _MAX + b) or (b > 0 and a < _MIN + b):
                raise OverflowError("an int past 64 bits")
            return np.int64(a) - np.int64(b)
        return impl
    if isinstance(a, _NUMBER) and isinstance(b, _NUMBER):
        return lambda a, b: a - b
    return None


@overload(checked_mul, inline="never")
def _mul(a, b):
    if _both_ints(a, b):
        def impl(a, b):  # (conservative: a product near 2**62 or past it goes to Python)
            if abs(float(a)) * abs(float(b)) >= 4611686018427387904.0:
                raise OverflowError("an int past 64 bits")
            return np.int64(a) * np.int64(b)
        return impl
    if isinstance(a, _NUMBER) and isinstance(b, _NUMBER):
        return lambda a, b: a * b
    return None


@overload(checked_pow, inline="never")
def _pow(a, b):
    if _both_ints(a, b):
        def impl(a, b):  # an int power: exact below 2**53, else Python's code
            if b < 0:
                raise OverflowError("a negative int exponent gives a float")
            r = math.pow(float(a), float(b))
            if not abs(r) < 9007199254740992.0:
                raise OverflowError("an int power past 2**53")
            return np.int64(r)
        return impl
    if isinstance(a, _NUMBER) and isinstance(b, _NUMBER):
        def impl(a, b):  # CPython's float power is C's pow; it raises where C gives
            r = math.pow(float(a), float(b))  # nan or inf from finite operands
            if not math.isfinite(r):
                raise ValueError("a power that is not finite")
            return r
        return impl
    return None


@overload(checked_lshift, inline="never")
def _lshift(a, b):
    if _both_ints(a, b):
        def impl(a, b):
            if b < 0 or b > 62 or abs(a) >= (np.int64(1) << (62 - b)):
                raise OverflowError("an int past 64 bits")
            return np.int64(a) << b
        return impl
    return None


@njit
def python_max(a, b):
    """``max(a, b)`` as Python compares: the first unless the second is larger."""
    return b if b > a else a


@njit
def python_min(a, b):
    return b if b < a else a


@njit
def to_int(x):
    """``int(x)`` of a float: Python makes a big int; here only what fits exactly."""
    if not abs(x) < 9007199254740992.0:
        raise OverflowError("int() of a float past 2**53 or not finite")
    return np.int64(x)


@njit
def vector_size(n):
    """``np.zeros(n)``'s length (``value_kinds.vector_size``)."""
    if n < 0:
        raise ValueError("negative dimensions are not allowed")
    return n


@njit
def full(n, value):
    """``[value] * n``: a list of floats or of tape slots, as an array."""
    return np.full(max(n, 0), value)


@njit
def float_array_of(items):
    """A new float array of ``items`` (a list the code appended floats to, or an array
    it wrote): a Jacobian's values."""
    out = np.empty(len(items))
    for j in range(len(items)):
        out[j] = items[j]
    return out


@njit
def int_array_of(items):
    """A new int array of ``items``: the tape slots of a Jacobian's values."""
    out = np.empty(len(items), np.int64)
    for j in range(len(items)):
        out[j] = items[j]
    return out


if sys.version_info >= (3, 12):
    @njit
    def python_sum(items, start, int_start):
        """``sum(items, start)`` of floats: CPython 3.12's Neumaier-compensated sum (an
        int start added to the first item first, as Python's int loop does)."""
        if int_start:
            if len(items) == 0:
                raise ValueError("sum() of nothing is its int start")
            total, first = start + items[0], 1
        else:
            total, first = float(start), 0
        compensation = 0.0
        for k in range(first, len(items)):
            x = items[k]
            t = total + x
            if abs(total) >= abs(x):
                compensation += (total - t) + x
            else:
                compensation += (x - t) + total
            total = t
        if compensation != 0.0 and math.isfinite(compensation):
            total += compensation
        return total
else:
    @njit
    def python_sum(items, start, int_start):
        """``sum(items, start)`` of floats: in order, as CPython before 3.12 adds."""
        if int_start and len(items) == 0:
            raise ValueError("sum() of nothing is its int start")
        total = start + items[0] if int_start else float(start)
        for k in range(1 if int_start else 0, len(items)):
            total = total + items[k]
        return total


@njit
def _pairwise(a, low, n):
    """numpy's pairwise sum of ``a[low:low + n]`` (its ``pairwise_sum`` for float64, in
    its order: eight running sums in blocks of up to 128, halves above)."""
    if n < 8:
        total = 0.0
        for i in range(low, low + n):
            total += a[i]
        return total
    if n <= 128:
        r0, r1, r2, r3 = a[low], a[low + 1], a[low + 2], a[low + 3]
        r4, r5, r6, r7 = a[low + 4], a[low + 5], a[low + 6], a[low + 7]
        i = 8
        while i < n - n % 8:
            j = low + i
            r0 += a[j]
            r1 += a[j + 1]
            r2 += a[j + 2]
            r3 += a[j + 3]
            r4 += a[j + 4]
            r5 += a[j + 5]
            r6 += a[j + 6]
            r7 += a[j + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            total += a[low + i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return _pairwise(a, low, half) + _pairwise(a, low + half, n - half)


@njit
def numpy_sum(a):
    """``np.sum`` of a 1-d float64 array, numpy's value to the last bit (numpy 2.3 and
    later: one pairwise sum of the whole array)."""
    return _pairwise(a, 0, a.shape[0])


@njit
def numpy_sum_chunked(a):
    """The same by numpy before 2.3, which sums a contiguous array in chunks of its
    buffer's 8,192 items, one after another, each pairwise."""
    n = a.shape[0]
    total, low = 0.0, 0
    while low < n:
        m = min(8192, n - low)
        total += _pairwise(a, low, m)
        low += m
    return total


@njit
def numpy_mean(a):
    if a.shape[0] == 0:
        raise ValueError("the mean of an empty array")
    return numpy_sum(a) / a.shape[0]


@njit
def numpy_mean_chunked(a):
    if a.shape[0] == 0:
        raise ValueError("the mean of an empty array")
    return numpy_sum_chunked(a) / a.shape[0]


_ORDER: list = []


def numpy_sum_order() -> str | None:
    """How this numpy's ``np.sum`` adds: "" (``numpy_sum``'s order), "_chunked"
    (``numpy_sum_chunked``'s), or None (neither: not compiled). Checked once, on sums
    whose rounding shows the order."""
    if not _ORDER:
        rng = np.random.default_rng(12345)
        sizes = (0, 1, 5, 8, 9, 17, 127, 128, 129, 300, 1000, 8193, 20001, 70000)
        arrays = [rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n) for n in sizes]
        found = None
        for suffix, total, mean in (("", numpy_sum, numpy_mean),
                                    ("_chunked", numpy_sum_chunked, numpy_mean_chunked)):
            if all(float(np.sum(a)) == total(a) and
                   (not len(a) or float(np.mean(a)) == mean(a)) for a in arrays):
                found = suffix
                break
        _ORDER.append(found)
    return _ORDER[0]


@njit
def _range_length(a, b, c):
    if c == 0:
        raise ValueError("range() arg 3 must not be zero")
    return max(0, (b - a + c - 1) // c if c > 0 else (a - b - c - 1) // -c)


@njit
def reversed_start(a, b, c):
    """``reversed(range(a, b, c))`` is ``range(reversed_start, reversed_stop, -c)``."""
    n = _range_length(a, b, c)
    return a + (n - 1) * c if n > 0 else 0


@njit
def reversed_stop(a, b, c):
    return a - c if _range_length(a, b, c) > 0 else 0


@njit
def swept(slots, partials, used, width, index, sink, room):
    """The adjoints of slots ``0 .. sink`` (the arguments' floats) after one sweep of the
    flat tape seeded at ``index``, in the order runtime.tape.sweep_flat adds them; the
    adjoints kept in ``room`` where it is large enough (a fresh array of that size would
    fault its pages in at every call)."""
    entries = used // width
    need = sink + 1 + entries
    adjoint = room[:need] if room.shape[0] >= need else np.empty(need)
    adjoint[:] = 0.0
    adjoint[index] = 1.0
    for e in range(entries - 1, -1, -1):
        g = adjoint[sink + 1 + e]
        if g != 0.0:
            base = e * width
            for k in range(width):
                adjoint[slots[base + k]] += partials[base + k] * g
    return adjoint[:sink + 1].copy()


@njit
def swept_rows(slots, partials, used, width, seeds, sink, room):
    """``swept`` once per output, seeded at each of ``seeds``: a row of the arguments'
    adjoints each (value_kinds.tape_rows_of's sweeps, in its order)."""
    rows = np.empty((len(seeds), sink + 1))
    for r in range(len(seeds)):
        rows[r, :] = swept(slots, partials, used, width, seeds[r], sink, room)
    return rows


def _math(name: str, arity: int):
    """numba's version of ``math.<name>`` raising where the result is not finite."""
    f = getattr(math, name)
    if arity == 1:
        def checked(x):
            r = f(x)
            if not math.isfinite(r):
                raise ValueError("a math function's result that is not finite")
            return r
    else:
        def checked(x, y):
            r = f(x, y)
            if not math.isfinite(r):
                raise ValueError("a math function's result that is not finite")
            return r
    checked.__name__ = name
    return njit(checked)


# math's functions numba compiles as C's; those of ints (floor, ceil, trunc) and tests
# (isnan, ...) are checked or need no check
MATH = {name: _math(name, 1) for name in (
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "exp", "expm1", "log", "log1p", "log10", "log2", "sqrt", "erf", "erfc",
    "gamma", "lgamma", "fabs", "degrees", "radians")}
MATH.update({name: _math(name, 2) for name in ("atan2", "hypot", "copysign", "fmod")})
MATH["pow"] = njit(lambda x, y: checked_pow(float(x), float(y)))


@njit
def _rounded(x):
    if not abs(x) < 9007199254740992.0:
        raise OverflowError("a float past 2**53 made an int")
    return x


MATH["floor"] = njit(lambda x: np.int64(math.floor(_rounded(x))))
MATH["ceil"] = njit(lambda x: np.int64(math.ceil(_rounded(x))))
MATH["trunc"] = njit(lambda x: np.int64(math.trunc(_rounded(x))))
MATH.update({name: getattr(math, name) for name in ("isnan", "isinf", "isfinite")})


def _numpy(name: str, arity: int):
    """numba's version of ``np.<name>`` of floats, raising where an argument or the
    result is not finite (numpy's answer there, and its warning, come from the Python
    code)."""
    f = getattr(np, name)
    if arity == 1:
        def checked(x):
            r = f(x)
            if not (math.isfinite(r) and math.isfinite(x)):
                raise ValueError("a numpy function's argument or result that is not finite")
            return r
    else:
        def checked(x, y):
            r = f(x, y)
            if not (math.isfinite(r) and math.isfinite(x) and math.isfinite(y)):
                raise ValueError("a numpy function's argument or result that is not finite")
            return r
    checked.__name__ = name
    return njit(checked)


# numpy's functions of floats (rules/numpy_floats.py), as numba compiles them: as C's
NUMPY = {name: _numpy(name, arity) for name, arity in {
    rule[len("numpy_"):]: len(partials) for rule, _, partials in float_rules()}.items()}

# the helpers of the rules' partials (rules/scalar.py's namespace), which are float code;
# numpy's division raises at a zero divisor here (numba's does), so the Python code runs
HELPERS = {"_sign": njit(sign), "_inv": njit(inverse),
           "_sech2": njit(rule_namespace()["_sech2"]), "_np_div": njit(lambda a, b: a / b)}
