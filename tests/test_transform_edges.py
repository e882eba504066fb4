"""Edges of the function transforms found by testing them against JAX's conventions: a
Jacobian of one output scalar, tangents through np.where's guard idiom, powers at a zero
base, functions returned by a differentiated function, a dict tangent's keys."""
import functools
import math
import warnings

import numpy as np
import pytest

import astad
from astad.errors import InputError


# -- jacrev / jacobian of one output scalar -----------------------------------------------
def cube(x):
    return x * x * x


def product(x, y):
    return x * y


def first_two(xs):
    return xs[0] * xs[1]


def as_list(x):
    return [x * x]


def in_dict(p):
    return p["w"] * p["w"] * p["b"]


@pytest.mark.parametrize("transform", [astad.jacrev, astad.jacobian, astad.jacfwd])
def test_jacobian_of_one_output_scalar(transform):
    assert transform(cube)(2.0) == 12.0
    assert transform(math.sin)(0.5) == math.cos(0.5)
    assert transform(product, argnums=(0, 1))(2.0, 3.0) == (3.0, 2.0)
    assert transform(first_two)([2.0, 3.0]) == [3.0, 2.0]
    assert transform(as_list)(2.0) == [4.0]
    assert transform(in_dict)({"w": 2.0, "b": 3.0}) == {"w": 12.0, "b": 4.0}
    assert transform(astad.grad(cube))(1.1) == pytest.approx(6.6, rel=1e-14)
    assert transform(lambda x: np.array([x * x]))(3.0).tolist() == [6.0]


def test_jacrev_of_one_output_scalar_with_aux_and_decorated():
    g, aux = astad.jacrev(lambda x: (x * x, "tag"), has_aux=True)(3.0)
    assert (g, aux) == (6.0, "tag")
    assert astad.jacrev(astad.reverse_diff(cube))(2.0) == 12.0


# -- forward mode through np.where's guard --------------------------------------------------
def guarded_sqrt(x):
    return np.where(x > 0, np.sqrt(x), 0.0)


def guarded_log_sum(x):
    return np.sum(np.where(x > 0, np.log(x), 0.0))


def test_forward_mode_selects_the_tangent_of_the_branch_np_where_takes():
    x = np.array([0.0, 4.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's own, at sqrt(-1))
        _, tangent = astad.jvp(guarded_sqrt, (x,), (np.ones(3),))
        forward, reverse = astad.jacfwd(guarded_sqrt)(x), astad.jacrev(guarded_sqrt)(x)
        _, slope = astad.jvp(guarded_log_sum, (np.array([0.0, 2.0]),), (np.ones(2),))
        gradient = astad.grad(guarded_log_sum)(np.array([0.0, 2.0]))
        _, scalar = astad.jvp(guarded_sqrt, (0.0,), (1.0,))
    assert tangent.tolist() == [0.0, 0.25, 0.0]
    assert forward.tolist() == reverse.tolist() == np.diag([0.0, 0.25, 0.0]).tolist()
    assert slope == 0.5 and gradient.tolist() == [0.0, 0.5]
    assert scalar == 0.0


def test_forward_mode_keeps_a_real_infinite_tangent():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _, tangent = astad.jvp(np.sqrt, (np.array([0.0, 4.0]),), (np.array([1.0, 0.0]),))
    assert tangent.tolist() == [math.inf, 0.0]


# -- powers at a zero base --------------------------------------------------------------------
def inverse(x):
    return x ** -1


def inverse_square(x):
    return x ** -2


def inverse_float_power(x):
    return x ** -1.0


@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize("fun, exponent", [(inverse, -1), (inverse_square, -2),
                                           (inverse_float_power, -1.0)])
def test_derivative_of_a_negative_power_at_a_zero_base_is_signed_as_ieee(fun, exponent, zero):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = float(exponent * np.power(np.float64(zero), float(exponent - 1)))  # IEEE
        _, tangent = astad.jvp(fun, (np.float64(zero),), (np.float64(1.0),))
        gradient = astad.grad(fun)(np.float64(zero))
        _, array_tangent = astad.jvp(fun, (np.array([zero]),), (np.array([1.0]),))
    assert math.isinf(want)
    assert float(tangent) == float(gradient) == float(array_tangent[0]) == want


def test_power_of_a_zero_dimensional_value_at_zero_in_reverse_mode():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert astad.grad(lambda x: np.power(x, 0.5))(0.0) == math.inf
        assert astad.grad(lambda x: 0.0 * np.power(x, 0.5) + x)(0.0) == 1.0
        assert astad.grad(lambda x: np.power(x, 0.5))(np.array(4.0)) == 0.25


# -- a function returned by a differentiated function -----------------------------------------
def curried(x):
    return lambda y: x * y


def curried_in_a_list(x):
    return [x, functools.partial(product, x)]


class Scale:
    def __init__(self, k):
        self.k = k

    def apply(self, y):
        return self.k * y


def bound_method(x):
    return {"f": Scale(x).apply}


def nested_closure(x):
    inner = [lambda y: x * y]
    return lambda y: inner[0](y)


@pytest.mark.parametrize("fun", [curried, curried_in_a_list, bound_method, nested_closure])
def test_a_function_of_the_differentiated_values_is_refused_as_a_result(fun):
    calls = [lambda: astad.jvp(fun, (2.0,), (1.0,)), lambda: astad.vjp(fun, 2.0),
             lambda: astad.jacfwd(fun)(2.0), lambda: astad.jacrev(fun)(2.0),
             lambda: astad.reverse_diff(fun).vjp(2.0),
             lambda: astad.reverse_diff(fun).jvp((2.0,), (1.0,))]
    for call in calls:
        with pytest.raises(InputError, match="returned a function of the differentiated"):
            call()


def constant_function_result(x):
    return x * x, math.sin  # a function of no differentiated value: a constant


def test_a_function_of_constants_in_a_result_is_returned_as_it_is():
    (value, fn), (tangent, fn_tangent) = astad.jvp(constant_function_result, (3.0,), (1.0,))
    assert (value, tangent) == (9.0, 6.0) and fn is math.sin and fn_tangent is math.sin


# -- a dict tangent has the primal's keys -------------------------------------------------------
def squares(d):
    return d["a"] * d["a"] * 2.0 + d["b"] * d["b"] * 2.0


@pytest.mark.parametrize("tangent", [{"a": 1.0, "c": 1.0}, {"a": 1.0},
                                     {"a": 1.0, "b": 1.0, "c": 1.0}])
def test_a_dict_tangent_with_other_keys_is_refused(tangent):
    with pytest.raises(InputError, match=r"keys \['a', 'b'\]"):
        astad.jvp(squares, ({"a": 1.0, "b": 2.0},), (tangent,))
    # and the next call is unaffected
    assert astad.jvp(squares, ({"a": 1.0, "b": 2.0},), ({"a": 1.0, "b": None},)) == (10.0, 4.0)
    assert astad.jvp(squares, ({"a": 1.0, "b": 2.0},), ({"a": 1.0, "b": 1.0},)) == (10.0, 12.0)


# -- JAX's leniences: a 0-d array for a float, hessian's has_aux ---------------------------------
def test_a_zero_dimensional_array_tangent_or_cotangent_for_a_float():
    assert astad.jvp(cube, (1.5,), (np.array(1.0),)) == (3.375, 6.75)
    assert astad.vjp(cube, 1.5)[1](np.array(2.0)) == (13.5,)
    assert astad.reverse_diff(cube).vjp(1.5)[1](np.array(2.0)) == 13.5
    with pytest.raises(InputError, match="should be a float"):
        astad.jvp(cube, (1.5,), (np.array([1.0]),))


def test_hessian_with_aux():
    hessian, aux = astad.hessian(lambda x: (x ** 4, {"n": 1}), has_aux=True)(2.0)
    assert (hessian, aux) == (48.0, {"n": 1})
    hessian, aux = astad.hessian(lambda x: (np.sum(x ** 4), "a"), has_aux=True)(
        np.array([1.0, 2.0]))
    assert hessian.tolist() == [[12.0, 0.0], [0.0, 48.0]] and aux == "a"


# -- a second derivative of a power at a zero base (JAX's values) --------------------------------
@pytest.mark.parametrize("exponent, zero, want", [(0.5, 0.0, -math.inf), (0.5, -0.0, -math.inf),
                                                  (-1.0, 0.0, math.inf), (-1.0, -0.0, -math.inf),
                                                  (1.5, 0.0, math.inf)])
@pytest.mark.parametrize("kind", [float, np.float64])
def test_second_derivative_of_a_power_at_a_zero_base(exponent, zero, want, kind):
    if kind is float and exponent < 0:
        return  # (0.0 ** -1.0 raises ZeroDivisionError in Python itself)

    def power(x):
        return x ** exponent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = kind(zero)
        assert float(astad.grad(astad.grad(power))(x)) == want
        assert float(astad.jvp(astad.grad(power), (x,), (1.0,))[1]) == want
        assert float(astad.hessian(power)(x)) == want


# -- a dual that escaped its call, converted outside any call ------------------------------------
def raises_with_a_dual(x):
    raise ValueError(x * 2.0)  # (an exception's arguments: a route leftovers do not clean)


@pytest.mark.parametrize("make", [lambda: 1.5, lambda: np.array([1.0, 2.0])])
def test_converting_a_dual_of_a_finished_call_says_it_is_stale(make):
    with pytest.raises(ValueError) as raised:
        astad.grad(lambda x: np.sum(raises_with_a_dual(x)))(make())
    leaked = raised.value.args[0]
    conversions = [np.asarray, np.sin] + ([float, math.sin] if np.ndim(make()) == 0 else [])
    for convert in conversions:
        with pytest.raises(astad.StaleDualError, match="after the gradient or derivative"):
            convert(leaked)
