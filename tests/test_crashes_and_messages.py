"""Issue 12, "crashes and misleading messages": supported code that was refused now runs
(and gives the right derivative, derived by hand), exceptions come in Python's order, and
every error names the construct and the user's line with advice that fits.
"""
from __future__ import annotations

import functools
import math
import re
import operator
import subprocess
import sys

import numpy as np
import pytest

import astad
from paths import check_every_path


# -- supported code that was refused ------------------------------------------------------
def compare_a_builtin_of_a_list(xs):
    if math.tanh(sum(xs)) > 1.0:
        return 0.0
    while math.sqrt(sum(xs)) < 3.0:
        xs = [x * 2.0 for x in xs]
    return xs[0] * xs[1]


class Vec:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __abs__(self):
        return math.sqrt(self.a * self.a + self.b * self.b)


def compare_a_user_abs(x, y):
    v = Vec(x, y)
    if abs(v) > 1.0 and abs(v) < 10.0:
        return x * y
    return x


def test_comparisons_of_builtins_on_lists_and_objects():
    # sum 3 -> doubled twice: xs = [4, 8] (sum 12 >= 9): f = 16 x0 x1
    got = astad.reverse_diff(compare_a_builtin_of_a_list).value_and_grad([1.0, 2.0])
    assert got == (32.0, [32.0, 16.0])
    check_every_path(compare_a_user_abs, (3.0, 4.0), 12.0, (4.0, 3.0))


def formats_text(x, y):
    text = "%s|%.2f" % (x, x) + "|%s and %.1f" % (x, y) + "|%(a).3f" % {"a": y} + "|%g" % x  # noqa: UP031,E501
    return x * y if text == "1.5|1.50|1.5 and 2.0|2.000|1.5" else 0.0


def test_printf_formatting_reads_the_primal():
    check_every_path(formats_text, (1.5, 2.0), 3.0, (2.0, 1.5))


def numpy_truth_times_a_dual(w, x):
    return np.sum((w[0] > 0) * x) + (w[1] > 0) * x


def test_a_numpy_bool_times_a_dual():
    value, (gw, gx) = astad.reverse_diff(numpy_truth_times_a_dual).value_and_grad(
        np.array([1.0, -1.0]), 2.0)
    assert value == 2.0 and gx == 1.0 and np.array_equal(gw, [0.0, 0.0])


class Celsius:
    def __init__(self, degrees):
        self.degrees = degrees

    def __float__(self):
        return self.degrees * 1.8 + 32.0


def float_of_a_user_class(x):
    return float(Celsius(x)) * 2.0 + math.sin(Celsius(x)) + math.atan2(Celsius(x), 100.0)


def test_a_user_class_whose_float_returns_a_differentiated_value():
    f = 1.8 * 2.0 + 32.0
    value = float_of_a_user_class(2.0)
    derivative = 3.6 + 1.8 * math.cos(f) + 1.8 * 100.0 / (f * f + 100.0 ** 2)
    check_every_path(float_of_a_user_class, (2.0,), value, derivative)


def scaled(x, factor=1.0, *, offset=0.0):
    return x * factor + offset


astad.register_scalar(scaled, lambda x, factor=1.0, offset=0.0: factor,
                      lambda x, factor=1.0, offset=0.0: x)


def calls_with_keywords(x, y):
    return scaled(x, factor=y) + scaled(y, 2.0)


def test_a_registered_function_called_with_keywords():
    check_every_path(calls_with_keywords, (1.5, 2.0), 3.0 + 4.0, (2.0, 1.5 + 2.0))
    with pytest.raises(TypeError, match="keyword-only"):
        astad.reverse_diff(offset_by_keyword).grad(1.5)


def offset_by_keyword(x):
    return scaled(x, offset=1.0)


def test_pow_with_a_modulus_is_pythons_error():
    with pytest.raises(TypeError, match="3rd argument not allowed"):
        astad.reverse_diff(lambda x: pow(x, 2, 5)).grad(3.0)
    assert astad.reverse_diff(lambda x, n: x * pow(n, 2, 5), argnums=0).grad(3.0, 3) == 4.0


# -- exceptions in Python's order -------------------------------------------------------------
def divides_before_an_unbound_name(w, x):
    return w / x + undefined_global  # noqa: F821


def divides_before_an_unbound_local(w, x, flag):
    if flag:
        late = 1.0
    return w / x + late


def catches_the_first_error(w, x):
    try:
        return w / x + undefined_global  # noqa: F821
    except ZeroDivisionError:
        return w * 3.0


def test_exceptions_come_in_pythons_order():
    for path in ({}, {"preaccumulate": False}):
        with pytest.raises(ZeroDivisionError):
            astad.reverse_diff(divides_before_an_unbound_name, **path).grad(1.0, 0.0)
        with pytest.raises(ZeroDivisionError):
            astad.reverse_diff(divides_before_an_unbound_local, **path).grad(1.0, 0.0, False)
        assert astad.reverse_diff(catches_the_first_error, **path).grad(1.0, 0.0) == (3.0, 0.0)
    with pytest.raises(ZeroDivisionError):
        astad.jvp(divides_before_an_unbound_name, (1.0, 0.0), (1.0, 0.0))
    # still one fused entry where nothing can raise out of order
    _, pullback = astad.reverse_diff(lambda a, b: a * b + a / b).vjp(1.0, 2.0)
    assert pullback.tape_length == 1


# -- lambdas -------------------------------------------------------------------------------
ACTIVATIONS = {
    "double": lambda x: x * 2.0,
    "square": lambda x: x * x,  # with a comment
    "spread": lambda x: (x *
                         3.0),
    "scaled": lambda x, k=0.5: x * k,  # (its parameters' commas are its own)
}
PAIR = (lambda x: x * 4.0, lambda y: y * 5.0)


def test_lambdas_in_multi_line_dict_literals_and_on_one_line():
    assert [astad.grad(f)(3.0) for f in ACTIVATIONS.values()] == [2.0, 6.0, 3.0, 0.5]
    assert [astad.grad(f)(3.0) for f in PAIR] == [4.0, 5.0]
    assert "# \"square\": lambda x: x * x," in astad.reverse_diff(ACTIVATIONS["square"]).source


# -- errors that name the construct and the line, with fitting advice ------------------------
def assigns_into_a_plain_array(x):
    y = np.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[i]
    return np.sum(y)


def joins_with_index_tricks(x):
    return np.sum(np.r_[x, x])


def joins_columns_with_index_tricks(x):
    return np.sum(np.c_[x, x])


def assigns_a_whole_array(x):
    y = np.zeros(2)
    y[:] = x
    return np.sum(y)


OUTSIDE = np.zeros(2)


def assigns_into_an_array_from_outside(x):
    OUTSIDE[:] = x
    return np.sum(OUTSIDE)


def assigns_an_element_into_an_array_from_outside(x):
    for i in range(len(x)):
        OUTSIDE[i] = x[i]
    return np.sum(OUTSIDE)


@pytest.mark.parametrize("f, line", [
    (assigns_into_an_array_from_outside, "OUTSIDE[:] = x"),
    (assigns_an_element_into_an_array_from_outside, "OUTSIDE[i] = x[i]"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_errors_name_the_construct_and_the_users_line(f, line):
    for run in (lambda: astad.reverse_diff(f).grad(np.array([1.0, 2.0])),
                lambda: astad.jvp(f, (np.array([1.0, 2.0]),), (np.ones(2),))):
        with pytest.raises(astad.NotDifferentiableError) as info:
            run()
        message = str(info.value)
        assert "written into a plain array" in message and "copy" in message
        assert "register_scalar" not in message
        assert "test_crashes_and_messages.py" in message and line in message
    assert not OUTSIDE.any()


@pytest.mark.parametrize("f, factor", [
    (assigns_into_a_plain_array, 1.0), (joins_with_index_tricks, 2.0),
    (joins_columns_with_index_tricks, 2.0), (assigns_a_whole_array, 1.0),
], ids=lambda v: getattr(v, "__name__", ""))
def test_what_was_refused_with_a_misleading_message_is_differentiated(f, factor):
    """(Refused with wrong advice when issue 12 was written; writes into arrays made
    inside and np.r_/np.c_ are differentiated since.)"""
    x = np.array([1.0, 2.0])
    value, grad = astad.reverse_diff(f).value_and_grad(x)
    assert value == 3.0 * factor and np.array_equal(grad, [factor, factor])
    assert astad.jvp(f, (x,), (np.array([1.0, 0.5]),)) == (3.0 * factor, 1.5 * factor)


def integer_part_and_repeats(w):
    k = np.int64(w[:, -1])                       # integers: no derivative
    return float(np.sum(k)) * np.sum(w) + np.sum(np.repeat(w, 0)) + np.sum(np.hstack(w[0]))


def test_numpy_calls_that_crashed_inside_astads_rules():
    w = np.array([[1.5, 2.0], [0.5, 3.0]])
    value, grad = astad.reverse_diff(integer_part_and_repeats).value_and_grad(w)
    # k = [2, 3]: 5 sum(w) + w[0, 0] + w[0, 1]
    assert value == 5.0 * 7.0 + 3.5
    assert np.array_equal(grad, [[6.0, 6.0], [5.0, 5.0]])


def test_the_command_line_reports_a_missing_argument_without_a_traceback(tmp_path):
    script = tmp_path / "model.py"
    script.write_text("def f(x, y):\n    return x * y\n")
    result = subprocess.run([sys.executable, "-m", "astad", "check", f"{script}:f", "1.0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "missing a required argument: 'y'" in result.stderr


def gamma_of(x):
    return math.gamma(x)


def test_math_gamma_has_a_rule():
    # gamma' = gamma digamma; digamma(5/2) = digamma(1/2) + 2 + 2/3 = 8/3 - euler - 2 ln 2
    digamma = 8.0 / 3.0 - 0.5772156649015329 - 2.0 * math.log(2.0)
    check_every_path(gamma_of, (2.5,), math.gamma(2.5), math.gamma(2.5) * digamma,
                     rtol=1e-14)


def doubles(x):
    return x * 2.0


def pairs(x):
    return [x, x * x]


def test_grad_of_a_result_that_is_not_a_float_names_what_the_function_returned():
    """The message shows the user's value and its type (an ndarray, a list), never the
    dual astad carried it in."""
    with pytest.raises(astad.InputError, match=r"doubles returned ndarray array\(\[2\., 4\.\]\); "
                       r"doubles\.grad needs a float result"):
        astad.reverse_diff(doubles).grad(np.array([1.0, 2.0]))
    with pytest.raises(astad.InputError, match=r"pairs returned list \[3\.0, 9\.0\]"):
        astad.reverse_diff(pairs).grad(3.0)


def one_element(x):
    return np.sum(x, keepdims=True)


def rounded(x):
    return round(x * 2.0)


NOT_A_FLOAT = {
    # (the call, what the message names as called, the advice it must give)
    "f.grad of a vector": (lambda: astad.reverse_diff(doubles).grad(np.ones(2)),
                           "doubles.grad", r"doubles\.vjp\(\*args\).*astad\.jacrev\(doubles\)"),
    "f.value_and_grad": (lambda: astad.reverse_diff(pairs).value_and_grad(3.0),
                         "pairs.value_and_grad", r"pairs\.vjp\(\*args\)"),
    "astad.grad": (lambda: astad.grad(doubles)(np.ones(2)),
                   "astad.grad", r"astad\.vjp\(doubles, \*args\).*astad\.jacrev\(doubles\)"),
    "astad.grad of a lambda": (lambda: astad.grad(lambda x: [x, x])(1.0),
                               "astad.grad", r"astad\.vjp\(f, \*args\)"),
    "astad.value_and_grad, one element": (
        lambda: astad.value_and_grad(one_element)(np.ones(3)),
        "astad.value_and_grad", r"a single number: return that number \(result\.item\(\)"),
    "astad.value_and_grad of a lambda, one element": (
        lambda: astad.value_and_grad(lambda x: one_element(x))(np.ones(3)),
        "astad.value_and_grad", r"result\[0\] of a 1-element vector"),
    "a list of one float": (lambda: astad.reverse_diff(lambda x: [2.0 * x]).grad(1.0),
                            "<lambda>.grad", r"return that number \(result\[0\]\)"),
    "an int": (lambda: astad.grad(rounded)(1.3), "astad.grad",
               r"an int or a bool has no derivative"),
    "an int through f.grad": (lambda: astad.reverse_diff(rounded).grad(1.3), "rounded.grad",
                              r"an int or a bool has no derivative"),
}


@pytest.mark.parametrize("case", list(NOT_A_FLOAT), ids=list(NOT_A_FLOAT))
def test_a_result_that_is_not_a_float_gets_advice_in_the_terms_of_the_call(case):
    """The message names the API the user called (not ``.grad`` where they called
    ``astad.value_and_grad``), suggests what exists for it (``astad.vjp`` for the
    transforms, ``f.vjp`` for a decorated function), ``[0]`` for a single number, and no
    pullback for an int."""
    call, called, advice = NOT_A_FLOAT[case]
    with pytest.raises(astad.InputError) as caught:
        call()
    message = str(caught.value)
    assert f"; {called} needs a float result: " in message
    assert re.search(advice, message), message
    if "int" in case:
        assert "vjp" not in message


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jvp", "vjp", "jacfwd",
                                       "jacrev"])
@pytest.mark.parametrize("argument", [3.0, np.array([1.0, 2.0])])
def test_has_aux_without_a_pair_names_the_users_type(transform, argument):
    expected = type(argument).__name__  # (float or ndarray, never the dual carrying it)
    calls = {"grad": lambda: astad.grad(doubles, has_aux=True)(argument),
             "value_and_grad": lambda: astad.value_and_grad(doubles, has_aux=True)(argument),
             "jvp": lambda: astad.jvp(doubles, (argument,), (argument,), has_aux=True),
             "vjp": lambda: astad.vjp(doubles, argument, has_aux=True),
             "jacfwd": lambda: astad.jacfwd(doubles, has_aux=True)(argument),
             "jacrev": lambda: astad.jacrev(doubles, has_aux=True)(argument)}
    with pytest.raises(astad.InputError, match=rf"must return a pair \(value, aux\); it "
                       rf"returned {expected}$"):
        calls[transform]()


# -- a numpy scalar's indexing; operator's getters as values and sort keys --------------------
class _Weighted:
    def __init__(self, w):
        self.w = w

    def scaled(self, k):
        return self.w * k


def scalar_indexed(v):
    return np.sum(v)[()] * 2.0 + np.sum(np.sum(v)[...] * v)


def sorted_by_itemgetter(d):
    items = sorted(d.items(), key=operator.itemgetter(0))
    return sum(v * v for _, v in items)


def itemgetter_as_a_value(xs):
    get = operator.itemgetter(1, 2)
    a, b = get(xs)
    return a * b


def sorted_by_attrgetter(w):
    objects = [_Weighted(w * 2.0), _Weighted(w)]
    objects.sort(key=operator.attrgetter("w"))
    return objects[0].w * 3.0 + objects[1].w


def methodcaller_of_a_user_method(w):
    call = operator.methodcaller("scaled", k=3.0)
    return call(_Weighted(w)) * math.sin(w)


def methodcaller_of_an_array_method(v):
    return functools.partial(operator.methodcaller("sum"))(v) * 2.0


@pytest.mark.parametrize("f, argument, gradient", [
    (scalar_indexed, np.array([1.0, 2.0]), np.array([8.0, 8.0])),  # 2 s + s^2, s = 3
    (sorted_by_itemgetter, {"b": 2.0, "a": 1.0}, {"b": 4.0, "a": 2.0}),
    (itemgetter_as_a_value, [1.0, 2.0, 3.0], [0.0, 3.0, 2.0]),
    (sorted_by_attrgetter, 1.5, 5.0),
    (methodcaller_of_a_user_method, 0.5, 3.0 * (math.sin(0.5) + 0.5 * math.cos(0.5))),
    (methodcaller_of_an_array_method, np.array([1.0, 2.0]), np.array([2.0, 2.0])),
], ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_scalar_indexing_and_operator_getters(f, argument, gradient):
    got = astad.grad(f)(argument)
    if isinstance(gradient, dict):
        assert got == pytest.approx(gradient)
    else:
        np.testing.assert_allclose(got, gradient, rtol=1e-12)
    # forward mode along the argument itself: the gradient dotted with it
    _, tangent = astad.jvp(f, (argument,), (argument,))
    pairs = [(gradient[k], argument[k]) for k in argument] if isinstance(argument, dict) \
        else zip(np.ravel(gradient), np.ravel(argument))
    assert tangent == pytest.approx(sum(g * a for g, a in pairs), rel=1e-12)


def test_a_float_result_is_not_subscriptable_as_in_python():
    with pytest.raises(TypeError, match="'float' object is not subscriptable"):
        astad.grad(lambda x: (x * 2.0)[()])(1.0)
    with pytest.raises(IndexError, match="invalid index to scalar variable"):
        astad.grad(lambda v: np.sum(v)[0])(np.ones(2))


@pytest.mark.parametrize("a", [np.array([[1.0, 2.0], [2.0, 4.0]]), np.zeros((3, 3)),
                               np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 1.0], [0.5, 3.0]]])],
                         ids=["rank 1", "zero", "a stack with a singular matrix"])
def test_the_determinant_of_a_singular_matrix_has_the_adjugate_as_gradient(a):
    def total(m):
        return np.sum(np.linalg.det(m))

    def adjugate_t(m):  # the cofactors, by 2x2 minors or by definition
        if m.shape[-1] == 2:
            return np.stack([m[..., 1, 1], -m[..., 1, 0], -m[..., 0, 1], m[..., 0, 0]],
                            -1).reshape(m.shape)
        out = np.zeros_like(m)
        for i in range(3):
            for j in range(3):
                minor = np.delete(np.delete(m, i, -2), j, -1)
                out[..., i, j] = (-1) ** (i + j) * np.linalg.det(minor)
        return out

    np.testing.assert_allclose(astad.grad(total)(a), adjugate_t(a), atol=1e-12)
    direction = np.ones_like(a)
    assert astad.jvp(total, (a,), (direction,))[1] == pytest.approx(
        np.sum(adjugate_t(a) * direction), abs=1e-12)


def modf_pair(x):
    fraction, whole = math.modf(x[0] * 3.7)
    return np.array([fraction * x[1], whole + x[1]])


@astad.custom_vjp
def _structured(x):
    return [x * 2.0, {"s": x * x}]


_structured.defvjp(lambda x: (_structured(x), x),
                   lambda x, g: (g[0] * 2.0 + g[1]["s"] * 2.0 * x,))


def structured_custom(x):
    out = _structured(x[0])
    return np.array([out[0], out[1]["s"] + x[1]])


@pytest.mark.parametrize("f, expected", [
    (modf_pair, lambda x: np.array([[3.7 * x[1], math.modf(x[0] * 3.7)[0]], [0.0, 1.0]])),
    (structured_custom, lambda x: np.array([[2.0, 0.0], [2.0 * x[0], 1.0]])),
], ids=["math.modf", "a custom_vjp returning a list and a dict"])
def test_jacobians_through_a_structured_custom_result(f, expected):
    x = np.array([0.9, 1.3])
    # (a custom_vjp alone has no forward rule: jacfwd refuses it, with a clear message)
    jacobians = (astad.jacrev,) if f is structured_custom else (astad.jacrev, astad.jacfwd,
                                                                  astad.jacobian)
    for jacobian in jacobians:
        np.testing.assert_allclose(jacobian(f)(x), expected(x), rtol=1e-12)


@pytest.mark.parametrize("g, second", [
    (lambda v: math.dist((v, 2.0), (0.5, v * v)), None),
    (lambda v: math.modf(v * 3.0)[0] * v, lambda v: 6.0),
    (lambda v: math.frexp(v * 3.0)[0] * v, lambda v: 6.0 * 2.0 ** -math.frexp(3.0 * v)[1]),
], ids=["math.dist", "math.modf", "math.frexp"])
def test_astads_own_custom_primitives_at_second_order(g, second):
    v = 0.9
    first = astad.grad(g)
    expected = (first(v + 1e-6) - first(v - 1e-6)) / 2e-6 if second is None else second(v)
    for got in (astad.grad(first)(v), astad.hessian(g)(v), astad.jvp(first, (v,), (1.0,))[1],
                astad.jacfwd(astad.jacrev(g))(v)):
        assert got == pytest.approx(expected, rel=1e-7)


def test_np_vectorize_is_refused_with_the_loop_to_write_instead():
    def f(x):
        square = np.vectorize(lambda t: t * t)
        return np.sum(square(x))
    with pytest.raises(astad.NotDifferentiableError,
                       match=r"np\.vectorize\(\.\.\.\) calls its function element by element"
                             r".*np\.array\(\[fn\(t\) for t in x\]\)"):
        astad.grad(f)(np.ones(3))
    assert f(np.ones(3)) == 3.0  # (on plain values it just runs)


def test_a_library_function_without_a_rule_is_named_as_the_user_calls_it():
    """Not numpy's short name of a ufunc: the module the user took it from, and the
    register_vjp line that gives it a rule."""
    special = pytest.importorskip("scipy.special")

    def f(x):
        return special.struve(1.5, x) * x
    with pytest.raises(astad.NotDifferentiableError,
                       match=r"no derivative for scipy\.special\.struve of a differentiated "
                             r"value; give it one with astad\.register_vjp\("
                             r"scipy\.special\.struve, vjp_0, vjp_1"):
        astad.grad(f)(0.7)
