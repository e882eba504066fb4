"""A catalogue of small scalar programs, each differentiated by astad and checked.

Every program in ``CASES`` is checked three ways:

* ``test_value``: ``.value_and_grad``'s value is exactly the value of calling the function;
* ``test_grad_matches_fd``: the gradient matches central finite differences
  (``oracles.central_fd``) in value and in structure;
* ``test_grad_matches_hand``: where a hand-derived gradient is given, the gradient
  matches it to near machine precision.

Further tests below the catalogue check the paper's Figure 1 program, exact tape
lengths, a doubling chain, a high fan-out program, 3000-deep recursion, vjp with other
cotangents, gradients computed inside differentiated functions, and threads.

Programs that call a differentiated function (or themselves) are decorated at module
level, so the call goes through the decorated object; the others are plain functions
decorated inside the test.
"""
from __future__ import annotations

import concurrent.futures
import functools
import math
import random
import sys
import threading

import pytest

import astad
from oracles import assert_grad_close, central_fd, pairing, random_direction

import inspect

HAS_311_MATH = hasattr(math, "exp2") and hasattr(math, "cbrt")

# ``pullback.tape_length`` counts tape entries. By default astad may preaccumulate a whole
# float expression into one entry (``preaccumulate=True``); with ``preaccumulate=False``
# it records exactly one entry per executed primitive float operation, which is what the
# exact counts below are about. (If the option does not exist, every entry is primitive.)
HAS_PREACCUMULATE = "preaccumulate" in inspect.signature(astad.reverse_diff).parameters
PRIMITIVE_TAPE = {"preaccumulate": False} if HAS_PREACCUMULATE else {}


def primitive(fn):
    """``fn`` decorated so that its tape has one entry per primitive float operation."""
    return astad.reverse_diff(fn, **PRIMITIVE_TAPE)

needs_311 = pytest.mark.skipif(not HAS_311_MATH, reason="math.exp2/math.cbrt need Python >= 3.11")

# ===========================================================================================
# Arithmetic operators


def p_add(x, y):
    return x + y


def p_sub(x, y):
    return x - y


def p_mul(x, y):
    return x * y


def p_div(x, y):
    return x / y


def p_rdiv_const(x):
    return 3.0 / x


def p_div_int_literal(x):
    return x / 2


def p_floordiv(x, y):
    return x * (x // y)


def p_mod(x, y):
    return (x % y) * x


def p_pow(x, y):
    return x ** y


def p_pow_int(x):
    return x ** 3


def p_pow_square(x):
    return x ** 2


def p_rpow(x):
    return 2.0 ** x


def p_pow_half(x):
    return x ** 0.5


def p_neg(x, y):
    return -x * y + (-y)


def p_pos(x):
    return +x * 2.0


def p_abs(x, y):
    return abs(x) * y + abs(y)


def p_int_mix(x, n):
    return n * x + n // 2 * x - n % 3


def p_chained_compare(x, y):
    if 0.0 < x < y:
        return x * y
    return x - y


# ===========================================================================================
# Math functions and constants


def m_sin(x):
    return math.sin(x)


def m_cos(x):
    return math.cos(x)


def m_tan(x):
    return math.tan(x)


def m_asin(x):
    return math.asin(x)


def m_acos(x):
    return math.acos(x)


def m_atan(x):
    return math.atan(x)


def m_sinh(x):
    return math.sinh(x)


def m_cosh(x):
    return math.cosh(x)


def m_tanh(x):
    return math.tanh(x)


def m_asinh(x):
    return math.asinh(x)


def m_acosh(x):
    return math.acosh(x)


def m_atanh(x):
    return math.atanh(x)


def m_exp(x):
    return math.exp(x)


def m_expm1(x):
    return math.expm1(x)


def m_exp2(x):
    return math.exp2(x)


def m_log(x):
    return math.log(x)


def m_log1p(x):
    return math.log1p(x)


def m_log2(x):
    return math.log2(x)


def m_log10(x):
    return math.log10(x)


def m_sqrt(x):
    return math.sqrt(x)


def m_cbrt(x):
    return math.cbrt(x)


def m_fabs(x):
    return math.fabs(x)


def m_erf(x):
    return math.erf(x)


def m_erfc(x):
    return math.erfc(x)


def m_atan2(y, x):
    return math.atan2(y, x)


def m_hypot(x, y):
    return math.hypot(x, y)


def m_pow(x, y):
    return math.pow(x, y)


def m_pow_negative_base(x):
    return math.pow(x, 3.0)


def m_exp_product(x, y):
    return math.exp(x * y)


def m_log_norm(x, y):
    return math.log(x * x + y * y)


def m_constants(x):
    return math.pi * x * x + math.e * x


def m_composite(x, y):
    r = math.sqrt(x * x + y * y)
    return math.sin(r) * math.exp(-0.5 * r) + math.atan2(y, x) * math.tanh(x - y)


# ===========================================================================================
# Augmented assignment, unpacking, swaps


def p_aug_basic(x, y):
    s = x
    s += y
    s *= x
    s -= y
    s /= 2.0
    s **= 2
    return s


def p_aug_floor_mod(x, y):
    a = x
    a %= y
    b = x
    b //= y
    return a * b + a


def p_swap(x, y):
    x, y = y, x * y
    return x - 2.0 * y


def p_unpack(x, y):
    a, b = x + y, x - y
    return a * b


def p_unpack_nested(x, y):
    (a, b), c = (x, y), x * y
    return a + b * c


def p_rotate3(x, y, z):
    x, y, z = y, z, x
    return x * 1.0 + y * 2.0 + z * 3.0


def p_unpack_tuple_arg(pt):
    px, py = pt
    return px * py * py


# ===========================================================================================
# Branches


def p_piecewise(x):
    if x < -1.0:
        return -x * x
    elif x < 0.0:
        return 3.0 * x + 2.0
    elif x < 1.0:
        return math.sin(x)
    else:
        return x ** 3


def p_nested_if(x, y):
    if x > 0.0:
        if y > 0.0:
            r = x * y
        else:
            r = x - y
    else:
        if y > x:
            r = y * y
        else:
            r = x
    return r * 2.0


def p_condexpr(x, y):
    return x * x if x > y else y * y * y


def p_bool_ops(x, y):
    if (x > 0.0 and y > 0.0) or not (x < y):
        return x * y
    return x + y


def p_and_value(x, y):
    z = x and y
    return z * x


def p_or_value(x, y):
    z = (x > 10.0) or y
    return z * x


def p_relu(x):
    return max(x, 0.0) + max(x * x, 1)


# ===========================================================================================
# Loops


def p_while_newton(a):
    x = a
    i = 0
    while i < 50:
        nx = 0.5 * (x + a / x)
        if abs(nx - x) < 1e-12:
            x = nx
            break
        x = nx
        i += 1
    return x


def p_while_else(x):
    i = 0
    while i < 3:
        x = x * 1.5
        i += 1
    else:
        x = x + 1.0
    return x * x


def p_while_break_skips_else(x):
    y = x
    while y < 100.0:
        y = y * 3.0
        if y > 20.0:
            break
    else:
        y = -y
    return y


def p_while_true(x):
    y = x
    n = 0
    while True:
        y = math.sin(y) + y * 0.5
        n += 1
        if n >= 4:
            break
    return y


def p_for_range(x, n):
    s = 0.0
    for i in range(1, n + 1):
        s += x ** i / i
    return s


def p_for_range_step(x):
    s = 0.0
    for i in range(10, 0, -3):
        s = s + x * i
    return s


def p_for_list_horner(x, cs):
    acc = 0.0
    for c in cs:
        acc = acc * x + c
    return acc


def p_for_tuple_literal(x):
    s = 0.0
    for w in (1.0, 2.0, 3.0):
        s = s + w * x * x
    return s


def p_for_tuple_arg(ts):
    s = 1.0
    for t in ts:
        s = s * t
    return s


def p_enumerate(x, cs):
    s = 0.0
    for i, c in enumerate(cs):
        s += c * x ** i
    return s


def p_zip(xs, ys):
    s = 0.0
    for a, b in zip(xs, ys):
        s = s + a * b
    return s


def p_reversed(x, cs):
    acc = 0.0
    for c in reversed(cs):
        acc = acc * x + c
    return acc


def p_continue(x):
    s = 0.0
    for i in range(6):
        if i % 2 == 0:
            continue
        s = s + x ** i
    return s


def p_break_list(cs):
    s = 0.0
    for c in cs:
        if c < 0.0:
            break
        s = s + c * c
    return s


def p_for_else(x, cs):
    s = x
    for c in cs:
        if c > 100.0:
            break
        s = s * c
    else:
        s = s * 2.0
    return s


def p_early_return_loop(x, y):
    for _i in range(10):
        x = x * 1.5
        if x > 5.0:
            return x * y
    return -x


def p_nested_loops(x):
    s = 0.0
    for i in range(3):
        for j in range(i + 1):
            s += x * (i + j) * x
    return s


def p_reversed_range(x, n):
    s = 0.0
    for i in reversed(range(n)):
        s = s * x + i
    return s


def p_enumerate_start(cs):
    s = 0.0
    for i, c in enumerate(cs, 1):
        s = s + i * c * c
    return s


def p_zip3(xs, ys, ws):
    s = 0.0
    for a, b, w in zip(xs, ys, ws):
        s += w * (a - b) ** 2
    return s


def p_while_continue(x):
    i = 0
    s = 0.0
    while i < 8:
        i += 1
        if i % 3 == 0:
            continue
        s = s + x / i
    return s


def p_nested_early_return(x, y):
    for i in range(4):
        z = x
        while z < 10.0:
            z = z * 2.0 + y
            if z > 7.5 and i > 1:
                return z * x
        x = x * 0.5
    return x + y


def p_pow_negative_exponent(x):
    return x ** -2 + 1.0 / x ** 2


# ===========================================================================================
# Lists and tuples


def p_list_literal(x, y):
    v = [x, y, x * y]
    return v[0] * v[2] + v[-1]


def p_mean(xs):
    return sum(xs) / len(xs)


def p_sum_builtin(x, y):
    return sum([x * x, y, x * y])


def p_negative_index(xs):
    return xs[-1] * xs[-2] - xs[0]


def p_index_loop(xs):
    s = 0.0
    n = len(xs)
    for i in range(n):
        s = s + xs[i] * xs[n - 1 - i]
    return s


def p_nested_list(m):
    s = 0.0
    for row in m:
        for v in row:
            s += v * v
    return s


def p_list_of_tuples(pts):
    s = 0.0
    for px, py in pts:
        s = s + px * py
    return s


def p_mixed_record(rec):
    name, count, w = rec
    return w * count


def p_list_with_ints(xs):
    return xs[0] * xs[1] + xs[2] ** 2


def p_max2(x, y):
    return max(x, y) * 2.0


def p_min3(x, y, z):
    return min(x, y, x * z)


def p_max_several(a, b, c, d):
    return max(a * b, c, d - a, 0.5)


def p_minmax_list(xs):
    return max(xs) + 2.0 * min(xs)


def p_tuple_value(x, y):
    t = (x, y, x * y)
    return t[2] * t[0] + len(t) * t[-2]


def p_sum_len_tuple(ts):
    return sum(ts) * len(ts)


def p_max_built_tuple(x, y):
    return max((x, y, x * y)) + min([x * 2.0, y + 1.0])


def p_elif_and(x, y):
    if x > 1.0 and y > 1.0:
        r = x * y
    elif x > 1.0 or y > 1.0:
        r = x + y
    elif not x > 0.0:
        r = -x
    else:
        r = x * x
    return r


def p_int_float_compare(x, n):
    if n > x:
        return x * n
    return x - n


# ===========================================================================================
# float(), int(), round()


def p_float_of_int(x, n):
    return float(n) * x + float(x) * 0.5


def p_int_of_float(x):
    return int(x) * x


def p_round(x):
    return round(x) * x + round(x, 1)


def p_truediv_ints(x, n):
    return x * (n / 4)


# ===========================================================================================
# int and bool parameters next to floats; keyword arguments


def p_flags(x, n, flag):
    r = x
    for _i in range(n):
        r = r * x
    if flag:
        r = -r
    return r


def p_kwargs(x, y, scale=1.0, shift=0.0):
    return scale * x * y + shift


def p_kwargs_kwonly(x, y, *, scale=1.0, shift=0.0):
    return scale * x * y + shift


# ===========================================================================================
# Calls between decorated functions, recursion (module-level decorated objects)


@astad.reverse_diff
def sq(x):
    return x * x


@astad.reverse_diff
def d_uses_sq(x, y):
    return sq(x) + sq(x * y)


@astad.reverse_diff
def helper_kw(x, scale=1.0):
    return scale * x * x


@astad.reverse_diff
def d_calls_with_kwargs(x, y):
    return helper_kw(x, scale=y) + helper_kw(y)


@astad.reverse_diff
def polar(r, t):
    return r * math.cos(t), r * math.sin(t)


@astad.reverse_diff
def d_uses_tuple_result(r, t):
    a, b = polar(r, t)
    return a * a + 2.0 * b


@astad.reverse_diff
def norm2(v):
    s = 0.0
    for e in v:
        s = s + e * e
    return s


@astad.reverse_diff
def d_builds_list_for_call(x, y):
    return norm2([x, y, x * y])


@astad.reverse_diff(argnums=1)
def an_argnum1(x, y, z):
    return x * y * z + y


@astad.reverse_diff
def d_calls_argnums_helper(x, y):
    # The callee's argnums only says what *its* .grad reports; inside another
    # differentiated function every argument still carries its derivative.
    return an_argnum1(x, y, 2.0)


@astad.reverse_diff(argnums=(0, 2))
def an_argnums02(x, y, z):
    return x * y * z + math.sin(z)


@astad.reverse_diff(argnums=(2,))
def an_argnums2_only(x, y, z):
    return x * y * z


@astad.reverse_diff(argnums=(0, 1))
def an_with_int(x, n):
    return x ** n


@astad.reverse_diff(argnums=0)
def an_list_only(xs, w):
    return w * sum(xs)


@astad.reverse_diff
def d_level3(x):
    return math.exp(x * 0.5)


@astad.reverse_diff
def d_level2(x):
    return d_level3(x) * x


@astad.reverse_diff
def d_level1(x, y):
    return d_level2(x + y) - d_level3(y)


@astad.reverse_diff
def ipow(x, n):
    if n == 0:
        return 1.0
    if n % 2 == 0:
        h = ipow(x, n // 2)
        return h * h
    return x * ipow(x, n - 1)


@astad.reverse_diff
def rchain(x, n):
    return x if n == 0 else rchain(math.sin(x) * 0.9 + 0.1, n - 1)


@astad.reverse_diff
def m_even(x, n):
    if n == 0:
        return x
    return m_odd(math.sin(x) + x, n - 1)


@astad.reverse_diff
def m_odd(x, n):
    if n == 0:
        return -x
    return m_even(x * 1.5, n - 1)


@astad.reverse_diff
def rsum_sq(xs, i):
    if i == len(xs):
        return 0.0
    return xs[i] * xs[i] + rsum_sq(xs, i + 1)


@astad.reverse_diff
def fibf(x, n):
    if n < 2:
        return x
    return fibf(x, n - 1) + fibf(x * 0.5, n - 2) * x


# ===========================================================================================
# Hand-derived gradients used in the table


def _horner_grad(x, cs):
    n = len(cs)
    dx = sum((n - 1 - k) * c * x ** (n - 2 - k) for k, c in enumerate(cs) if k < n - 1)
    return (dx, [x ** (n - 1 - k) for k in range(n)])


def _series_grad(x, cs):  # d/dx and d/dcs of sum_k cs[k] x**k
    dx = sum(k * c * x ** (k - 1) for k, c in enumerate(cs) if k > 0)
    return (dx, [x ** k for k in range(len(cs))])


def _prod_except(ts):
    out = []
    for k in range(len(ts)):
        p = 1.0
        for j, t in enumerate(ts):
            if j != k:
                p *= t
        out.append(p)
    return tuple(out)


def _aug_basic_grad(x, y):
    s4 = ((x + y) * x - y) / 2.0
    return (s4 * (2 * x + y), s4 * (x - 1))


def _rchain_grad(x, n):
    d = 1.0
    for _ in range(n):
        d *= math.cos(x) * 0.9
        x = math.sin(x) * 0.9 + 0.1
    return (d, None)  # (n, an int, is not differentiated)


def _even_odd_grad(x, n):
    d, in_even = 1.0, True
    for _ in range(n):
        if in_even:
            d *= math.cos(x) + 1.0
            x = math.sin(x) + x
        else:
            d *= 1.5
            x = x * 1.5
        in_even = not in_even
    return (d if in_even else -d, None)


def _polar_grad(r, t):
    c, s = math.cos(t), math.sin(t)
    return (2 * r * c * c + 2 * s, -2 * r * r * c * s + 2 * r * c)


def _level1_grad(x, y):
    # f = g(x + y) - e(y), g(u) = u exp(u/2), e(y) = exp(y/2)
    u = x + y
    gp = math.exp(u * 0.5) * (1 + 0.5 * u)
    return (gp, gp - 0.5 * math.exp(y * 0.5))


# ===========================================================================================
# The table

ERF_D = 2.0 / math.sqrt(math.pi)


def C(id, fn, args, hand=None, *, argnums=None, kwargs=None, fd_rtol=1e-6, fd_atol=1e-7,
      marks=()):
    """One catalogue entry. ``hand(*args)`` returns the expected gradient; ``argnums`` is
    what the function's .grad differentiates (None: astad's default, all arguments)."""
    return pytest.param(fn, tuple(args), hand, argnums, dict(kwargs or {}), fd_rtol, fd_atol,
                        id=id, marks=marks)


CASES = [
    # operators
    C("add", p_add, (1.5, -2.25), lambda x, y: (1.0, 1.0)),
    C("sub", p_sub, (1.5, -2.25), lambda x, y: (1.0, -1.0)),
    C("mul", p_mul, (1.5, -2.25), lambda x, y: (y, x)),
    C("div", p_div, (1.5, -2.25), lambda x, y: (1 / y, -x / y ** 2)),
    C("rdiv_const", p_rdiv_const, (1.25,), lambda x: -3.0 / x ** 2),
    C("div_int_literal", p_div_int_literal, (1.25,), lambda x: 0.5),
    C("floordiv", p_floordiv, (7.3, 2.0), lambda x, y: (x // y, 0.0)),
    C("mod_pos", p_mod, (7.3, 2.0), lambda x, y: (x % y + x, -math.floor(x / y) * x)),
    C("mod_neg", p_mod, (-7.3, 2.0), lambda x, y: (x % y + x, -math.floor(x / y) * x)),
    C("pow", p_pow, (1.7, 2.3), lambda x, y: (y * x ** (y - 1), x ** y * math.log(x))),
    C("pow_int_neg_base", p_pow_int, (-1.5,), lambda x: 3 * x * x),
    C("pow_square_neg_base", p_pow_square, (-1.5,), lambda x: 2 * x),
    C("rpow", p_rpow, (0.7,), lambda x: math.log(2.0) * 2.0 ** x),
    C("pow_half", p_pow_half, (2.5,), lambda x: 0.5 / math.sqrt(x)),
    C("neg", p_neg, (1.5, -2.25), lambda x, y: (-y, -x - 1.0)),
    C("pos", p_pos, (1.5,), lambda x: 2.0),
    C("abs", p_abs, (-1.5, 2.0), lambda x, y: (-y, abs(x) + 1.0)),
    C("int_mix", p_int_mix, (1.25, 5), lambda x, n: (float(n + n // 2), None)),
    C("chained_compare_true", p_chained_compare, (1.0, 2.0), lambda x, y: (y, x)),
    C("chained_compare_false", p_chained_compare, (3.0, 2.0), lambda x, y: (1.0, -1.0)),
    # math functions
    C("sin", m_sin, (0.7,), math.cos),
    C("cos", m_cos, (0.7,), lambda x: -math.sin(x)),
    C("tan", m_tan, (0.7,), lambda x: 1 / math.cos(x) ** 2),
    C("asin", m_asin, (0.3,), lambda x: 1 / math.sqrt(1 - x * x)),
    C("acos", m_acos, (0.3,), lambda x: -1 / math.sqrt(1 - x * x)),
    C("atan", m_atan, (0.7,), lambda x: 1 / (1 + x * x)),
    C("sinh", m_sinh, (0.7,), math.cosh),
    C("cosh", m_cosh, (0.7,), math.sinh),
    C("tanh", m_tanh, (0.7,), lambda x: 1 - math.tanh(x) ** 2),
    C("asinh", m_asinh, (0.7,), lambda x: 1 / math.sqrt(x * x + 1)),
    C("acosh", m_acosh, (1.7,), lambda x: 1 / math.sqrt(x * x - 1)),
    C("atanh", m_atanh, (0.4,), lambda x: 1 / (1 - x * x)),
    C("exp", m_exp, (0.7,), math.exp),
    C("expm1", m_expm1, (0.7,), math.exp),
    C("exp2", m_exp2, (0.7,), lambda x: math.log(2.0) * 2.0 ** x, marks=needs_311),
    C("log", m_log, (1.7,), lambda x: 1 / x),
    C("log1p", m_log1p, (0.7,), lambda x: 1 / (1 + x)),
    C("log2", m_log2, (1.7,), lambda x: 1 / (x * math.log(2.0))),
    C("log10", m_log10, (1.7,), lambda x: 1 / (x * math.log(10.0))),
    C("sqrt", m_sqrt, (1.7,), lambda x: 0.5 / math.sqrt(x)),
    C("cbrt", m_cbrt, (1.7,), lambda x: 1 / (3 * abs(x) ** (2 / 3)), marks=needs_311),
    C("cbrt_negative", m_cbrt, (-2.0,), lambda x: 1 / (3 * abs(x) ** (2 / 3)),
      marks=needs_311),
    C("fabs_negative", m_fabs, (-1.3,), lambda x: -1.0),
    C("fabs_positive", m_fabs, (1.3,), lambda x: 1.0),
    C("erf", m_erf, (0.7,), lambda x: ERF_D * math.exp(-x * x)),
    C("erfc", m_erfc, (0.7,), lambda x: -ERF_D * math.exp(-x * x)),
    C("atan2", m_atan2, (0.5, -1.2),
      lambda y, x: (x / (x * x + y * y), -y / (x * x + y * y))),
    C("hypot", m_hypot, (3.0, -4.0), lambda x, y: (x / 5.0, y / 5.0)),
    C("math_pow", m_pow, (1.7, 2.3), lambda x, y: (y * x ** (y - 1), x ** y * math.log(x))),
    C("math_pow_negative_base", m_pow_negative_base, (-1.5,), lambda x: 3 * x * x),
    C("exp_product", m_exp_product, (0.6, -1.1),
      lambda x, y: (y * math.exp(x * y), x * math.exp(x * y))),
    C("log_norm", m_log_norm, (0.6, -1.1),
      lambda x, y: (2 * x / (x * x + y * y), 2 * y / (x * x + y * y))),
    C("pi_e", m_constants, (0.8,), lambda x: 2 * math.pi * x + math.e),
    C("composite", m_composite, (0.8, -0.3)),
    # augmented assignment, unpacking, swaps
    C("aug_basic", p_aug_basic, (1.3, 0.4), _aug_basic_grad),
    C("aug_floor_mod", p_aug_floor_mod, (7.3, 2.0), lambda x, y: (4.0, -12.0)),
    C("swap", p_swap, (1.3, 0.4), lambda x, y: (-2 * y, 1 - 2 * x)),
    C("unpack", p_unpack, (1.3, 0.4), lambda x, y: (2 * x, -2 * y)),
    C("unpack_nested", p_unpack_nested, (1.3, 0.4), lambda x, y: (1 + y * y, 2 * x * y)),
    C("rotate3", p_rotate3, (1.3, 0.4, -0.2), lambda x, y, z: (3.0, 1.0, 2.0)),
    C("unpack_tuple_arg", p_unpack_tuple_arg, ((1.3, 0.4),),
      lambda pt: (pt[1] ** 2, 2 * pt[0] * pt[1])),
    # branches
    C("piecewise_lt_m1", p_piecewise, (-2.0,), lambda x: -2 * x),
    C("piecewise_elif1", p_piecewise, (-0.5,), lambda x: 3.0),
    C("piecewise_elif2", p_piecewise, (0.5,), math.cos),
    C("piecewise_else", p_piecewise, (2.0,), lambda x: 3 * x * x),
    C("nested_if_pp", p_nested_if, (1.0, 2.0), lambda x, y: (2 * y, 2 * x)),
    C("nested_if_pn", p_nested_if, (1.0, -2.0), lambda x, y: (2.0, -2.0)),
    C("nested_if_np", p_nested_if, (-1.0, 2.0), lambda x, y: (0.0, 4 * y)),
    C("nested_if_nn", p_nested_if, (-1.0, -3.0), lambda x, y: (2.0, 0.0)),
    C("condexpr_then", p_condexpr, (1.5, 1.0), lambda x, y: (2 * x, 0.0)),
    C("condexpr_else", p_condexpr, (0.5, 1.0), lambda x, y: (0.0, 3 * y * y)),
    C("bool_ops_and", p_bool_ops, (1.0, 2.0), lambda x, y: (y, x)),
    C("bool_ops_neither", p_bool_ops, (-1.0, 2.0), lambda x, y: (1.0, 1.0)),
    C("bool_ops_not", p_bool_ops, (3.0, -1.0), lambda x, y: (y, x)),
    C("and_value", p_and_value, (2.0, 3.0), lambda x, y: (y, x)),
    C("or_value", p_or_value, (2.0, 3.0), lambda x, y: (y, x)),
    C("relu_pos", p_relu, (2.0,), lambda x: 1.0 + 2 * x),
    C("relu_neg", p_relu, (-0.5,), lambda x: 0.0),
    # loops
    C("while_newton_break", p_while_newton, (2.0,), lambda a: 0.5 / math.sqrt(a)),
    C("while_else", p_while_else, (0.8,), lambda x: 2 * (3.375 * x + 1) * 3.375),
    C("while_break_a", p_while_break_skips_else, (1.0,), lambda x: 27.0),
    C("while_break_b", p_while_break_skips_else, (50.0,), lambda x: 3.0),
    C("while_else_runs", p_while_break_skips_else, (150.0,), lambda x: -1.0),
    C("while_true_break", p_while_true, (0.9,)),
    C("for_range", p_for_range, (0.7, 6),
      lambda x, n: (sum(x ** (i - 1) for i in range(1, n + 1)), None)),
    C("for_range_step", p_for_range_step, (0.7,), lambda x: 22.0),
    C("for_list", p_for_list_horner, (0.7, [1.0, -2.0, 0.5, 3.0]), _horner_grad),
    C("for_tuple_literal", p_for_tuple_literal, (0.7,), lambda x: 12 * x),
    C("for_tuple_arg", p_for_tuple_arg, ((1.5, -2.0, 0.5, 3.0),), _prod_except),
    C("enumerate", p_enumerate, (0.7, [1.0, -2.0, 0.5, 3.0]), _series_grad),
    C("zip", p_zip, ([1.0, 2.0, 3.0], [0.5, -1.0, 4.0]), lambda xs, ys: (list(ys), list(xs))),
    C("reversed", p_reversed, (0.7, [1.0, -2.0, 0.5, 3.0]), _series_grad),
    C("continue", p_continue, (0.7,), lambda x: 1 + 3 * x ** 2 + 5 * x ** 4),
    C("break_list", p_break_list, ([1.0, 2.0, -1.0, 5.0],), lambda cs: [2.0, 4.0, 0.0, 0.0]),
    C("for_else_runs", p_for_else, (0.7, [1.5, 2.0]), lambda x, cs: (6.0, [4 * x, 3 * x])),
    C("for_else_skipped", p_for_else, (0.7, [2.0, 200.0, 3.0]),
      lambda x, cs: (2.0, [x, 0.0, 0.0])),
    C("early_return_loop", p_early_return_loop, (1.0, 2.0),
      lambda x, y: (1.5 ** 4 * y, 1.5 ** 4 * x)),
    C("loop_falls_through", p_early_return_loop, (0.001, 2.0),
      lambda x, y: (-(1.5 ** 10), 0.0)),
    C("nested_loops", p_nested_loops, (0.7,), lambda x: 24 * x),
    C("reversed_range", p_reversed_range, (0.7, 5),
      lambda x, n: (sum(k * k * x ** (k - 1) for k in range(1, n)), None)),  # s = sum k x^k
    C("enumerate_start", p_enumerate_start, ([1.0, -2.0, 0.5],),
      lambda cs: [2.0 * (k + 1) * c for k, c in enumerate(cs)]),
    C("zip3", p_zip3, ([1.0, 2.0], [0.5, 3.0], [2.0, -1.0]),
      lambda xs, ys, ws: ([2 * w * (a - b) for a, b, w in zip(xs, ys, ws)],
                          [-2 * w * (a - b) for a, b, w in zip(xs, ys, ws)],
                          [(a - b) ** 2 for a, b in zip(xs, ys)])),
    C("while_continue", p_while_continue, (0.7,),
      lambda x: sum(1.0 / i for i in (1, 2, 4, 5, 7, 8))),
    C("nested_early_return", p_nested_early_return, (1.0, 0.5)),
    C("nested_loops_fall_through", p_nested_early_return, (100.0, 0.5),
      lambda x, y: (1.0 / 16, 1.0)),
    C("pow_negative_exponent", p_pow_negative_exponent, (1.3,), lambda x: -4.0 / x ** 3),
    # lists and tuples
    C("list_literal", p_list_literal, (1.3, 0.4), lambda x, y: (2 * x * y + y, x * x + x)),
    C("mean_len_sum", p_mean, ([1.0, 2.0, 4.5, -3.0],), lambda xs: [0.25] * 4),
    C("sum_builtin", p_sum_builtin, (1.3, 0.4), lambda x, y: (2 * x + y, 1 + x)),
    C("negative_index", p_negative_index, ([1.0, 2.0, 4.5, -3.0],),
      lambda xs: [-1.0, 0.0, xs[3], xs[2]]),
    C("index_loop", p_index_loop, ([1.0, 2.0, 4.5, -3.0],),
      lambda xs: [2 * xs[3 - k] for k in range(4)]),
    C("nested_list", p_nested_list, ([[1.0, 2.0], [-0.5, 3.0, 0.25]],),
      lambda m: [[2 * v for v in row] for row in m]),
    C("list_of_tuples", p_list_of_tuples, ([(1.0, 2.0), (-0.5, 3.0)],),
      lambda pts: [(py, px) for px, py in pts]),
    C("mixed_record", p_mixed_record, (("w", 3, 2.0),), lambda rec: ("w", 3, 3.0)),
    C("list_with_ints", p_list_with_ints, ([1.5, 2, 3.0],), lambda xs: [2.0, 2, 6.0]),
    C("max2_right", p_max2, (1.0, 3.0), lambda x, y: (0.0, 2.0)),
    C("max2_left", p_max2, (3.0, 1.0), lambda x, y: (2.0, 0.0)),
    C("min3", p_min3, (1.0, 2.0, 0.5), lambda x, y, z: (z, 0.0, x)),
    C("max_several_prod", p_max_several, (2.0, 1.5, 1.0, 0.0),
      lambda a, b, c, d: (b, a, 0.0, 0.0)),
    C("max_several_diff", p_max_several, (0.5, 1.5, 1.0, 3.0),
      lambda a, b, c, d: (-1.0, 0.0, 0.0, 1.0)),
    C("max_several_const", p_max_several, (0.1, 0.1, 0.2, 0.3),
      lambda a, b, c, d: (0.0, 0.0, 0.0, 0.0)),
    C("minmax_list", p_minmax_list, ([3.0, -1.0, 2.0],), lambda xs: [1.0, 2.0, 0.0]),
    C("tuple_value", p_tuple_value, (1.3, 0.4), lambda x, y: (2 * x * y, x * x + 3.0)),
    C("sum_len_tuple", p_sum_len_tuple, ((1.0, 2.0, 4.0),), lambda ts: (3.0, 3.0, 3.0)),
    C("max_built_tuple", p_max_built_tuple, (1.5, 2.5), lambda x, y: (y + 2.0, x)),
    C("elif_and", p_elif_and, (1.5, 2.5), lambda x, y: (y, x)),
    C("elif_or", p_elif_and, (1.5, 0.5), lambda x, y: (1.0, 1.0)),
    C("elif_not", p_elif_and, (-0.5, 0.5), lambda x, y: (-1.0, 0.0)),
    C("elif_else", p_elif_and, (0.5, 0.5), lambda x, y: (2 * x, 0.0)),
    C("int_float_compare_then", p_int_float_compare, (1.5, 2), lambda x, n: (2.0, None)),
    C("int_float_compare_else", p_int_float_compare, (2.5, 2), lambda x, n: (1.0, None)),
    # float()/int()/round()
    C("float_of_int", p_float_of_int, (1.3, 4), lambda x, n: (n + 0.5, None)),
    C("int_of_float", p_int_of_float, (2.7,), lambda x: 2.0),
    C("round", p_round, (2.7,), lambda x: 3.0),
    C("truediv_ints", p_truediv_ints, (1.3, 6), lambda x, n: (1.5, None)),
    # int/bool parameters, kwargs, argnums
    C("flags_false", p_flags, (1.1, 3, False), lambda x, n, f: (4 * x ** 3, None, None)),
    C("flags_true", p_flags, (1.1, 3, True), lambda x, n, f: (-4 * x ** 3, None, None)),
    # keyword arguments are passed through and not differentiated: the gradient is wrt
    # the positional arguments only, whether the parameter is keyword-only or not
    C("kwargs_keyword_only", p_kwargs_kwonly, (2.0, 3.0), lambda x, y, **k: (2.5 * y, 2.5 * x),
      kwargs={"scale": 2.5, "shift": 1.0}),
    C("kwargs_positional_or_keyword", p_kwargs, (2.0, 3.0),
      lambda x, y, **k: (2.5 * y, 2.5 * x), kwargs={"scale": 2.5, "shift": 1.0}),
    C("argnums_int", an_argnum1, (1.5, 2.0, -0.5), lambda x, y, z: x * z + 1.0, argnums=1),
    C("argnums_tuple", an_argnums02, (1.5, 2.0, -0.5),
      lambda x, y, z: (y * z, x * y + math.cos(z)), argnums=(0, 2)),
    C("argnums_one_tuple", an_argnums2_only, (1.5, 2.0, -0.5),
      lambda x, y, z: (x * y,), argnums=(2,)),
    C("argnums_int_param", an_with_int, (1.5, 4), lambda x, n: (n * x ** (n - 1), None),
      argnums=(0, 1)),
    C("argnums_list_alone", an_list_only, ([1.0, 2.0], 3.0), lambda xs, w: [w, w], argnums=0),
    # calls between decorated functions
    C("calls_sq", d_uses_sq, (1.3, 0.4), lambda x, y: (2 * x + 2 * x * y * y, 2 * x * x * y)),
    C("calls_with_kwargs", d_calls_with_kwargs, (1.3, 0.4),
      lambda x, y: (2 * y * x, x * x + 2 * y)),
    C("calls_tuple_result", d_uses_tuple_result, (1.3, 0.4), _polar_grad),
    C("calls_with_built_list", d_builds_list_for_call, (1.3, 0.4),
      lambda x, y: (2 * x + 2 * x * y * y, 2 * y + 2 * x * x * y)),
    C("calls_argnums_helper", d_calls_argnums_helper, (1.3, 0.4),
      lambda x, y: (2.0 * y, 2.0 * x + 1.0)),
    C("calls_three_levels", d_level1, (0.3, 0.4), _level1_grad),
    # recursion
    C("ipow_13", ipow, (1.1, 13), lambda x, n: (n * x ** (n - 1), None)),
    C("ipow_10_neg", ipow, (-0.9, 10), lambda x, n: (n * x ** (n - 1), None)),
    C("ipow_0", ipow, (1.1, 0), lambda x, n: (0.0, None)),
    C("recursive_chain", rchain, (0.4, 25), _rchain_grad),
    C("mutual_recursion_odd_end", m_even, (0.4, 5), _even_odd_grad),
    C("mutual_recursion_even_end", m_even, (0.4, 6), _even_odd_grad),
    C("recursive_list_sum", rsum_sq, ([1.0, -2.0, 0.5], 0),
      lambda xs, i: ([2 * v for v in xs], None)),
    C("tree_recursion", fibf, (0.9, 7)),
]

_DECORATED: dict = {}


def ad(fn):
    """The astad-decorated version of ``fn`` (``fn`` itself when already decorated)."""
    if hasattr(fn, "grad") and hasattr(fn, "vjp"):
        return fn
    if fn not in _DECORATED:
        _DECORATED[fn] = astad.reverse_diff(fn)
    return _DECORATED[fn]


PARAMS = "fn, args, hand, argnums, kwargs, fd_rtol, fd_atol"


@pytest.mark.parametrize(PARAMS, CASES)
def test_value(fn, args, hand, argnums, kwargs, fd_rtol, fd_atol):
    f = ad(fn)
    if kwargs:
        value = f(*args, **kwargs)
        assert value == fn(*args, **kwargs)
        return
    value, _ = f.value_and_grad(*args)
    expected = f(*args)
    assert type(value) is type(expected)
    assert value == expected


@pytest.mark.parametrize(PARAMS, CASES)
def test_grad_matches_fd(fn, args, hand, argnums, kwargs, fd_rtol, fd_atol):
    f = ad(fn)
    grad = f.grad(*args, **kwargs)
    expected = central_fd(f, args, argnums, kwargs=kwargs)
    assert_grad_close(grad, expected, rtol=fd_rtol, atol=fd_atol)


HAND_CASES = [c for c in CASES if c.values[2] is not None]


@pytest.mark.parametrize(PARAMS, HAND_CASES)
def test_grad_matches_hand(fn, args, hand, argnums, kwargs, fd_rtol, fd_atol):
    f = ad(fn)
    grad = f.grad(*args, **kwargs)
    expected = hand(*args, **kwargs)
    assert_grad_close(grad, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("path", ["f.jvp", "duals"])
@pytest.mark.parametrize(PARAMS, CASES)
def test_jvp_matches_the_reverse_gradient(fn, args, hand, argnums, kwargs, fd_rtol, fd_atol,
                                          path):
    """Forward mode along a random direction equals the reverse gradient paired with that
    direction, on every program of the catalogue: through ``f.jvp`` (the code specialised
    for floats where it applies) and on forward duals (``jvp`` of a partial application,
    which always runs the transformed code)."""
    rng = random.Random(len(args) * 7919 + sum(map(ord, fn.__name__)))
    f = ad(fn)
    nums = range(len(args)) if argnums is None else (
        (argnums,) if isinstance(argnums, int) else argnums)
    tangents = [random_direction(a, rng) if k in nums else None for k, a in enumerate(args)]
    if path == "f.jvp":
        value, tangent = f.jvp(args, tangents, **kwargs)
    else:
        value, tangent = astad.jvp(functools.partial(f, **kwargs), args, tangents)
    assert value == fn(*args, **kwargs)
    grad = f.grad(*args, **kwargs)
    grads = (grad,) if argnums is None and len(args) == 1 or isinstance(argnums, int) \
        else grad
    expected = math.fsum(pairing(g, tangents[k]) for k, g in zip(nums, grads))
    assert tangent == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("jacobian", ["jacrev", "jacfwd"])
@pytest.mark.parametrize(PARAMS, CASES)
def test_jacobians_of_one_output_equal_the_gradient(fn, args, hand, argnums, kwargs, fd_rtol,
                                                   fd_atol, jacobian):
    """The Jacobian of a float-valued program (one output scalar: jacrev's ordinary sweep,
    jacfwd's vector of tangents) is its gradient, on every program of the catalogue."""
    f = ad(fn)
    nums = tuple(range(len(args))) if argnums is None else argnums
    transform = getattr(astad, jacobian)(functools.partial(f, **kwargs), argnums=nums)
    grad = f.grad(*args, **kwargs)
    grads = (grad,) if argnums is None and len(args) == 1 else grad
    assert_grad_close(transform(*args), grads, rtol=1e-10, atol=1e-12)


PLAIN_CASES = [c for c in CASES if not hasattr(c.values[0], "grad")]


@pytest.mark.parametrize(PARAMS, PLAIN_CASES)
def test_primitive_tape_mode_agrees(fn, args, hand, argnums, kwargs, fd_rtol, fd_atol):
    """One entry per primitive operation or preaccumulated: same value, same gradient."""
    f = primitive(fn)
    value, grad = f.value_and_grad(*args, **kwargs)
    assert value == fn(*args, **kwargs)
    assert_grad_close(grad, ad(fn).grad(*args, **kwargs), rtol=1e-12, atol=1e-14)


def test_catalogue_covers_enough_programs():
    assert len({id(c.values[0]) for c in CASES}) >= 60
    assert len(CASES) >= 100


# ===========================================================================================
# The oracles themselves (they are what every other check relies on)


def test_central_fd_mirrors_structure_and_values():
    def f(x, ys, n, label):
        return x * ys[0] * n + math.sin(ys[1][0]) * ys[1][1]

    args = (1.5, [2.0, (0.3, 4.0)], 3, "lbl")
    g = central_fd(f, args, (0, 1, 2, 3))
    expected = (6.0, [4.5, (math.cos(0.3) * 4.0, math.sin(0.3))], None, None)
    assert_grad_close(g, expected, rtol=1e-8, atol=1e-9)
    assert central_fd(f, args, 2) is None
    with pytest.raises(AssertionError):
        assert_grad_close((1.0, [2.0]), (1.0, (2.0,)))
    with pytest.raises(AssertionError):
        assert_grad_close((1.0, 3.0), (1.0, 3))
    with pytest.raises(AssertionError):
        assert_grad_close([1.0, 2.0 + 1e-3], [1.0, 2.0])


# ===========================================================================================
# The paper's Figure 1 program


def fig1_plain(x, y):
    z = x + y
    return x * z


fig1 = astad.reverse_diff(fig1_plain)
fig1_primitive = primitive(fig1_plain)


@pytest.mark.parametrize("x, y", [(3.0, 4.0), (-1.25, 0.5), (0.0, 2.0)])
def test_figure1(x, y):
    assert fig1(x, y) == x * (x + y)
    assert fig1.grad(x, y) == (2 * x + y, x)
    value, grad = fig1.value_and_grad(x, y)
    assert value == x * (x + y)
    assert grad == (2 * x + y, x)
    value, pullback = fig1.vjp(x, y)
    assert pullback(1.0) == (2 * x + y, x)
    assert pullback.tape_length == 2          # two statements, one operation each
    value, pullback = fig1_primitive.vjp(x, y)
    assert value == x * (x + y)
    assert pullback(1.0) == (2 * x + y, x)
    assert pullback.tape_length == 2


# ===========================================================================================
# Exact tape lengths


def tl_two_ops(x, y):
    return x * y + x


def tl_math(x, y):
    return math.sin(x) * math.cos(y)


def tl_for_loop(x, n):
    s = x
    for _i in range(n):
        s = s * x
    return s


def tl_while_int_counter(x, n):
    i = 0
    k = 0
    while i < n:
        k = k + i * 2 - 1
        x = x * 1.01
        i += 1
    return x


def tl_constant_floats(x):
    c = 2.0 * 3.0 + 0.5
    k = 5 * 4 + 1
    return x * c + k


def tl_compare(x, y):
    if x < y and not (x == y) and x >= -5.0:
        r = x * y
    else:
        r = x + y
    return r


def tl_unary_and_pow(x):
    return -(x ** 2)


def tl_loop_continue(x):
    s = x
    for i in range(10):
        if i % 3 == 0:
            continue
        s = s + x
    return s


@pytest.mark.parametrize("fn, args, count", [
    pytest.param(tl_two_ops, (1.5, 2.0), 2, id="x*y+x"),
    pytest.param(tl_math, (1.5, 2.0), 3, id="sin*cos"),
    pytest.param(tl_for_loop, (1.01, 7), 7, id="for-7"),
    pytest.param(tl_for_loop, (1.01, 0), 0, id="for-0"),
    pytest.param(tl_while_int_counter, (1.5, 9), 9, id="while-int-counter-9"),
    pytest.param(tl_constant_floats, (1.5,), 2, id="constant-floats"),
    pytest.param(tl_compare, (1.0, 2.0), 1, id="compare-then"),
    pytest.param(tl_compare, (3.0, 2.0), 1, id="compare-else"),
    pytest.param(tl_unary_and_pow, (1.5,), 2, id="neg-pow"),
    pytest.param(tl_loop_continue, (1.5,), 6, id="continue"),
])
def test_tape_length(fn, args, count):
    """Exactly one entry per executed primitive float operation; none for int-only
    arithmetic, comparisons, or operations on float constants."""
    f = primitive(fn)
    value, pullback = f.vjp(*args)
    assert pullback.tape_length == count
    assert value == fn(*args)
    # the default (possibly preaccumulated) tape is never longer and gives the same result
    value2, pullback2 = ad(fn).vjp(*args)
    assert value2 == value
    assert pullback2.tape_length <= count
    assert_grad_close(pullback2(1.0), pullback(1.0), rtol=1e-13, atol=1e-15)


@pytest.mark.skipif(not HAS_PREACCUMULATE, reason="astad has no preaccumulate option")
def test_preaccumulation_shortens_straight_line_tape():
    # x * y + x is one float expression: preaccumulated, it is one tape entry
    _, pullback = ad(tl_two_ops).vjp(1.5, 2.0)
    assert pullback.tape_length == 1
    assert pullback(1.0) == (3.0, 1.5)


# ===========================================================================================
# Doubling chain and fan-out


def doubling_plain(x):
    for _i in range(50):
        x = x + x
    return x


doubling = astad.reverse_diff(doubling_plain)


@pytest.mark.parametrize("decorate", [astad.reverse_diff, primitive], ids=["default", "primitive"])
def test_doubling_chain_is_exact(decorate):
    f = decorate(doubling_plain)
    value, pullback = f.vjp(0.75)
    assert value == 0.75 * 2.0 ** 50
    assert pullback(1.0) == 2.0 ** 50
    assert f.grad(0.75) == 2.0 ** 50
    assert pullback.tape_length == 50


def fanout_plain(x):
    for _level in range(12):
        y = math.sin(x) + math.cos(x)
        y = y + math.tanh(x) + x * 0.25
        y = y + math.sin(x * 0.5) + math.cos(x * 0.5)
        y = y + x * x * 0.01
        x = y * 0.25
    return x


fanout = astad.reverse_diff(fanout_plain)
fanout_primitive = primitive(fanout_plain)


def fanout_hand(x):
    """Forward accumulation of d fanout / dx (each level uses x eight times)."""
    d = 1.0
    for _level in range(12):
        dy = (math.cos(x) - math.sin(x) + (1 - math.tanh(x) ** 2) + 0.25
              + 0.5 * math.cos(x * 0.5) - 0.5 * math.sin(x * 0.5) + 0.02 * x)
        d *= dy * 0.25
        y = math.sin(x) + math.cos(x)
        y = y + math.tanh(x) + x * 0.25
        y = y + math.sin(x * 0.5) + math.cos(x * 0.5)
        y = y + x * x * 0.01
        x = y * 0.25
    return d


@pytest.mark.parametrize("x", [0.3, -1.2])
def test_fanout(x):
    value, pullback = fanout_primitive.vjp(x)
    assert value == fanout_plain(x)
    assert_grad_close(pullback(1.0), fanout_hand(x), rtol=1e-11, atol=1e-14)
    # 17 primitive float operations per level: sin cos + | tanh + *0.25 + |
    # *0.5 sin + *0.5 cos + | * *0.01 + | *0.25
    assert pullback.tape_length == 17 * 12
    # default mode: same value and gradient, at most one entry per statement (5 a level)
    value, pullback = fanout.vjp(x)
    assert value == fanout_plain(x)
    assert_grad_close(pullback(1.0), fanout_hand(x), rtol=1e-11, atol=1e-14)
    assert pullback.tape_length <= 17 * 12
    assert_grad_close(fanout.grad(x), central_fd(fanout, (x,), 0), rtol=1e-6, atol=1e-9)


# ===========================================================================================
# value_and_grad value, vjp with other cotangents, pullback reuse


def vjp_prog_plain(x, ys, n):
    s = 0.0
    for y in ys:
        s = s + math.sin(x * y)
    return s * n


vjp_prog = astad.reverse_diff(vjp_prog_plain)
vjp_prog_primitive = primitive(vjp_prog_plain)


def vjp_prog_hand(x, ys, n):
    return (n * sum(y * math.cos(x * y) for y in ys),
            [n * x * math.cos(x * y) for y in ys], None)


def _scale_grad(g, c):
    if isinstance(g, float):
        return g * c
    if isinstance(g, list):
        return [_scale_grad(v, c) for v in g]
    if isinstance(g, tuple):
        return tuple(_scale_grad(v, c) for v in g)
    return g


@pytest.mark.parametrize("cotangent", [2.5, -0.75, 0.0, 1.0])
def test_vjp_cotangent_and_reuse(cotangent):
    args = (0.7, [0.5, -1.25, 2.0], 3)
    value, pullback = vjp_prog.vjp(*args)
    assert value == vjp_prog(*args)
    first = pullback(cotangent)
    second = pullback(cotangent)
    assert first == second
    expected = _scale_grad(vjp_prog_hand(*args), cotangent)
    assert_grad_close(first, expected, rtol=1e-12, atol=1e-12)
    # a different cotangent after these calls is still exact (pullback is reusable)
    assert_grad_close(pullback(1.0), vjp_prog_hand(*args), rtol=1e-12, atol=1e-12)
    _, primitive_pullback = vjp_prog_primitive.vjp(*args)
    assert primitive_pullback.tape_length == 3 * 3 + 1  # per y: x*y, sin, s + _; then s * n
    assert_grad_close(primitive_pullback(cotangent), expected, rtol=1e-12, atol=1e-12)
    # no cotangent leaks into later value_and_grad calls
    v2, g2 = vjp_prog.value_and_grad(*args)
    assert v2 == value
    assert_grad_close(g2, vjp_prog_hand(*args), rtol=1e-12, atol=1e-12)


def test_gradient_structure_types():
    g = vjp_prog.grad(0.7, (0.5, -1.25), 2)
    assert type(g) is tuple and len(g) == 3
    assert type(g[1]) is tuple and all(type(v) is float for v in g[1])
    assert g[2] is None  # (an int)
    g = vjp_prog.grad(0.7, [0.5, -1.25], 2)
    assert type(g[1]) is list
    assert type(g[0]) is float


# ===========================================================================================
# Deep recursion


@astad.reverse_diff
def deep_chain(x, n):
    return x if n == 0 else deep_chain(x * 1.0001, n - 1) + 0.0


def test_recursion_3000_deep():
    n = 3000
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, n + 200))
    try:
        value, grad = deep_chain.value_and_grad(0.5, n)
        _, pullback = deep_chain.vjp(0.5, n)
        tape_length = pullback.tape_length
        g2 = pullback(2.0)
    finally:
        sys.setrecursionlimit(old)
    factor = 1.0001 ** n
    assert value == pytest.approx(0.5 * factor, rel=1e-10)
    assert_grad_close(grad, (factor, None), rtol=1e-10, atol=0.0)
    assert_grad_close(g2, (2.0 * factor, None), rtol=1e-10, atol=0.0)
    assert tape_length == 2 * n  # one multiplication and one "+ 0.0" per level


# ===========================================================================================
# Gradients computed inside a differentiated function (inactive arguments)


@astad.reverse_diff
def inner(a, b):
    return a * a * b


@astad.reverse_diff
def outer(x, n):
    ga, gb = inner.grad(float(n), 3.0)   # (2ab, a^2) at a = n, b = 3: constants here
    return x * ga + gb * x * x


@astad.reverse_diff
def outer_vg(x):
    v, g = inner.value_and_grad(2.0, 0.5)  # v = 2.0, g = (2.0, 4.0)
    return v * x + g[0] * g[1] * math.sin(x)


def test_grad_inside_differentiated_function():
    # at n = 2: ga = 12, gb = 4, outer = 12x + 4x^2
    assert outer(1.5, 2) == 12.0 * 1.5 + 4.0 * 1.5 * 1.5
    value, grad = outer.value_and_grad(1.5, 2)
    assert value == outer(1.5, 2)
    assert_grad_close(grad, (12.0 + 8.0 * 1.5, None), rtol=1e-12, atol=1e-12)
    value, grad = outer_vg.value_and_grad(0.4)
    assert value == outer_vg(0.4)
    assert_grad_close(grad, 2.0 + 8.0 * math.cos(0.4), rtol=1e-12, atol=1e-12)


# ===========================================================================================
# Threads


@astad.reverse_diff
def threaded_prog(x, cs):
    acc = 0.0
    for c in cs:
        acc = acc * x + c
    return math.sin(acc) + acc * x


def threaded_hand(x, cs):
    acc, dacc = 0.0, 0.0
    for c in cs:
        dacc = dacc * x + acc
        acc = acc * x + c
    # f = sin(acc) + acc x
    dx = math.cos(acc) * dacc + dacc * x + acc
    dcs = []
    n = len(cs)
    for k in range(n):
        dacc_dc = x ** (n - 1 - k)
        dcs.append((math.cos(acc) + x) * dacc_dc)
    return (dx, dcs)


def test_threads_compute_correct_gradients_concurrently():
    n_threads = 8
    barrier = threading.Barrier(n_threads)
    cs = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5]

    def work(t):
        barrier.wait(timeout=30)
        results = []
        for k in range(40):
            x = -0.9 + 0.05 * t + 0.01 * k
            results.append((x, threaded_prog.grad(x, cs)))
        return t, results

    with concurrent.futures.ThreadPoolExecutor(max_workers=n_threads) as pool:
        outcomes = list(pool.map(work, range(n_threads)))
    assert sorted(t for t, _ in outcomes) == list(range(n_threads))
    for _, results in outcomes:
        assert len(results) == 40
        for x, grad in results:
            assert_grad_close(grad, threaded_hand(x, cs), rtol=1e-11, atol=1e-12)


# ===========================================================================================
# Generated source


def test_source_is_deterministic_python():
    a = astad.reverse_diff(p_aug_basic).source
    b = astad.reverse_diff(p_aug_basic).source
    assert isinstance(a, str) and a.strip()
    assert a == b
    compile(a, "<astad source>", "exec")
    assert fig1.source == fig1.source
