"""Issue 12, class 1: every way Python code asks "what type is this?" answers, for a
differentiated value, as for the original value, on every path.

A dual's ``__class__`` is its primal value's (float, numpy.float64, numpy.ndarray...), so
``isinstance``, ``x.__class__``, abc's checks (``numbers.Real``), ``functools.
singledispatch`` and ``match`` class patterns see the original's class; ``type(x)`` in
differentiated code does too (``ad.type``), also reached by another name. Each example
returns the derivative only through the branch the original takes: a wrong answer gives a
wrong value and gradient. Expected values are derived by hand.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np
import pytest

import astad
from paths import check_every_path, close, gradients


# -- floats -----------------------------------------------------------------------------------
def isinstance_float(x):
    return x * x if isinstance(x, float) else 0.0


def alias_of_isinstance(x):
    check = isinstance
    return x * x if check(x, float) else 0.0


def class_attribute(x):
    return x * x if x.__class__ is float else 0.0


def type_is_float(x):
    return x * x if type(x) is float else 0.0


def alias_of_type(x):
    kind = type
    return x * x if kind(x) is float and kind(x).__name__ == "float" else 0.0


def abc_real(x):
    return x * x if isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral) \
        else 0.0


def numpy_isscalar(x):
    return x * x if np.isscalar(x) and not np.ndim(x) else 0.0


def not_an_int(x):
    return 0.0 if isinstance(x, int) else x * x


@functools.singledispatch
def squared(value):
    return 0.0


@squared.register(float)
def _(value):
    return value * value


def by_singledispatch(x):
    return squared(x)


def match_real(x):
    match x:
        case numbers.Real():
            return x * x
    return 0.0


def match_float_pattern(x):
    match x:
        case int():
            return 0.0
        case complex():
            return 0.0
        case float(v):
            return v * v
    return 0.0


def through_a_container(x):
    values = [x, 2.0]
    return sum(v * v for v in values if isinstance(v, float)) - 4.0


FLOAT_TESTS = [isinstance_float, alias_of_isinstance, class_attribute, type_is_float,
               alias_of_type, abc_real, numpy_isscalar, not_an_int, by_singledispatch,
               match_real, match_float_pattern, through_a_container]


@pytest.mark.parametrize("f", FLOAT_TESTS, ids=lambda f: f.__name__)
def test_a_float_answers_type_questions_as_a_float_on_every_path(f):
    check_every_path(f, (3.0,), 9.0, 6.0)


@pytest.mark.parametrize("f", [isinstance_float, class_attribute, match_float_pattern,
                               by_singledispatch], ids=lambda f: f.__name__)
def test_second_derivatives_take_the_same_branch(f):
    assert astad.hessian(f)(3.0) == 2.0
    assert astad.grad(astad.grad(f))(3.0) == 2.0


def test_a_float_subclass_argument_keeps_its_class_inside():
    class Meters(float):
        pass

    def f(x):
        return x * 3.0 if isinstance(x, Meters) else 0.0
    grad = astad.reverse_diff(f).grad(Meters(2.0))
    assert grad == 3.0 and type(grad) is Meters
    assert astad.jvp(f, (Meters(2.0),), (1.0,))[1] == 3.0


# -- numpy arrays and numpy scalars ---------------------------------------------------------
def isinstance_ndarray(x):
    return np.sum(x * x) if isinstance(x, np.ndarray) else 0.0


def type_is_ndarray(x):
    return np.sum(x * x) if type(x) is np.ndarray else 0.0


def element_is_numpy_floating(x):
    y = x[0]
    return y * y if isinstance(y, np.floating) and type(y) is np.float64 else 0.0


def element_is_a_float_too(x):
    y = x[0]
    return y * y if isinstance(y, float) else 0.0


def reduction_is_numpy_float64(x):
    s = np.sum(x)
    return s * s if isinstance(s, np.float64) and np.isscalar(s) else 0.0


def array_dtype_and_ndim(x):
    return np.sum(x * x) if x.dtype == np.float64 and x.ndim == 1 else 0.0


@pytest.mark.parametrize("f, value, gradient", [
    (isinstance_ndarray, 5.0, [2.0, 4.0]), (type_is_ndarray, 5.0, [2.0, 4.0]),
    (element_is_numpy_floating, 1.0, [2.0, 0.0]), (element_is_a_float_too, 1.0, [2.0, 0.0]),
    (reduction_is_numpy_float64, 9.0, [6.0, 6.0]), (array_dtype_and_ndim, 5.0, [2.0, 4.0])],
    ids=lambda v: getattr(v, "__name__", ""))
def test_an_array_and_its_elements_answer_as_numpy_values(f, value, gradient):
    x = np.array([1.0, 2.0])
    found = gradients(f, x)
    for path, (v, g) in found.items():
        assert close(v, value) and close(g, np.array(gradient)), path
    # forward mode and a Hessian-vector product take the same branch
    _, tangent = astad.jvp(f, (x,), (np.array([1.0, 0.0]),))
    assert close(tangent, gradient[0])
    hvp = astad.jvp(astad.grad(f), (x,), (np.array([1.0, 0.0]),))[1]
    assert hvp.shape == (2,) and np.all(np.isfinite(hvp))


def test_a_numpy_float64_argument_is_a_numpy_float64_inside():
    def f(x):
        return x * x if isinstance(x, np.floating) and type(x) is np.float64 else 0.0
    x = np.float64(3.0)
    value, grad = astad.reverse_diff(f).value_and_grad(x)
    assert value == 9.0 and grad == 6.0 and type(grad) is np.float64
    assert type(value) is np.float64  # numpy's arithmetic, as in the original
    assert astad.jvp(f, (x,), (1.0,))[1] == 6.0
    assert astad.hessian(f)(x) == 2.0


def test_a_numpy_float32_argument_computes_in_float32():
    def f(x):
        return x * x if type(x) is np.float32 else 0.0
    x = np.float32(1.1)
    value, grad = astad.reverse_diff(f).value_and_grad(x)
    assert type(value) is np.float32 and value == f(x)  # rounded as float32 is
    assert type(grad) is np.float32 and grad == pytest.approx(2.2, rel=1e-6)


def test_type_of_a_dual_by_name_and_through_calls():
    def f(x, kinds):
        kinds.append(type(x).__name__)
        kinds.append(type(x * 2.0) is float)
        return x * 2.0
    kinds: list = []
    assert astad.reverse_diff(f, argnums=0).grad(1.5, kinds) == 2.0
    assert kinds == ["float", True]
    assert math.isclose(astad.jvp(lambda x: f(x, []), (1.5,), (1.0,))[1], 2.0)
