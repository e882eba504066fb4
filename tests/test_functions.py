"""Functions as values: closures, lambdas, helpers, methods, properties, operators."""
import functools
import math
import operator
from dataclasses import dataclass

import pytest

import astad
from oracles import assert_grad_close, central_fd


def check(f, *args, rtol=1e-6, atol=1e-8):
    g = f.grad(*args)
    assert_grad_close(g, central_fd(f, args), rtol=rtol, atol=atol)
    return g


def helper_square(x):
    return x * x


def helper_two_deep(x):
    return helper_square(math.sin(x)) + 1.0


def countdown(x, n):  # recursion through an undecorated helper
    return x if n == 0 else countdown(x * 1.1, n - 1)


@dataclass
class Vec:
    x: float
    y: float

    def __add__(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def __mul__(self, k):
        return Vec(self.x * k, self.y * k)

    @property
    def norm(self):
        return math.sqrt(self.x * self.x + self.y * self.y)

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    @classmethod
    def unit(cls, angle):
        return cls(math.cos(angle), math.sin(angle))

    @staticmethod
    def area(a, b):
        return a.x * b.y - a.y * b.x


class Spring:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return 0.5 * self.k * x * x


@dataclass
class Model:
    activation: object
    weight: float


def test_closure_capturing_an_active_value():
    @astad.reverse_diff
    def f(x, y):
        def scaled(t):
            return t * x + y
        return scaled(2.0) * scaled(x)
    check(f, 1.3, -0.4)


def test_nonlocal_rebinding_in_a_nested_function():
    @astad.reverse_diff
    def f(x):
        total = 0.0

        def add(t):
            nonlocal total
            total = total + t * x
        for k in range(3):
            add(float(k))
        return total
    assert f.grad(2.0) == pytest.approx(0.0 + 1.0 + 2.0)


def test_function_returned_from_a_function():
    @astad.reverse_diff
    def f(x):
        def make(a):
            return lambda t: a * t * t
        g = make(x)
        return g(3.0) + g(x)
    check(f, 0.7)


def test_decorated_function_receiving_lambda_and_nested_function():
    @astad.reverse_diff(argnums=0)
    def apply_twice(x, fn):
        return fn(fn(x))
    assert apply_twice.grad(0.5, lambda t: t * t * 3.0) == pytest.approx(
        central_fd(lambda x: apply_twice(x, lambda t: t * t * 3.0), (0.5,)))
    assert apply_twice.grad(0.5, math.sin) == pytest.approx(
        math.cos(math.sin(0.5)) * math.cos(0.5))
    assert apply_twice.grad(0.5, helper_square) == pytest.approx(4 * 0.5 ** 3)


def test_builtins_calling_user_functions():
    @astad.reverse_diff
    def f(xs):
        squares = list(map(lambda t: t * t, xs))
        positives = list(filter(lambda t: t > 0.0, xs))
        ordered = sorted(xs, key=lambda t: -t)
        product = functools.reduce(lambda a, b: a * b, xs)
        biggest = max(xs, key=abs)
        return sum(squares) + sum(positives) + ordered[0] * 2.0 + product + biggest
    check(f, [0.5, -1.5, 2.0])


def test_operator_module_functions_through_reduce_and_partial():
    @astad.reverse_diff
    def f(xs, y):
        scale = functools.partial(operator.mul, y)
        return functools.reduce(operator.add, map(scale, xs))
    check(f, [1.0, 2.0, 3.0], 0.5)


def test_undecorated_helpers_and_recursion_through_them():
    @astad.reverse_diff
    def f(x):
        return helper_two_deep(x) * countdown(x, 5)
    check(f, 0.8)


def test_methods_properties_classmethods_staticmethods_and_dunders():
    @astad.reverse_diff
    def f(a, b, angle):
        s = a + b * 2.0
        u = Vec.unit(angle)
        return s.norm + s.dot(u) + Vec.area(a, u)
    g = check(f, Vec(1.0, 2.0), Vec(-0.5, 0.3), 0.4)
    assert type(g[0]) is Vec


def test_callable_object_and_function_in_a_dataclass_field():
    @astad.reverse_diff(argnums=(0, 1))
    def f(x, m):
        spring = Spring(m.weight)
        return spring(x) + m.activation(x * m.weight)
    g = f.grad(0.6, Model(math.tanh, 1.5))
    fd = central_fd(lambda x, w: f(x, Model(math.tanh, w)), (0.6, 1.5))
    assert g[0] == pytest.approx(fd[0]) and g[1].weight == pytest.approx(fd[1])
    assert g[1].activation is math.tanh


def test_functions_in_lists_and_dicts():
    @astad.reverse_diff
    def f(x):
        table = {"sq": lambda t: t * t, "sin": math.sin}
        chain = [table["sq"], table["sin"], helper_square]
        for fn in chain:
            x = fn(x)
        return x
    check(f, 0.9)


def test_opaque_function_with_active_argument_names_it_and_how_to_fix():
    @astad.reverse_diff
    def f(x):
        return math.gamma(x)
    with pytest.raises(astad.NotDifferentiableError) as info:
        f.grad(2.5)
    message = str(info.value)
    assert "'gamma'" in message and "register_scalar" in message
    assert "test_functions.py" in message and "return math.gamma(x)" in message


def test_c_function_in_untransformed_code_is_an_error_with_a_location():
    def untransformed_getter(v):
        return math.sqrt(v)
    helper = {"f": untransformed_getter}

    @astad.reverse_diff
    def f(x):
        return functools.reduce(lambda a, fn: fn(a), [helper["f"]], x)
    assert f.grad(4.0) == pytest.approx(0.25)  # followed and transformed: works


def test_escaped_dual_is_an_error_later():
    kept = []

    @astad.reverse_diff
    def f(x):
        kept.append(x)
        return x * 2.0
    f.grad(1.0)
    with pytest.raises(astad.AstadError, match="escaped"):
        kept[0] * 3.0
