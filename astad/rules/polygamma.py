"""The polygamma functions, for the derivatives of ``math.gamma`` (and of themselves).

``digamma(x) = polygamma(0, x)`` is d log gamma / dx, so d gamma / dx = gamma(x)
digamma(x); ``polygamma(n, x)``'s derivative is ``polygamma(n + 1, x)``, so derivatives
of any order exist (``general``: the same functions on differentiated values, through
the general rules). Pure Python, double precision: the recurrence psi_n(x) = psi_n(x + 1)
- (-1)^n n! / x^(n+1) moves the argument above 20, where the asymptotic series (its
Bernoulli terms up to B_20) is accurate to rounding; below 1/2, digamma's reflection
psi(1 - x) - psi(x) = pi cot(pi x).
"""
from __future__ import annotations

import math

# B_2k / (2k)! for k = 1..10
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330]
_SERIES = [b / math.factorial(2 * k) for k, b in enumerate(_BERNOULLI, 1)]
_LARGE = 20.0


def polygamma(n: int, x: float) -> float:
    """The n-th derivative of digamma at the float ``x`` (nan at a pole)."""
    if x <= 0.0 and x == math.floor(x):
        return math.nan  # a pole of gamma
    if n == 0 and x < 0.5:
        return polygamma(0, 1.0 - x) - math.pi / math.tan(math.pi * x)
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    factorial = math.factorial(n)
    total = 0.0
    while x < _LARGE:
        # psi_n(x) = psi_n(x + 1) - (-1)^n n! / x^(n+1) = psi_n(x + 1) + sign n! / x^(n+1)
        total += sign * factorial * _inverse_power(x, n + 1)
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    if n == 0:
        series = 0.0
        for k in range(len(_SERIES), 0, -1):  # sum B_2k / (2k x^2k)
            series = series * inv2 + _BERNOULLI[k - 1] / (2 * k)
        return total + math.log(x) - 0.5 * inv - series * inv2
    # psi_n(x) ~ sign [(n-1)!/x^n + n!/(2 x^(n+1)) + sum_k B_2k (2k+n-1)!/(2k)! / x^(2k+n)]
    series = 0.0
    for k in range(len(_SERIES), 0, -1):
        series = series * inv2 + _SERIES[k - 1] * math.factorial(2 * k + n - 1)
    head = math.factorial(n - 1) * inv ** n + factorial * 0.5 * inv ** (n + 1)
    return total + sign * (head + series * inv2 * inv ** n)


def _inverse_power(x: float, m: int) -> float:
    """x^-m, infinite (of its sign) where it overflows rather than an OverflowError."""
    try:
        return (1.0 / x) ** m
    except OverflowError:
        return math.copysign(math.inf, x) if m % 2 else math.inf


def digamma(x: float) -> float:
    return polygamma(0, x)


def general(apply, rule_class, is_dual):
    """``digamma`` for the general rules' namespace: on a differentiated value, the rule
    whose partial is the next polygamma function (built on first use, for each order)."""
    rules: dict = {}

    def polygamma_general(n, x):
        if not is_dual(x):
            return polygamma(n, x)
        rule = rules.get(n)
        if rule is None:
            rule = rules[n] = rule_class(
                f"polygamma{n}", lambda y: polygamma_general(n, y),
                (lambda y, r: polygamma_general(n + 1, y),))
        return apply(rule, (x,))

    return lambda x: polygamma_general(0, x)
