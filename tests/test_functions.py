"""Functions as values: closures, lambdas, helpers, methods, properties, operators."""
import functools
import itertools
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
        return math.ulp(x)  # (a C function with no derivative registered)
    with pytest.raises(astad.NotDifferentiableError) as info:
        f.grad(2.5)
    message = str(info.value)
    assert "'ulp'" in message and "register_scalar(ulp" in message
    assert "custom_vjp" in message and "register_vjp" in message
    assert "test_functions.py" in message and "return math.ulp(x)" in message


REPL_LAMBDA = eval("lambda t: t * 3.0")  # like a lambda typed at a REPL: no source file
_namespace: dict = {}
exec("def made_at_runtime(t):\n    return t * t\n", _namespace)
MADE_AT_RUNTIME = _namespace["made_at_runtime"]


@pytest.mark.parametrize("opaque, name", [(REPL_LAMBDA, "<lambda>"),
                                          (MADE_AT_RUNTIME, "made_at_runtime"),
                                          (math.ulp, "ulp")])
def test_function_without_source_reached_by_a_differentiated_value(opaque, name):
    @astad.reverse_diff(argnums=0)
    def f(x, fn):
        y = x * 2.0
        return fn(y) + 1.0
    with pytest.raises(astad.NotDifferentiableError) as info:
        f.grad(1.5, opaque)
    message = str(info.value)
    assert f"{name!r}" in message and "custom_vjp" in message
    line = f.__code__.co_firstlineno + 3
    assert f"test_functions.py:{line}" in message and "return fn(y) + 1.0" in message
    assert f.grad(1.5, lambda t: t * 5.0) == 10.0  # with source: followed
    # the same function on values that are not differentiated just runs
    assert f(1.5, opaque) == opaque(3.0) + 1.0


def test_c_function_in_untransformed_code_is_an_error_with_a_location():
    def untransformed_getter(v):
        return math.sqrt(v)
    helper = {"f": untransformed_getter}

    @astad.reverse_diff
    def f(x):
        return functools.reduce(lambda a, fn: fn(a), [helper["f"]], x)
    assert f.grad(4.0) == pytest.approx(0.25)  # followed and transformed: works


def test_a_value_kept_in_a_closure_list_ends_plain_and_one_astad_cannot_see_is_an_error():
    kept = []

    @astad.reverse_diff
    def f(x):
        kept.append(x)
        return x * 2.0
    f.grad(1.0)
    assert kept == [1.0] and type(kept[0]) is float  # as the original leaves it
    hidden = []

    @astad.reverse_diff
    def g(x):
        hidden.append(iter([x]))  # an iterator: astad cannot look inside to clean it
        return x * 2.0
    g.grad(1.0)
    with pytest.raises(astad.AstadError, match="has returned"):
        next(hidden[0]) * 3.0


# ==========================================================================================
# Custom derivatives: custom_vjp, register_vjp, register_scalar, stop_gradient

BWD_CALLS = []


@astad.custom_vjp
def cos_fixed_point(a):
    """x with x = cos(a x), by iteration (a contraction for |a| < 1)."""
    x = 0.0
    for _ in range(200):
        x = math.cos(a * x)
    return x


def _cos_fixed_point_fwd(a):
    x = cos_fixed_point(a)
    return x, (a, x)


def _cos_fixed_point_bwd(residuals, g):
    # implicit function theorem on F(x, a) = x - cos(a x) = 0:
    # dx/da = -F_a / F_x = -x sin(a x) / (1 + a sin(a x))
    a, x = residuals
    s = math.sin(a * x)
    BWD_CALLS.append(a)
    return (g * -x * s / (1.0 + a * s),)


cos_fixed_point.defvjp(_cos_fixed_point_fwd, _cos_fixed_point_bwd)


def test_custom_vjp_fixed_point_iteration_uses_its_implicit_derivative():
    @astad.reverse_diff(preaccumulate=False)
    def f(a, b):
        x = cos_fixed_point(a * b)
        return x * x + b
    BWD_CALLS.clear()
    value, pullback = f.vjp(0.6, 0.9)
    assert value == f(0.6, 0.9)
    # the 200 iterations are not on the tape: a*b, the custom call, x*x and + b
    assert pullback.tape_length == 4
    g = pullback(1.0)
    assert BWD_CALLS == [pytest.approx(0.54)]
    assert_grad_close(g, central_fd(f, (0.6, 0.9)), rtol=1e-7, atol=1e-9)
    assert pullback(2.0) == pytest.approx((2.0 * g[0], 2.0 * g[1]))  # a pullback reruns bwd
    assert cos_fixed_point(0.5) == pytest.approx(math.cos(0.5 * cos_fixed_point(0.5)))
    assert cos_fixed_point.__name__ == "cos_fixed_point" and "iteration" in cos_fixed_point.__doc__


def _fixed_point_plain(a):
    x = 0.0
    for _ in range(200):
        x = math.cos(a * x)
    return x


def test_register_vjp_on_a_plain_python_function():
    def solve(a):  # a fresh function object: registering it affects nothing else
        return _fixed_point_plain(a)
    calls = []

    def solve_vjp(g, x, a):
        calls.append(a)
        s = math.sin(a * x)
        return g * -x * s / (1.0 + a * s)
    astad.register_vjp(solve, solve_vjp)

    @astad.reverse_diff
    def f(a):
        return solve(a) * math.exp(a)
    assert_grad_close(f.grad(0.4), central_fd(f, (0.4,)), rtol=1e-7, atol=1e-9)
    assert calls == [0.4]


try:
    import scipy.special as scipy_special
except ImportError:  # scipy is in the test extras; without it these tests skip
    scipy_special = None
needs_scipy = pytest.mark.skipif(scipy_special is None, reason="scipy is not installed")

if scipy_special is not None:
    # gammaln is a C ufunc: astad cannot read it. Registered once, here, for every caller.
    astad.custom_vjp(scipy_special.gammaln).defvjp(
        lambda x: (scipy_special.gammaln(x), x),
        lambda x, g: (g * scipy_special.digamma(x),))


@needs_scipy
def test_custom_vjp_for_a_c_function_without_source_scipy_gammaln():
    import numpy as np

    @astad.reverse_diff
    def log_beta(a, b):
        gl = scipy_special.gammaln
        return gl(a) + gl(b) - gl(a + b)
    args = (1.7, 3.2)
    g = log_beta.grad(*args)
    assert_grad_close(g, central_fd(log_beta, args), rtol=1e-7, atol=1e-9)
    # hand-derived: d/da = digamma(a) - digamma(a + b)
    assert g[0] == pytest.approx(scipy_special.digamma(1.7) - scipy_special.digamma(4.9),
                                 rel=1e-12)

    @astad.reverse_diff
    def on_arrays(x):
        return np.sum(scipy_special.gammaln(x * x))
    x = np.array([0.5, 1.5, 2.5])
    assert np.allclose(on_arrays.grad(x), 2.0 * x * scipy_special.digamma(x * x), rtol=1e-12)


@needs_scipy
def test_register_vjp_for_a_scipy_ufunc_through_numpy_dispatch():
    import numpy as np
    erfcx = scipy_special.erfcx  # erfcx(x) = exp(x^2) erfc(x); erfcx' = 2x erfcx - 2/sqrt(pi)
    astad.register_vjp(erfcx, lambda g, r, x: g * (2.0 * x * r - 2.0 / math.sqrt(math.pi)))

    @astad.reverse_diff
    def f(x, y):
        return erfcx(x * y) + float(np.sum(erfcx(np.array([x, y]))))
    assert_grad_close(f.grad(0.3, 1.2), central_fd(f, (0.3, 1.2)), rtol=1e-7, atol=1e-9)


@dataclass
class Pt:
    x: float
    y: float
    label: str = "p"


@astad.custom_vjp
def polar_of(p, scale, n):
    """(r, angle) of p, scaled, and a Pt of squares: structured arguments and result."""
    r = math.hypot(p.x, p.y) * scale[0]
    return (r, math.atan2(p.y, p.x) * n), Pt(p.x * p.x, p.y * scale[1], "sq")


def _polar_fwd(p, scale, n):
    return polar_of(p, scale, n), (p, scale, n)


def _polar_bwd(residuals, g):
    p, scale, n = residuals
    (g_r, g_angle), g_pt = g
    h = math.hypot(p.x, p.y)
    d2 = p.x * p.x + p.y * p.y
    gx = g_r * scale[0] * p.x / h + g_angle * n * -p.y / d2 + g_pt.x * 2.0 * p.x
    gy = g_r * scale[0] * p.y / h + g_angle * n * p.x / d2 + g_pt.y * scale[1]
    return Pt(gx, gy, p.label), [g_r * h, g_pt.y * p.y], None


polar_of.defvjp(_polar_fwd, _polar_bwd)


def test_custom_vjp_with_structured_arguments_and_result():
    @astad.reverse_diff(argnums=(0, 1))
    def f(p, scale, n):
        (r, angle), sq = polar_of(p, scale, n)
        return r * angle + sq.x - 2.0 * sq.y
    args = (Pt(0.6, -1.1, "in"), [1.5, 0.7], 3)
    g = f.grad(*args)
    assert type(g[0]) is Pt and g[0].label == "in" and type(g[1]) is list
    fd = central_fd(f, args, (0, 1))
    assert_grad_close(g, fd, rtol=1e-7, atol=1e-9)

    @astad.reverse_diff(argnums=0)
    def whole(p, scale, n):
        return polar_of(p, scale, n)
    value, pullback = whole.vjp(*args)
    assert value == polar_of(*args)
    cot = ((1.0, None), Pt(0.5, 2.0, "sq"))  # None: a zero cotangent for that leaf
    got = pullback(cot)
    expected = central_fd(lambda p: polar_of(p, args[1], 3)[0][0]
                          + 0.5 * polar_of(p, args[1], 3)[1].x
                          + 2.0 * polar_of(p, args[1], 3)[1].y, (args[0],))
    assert_grad_close(got, expected, rtol=1e-7, atol=1e-9)


@astad.custom_vjp
def pair_of(x):
    return (x, 2.0 * x)


pair_of.defvjp(lambda x: (pair_of(x), None), lambda _, g: (g[0] + 2.0 * g[1],))


def test_custom_result_whose_cotangents_cancel_still_pulls_back():
    # cotangents (1, -1) sum to zero; the gradient 1 - 2 = -1 does not
    @astad.reverse_diff
    def f(x):
        a, b = pair_of(x)
        return a - b
    assert f.grad(0.5) == -1.0
    assert f.grad(0.5) == central_fd(f, (0.5,)) == pytest.approx(-1.0)


@astad.custom_vjp
def weighted(xs):
    return sum(w * x for w, x in zip((1.0, 2.0, 3.0), xs))


weighted.defvjp(lambda xs: (weighted(xs), None), lambda _, g: ([g, 2.0 * g, 3.0 * g],))


def test_custom_vjp_cotangents_reach_the_values_passed_even_if_the_list_changes_later():
    @astad.reverse_diff
    def f(x, y):
        xs = [x, y, x * y]
        s = weighted(xs)
        xs[0] = xs[0] * 10.0     # the list is changed after the call
        xs.reverse()
        return s + xs[2]
    g = f.grad(1.5, -0.5)
    assert_grad_close(g, central_fd(f, (1.5, -0.5)), rtol=1e-7, atol=1e-9)
    # hand: s = x + 2y + 3xy, xs[2] = 10x: d/dx = 1 + 3y + 10, d/dy = 2 + 3x
    assert g == pytest.approx((11.0 + 3 * -0.5, 2.0 + 4.5))


def test_custom_vjp_keyword_arguments_are_matched_to_positions():
    @astad.custom_vjp
    def scaled(x, scale=2.0, *, shift=0.0):
        return x * scale + shift
    scaled.defvjp(lambda x, scale=2.0, *, shift=0.0: (scaled(x, scale, shift=shift), (x, scale)),
                  lambda res, g: (g * res[1], g * res[0]))

    @astad.reverse_diff
    def f(x, y):
        return scaled(x, scale=y) + scaled(y, shift=1.0) + scaled(scale=x, x=y)
    assert_grad_close(f.grad(0.7, -1.3), central_fd(f, (0.7, -1.3)), rtol=1e-7, atol=1e-9)

    @astad.reverse_diff
    def through_keyword_only(x):
        return scaled(1.0, shift=x)
    with pytest.raises(astad.NotDifferentiableError, match="keyword-only argument 'shift'"):
        through_keyword_only.grad(0.5)


def test_custom_vjp_functions_as_values_map_reduce_and_from_untransformed_code():
    def apply_all(fn, xs):  # called through map in transformed code
        return list(map(fn, xs))

    @astad.reverse_diff
    def f(xs):
        ys = apply_all(cos_fixed_point, xs)
        total = functools.reduce(lambda s, t: s + t * t, ys, 0.0)
        return total + sum(map(lambda t: cos_fixed_point(t), xs))
    xs = [0.3, -0.45, 0.8]
    assert_grad_close(f.grad(xs), central_fd(f, (xs,)), rtol=1e-7, atol=1e-9)


def test_custom_vjp_wins_over_an_astad_decorated_functions_own_transform():
    @astad.reverse_diff
    def squash(x):  # its own derivative would be 2x; the registered one says 100
        return x * x
    custom = astad.custom_vjp(squash).defvjp(lambda x: (squash(x), None),
                                             lambda _, g: (100.0 * g,))

    @astad.reverse_diff(argnums=0)
    def f(x, fn):
        return fn(x) + squash(x)          # a call by value (calls.rev) and a direct one
    assert f.grad(0.5, squash) == 200.0
    assert f.grad(0.5, custom) == 200.0
    assert squash.grad(0.5) == 1.0        # differentiating squash itself: its own code


def test_custom_vjp_errors_are_clear():
    @astad.custom_vjp
    def no_rule(x):
        return x * 2.0

    @astad.reverse_diff
    def f(x):
        return no_rule(x)
    assert f(1.0) == 2.0 and no_rule(3.0) == 6.0
    with pytest.raises(astad.NotDifferentiableError, match=r"no_rule.*defvjp") as info:
        f.grad(1.0)
    assert "test_functions.py" in str(info.value)

    no_rule.defvjp(lambda x: (no_rule(x), None), lambda _, g: (g, g))  # one too many
    with pytest.raises(astad.AstadError, match=r"one cotangent per positional argument \(1\)"):
        f.grad(1.0)

    no_rule.defvjp(lambda x: (no_rule(x), None), lambda _, g: ("two",))
    with pytest.raises(astad.InputError, match=r"argument 0 of .*no_rule.* should be a float"):
        f.grad(1.0)

    no_rule.defvjp(lambda x: no_rule(x), lambda _, g: (g,))
    with pytest.raises(astad.AstadError, match=r"pair \(result, residuals\)"):
        f.grad(1.0)

    @astad.reverse_diff
    def captures(x):
        @astad.custom_vjp
        def uses_x(t):
            return t * x             # x is differentiated, but not an argument of uses_x
        uses_x.defvjp(lambda t: (uses_x(t), None), lambda _, g: (g * 2.0,))
        return uses_x(x)
    with pytest.raises(astad.NotDifferentiableError, match="enclosing scope"):
        captures.grad(1.5)

    with pytest.raises(astad.AstadError, match="callable"):
        astad.custom_vjp(3.0)


def test_custom_vjp_with_no_differentiated_argument_just_runs():
    @astad.reverse_diff
    def f(x, n):
        return x * cos_fixed_point(float(n) / 10.0)
    BWD_CALLS.clear()
    assert f.grad(2.0, 5) == (cos_fixed_point(0.5), None)
    assert BWD_CALLS == []


def test_register_scalar_rule_is_used_everywhere_it_is_passed():
    def log1pexp(x):
        return math.log1p(math.exp(x))
    astad.register_scalar(log1pexp, lambda x: 1.0 / (1.0 + math.exp(-x)))

    @astad.reverse_diff
    def f(xs):
        return sum(map(log1pexp, xs)) + functools.reduce(lambda a, b: a + log1pexp(b), xs, 0.0)
    xs = [0.3, -2.0, 1.1]
    assert f.grad(xs) == pytest.approx([2.0 / (1.0 + math.exp(-x)) for x in xs], rel=1e-12)


def test_stop_gradient():
    @astad.reverse_diff
    def f(x, y):
        return x * astad.stop_gradient(x) + astad.stop_gradient(x * y) * y
    # x is a constant where stopped: d/dx = x, d/dy = x y
    assert f.grad(3.0, 2.0) == (3.0, 6.0)
    assert f(3.0, 2.0) == 21.0
    assert astad.reverse_diff(f.__wrapped__, preaccumulate=False).grad(3.0, 2.0) == (3.0, 6.0)

    @astad.reverse_diff
    def structured(p, xs):
        q = astad.stop_gradient(p)
        ys = list(map(astad.stop_gradient, xs))
        return p.x * q.x + q.y + xs[0] * ys[0] + sum(astad.stop_gradient(xs))
    gp, gxs = structured.grad(Pt(2.0, 5.0), [3.0, 4.0])
    assert gp == Pt(2.0, 0.0, "p") and gxs == [3.0, 0.0]
    value = [1.0, 2.0]
    assert astad.stop_gradient(value) is value  # outside a gradient call: the value itself


def test_math_dist_is_defined_with_the_public_custom_vjp():
    @astad.reverse_diff
    def f(p, q):
        return math.dist(p, q) * 2.0
    p, q = [1.0, -2.0, 0.5], (0.3, 0.4, -1.0)
    g = f.grad(p, q)
    assert type(g[0]) is list and type(g[1]) is tuple
    assert_grad_close(g, central_fd(f, (p, q)), rtol=1e-7, atol=1e-9)
    assert f.grad([1.0, 2.0], [1.0, 2.0]) == ([0.0, 0.0], [0.0, 0.0])  # at p == q: 0


def test_divmod_of_differentiated_values():
    @astad.reverse_diff
    def f(x, y):
        q, r = divmod(x, y)
        return r * x + q
    assert_grad_close(f.grad(7.3, 2.1), central_fd(f, (7.3, 2.1)), rtol=1e-6, atol=1e-8)
    # hand: r = x - q y with q = 3: d/dx = r + x, d/dy = -q x
    r = 7.3 - 3 * 2.1
    assert f.grad(7.3, 2.1) == pytest.approx((r + 7.3, -3 * 7.3))


class Shape2:
    def __init__(self, w):
        self.w = w

    def area(self, x):
        return self.w * x

    def __add__(self, other):
        return Shape2(self.w + other.w)


class Square2(Shape2):
    def __init__(self, w, pad):
        super().__init__(w * 2.0)     # zero-argument super() in a constructor
        self.pad = pad

    def area(self, x):
        return super().area(x) * 2.0 + Shape2.area(self, x) + self.pad

    def __add__(self, other):
        total = super().__add__(other)
        return Square2(total.w * 10.0, self.pad)


@dataclass
class Positive:
    x: float

    def __post_init__(self):
        self.x = abs(self.x)


@dataclass
class ScaledPositive(Positive):
    k: float = 2.0

    def __post_init__(self):
        super().__post_init__()
        self.x = self.x * self.k


def test_zero_argument_super_in_methods_constructors_and_post_init():
    # regression: the transformed method took the tape first, so super() saw the tape
    @astad.reverse_diff
    def f(w, pad, x):
        s = Square2(w, pad) + Square2(x, pad)
        return s.area(x) + ScaledPositive(w * x, pad).x
    check(f, -0.7, 0.4, 1.5)


def test_math_functions_astad_registers_with_its_public_registry():
    @astad.reverse_diff
    def f(x, y):
        frac, whole = math.modf(x * 3.0)
        m, e = math.frexp(y)
        return (math.lgamma(x) + math.lgamma(y * 0.5) + math.lgamma(-x) + frac * whole
                + m * e + math.ldexp(x, 3) + math.remainder(x, 0.4) + math.remainder(3.0, y))
    assert_grad_close(f.grad(1.3, 2.3), central_fd(f, (1.3, 2.3)), rtol=1e-6, atol=1e-8)
    # lgamma' is digamma: psi(1) = -euler_gamma, psi(1/2) = -euler_gamma - 2 ln 2
    euler_gamma = 0.5772156649015329
    lgamma = astad.reverse_diff(lambda t: math.lgamma(t))
    assert lgamma.grad(1.0) == pytest.approx(-euler_gamma, rel=1e-13)
    assert lgamma.grad(0.5) == pytest.approx(-euler_gamma - 2.0 * math.log(2.0), rel=1e-13)
    assert lgamma.grad(-2.7) == pytest.approx(central_fd(lgamma, (-2.7,)), rel=1e-7)
    if scipy_special is not None:
        for t in (0.1, 2.3, 7.9, 10.0, 55.5, -0.3, 1e6):
            assert lgamma.grad(t) == pytest.approx(float(scipy_special.digamma(t)), rel=1e-13)


def test_register_scalar_refuses_an_argument_without_a_partial():
    def times(a, b):
        return a * b
    astad.register_scalar(times, lambda a, b: b)  # no partial for b

    @astad.reverse_diff
    def f(x, y):
        return times(x, y)
    with pytest.raises(astad.NotDifferentiableError, match="argument 1") as info:
        f.grad(2.0, 3.0)
    assert "test_functions.py" in str(info.value)

    @astad.reverse_diff(argnums=0)
    def only_x(x, y):
        return times(x, y)
    assert only_x.grad(2.0, 3.0) == 3.0


def test_helpers_from_another_module_of_the_users_code(tmp_path, monkeypatch):
    (tmp_path / "user_physics.py").write_text(
        "import math\n"
        "GRAVITY = 9.81\n"
        "\n"
        "def height(v, angle, t):\n"
        "    return v * math.sin(angle) * t - 0.5 * GRAVITY * t * t\n"
        "\n"
        "class Cannon:\n"
        "    def __init__(self, v):\n"
        "        self.v = v\n"
        "\n"
        "    def peak(self, angle):\n"
        "        vy = self.v * math.sin(angle)\n"
        "        return height(self.v, angle, vy / GRAVITY)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    physics = importlib.import_module("user_physics")

    @astad.reverse_diff
    def f(v, angle):
        return physics.Cannon(v).peak(angle) + physics.height(v, angle, 0.5)
    g = check(f, 20.0, 0.6)
    # the peak is (v sin a)^2 / (2 g): d/dv = v sin^2 a / g + sin a * 0.5
    assert g[0] == pytest.approx(20.0 * math.sin(0.6) ** 2 / 9.81 + math.sin(0.6) * 0.5)
    # transformed once, then cached; rebinding a global it read makes a new version
    from astad.compile import calls as codegen
    assert codegen.transformed(physics.height) is codegen.transformed(physics.height)
    monkeypatch.setattr(physics, "GRAVITY", 1.62)
    assert f.grad(20.0, 0.6)[0] == pytest.approx(
        20.0 * math.sin(0.6) ** 2 / 1.62 + math.sin(0.6) * 0.5)


def test_accumulate_starmap_and_min_with_key_call_transformed_functions():
    @astad.reverse_diff
    def f(xs, y):
        running = list(itertools.accumulate(xs, lambda a, b: a * y + b))
        pairs = list(itertools.starmap(lambda a, b: a * b, zip(xs, running)))
        closest = min(xs, key=lambda t: (t - y) ** 2)
        return sum(pairs) + closest * y + max(running, key=helper_square)
    check(f, [0.5, -1.5, 2.0, 0.25], 0.8)


@astad.reverse_diff
def decorated_cube(t):
    return t * t * t


def test_function_arguments_that_are_decorated_or_nested_defs():
    @astad.reverse_diff(argnums=0)
    def apply_twice(x, fn):
        return fn(fn(x))

    def outer(x, k):
        def nested(t):            # a nested def closing over an int
            return t * t * k
        return apply_twice.grad(x, nested)
    # d/dx (k (k x^2)^2) = 4 k^3 x^3
    assert outer(0.5, 3) == pytest.approx(4 * 27 * 0.125)
    # d/dx ((x^3)^3) = 9 x^8
    assert apply_twice.grad(0.9, decorated_cube) == pytest.approx(9 * 0.9 ** 8)

    @astad.reverse_diff
    def with_nested_closing_over_x(x):
        def nested(t):
            return t * x
        return apply_twice(x, nested) + apply_twice(x, decorated_cube)
    check(with_nested_closing_over_x, 0.7)


@dataclass
class Spline:
    a: float
    b: float

    @astad.custom_vjp
    def at(self, t):
        return self.a * t * t + self.b * t


Spline.at.defvjp(lambda s, t: (s.at(t), (s, t)),
                 lambda res, g: (Spline(g * res[1] ** 2, g * res[1]),
                                 g * (2.0 * res[0].a * res[1] + res[0].b)))


def test_custom_vjp_on_a_method():
    @astad.reverse_diff
    def f(s, t):
        return s.at(t) * Spline.at(s, t)
    g = f.grad(Spline(0.5, -1.5), 1.3)
    assert type(g[0]) is Spline
    assert_grad_close(g, central_fd(f, (Spline(0.5, -1.5), 1.3)), rtol=1e-7, atol=1e-9)


def test_custom_vjp_with_arrays_in_a_dict_result():
    import numpy as np

    @astad.custom_vjp
    def scaled_norm_and_unit(v, w):
        n = float(np.sqrt(np.sum(v * v)))
        return {"n": n * w, "u": v / n}

    def bwd(residuals, g):
        v, w = residuals
        n = float(np.sqrt(np.sum(v * v)))
        gv = g["n"] * w * v / n + g["u"] / n - v * np.dot(g["u"], v) / n ** 3
        return gv, g["n"] * n
    scaled_norm_and_unit.defvjp(lambda v, w: (scaled_norm_and_unit(v, w), (v, w)), bwd)

    @astad.reverse_diff
    def f(v, w):
        d = scaled_norm_and_unit(v * 2.0, w)
        return d["n"] * np.sum(d["u"] * np.array([1.0, 2.0, 3.0]))
    v, w, h = np.array([0.5, -1.0, 2.0]), 0.7, 1e-6
    gv, gw = f.grad(v, w)
    fd = [(f(v + h * e, w) - f(v - h * e, w)) / (2 * h) for e in np.eye(3)]
    assert type(gv) is np.ndarray and np.allclose(gv, fd, rtol=1e-7, atol=1e-9)
    assert gw == pytest.approx((f(v, w + h) - f(v, w - h)) / (2 * h), rel=1e-7)


# -- dataclass arguments of floats (interleaved inline, structure._float_record) --------

@dataclass
class Pair:
    a: float
    b: float


@dataclass(frozen=True)
class FrozenPair:
    a: float
    b: float


@dataclass
class PairWithProperty:
    a: float
    b: float

    @property
    def total(self):
        return self.a + self.b


def rescales_and_tags(p, q, r):
    p.a = p.a * q.b          # the caller's p must look as the original leaves it
    p.extra = 2.0            # a new attribute, written back as a float
    del p.b                  # a deleted one, deleted on the caller's object too
    return p.a * p.extra + q.a * r.total


def test_float_dataclass_arguments_mutated_frozen_and_with_a_property():
    f = astad.reverse_diff(rescales_and_tags)
    args = (Pair(1.5, 2.0), FrozenPair(0.5, 3.0), PairWithProperty(4.0, -1.0))
    reference = (Pair(1.5, 2.0), FrozenPair(0.5, 3.0), PairWithProperty(4.0, -1.0))
    expected = rescales_and_tags(*reference)
    value, (gp, gq, gr) = f.value_and_grad(*args)
    # value = 2 p.a q.b + q.a (r.a + r.b)
    assert value == expected == 2 * 1.5 * 3.0 + 0.5 * 3.0
    assert vars(args[0]) == vars(reference[0]) == {"a": 4.5, "extra": 2.0}
    assert type(args[0].a) is float and type(args[0].extra) is float
    assert (type(gp), type(gq), type(gr)) == (Pair, FrozenPair, PairWithProperty)
    assert (gp.a, gp.b) == (6.0, 0.0)
    assert (gq.a, gq.b) == (3.0, 3.0)
    assert (gr.a, gr.b) == (0.5, 0.5)


def test_a_helper_called_through_its_module_follows_a_rebinding(tmp_path, monkeypatch):
    (tmp_path / "astad_shapes_helpers.py").write_text(
        "def square(x):\n    return x * x\n\n\ndef cube(x):\n    return x * x * x\n")
    (tmp_path / "astad_shapes_user.py").write_text(
        "import astad_shapes_helpers as helpers\n\n\n"
        "def area(x):\n    return helpers.square(x) * 3.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import astad_shapes_helpers
    import astad_shapes_user
    area = astad.reverse_diff(astad_shapes_user.area)
    # resolved when transformed, checked where it is called
    assert "(D_square if helpers.square is _square else ad.rev(helpers.square))(_tape, x)" \
        in area.source
    assert area.grad(2.0) == 12.0
    monkeypatch.setattr(astad_shapes_helpers, "square", astad_shapes_helpers.cube)
    assert area.grad(2.0) == 36.0  # 9 x^2: the module's new function, not the old one
