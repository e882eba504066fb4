"""Robustness: bad input, NaN and infinity, exceptions in user code, cotangents of the
wrong shape, non-smooth points, threads, gradients inside differentiated code, repeated
calls, and recursion 10^4 deep.

Every documented choice tested here is listed in docs/supported.md ("Non-smooth points",
"NaN and infinity"); values are hand-derived, from finite differences or from the
forward-mode oracle (tests/forward_mode.py).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import operator
import os
import threading
import traceback
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import astad
from astad.runtime import duals
from forward_mode import Fwd, fmath
from oracles import assert_grad_close, central_fd
from test_structured import run_deep

BOTH = pytest.mark.parametrize("preaccumulate", [True, False], ids=["fused", "unfused"])


def ad(fn, preaccumulate=True, **options):
    return astad.reverse_diff(fn, preaccumulate=preaccumulate, **options)


def line_of(fn, text: str) -> int:
    """The line number in this file of the line of ``fn`` that contains ``text``."""
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return next(first + k for k, line in enumerate(lines) if text in line)


# ---------------------------------------------------------------------------------------
# Bad input

def scale(x):
    return x * 2.0


@pytest.mark.parametrize("value", ["abc", None, object(), Fraction(1, 2), Decimal("1.5"),
                                   True, [], ("a", 1)],
                         ids=["str", "None", "object", "Fraction", "Decimal", "bool",
                              "empty list", "tuple without float"])
def test_no_float_to_differentiate_is_an_input_error_showing_the_value(value):
    with pytest.raises(astad.InputError) as info:
        ad(scale).grad(value)
    message = str(info.value)
    assert "scale: no argument chosen for differentiation holds a float" in message
    assert repr(value)[:20] in message


def test_an_int_is_refused_with_a_hint_to_pass_a_float():
    with pytest.raises(astad.InputError, match=r"pass 3\.0 instead of 3"):
        ad(scale).grad(3)


def test_complex_numbers_are_inputs_at_every_place():
    """Complex numbers in lists and dicts are differentiated like floats (JAX's
    convention: df/dx - i df/dy), each gradient at its place."""
    def total(z):
        return abs(z[0]) ** 2 + (z[1] * z[1]).real if isinstance(z, list) else \
            abs(z["k"]) ** 2 + z["m"]
    assert ad(total).grad([1 + 2j, 2j]) == [2 - 4j, 4j]  # (Re z^2 = x^2 - y^2)
    assert ad(total).grad({"k": 1j, "m": 1.0}) == {"k": -2j, "m": 1.0}


def mixes_complex(x, c):
    return np.maximum(x * c, 0.5)


def test_a_complex_value_meeting_a_rule_for_real_values_is_refused_at_its_line():
    with pytest.raises(astad.NotDifferentiableError) as info:
        ad(mixes_complex, argnums=0).grad(np.ones(2), 2j)
    err = info.value
    assert "numpy.maximum of complex values" in str(err)
    assert (err.filename, err.lineno) == (__file__, line_of(mixes_complex, "np.maximum"))


def adds(x, y):
    z = x * 3.0
    return z + y


@pytest.mark.parametrize("bad", ["abc", None, object(), [1.0]],
                         ids=["str", "None", "object", "list"])
def test_a_non_number_where_a_float_is_expected_raises_pythons_own_error(bad):
    """The original function's TypeError, unchanged, raised from the user's line (the
    innermost frame outside astad: generated code keeps the user's file and lines)."""
    with pytest.raises(TypeError) as expected:
        adds(1.0, bad)
    with pytest.raises(TypeError) as info:
        ad(adds).grad(1.0, bad)
    assert str(info.value) == str(expected.value)
    assert innermost_user_frame(info.value) == (__file__, line_of(adds, "return z + y"),
                                                "return z + y")


PACKAGE = os.path.dirname(os.path.abspath(astad.__file__)) + os.sep


def innermost_user_frame(exc):
    """The innermost frame outside the astad package (wherever the checkout lives: a
    folder named astad, as git clone makes, holds the tests too)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not os.path.abspath(f.filename).startswith(PACKAGE) and
              f.filename != "<astad rule>"]
    return frames[-1].filename, frames[-1].lineno, frames[-1].line


# ---------------------------------------------------------------------------------------
# NaN and infinity: IEEE arithmetic on the primal and on the partials

def product(x, y):
    return x * y


def difference_with_itself(x):
    return x - x


def sign_branch(x):
    if x > 0.0:
        return x * 2.0
    return -x


class ThroughTheTape:
    """``.value_and_grad`` computed from ``.vjp``: always the tape, never the tape-free
    straight-line path that ``.grad`` may take for functions of floats."""

    def __init__(self, f):
        self.f = f

    def value_and_grad(self, *args):
        value, pullback = self.f.vjp(*args)
        return value, pullback(1.0)

    def grad(self, *args):
        return self.value_and_grad(*args)[1]


PATHS = pytest.mark.parametrize("path", [lambda f: f, ThroughTheTape],
                                ids=["grad", "vjp"])


@BOTH
@PATHS
def test_nan_and_infinity_propagate_as_ieee_arithmetic_says(preaccumulate, path):
    def ad(fn, preaccumulate):
        return path(astad.reverse_diff(fn, preaccumulate=preaccumulate))
    f = ad(product, preaccumulate)
    value, grad = f.value_and_grad(math.nan, 2.0)
    assert math.isnan(value)
    assert grad[0] == 2.0 and math.isnan(grad[1])    # d/dx = y, d/dy = x
    value, grad = f.value_and_grad(math.inf, 2.0)
    assert value == math.inf and grad == (2.0, math.inf)
    value, grad = f.value_and_grad(math.inf, 0.0)     # inf * 0 is nan; d/dx = 0
    assert math.isnan(value) and grad == (0.0, math.inf)
    value, grad = ad(difference_with_itself, preaccumulate).value_and_grad(math.inf)
    assert math.isnan(value) and grad == 0.0           # 1 - 1
    # a comparison with nan is False, as in Python: the else branch
    assert ad(sign_branch, preaccumulate).grad(math.nan) == -1.0


def test_a_nan_cotangent_propagates():
    _, pullback = ad(product).vjp(1.0, 2.0)
    gx, gy = pullback(math.nan)
    assert math.isnan(gx) and math.isnan(gy)


def exp_of(x):
    return math.exp(x) + 1.0


def sqrt_of(x):
    return math.sqrt(x) * 2.0


@pytest.mark.parametrize("fn, arg", [(exp_of, 1000.0), (sqrt_of, -1.0)])
def test_math_errors_are_pythons_own(fn, arg):
    with pytest.raises((OverflowError, ValueError)) as expected:
        fn(arg)
    with pytest.raises(type(expected.value)) as info:
        ad(fn).grad(arg)
    assert str(info.value) == str(expected.value)


# ---------------------------------------------------------------------------------------
# Exceptions in user code during the forward pass

MISSING_KEY = KeyError("no such key")


def fails_midway(x, log, fail):
    y = x * 2.0
    log.append(y)
    if fail:
        raise MISSING_KEY
    return y * y


def test_an_exception_in_user_code_propagates_unchanged_and_leaves_nothing_behind():
    f = ad(fails_midway, argnums=0)
    log: list = []
    with pytest.raises(KeyError) as info:
        f.grad(1.5, log, True)
    assert info.value is MISSING_KEY  # the very object the user's code raised
    assert innermost_user_frame(info.value)[:2] == (__file__,
                                                    line_of(fails_midway, "raise MISSING_KEY"))
    # the caller's list ends as the original leaves it: a plain float, no dual
    assert log == [3.0] and type(log[0]) is float
    assert not duals.running.stack  # no differentiation left running
    # the next call is correct: d/dx (2x)^2 = 8x
    assert f.value_and_grad(1.5, [], False) == (9.0, 12.0)


def inner_raises(x):
    if x > 1.0:
        raise ValueError(f"too big: {x}")
    return x * x


def catches(x):
    total = 0.0
    for k in range(3):
        try:
            total += inner_raises(x + k)
        except ValueError:
            total += 1.0
    # operator overloading (code astad did not transform) needs the right tape after
    return functools.reduce(operator.mul, [total, x], 1.0)


def test_an_exception_caught_inside_differentiated_code_leaves_the_gradient_correct():
    f = ad(catches)
    x = 0.25   # k = 0 runs, k = 1, 2 raise: total = x^2 + 2, result x^3 + 2x
    assert f.value_and_grad(x) == pytest.approx((x ** 3 + 2 * x, 3 * x * x + 2.0),
                                                rel=1e-15)


# ---------------------------------------------------------------------------------------
# Cotangents of the wrong shape: an InputError saying where

@dataclasses.dataclass
class Pair:
    left: float
    right: list


def structured(x):
    return {"a": [x, x * 2.0], "b": Pair(x, [x, 3.0])}


@pytest.mark.parametrize("cotangent, where", [
    ({"a": [1.0], "b": None}, "the cotangent at result['a'] should be a list of length 2"),
    ({"a": [1.0, 2.0]}, "result"),
    ({"a": [1.0, "x"], "b": None}, "the cotangent at result['a'][1] should be a float"),
    ({"a": None, "b": Pair(1.0, [1.0, 2.0, 3.0])}, "result['b'].right"),
    ({"a": None, "b": [1.0, 2.0]}, "result['b']"),
    (1.0, "result"),
])
def test_a_cotangent_of_the_wrong_shape_names_where(cotangent, where):
    _, pullback = ad(structured).vjp(2.0)
    with pytest.raises(astad.InputError) as info:
        pullback(cotangent)
    assert where in str(info.value)
    # and the pullback still works with a good cotangent
    assert pullback({"a": [1.0, 1.0], "b": Pair(1.0, [1.0, 0.0])}) == 1.0 + 2.0 + 1.0 + 1.0


# ---------------------------------------------------------------------------------------
# Non-smooth points: the documented choices (docs/supported.md)

def relu(x):
    return max(x, 0.0)


def relu_constant_first(x):
    return max(0.0, x)


def max2(x, y):
    return max(x, y)


def min2(x, y):
    return min(x, y)


def max_list(x, y, z):
    return max([x, y, z])


def absolute(x):
    return abs(x) * 3.0


def math_fabs(x):
    return math.fabs(x) * 3.0


def sqrt_plain(x):
    return math.sqrt(x)


def cbrt_plain(x):
    return math.cbrt(x)


def asin_plain(x):
    return math.asin(x)


def acos_plain(x):
    return math.acos(x)


def half_power(x):
    return x ** 0.5


def square(x):
    return x ** 2


def hypot_atan2(x, y):
    return math.hypot(x, y) + math.atan2(y, x)


def power_negative_base(x, y):
    return x ** y


def sqrt_times_zero(x):
    return math.sqrt(x) * 0.0


def scaled_sqrt(x, y):
    return y * math.sqrt(x) + 1.0


def sqrt_of_square(x):
    return math.sqrt(x * x)


NON_SMOOTH = [
    (absolute, (0.0,), 0.0),                  # abs has derivative 0 at 0
    (math_fabs, (0.0,), 0.0),
    (relu, (0.0,), 1.0),                      # max on a tie: Python returns the first
    (relu_constant_first, (0.0,), 0.0),
    (max2, (1.0, 1.0), (1.0, 0.0)),
    (min2, (1.0, 1.0), (1.0, 0.0)),
    (max_list, (2.0, 2.0, 2.0), (1.0, 0.0, 0.0)),
    (sqrt_plain, (0.0,), math.inf),           # vertical tangents: an infinite derivative
    (asin_plain, (1.0,), math.inf),
    (acos_plain, (1.0,), -math.inf),
    (half_power, (0.0,), math.inf),
    (square, (0.0,), 0.0),
    (hypot_atan2, (0.0, 0.0), (0.0, 0.0)),    # 0 at the origin
    (power_negative_base, (-2.0, 2.0), (-4.0, math.nan)),  # d/dy of x ** y, x < 0
    (sqrt_times_zero, (0.0,), 0.0),           # a zero cotangent is never propagated,
    (scaled_sqrt, (0.0, 0.0), (0.0, 0.0)),    # even through an infinite partial
    (scaled_sqrt, (0.0, 2.0), (math.inf, 0.0)),
    (sqrt_of_square, (0.0,), math.nan),       # inf * 0: write abs(x) instead
] + ([(cbrt_plain, (0.0,), math.inf)] if hasattr(math, "cbrt") else [])  # Python >= 3.11


@BOTH
@pytest.mark.parametrize("fn, args, expected", NON_SMOOTH,
                         ids=[f"{c[0].__name__}{c[1]}" for c in NON_SMOOTH])
def test_non_smooth_points_follow_the_documented_choice(fn, args, expected, preaccumulate):
    f = ad(fn, preaccumulate)
    # .grad (which may take the tape-free straight-line path) and the tape's pullback
    assert_grad_close(f.grad(*args), expected, rtol=0.0, atol=0.0)
    _, pullback = f.vjp(*args)
    assert_grad_close(pullback(1.0), expected, rtol=0.0, atol=0.0)


def test_the_forward_mode_oracle_makes_the_same_choices():
    """The oracle's conventions at abs and max agree with astad's (so the fuzzer could
    use them, although it rejects inputs near such points)."""
    assert abs(Fwd(0.0, 1.0)).t == 0.0
    assert max(Fwd(1.0, 1.0), Fwd(1.0, 0.0)).t == 1.0
    assert fmath.hypot(Fwd(0.0, 1.0), 0.0).t == 0.0


# ---------------------------------------------------------------------------------------
# Threads, reentrancy, repeated calls

@dataclasses.dataclass
class Model:
    w: float
    b: float


def loss(m, xs):
    total = 0.0
    for x in xs:
        err = math.tanh(m.w * x + m.b) - 0.5
        total += err * err
    return total / len(xs)


def chain(x, n):
    if n == 0:
        return x
    return math.sin(chain(x, n - 1)) + 0.1 * x


def reduce_product(xs):
    return functools.reduce(operator.mul, xs, 1.0)   # operator overloading on duals


def test_gradients_from_8_threads_at_once_are_all_correct():
    def helper(a, b):          # a new function object: transformed on first use, in
        return a * math.exp(-b * b)   # the threads, concurrently

    def uses_helper(x, y):
        return helper(x, y) + helper(y, x)

    jobs = [  # (function, its arguments in round k, argnums for finite differences)
        (ad(loss, argnums=0), lambda k: (Model(0.1 * k, -0.2), [0.5, 1.0 + k, -0.3]), 0),
        (ad(chain, argnums=0), lambda k: (0.1 + 0.05 * k, 20 + k), 0),
        (ad(reduce_product), lambda k: ([1.0 + 0.1 * k, 2.0, -0.5, 0.25 * k],), None),
        (ad(uses_helper), lambda k: (0.3 * k, 0.7 - 0.1 * k), (0, 1)),
    ]
    start = threading.Barrier(8)
    results: dict = {}
    errors: list = []

    def worker(t):
        try:
            start.wait()
            for round_ in range(25):
                for j, (f, make, _) in enumerate(jobs):
                    k = (t + round_) % 8
                    results.setdefault((t, j, k), []).append(f.value_and_grad(*make(k)))
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert not duals.running.stack  # no differentiation left running
    for (_thread, j, k), got in results.items():
        f, make, argnums = jobs[j]
        serial = f.value_and_grad(*make(k))
        for value_and_grad in got:       # every thread's every call: bit-identical
            assert value_and_grad == serial
        expected = central_fd(f, make(k), argnums)
        assert_grad_close(serial[1], expected, rtol=1e-6, atol=1e-8)


def test_a_value_read_by_another_thread_during_its_call_is_named_so():
    """A differentiated value shared with another thread while its call runs: that thread's
    use is refused saying so (it was called 'used after the call has returned')."""
    shared, seen, used = [], threading.Event(), threading.Event()
    found: list = []

    def keeps_a_value(x):
        y = x * x
        shared.append(y)
        seen.set()
        used.wait(10)
        return y

    def reader():
        seen.wait(10)
        try:
            found.append(shared[0] + 1.0)
        except astad.StaleDualError as error:
            found.append(error)
        used.set()

    thread = threading.Thread(target=reader)
    thread.start()
    value, pullback = ad(keeps_a_value).vjp(3.0)  # (the tape: the value is a dual)
    thread.join()
    assert (value, pullback(1.0)) == (9.0, 6.0)
    assert isinstance(found[0], astad.StaleDualError)
    assert "running in another thread" in str(found[0])
    assert type(shared[0]) is float and shared[0] == 9.0  # (no dual left behind)


def inner_objective(w, c):
    return (w - c) ** 2 + 0.1 * w ** 4


inner = astad.reverse_diff(inner_objective, argnums=0)


def outer_objective(x, c):
    """An inner optimisation loop: gradient descent on ``inner`` with a constant c, then
    a differentiated use of the minimiser."""
    w = 0.0
    for _ in range(60):
        w = w - 0.1 * inner.grad(w, c)
    return x * w + math.sin(x) * inner(w, c)


def test_a_gradient_computed_inside_a_differentiated_function_is_correct():
    outer = ad(outer_objective, argnums=0)
    value, grad = outer.value_and_grad(1.5, 2.0)
    assert value == outer_objective(1.5, 2.0)
    assert grad == pytest.approx(central_fd(outer_objective, (1.5, 2.0), 0), rel=1e-7)
    assert not duals.running.stack  # no differentiation left running


def outer_uses_x(x):
    return inner.grad(x, 1.0)


def test_a_differentiated_value_reaching_an_inner_gradient_is_a_second_derivative():
    """A gradient of a gradient: d/dx d/dw inner(w, 1) at w = x, the second derivative
    2 + 1.2 x^2, by hand."""
    assert ad(outer_uses_x).grad(1.5) == pytest.approx(2.0 + 1.2 * 1.5 ** 2, rel=1e-14)
    assert not duals.running.stack  # no differentiation left running


def test_repeated_calls_give_identical_results():
    f = ad(loss, argnums=(0, 1))
    args = (Model(0.3, -0.1), [0.5, 1.5, -2.0])
    first = f.value_and_grad(*args)
    for _ in range(5):
        assert f.value_and_grad(*args) == first
    value, pullback = f.vjp(*args)
    assert value == first[0]
    assert pullback(1.0) == first[1] and pullback(1.0) == first[1]
    assert pullback(2.0)[1] == [2.0 * g for g in first[1][1]]


# ---------------------------------------------------------------------------------------
# Recursion 10^4 deep

DEPTH = 10_000


def deep(x, n):
    if n == 0:
        return x
    return 0.5 * math.sin(deep(x, n - 1)) + 0.01 * x


def test_a_recursion_10_to_the_4_deep_works_with_the_limit_the_original_needs():
    # hand-derived: y_0 = x, y_k = 0.5 sin(y_{k-1}) + 0.01 x,
    # dy_k/dx = 0.5 cos(y_{k-1}) dy_{k-1} + 0.01
    x, y, dy = 0.7, 0.7, 1.0
    for _ in range(DEPTH):
        y, dy = 0.5 * math.sin(y) + 0.01 * x, 0.5 * math.cos(y) * dy + 0.01
    f = ad(deep, argnums=0)
    frames = DEPTH + 20
    assert run_deep(lambda: deep(x, DEPTH), frames) == y   # what the original needs
    value, grad = run_deep(lambda: f.value_and_grad(x, DEPTH), frames)
    assert value == y
    assert grad == pytest.approx(dy, rel=1e-12)


# ---------------------------------------------------------------------------------------
# The source astad reads is the source of the code that runs

def doubles_its_argument(f):
    @functools.wraps(f)
    def wrapper(x):
        return f(2.0 * x)
    return wrapper


@doubles_its_argument
def wrapped_square(x):
    return x * x


def calls_wrapped_square(x):
    return wrapped_square(x) + 1.0


def test_a_function_wrapped_with_functools_wraps_is_differentiated_as_it_runs():
    """inspect.getsource follows __wrapped__: astad used to differentiate the wrapped
    function (x^2: value 2.25, gradient 3 at 1.5) instead of the wrapper that runs
    ((2x)^2: value 9, gradient 12). Found while reviewing how source is read."""
    assert wrapped_square(1.5) == 9.0
    assert ad(wrapped_square).value_and_grad(1.5) == (9.0, 12.0)
    assert ad(calls_wrapped_square).value_and_grad(1.5) == (10.0, 12.0)


def squares_it(x):
    return x * x


def cubes_it(x):
    return x * x * x


def calls_squares_it(x):
    return squares_it(x) + 1.0


def test_replacing_a_functions_code_rebuilds_its_transformation():
    """IPython's autoreload gives the function objects of a reloaded module their new
    __code__; astad kept differentiating the old code (value 4, gradient 4 at 2 for a
    function that now computes x^3). Found while reviewing the cache keying."""
    decorated = ad(squares_it)
    helper_user = ad(calls_squares_it)
    assert decorated.value_and_grad(2.0) == (4.0, 4.0)
    assert helper_user.value_and_grad(2.0) == (5.0, 4.0)
    old_code = squares_it.__code__
    try:
        squares_it.__code__ = cubes_it.__code__   # as autoreload does, to both objects
        decorated.__code__ = cubes_it.__code__
        assert decorated(2.0) == 8.0
        assert decorated.value_and_grad(2.0) == (8.0, 12.0)
        _, pullback = decorated.vjp(2.0)
        assert pullback(1.0) == 12.0
        assert helper_user.value_and_grad(2.0) == (9.0, 12.0)
    finally:
        squares_it.__code__ = old_code
    assert helper_user.value_and_grad(2.0) == (5.0, 4.0)


# ---------------------------------------------------------------------------------------
# Names of builtins the analysis trusts, bound to user functions

SHADOWING_MODULE = '''
import builtins
import math


def format(x):          # a module function with the name of a builtin
    return x * 3.0


def range(n):           # another: floats, not ints
    return [0.5 * k + 1.0 for k in builtins.range(n)]


def uses_format(x):
    return format(x) + math.sin(x)


def uses_range(x):
    total = 0.0
    for k in range(3):
        total = total + k * x
    return total
'''


def closure_shadowing_len():
    def len(x):  # noqa: A001 - shadows the builtin inside this closure on purpose
        return x * 3.0

    def uses_len(x):
        return len(x) + math.sin(x)
    return uses_len


@BOTH
def test_a_user_function_named_like_a_builtin_is_differentiated(tmp_path, preaccumulate):
    """The activity analysis took a module function named ``format`` for the builtin
    (whose result is a str) and dropped its derivative: 0.88 instead of 3.88 at 0.5."""
    import importlib.util
    path = tmp_path / "shadowing_module.py"
    path.write_text(SHADOWING_MODULE)
    spec = importlib.util.spec_from_file_location("shadowing_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = 0.5
    for f, derivative in [(module.uses_format, 3.0 + math.cos(x)),
                          (module.uses_range, 1.0 + 1.5 + 2.0),
                          (closure_shadowing_len(), 3.0 + math.cos(x))]:
        value, grad = ad(f, preaccumulate).value_and_grad(x)
        assert value == f(x)
        assert grad == pytest.approx(derivative, rel=1e-15)
        _, pullback = ad(f, preaccumulate).vjp(x)
        assert pullback(1.0) == pytest.approx(derivative, rel=1e-15)


def test_functions_made_at_run_time_are_not_kept_alive_by_astad():
    # a closure made per call (over a large array, say) is transformed and cached; once
    # the caller drops it, astad's cache must not keep it, or its data, alive
    import gc
    import weakref

    class Data(list):  # (a list subclass can be weakly referenced)
        pass

    def make_loss(data):
        def loss(w):
            return data[0] * w * w
        return loss

    def make_caller(loss):
        def call(w):
            return loss(w) + 0.0
        return call

    refs = []
    for k in range(3):
        data = Data([float(k + 1)])
        loss = make_loss(data)
        f = astad.reverse_diff(loss)
        assert f.grad(2.0) == 4.0 * (k + 1)  # d/dw of c w^2 at 2
        # and the same closure through ad.rev (called, not decorated)
        g = astad.reverse_diff(make_caller(loss))
        assert g.grad(2.0) == 4.0 * (k + 1)
        refs.append((weakref.ref(data), weakref.ref(loss)))
        del data, loss, f, g
    gc.collect()
    assert all(ref() is None for pair in refs for ref in pair)
