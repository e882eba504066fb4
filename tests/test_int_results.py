"""Issue 12, class 9: integers stay integers inside differentiated code. ``sum`` and
``math.prod`` (and ``math.fsum``, ``max``, ``min``, ``abs``, ``divmod``, ``round``, ``**``)
of ints give what Python gives, exactly (big ints keep every digit), so an index made
from them works and ``sum([])`` is ``0``; on every path, and inside nested derivatives.
"""
from __future__ import annotations

import math

import pytest

import astad
from paths import check_every_path

BIG = 2 ** 60


def index_from_sum(x, ns):
    return x * [1.0, 2.0, 3.0, 4.0][sum(ns)]


def index_from_prod(x, ns):
    return x * [1.0, 2.0, 3.0][math.prod(ns)]


def big_int_arithmetic(x, ns):
    return x * (sum(ns) - BIG) + x * (math.prod(ns) - BIG)


def empty_sum_is_the_int_zero(x, ns):
    total = sum([])
    product = math.prod([])
    return x * 2.0 if type(total) is int and type(product) is int and total == 0 else x


def ints_stay_ints_through_builtins(x, ns):
    k = max(ns) + min(ns) + abs(-ns[0]) + divmod(ns[1], 2)[0] + round(2.5) + ns[0] ** 2
    return x * k if type(k) is int else 0.0


def mixed_sum_is_a_float(x, ns):
    s = sum([x, ns[0]])  # a float and an int: a float, as in Python
    return s * s


@pytest.mark.parametrize("f, value, derivative", [
    (index_from_sum, 2.0 * 4.0, 4.0),
    (index_from_prod, 2.0 * 3.0, 3.0),
    (big_int_arithmetic, 2.0 * 1 + 2.0 * 0, 1.0),
    (empty_sum_is_the_int_zero, 4.0, 2.0),
    (ints_stay_ints_through_builtins, 2.0 * (2 + 1 + 1 + 1 + 2 + 1), 8.0),
    (mixed_sum_is_a_float, 9.0, 6.0),
], ids=lambda v: getattr(v, "__name__", ""))
def test_ints_stay_ints_on_every_path(f, value, derivative):
    ns = [BIG, 1] if f is big_int_arithmetic else [1, 2]
    check_every_path(f, (2.0, ns), value, (derivative, ns), forward=False, nested=False)
    # forward mode and a derivative taken inside another differentiation
    assert astad.jvp(f, (2.0, ns), (1.0, None)) == (value, derivative)
    inner = astad.grad(f, argnums=0)
    assert astad.jvp(lambda x: inner(x, ns), (2.0,), (0.0,))[0] == derivative
    assert astad.hessian(f, argnums=0)(2.0, ns) == (2.0 if f is mixed_sum_is_a_float else 0.0)


def test_ints_reached_through_lists_of_the_arguments_stay_ints():
    def f(x, ns):
        assert all(type(n) is int for n in ns)
        return x * sum(ns)
    assert astad.reverse_diff(f).grad(2.0, [1, 2]) == (3.0, [1, 2])
