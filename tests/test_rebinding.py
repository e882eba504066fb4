"""Issue 12, class 8: a call resolved when the function was transformed sees a global
rebound during the call, as Python reads the name where it calls it: a helper's
``global act; act = math.sin``, ``globals()[...] = ...``, inside a recursion, through a
module's attribute, in a fused expression and unfused, in every mode. Expected values
are the original function's and hand-derived derivatives.
"""
from __future__ import annotations

import math

import pytest

import astad

act = math.tanh


def use_sin():
    global act
    act = math.sin


def rebinds_then_calls(x):
    use_sin()
    return act(x)


def rebinds_then_calls_inside_an_expression(x):
    use_sin()
    return act(x) * 2.0 + x  # a fused rule: its callee is checked where it is read


def rebinds_through_globals(x):
    globals()["act"] = math.sin
    return act(x)


def triple(y):
    return y * 3.0


def quintuple(y):
    return y * 5.0


helper = triple


def use_quintuple():
    global helper
    helper = quintuple


def rebinds_a_python_helper(x):
    use_quintuple()
    return helper(x) + helper(x * x)


def recurse(x, n):
    if n == 0:
        return x
    if n == 1:
        globals()["recurse"] = lambda y, m: y * 10.0
    return recurse(x, n - 1) * 2.0


ORIGINAL_RECURSE = recurse


@pytest.fixture(autouse=True)
def restore():
    yield
    globals().update(act=math.tanh, helper=triple, recurse=ORIGINAL_RECURSE)


@pytest.mark.parametrize("f, value, derivative", [
    (rebinds_then_calls, math.sin(0.5), math.cos(0.5)),
    (rebinds_then_calls_inside_an_expression, 2 * math.sin(0.5) + 0.5,
     2 * math.cos(0.5) + 1.0),
    (rebinds_through_globals, math.sin(0.5), math.cos(0.5)),
    (rebinds_a_python_helper, 5 * 0.5 + 5 * 0.25, 5.0 + 10 * 0.5),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_global_rebound_during_the_call_is_seen(f, value, derivative):
    runs = {
        "grad": lambda: astad.reverse_diff(f).value_and_grad(0.5),
        "vjp": lambda: (lambda v, p: (v, p(1.0)))(*astad.reverse_diff(f).vjp(0.5)),
        "unfused": lambda: astad.reverse_diff(f, preaccumulate=False).value_and_grad(0.5),
        "forward": lambda: astad.jvp(f, (0.5,), (1.0,)),
        "nested": lambda: (value, astad.jvp(astad.grad(f), (0.5,), (0.0,))[0]),
    }
    for path, run in runs.items():
        restore_globals()  # the binding the code was built for: rebound during the call
        got_value, got_derivative = run()
        assert got_value == pytest.approx(value, rel=1e-15), path
        assert got_derivative == pytest.approx(derivative, rel=1e-15), path
    restore_globals()
    second = 10.0 if f is rebinds_a_python_helper else -math.sin(0.5) * (
        2.0 if f is rebinds_then_calls_inside_an_expression else 1.0)
    assert astad.hessian(f)(0.5) == pytest.approx(second, rel=1e-15)


def restore_globals():
    globals().update(act=math.tanh, helper=triple, recurse=ORIGINAL_RECURSE)


def test_a_recursion_sees_its_own_name_rebound():
    # recurse(x, 2) = 2 * recurse(x, 1) = 2 * (2 * new(x, 0)) = 4 * 10 x
    value = ORIGINAL_RECURSE(0.5, 2)
    restore_globals()
    for run in (lambda: astad.reverse_diff(ORIGINAL_RECURSE).value_and_grad(0.5, 2),
                lambda: astad.reverse_diff(ORIGINAL_RECURSE, preaccumulate=False)
                .value_and_grad(0.5, 2)):
        restore_globals()
        assert run() == (value, (40.0, None))
    restore_globals()
    assert astad.jvp(ORIGINAL_RECURSE, (0.5, 2), (1.0, None)) == (value, 40.0)


def test_a_module_attribute_replaced_between_calls_rebuilds_the_code(monkeypatch):
    def f(x):
        return math.tanh(x) * 2.0  # specialised straight-line code and a fused rule
    g = astad.reverse_diff(f)
    assert g.grad(0.5) == pytest.approx(2 * (1 - math.tanh(0.5) ** 2))
    monkeypatch.setattr(math, "tanh", math.sin)
    assert g.grad(0.5) == pytest.approx(2 * math.cos(0.5))
    assert g.vjp(0.5)[1](1.0) == pytest.approx(2 * math.cos(0.5))
    assert astad.jvp(f, (0.5,), (1.0,))[1] == pytest.approx(2 * math.cos(0.5))


@pytest.mark.parametrize("size", [3, 40_000])  # the compiled element-wise path, numpy's
def test_a_rule_uses_the_functions_it_was_registered_with(size, monkeypatch):
    """np.cos's partial is -sin: the sin numpy had when the rule was registered, not
    np.sin looked up when the rule runs (a program rebinding np.sin never touched np.cos,
    and its derivative must not change)."""
    import numpy as np

    def f(x):
        return np.sum(np.cos(x))

    x = np.linspace(0.1, 1.0, size)
    sin = np.sin
    monkeypatch.setattr(np, "sin", lambda v, *args, **kwargs: sin(v) * 0.0 + 7.0)
    expected = -sin(x)
    np.testing.assert_allclose(astad.grad(f)(x), expected, rtol=1e-14)
    assert astad.jvp(f, (x,), (np.ones(size),))[1] == pytest.approx(np.sum(expected))
    np.testing.assert_allclose(astad.jvp(astad.grad(f), (x,), (np.ones(size),))[1],
                               -np.cos(x), rtol=1e-14)
