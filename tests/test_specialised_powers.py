"""Powers whose exponent is not a number written in the source (``x ** i`` with a loop's
index, ``x ** n`` with an int argument, ``x ** p`` with p differentiated, ``2.0 ** x``,
``pow(x, y)``, ``math.pow(x, y)``) on the code written for floats, not the ordinary
code: checked against the ordinary code (every edge where the power's derivative is
special: a zero base, a zero exponent, a negative base, a complex result), central
differences, forward mode and second derivatives by hand."""
import math

import numpy as np
import pytest

import astad
from astad.compile import calls as codegen


def polynomial(x, c):
    s = 0.0
    for i in range(len(c)):
        s = s + c[i] * x ** i
    return s


def polynomial_generator(x, c):
    return sum(ci * x ** (i + 1) for i, ci in enumerate(c))


def power(x, p):
    return x ** p


def int_power(x, n):
    return x ** n + x


def exponential(x):
    return 2.0 ** x + 1.5 ** (x * x)


def builtin_power(x, y):
    return pow(x, y) * 0.5 + x


def math_power(x, y):
    return math.pow(x, y) - y


CASES = [
    (polynomial, (0.7, [0.5, -1.0, 2.0, 0.25])),
    (polynomial, (-1.3, [0.5, -1.0, 2.0, 0.25])),
    (polynomial_generator, (0.7, [0.5, -1.0, 2.0])),
    (power, (1.3, 2.5)),
    (power, (0.4, -1.5)),
    (int_power, (-1.3, 3)),
    (int_power, (0.6, 0)),
    (exponential, (0.8,)),
    (builtin_power, (2.1, 0.3)),
    (math_power, (2.1, -0.3)),
]
IDS = [f"{fn.__name__}-{k}" for k, (fn, _) in enumerate(CASES)]


def _general(fn, args):
    """The ordinary (taped) code's value and gradient, or the exception it raises."""
    diff = astad.reverse_diff(fn).value_and_grad.__self__
    try:
        return diff._value_and_grad_taped(args, {})
    except Exception as error:  # noqa: BLE001 (compared with the fast path's)
        return type(error)


def _fast(fn, args):
    try:
        return astad.reverse_diff(fn).value_and_grad(*args)
    except Exception as error:  # noqa: BLE001
        return type(error)


def _same(a, b):
    if isinstance(a, type) or isinstance(b, type):
        return a is b
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    return a == pytest.approx(b, rel=1e-13, abs=1e-300, nan_ok=True)


@pytest.mark.parametrize("fn, args", CASES, ids=IDS)
def test_the_code_for_floats_serves_powers(fn, args):
    entry = codegen.build(fn)
    assert entry.tapeless is not None and entry.tapeless(*args) is not None
    value, grads = astad.reverse_diff(fn).value_and_grad(*args)
    assert _same((value, grads), _general(fn, args))
    grads = grads if len(args) > 1 else (grads,)
    h = 1e-6
    for k, a in enumerate(args):
        if type(a) is not float:
            continue
        up, down = list(args), list(args)
        up[k], down[k] = a + h, a - h
        assert grads[k] == pytest.approx((fn(*up) - fn(*down)) / (2 * h), rel=1e-6)


@pytest.mark.parametrize("x", [0.0, -0.0, 1.5, -1.5])
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, -1.0, -2.0, 2.5])
def test_every_edge_of_a_power_is_the_ordinary_codes(x, p):
    """x ** p at a zero base, a zero or negative exponent, a negative base (an integer
    exponent: real, its p-derivative NaN; otherwise a complex number: the error): the
    code for floats answers what the ordinary code does, or leaves it to it."""
    assert _same(_fast(power, (x, p)), _general(power, (x, p)))
    assert _same(_fast(math_power, (x, p)), _general(math_power, (x, p)))
    if p.is_integer():
        args = (x, int(p))
        assert _same(_fast(int_power, args), _general(int_power, args))


def test_second_derivatives_by_hand():
    x, p = 1.3, 2.5
    want = np.array([[p * (p - 1) * x ** (p - 2), x ** (p - 1) * (1 + p * math.log(x))],
                     [x ** (p - 1) * (1 + p * math.log(x)), x ** p * math.log(x) ** 2]])
    got = astad.hessian(power, argnums=(0, 1))(x, p)
    assert np.allclose(np.array(got, dtype=float), want, rtol=1e-12)
    assert astad.jvp(power, (x, p), (1.0, 0.5)) == pytest.approx(
        (x ** p, p * x ** (p - 1) + 0.5 * x ** p * math.log(x)), rel=1e-13)
    c = [0.5, -1.0, 2.0, 0.25]  # polynomial'' = 2 c2 + 6 c3 x
    assert astad.grad(astad.grad(polynomial))(0.7, c) == pytest.approx(
        2 * c[2] + 6 * c[3] * 0.7, rel=1e-12)
