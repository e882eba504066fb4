"""The public API and its conventions (JAX/autograd-style argnums, structure, errors)."""
import math
import sys

import pytest

import astad


@astad.reverse_diff
def poly(x, y, z):
    """A documented function."""
    return x * y + z ** 2


@astad.reverse_diff(argnums=(0, 2))
def poly02(x, y, z):
    return x * y + z ** 2


@astad.reverse_diff(argnums=1)
def poly1(x, y, z):
    return x * y + z ** 2


@astad.reverse_diff
def square(x):
    return x * x


def test_decorated_function_is_the_original():
    assert poly(2.0, 3.0, 4.0) == 22.0
    assert poly.__name__ == "poly" and poly.__doc__ == "A documented function."
    assert poly.__wrapped__(2.0, 3.0, 4.0) == 22.0
    assert poly.__wrapped__.__code__ is poly.__code__  # the user's own code runs


def test_argnums_conventions():
    assert poly.grad(2.0, 3.0, 4.0) == (3.0, 2.0, 8.0)
    assert poly02.grad(2.0, 3.0, 4.0) == (3.0, 8.0)
    assert poly1.grad(2.0, 3.0, 4.0) == 2.0
    assert square.grad(3.0) == 6.0  # one parameter: the gradient alone, not a 1-tuple


def test_argnums_by_keyword_and_negative():
    assert poly.grad(2.0, 3.0, z=4.0) == (3.0, 2.0)  # keyword arguments: constants, as in JAX
    f = astad.reverse_diff(poly.__wrapped__, argnums=-1)
    assert f.grad(2.0, 3.0, 4.0) == 8.0
    with pytest.raises(astad.InputError, match="argnums"):
        astad.reverse_diff(poly.__wrapped__, argnums=5).grad(1.0, 2.0, 3.0)


def test_value_and_grad_and_vjp():
    value, grads = poly.value_and_grad(2.0, 3.0, 4.0)
    assert value == 22.0 and grads == (3.0, 2.0, 8.0)
    value, pullback = poly.vjp(2.0, 3.0, 4.0)
    assert value == 22.0
    assert pullback(2.0) == (6.0, 4.0, 16.0)
    assert pullback(2.0) == (6.0, 4.0, 16.0)  # twice: same answer
    assert pullback.tape_length == 1  # one preaccumulated entry for x * y + z ** 2
    unfused = astad.reverse_diff(poly.__wrapped__, preaccumulate=False)
    value, pullback = unfused.vjp(2.0, 3.0, 4.0)
    assert pullback(2.0) == (6.0, 4.0, 16.0)
    assert pullback.tape_length == 3  # x*y, z**2, + and nothing else

@pytest.mark.parametrize("preaccumulate, per_iteration", [(False, 2), (True, 1)])
def test_tape_length_counts_float_operations_only(preaccumulate, per_iteration):
    @astad.reverse_diff(preaccumulate=preaccumulate)
    def f(x, n):
        total = 0.0
        for i in range(n):      # int counter: no entries
            if i % 2 == 0:      # int arithmetic, comparison: no entries
                total = total + x * i   # two float operations
        return total
    _, pullback = f.vjp(1.5, 10)
    assert pullback.tape_length == per_iteration * 5
    assert pullback(1.0) == (0.0 + 2 + 4 + 6 + 8, None)


def test_an_argument_holding_no_float_gets_none_in_the_gradient():
    """An int, a bool, a string: not differentiated, and never given back where a
    gradient is expected (``x - lr * g`` on it raises instead of going quietly wrong)."""
    @astad.reverse_diff
    def f(x, n, flag, name):
        return x ** n if flag else x
    assert f.grad(2.0, 3, True, "label") == (12.0, None, None, None)
    assert f.value_and_grad(2.0, 3, True, "label") == (8.0, (12.0, None, None, None))
    assert f.vjp(2.0, 3, True, "label")[1](1.0) == (12.0, None, None, None)
    assert astad.grad(f, argnums=(0, 1))(2.0, 3, True, "label") == (12.0, None)
    assert astad.jacrev(f, argnums=(0, 1))(2.0, 3, True, "label") == (12.0, None)
    assert astad.jacfwd(f, argnums=(0, 1))(2.0, 3, True, "label") == (12.0, None)
    with pytest.raises(TypeError):
        2.0 - 0.1 * f.grad(2.0, 3, True, "label")[1]


def test_grad_of_int_only_input_suggests_a_float():
    with pytest.raises(astad.InputError, match=r"pass 3\.0 instead of 3"):
        square.grad(3)


def test_grad_of_non_float_result_suggests_vjp():
    @astad.reverse_diff
    def pair(x):
        return [x, 2.0 * x]
    with pytest.raises(astad.InputError, match=r"\.vjp"):
        pair.grad(1.0)
    value, pullback = pair.vjp(1.0)
    assert value == [1.0, 2.0]
    assert pullback([1.0, 10.0]) == 21.0
    assert pullback([None, 1.0]) == 2.0
    with pytest.raises(astad.InputError, match="length 2"):
        pullback([1.0])


def test_result_independent_of_input_has_zero_gradient():
    @astad.reverse_diff
    def const(x):
        return 3.0
    assert const.grad(1.0) == 0.0


def test_list_and_tuple_arguments_give_same_structure():
    @astad.reverse_diff
    def f(xs, pair):
        return sum(xs) * pair[0] + len(xs) * pair[1]
    gx, gp = f.grad([1.0, 2.0], (3.0, 4.0))
    assert gx == [3.0, 3.0] and type(gx) is list
    assert gp == (3.0, 2.0) and type(gp) is tuple


def test_user_exception_propagates_unchanged_and_next_call_is_correct():
    @astad.reverse_diff
    def f(x):
        if x < 0:
            raise ValueError("negative input")
        return x * x
    with pytest.raises(ValueError, match="^negative input$"):
        f.grad(-1.0)
    assert f.grad(3.0) == 6.0


def test_recursion_3000_deep_with_original_limit():
    @astad.reverse_diff
    def chain(x, n):
        if n == 0:
            return x
        return chain(x * 1.001 + 0.0, n - 1)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(3000 + 50)
    try:
        depth = 3000 - 30
        chain(1.0, depth)  # the original runs at this limit ...
        assert chain.grad(1.0, depth)[0] == pytest.approx(1.001 ** depth)  # ... and so does .grad
    finally:
        sys.setrecursionlimit(old)


def test_opaque_callable_with_active_argument_is_an_error_naming_it():
    @astad.reverse_diff
    def f(x):
        return math.ulp(x)  # (a C function with no derivative registered)
    with pytest.raises(astad.NotDifferentiableError, match="'ulp'") as info:
        f.grad(1.5)
    assert "test_api.py" in str(info.value) and "math.ulp(x)" in str(info.value)
    assert f(1.5) == math.ulp(1.5)


def test_opaque_callable_with_inactive_arguments_just_runs():
    @astad.reverse_diff
    def f(x, n):
        return x * math.factorial(n) + len(str(n))
    assert f.grad(2.0, 4) == (24.0, None)


def test_register_scalar_extends_astad():
    def softplus_c(x):  # stands in for a C function astad cannot read
        return math.log1p(math.exp(x))
    astad.register_scalar(softplus_c, lambda x: 1.0 / (1.0 + math.exp(-x)))

    @astad.reverse_diff
    def f(x):
        return softplus_c(2.0 * x)
    assert f.grad(0.3) == pytest.approx(2.0 / (1.0 + math.exp(-0.6)))


def test_gradient_inside_a_differentiated_function():
    @astad.reverse_diff
    def outer(x):
        slope = square.grad(3.0)  # an inner gradient on constants
        return slope * x
    assert outer.grad(2.0) == 6.0


def test_gradient_of_a_gradient():
    @astad.reverse_diff
    def outer(x):
        return square.grad(x) * x  # d/dx (2x * x) = 4x
    assert outer.value_and_grad(2.0) == (8.0, 8.0)


def test_float_isinstance_and_type_see_through_duals():
    @astad.reverse_diff
    def f(x):
        if isinstance(x, float) and type(x) is float:
            return float(x) * 3.0
        return x
    assert f.grad(2.0) == 3.0


def test_function_that_mutates_its_argument_list():
    # regression: the gradient was read from the list the function had overwritten
    @astad.reverse_diff
    def g(xs):
        xs[0] = xs[0] * 2.0
        xs.append(xs[0] * xs[1])
        return xs[0] + xs[2]
    caller = [1.0, 3.0]
    assert g.grad(caller) == [2.0 + 2.0 * 3.0, 2.0]
    # the caller's list is left as the original function leaves it, with no dual in it
    after_original = [1.0, 3.0]
    g(after_original)
    assert caller == after_original == [2.0, 3.0, 6.0]
    assert all(type(x) is float for x in caller)
    value, pullback = g.vjp([1.0, 3.0])
    assert value == 8.0 and pullback(1.0) == [8.0, 2.0]


@pytest.mark.slow
def test_tape_is_freed_when_the_gradient_returns():
    import gc
    import tracemalloc

    @astad.reverse_diff(preaccumulate=False)
    def long_chain(x, n):
        for _i in range(n):
            x = x * 1.0000001 + 1e-9   # two entries per iteration: 100000 in all
        return x

    def allocated():
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    long_chain.grad(1.0, 10)  # transform and cache first
    tracemalloc.start()
    try:
        before = allocated()
        value, grad = long_chain.value_and_grad(1.0, 50000)
        after_grad = allocated()
        _, pullback = long_chain.vjp(1.0, 50000)
        while_held = allocated()
        assert pullback.tape_length == 100000
        del pullback
        after_release = allocated()
    finally:
        tracemalloc.stop()
    assert grad[0] == pytest.approx(1.0000001 ** 50000, rel=1e-9)
    # a tape of 100000 entries takes megabytes; none of it outlives the call
    assert while_held - before > 4_000_000
    assert after_grad - before < 200_000
    assert after_release - before < 200_000
