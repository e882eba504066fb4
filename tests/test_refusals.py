"""Issue 12, class 6: an astad refusal inside the differentiated function ends the gradient
call with that refusal, whatever the user's code catches. The function's fallback would
compute something else than the original (which took the other branch), so catching it
must not let the call return a value.

Every path: ``.grad`` (tape), ``.vjp``, ``preaccumulate=False``, forward mode, and nested
derivatives (a refusal in an inner call ends the outer one too).
"""
from __future__ import annotations

import contextlib
import math
import struct

import numpy as np
import pytest

import astad


def opaque(x):  # a C function with no derivative: refused when a dual reaches it
    return struct.unpack("d", struct.pack("d", x))[0]


def except_exception(x):
    try:
        return opaque(x) * 2.0
    except Exception:
        return x * x  # the fallback the original never takes


def bare_except(x):
    try:
        y = opaque(x)
    except:  # noqa: E722
        y = x * x
    return y


def except_the_astad_error(x):
    try:
        return opaque(x)
    except astad.NotDifferentiableError:
        return x * x


def suppressed(x):
    y = x * x
    with contextlib.suppress(Exception):
        y = opaque(x)
    return y


def helper_catches(x):
    return guarded_helper(x) + 1.0


def guarded_helper(x):
    try:
        return math.ulp(x) * x
    except Exception:
        return x * x


def float_method_caught(x):
    try:
        return float.fromhex(x.hex())
    except Exception:
        return x * x


def caught_and_replaced(x):
    try:
        return opaque(x)
    except Exception as exc:
        raise ValueError("my fallback failed") from exc


PLAIN_ARRAY = np.zeros(2)


def array_refusal_caught(x):
    try:
        PLAIN_ARRAY[0] = x  # refused: a dual into a plain array made outside
    except Exception:
        pass
    return np.sum(PLAIN_ARRAY) + x


def array_made_inside(x):
    y = np.zeros(2)
    y[0] = x  # (an array made inside may be written: the write is differentiated)
    return np.sum(y) + x


FUNCTIONS = [except_exception, bare_except, except_the_astad_error, suppressed,
             helper_catches, float_method_caught, caught_and_replaced]


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_a_caught_refusal_still_ends_the_call_on_every_path(f):
    runs = [lambda: astad.reverse_diff(f).grad(3.0),
            lambda: astad.reverse_diff(f).vjp(3.0),
            lambda: astad.reverse_diff(f, preaccumulate=False).value_and_grad(3.0),
            lambda: astad.grad(f)(3.0),
            lambda: astad.jvp(f, (3.0,), (1.0,)),
            lambda: astad.hessian(f)(3.0)]
    for run in runs:
        with pytest.raises(astad.NotDifferentiableError) as info:
            run()
        assert "test_refusals.py" in str(info.value)  # where the refusal was made


def test_a_refusal_caught_in_array_code():
    with pytest.raises(astad.NotDifferentiableError, match="plain array"):
        astad.reverse_diff(array_refusal_caught).grad(3.0)
    with pytest.raises(astad.NotDifferentiableError, match="plain array"):
        astad.jvp(array_refusal_caught, (3.0,), (1.0,))
    assert not PLAIN_ARRAY.any()
    assert astad.reverse_diff(array_made_inside).value_and_grad(3.0) == (6.0, 2.0)


def test_the_original_function_is_unaffected_and_the_next_call_works():
    assert except_exception(3.0) == opaque(3.0) * 2.0
    with pytest.raises(astad.NotDifferentiableError):
        astad.reverse_diff(except_exception).grad(3.0)
    assert astad.reverse_diff(lambda x: x * x).grad(3.0) == 6.0  # nothing left pending


def test_a_refusal_in_an_inner_call_ends_the_outer_call_though_caught_there():
    def outer(x):
        try:
            inner = astad.grad(except_exception)(x)
        except astad.NotDifferentiableError:
            inner = 0.0
        return x * inner + x
    with pytest.raises(astad.NotDifferentiableError):
        astad.grad(outer)(3.0)


def test_a_stale_dual_caught_still_ends_the_call():
    kept = []

    def keeps(x):
        kept.append(iter([x]))  # (an iterator: astad cannot clean what it holds)
        return x * 2.0

    def uses(x):
        try:
            return next(kept[0]) * x
        except Exception:
            return x
    astad.reverse_diff(keeps).grad(1.0)
    with pytest.raises(astad.StaleDualError):
        astad.reverse_diff(uses).grad(2.0)


def test_errors_that_are_not_refusals_are_the_users_to_catch():
    def f(x):
        try:
            return math.sqrt(x - 10.0)  # Python's own ValueError: the user's business
        except ValueError:
            return x * x
    assert astad.reverse_diff(f).value_and_grad(3.0) == (9.0, 6.0)
