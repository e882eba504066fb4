"""Issue 12, class 2, and issue 13 item 3: numpy functions given lists and floats follow
the array rules; numpy's scalar types and numpy scalars' methods on differentiated values.

A list (or tuple) holding differentiated values, given to a numpy function, is made a
differentiated array first, as numpy itself converts it; a scalar dual is a 0-d array
where numpy would not dispatch on it. An object array of duals is never produced
silently: code astad did not transform that converts a dual to an array is refused.
Expected gradients are derived by hand; every path is checked (tests/paths.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import astad
from paths import check_every_path, close, gradients


def concatenate_lists(a, b):
    return np.sum(np.concatenate([[a, b], [a]]) ** 2)         # 2a^2 + b^2


def array_of_a_float(a, b):
    return np.sum(np.array(a) * 3.0) + b                         # 3a + b


def stack_lists(a, b):
    return np.sum(np.stack([[a, b], [b, a]]) * np.array([[1.0, 2.0], [3.0, 4.0]]))


def hstack_and_vstack(a, b):
    return np.sum(np.hstack([[a], [b, b]])) + np.sum(np.vstack([[a, b], [b, a]]))


def cumsum_of_a_list(a, b):
    return np.sum(np.cumsum([a, b, a]))                          # 4a + 2b


def sort_of_a_list(a, b):
    return float(np.sort([a, b])[0]) * 2.0 + b                   # min(a, b) * 2 + b


def diff_of_a_list(a, b):
    return np.sum(np.diff([a, b, a * a]) ** 2)


def clip_of_a_list(a, b):
    return np.sum(np.clip([a, b], 0.0, 2.5))                     # a + b inside


def where_of_lists(a, b):
    return np.sum(np.where([True, False], [a, b], [b, a]))       # 2a


def full_of_a_float(a, b):
    return np.sum(np.full(3, a)) + np.sum(np.full_like(np.zeros(2), b))   # 3a + 2b


def exp_of_a_list(a, b):
    return np.sum(np.exp([a, b]))


def numpy_function_of_a_float(a, b):
    return np.exp(a) * np.sin(b) + np.sqrt(a)


def method_of_an_array_with_a_list(a, b):
    return np.ones(2).dot([a, b]) + np.array([a, b]).dot([b, a])   # a + b + 2ab


A, B = 1.5, 2.0
CASES = [
    (concatenate_lists, 2 * A * A + B * B, (4 * A, 2 * B)),
    (array_of_a_float, 3 * A + B, (3.0, 1.0)),
    (stack_lists, A + 2 * B + 3 * B + 4 * A, (5.0, 5.0)),
    (hstack_and_vstack, A + 2 * B + 2 * A + 2 * B, (3.0, 4.0)),
    (cumsum_of_a_list, 4 * A + 2 * B, (4.0, 2.0)),
    (sort_of_a_list, 2 * A + B, (2.0, 1.0)),
    (diff_of_a_list, (B - A) ** 2 + (A * A - B) ** 2,
     (-2 * (B - A) + 4 * A * (A * A - B), 2 * (B - A) - 2 * (A * A - B))),
    (clip_of_a_list, A + B, (1.0, 1.0)),
    (where_of_lists, 2 * A, (2.0, 0.0)),
    (full_of_a_float, 3 * A + 2 * B, (3.0, 2.0)),
    (exp_of_a_list, np.exp(A) + np.exp(B), (np.exp(A), np.exp(B))),
    (numpy_function_of_a_float, np.exp(A) * np.sin(B) + np.sqrt(A),
     (np.exp(A) * np.sin(B) + 0.5 / np.sqrt(A), np.exp(A) * np.cos(B))),
    (method_of_an_array_with_a_list, A + B + 2 * A * B, (1 + 2 * B, 1 + 2 * A)),
]


# numpy functions whose forward-mode rule, or whose derivative of a derivative, astad does
# not have yet (an error naming the function, never a wrong value: the catalogue of numpy
# rules is its own work); their reverse paths are checked
NO_FORWARD = {sort_of_a_list, clip_of_a_list}
NO_NESTED = {concatenate_lists, diff_of_a_list, sort_of_a_list, clip_of_a_list}


@pytest.mark.parametrize("f, value, gradient", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_functions_on_lists_and_floats_follow_the_array_rules(f, value, gradient):
    check_every_path(f, (A, B), value, gradient, rtol=1e-12, forward=f not in NO_FORWARD,
                     nested=f not in NO_NESTED)
    if f in NO_NESTED or f in NO_FORWARD:
        return
    # and a second derivative through them, against finite differences of the gradient
    h = 1e-5
    hessian = astad.hessian(f, argnums=(0, 1))(A, B)
    for j in range(2):
        up = astad.grad(f, argnums=(0, 1))(*[v + h * (k == j) for k, v in enumerate((A, B))])
        down = astad.grad(f, argnums=(0, 1))(*[v - h * (k == j) for k, v in
                                               enumerate((A, B))])
        for i in range(2):
            assert close(float(hessian[i][j]), (up[i] - down[i]) / (2 * h), rtol=1e-5,
                         atol=1e-5)


def test_list_arguments_given_to_numpy():
    def f(xs):
        return np.sum(np.concatenate([xs, xs]) ** 2)
    assert astad.reverse_diff(f).grad([1.0, 2.0]) == [4.0, 8.0]
    _, pullback = astad.reverse_diff(lambda xs: np.concatenate([xs, xs])).vjp([1.0, 2.0])
    assert pullback(np.array([1.0, 2.0, 3.0, 4.0])) == [4.0, 6.0]
    assert astad.jvp(f, ([1.0, 2.0],), ([1.0, 0.0],))[1] == 4.0


def test_a_numpy_function_without_a_rule_is_refused_never_an_object_array():
    def f(a, b):
        return np.sum(np.convolve([a, b], [1.0, 3.0]))
    with pytest.raises(astad.NotDifferentiableError, match=r"numpy\.convolve of a differentiated"):
        astad.reverse_diff(f).grad(1.0, 2.0)
    with pytest.raises(astad.NotDifferentiableError, match=r"numpy\.convolve of a differentiated"):
        astad.jvp(f, (1.0, 2.0), (1.0, 0.0))


def test_floats_given_to_a_numpy_function_with_a_rule():
    def f(a, b):  # (np.append had no rule when this class was found: it has one now)
        return np.sum(np.append([a, b], 3.0) ** 2)
    assert astad.reverse_diff(f).value_and_grad(1.0, 2.0) == (14.0, (2.0, 4.0))
    assert astad.jvp(f, (1.0, 2.0), (1.0, 0.0)) == (14.0, 2.0)


class Positive:
    def __init__(self, v):
        self.v = v

    def __bool__(self):  # Python calls it for `if`: code astad does not transform
        return bool(np.asarray([self.v])[0] > 0.0)


def test_code_astad_did_not_transform_cannot_make_an_object_array_of_duals():
    def f(a):
        return np.sum(np.asarray([a, 1.0]) * 2.0)  # generated code: the rule of np.asarray
    assert astad.reverse_diff(f).grad(1.5) == 2.0

    def g(a):
        return a * 2.0 if Positive(a) else a
    # numpy's own conversion of a dual, in code astad did not transform, is refused: an
    # object array of duals no rule follows is never made
    for run in (lambda: astad.reverse_diff(g).grad(1.5), lambda: astad.jvp(g, (1.5,), (1.0,))):
        with pytest.raises(astad.NotDifferentiableError, match="converted to a numpy array"):
            run()
    assert g(1.5) == 3.0


# -- numpy's scalar types ------------------------------------------------------------------------
def float64_of(a, b):
    return np.float64(a) * b if type(np.float64(a)) is np.float64 else 0.0


def int64_of_an_array(a, b):
    w = np.array([[a, b], [b, 2.0]])
    k = np.int64(w[:, -1])                 # integers: no derivative
    return float(np.sum(k)) * a + np.sum(w)


def astype_of_an_element(a, b):
    v = np.array([a, b])
    y = v[0].astype(np.float32)            # numpy scalar methods on an element
    return float(y) * b + v[1].item() * v[0].round(1) + float(v[0].dtype == np.float64)


def tolist_and_sum_of_an_element(a, b):
    v = np.array([a, b])
    return v[0].tolist() * v[1].sum() + v[1].squeeze() * 0.0 + v[1].round(0)


@pytest.mark.parametrize("f, value, gradient", [
    (float64_of, A * B, (B, A)),
    (int64_of_an_array, (2 + 2) * A + A + 2 * B + 2.0, (4.0 + 1.0, 2.0)),
    (astype_of_an_element, float(np.float32(A)) * B + B * 1.5 + 1.0,
     (B, float(np.float32(A)) + 1.5)),
    (tolist_and_sum_of_an_element, A * B + round(B), (B, A)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_scalar_types_and_methods_on_differentiated_values(f, value, gradient):
    check_every_path(f, (A, B), value, gradient, rtol=1e-6)


def test_numpy_scalar_results_keep_numpy_types():
    def f(x):
        return np.sum(x) * 2.0
    value, grad = astad.reverse_diff(f).value_and_grad(np.array([1.0, 2.0]))
    assert type(value) is np.float64 and value == 6.0
    found = gradients(lambda a: np.exp(a), 1.0)
    assert all(type(v) is np.float64 for v, _ in found.values())


def test_lists_of_numpy_float64_are_lists_of_float64_inside_and_in_the_gradient():
    def f(xs):
        assert all(type(x) is np.float64 for x in xs)
        return xs[0] * xs[1] + xs[1]
    xs = [np.float64(2.0), np.float64(3.0)]
    value, grad = astad.reverse_diff(f).value_and_grad(xs)
    assert value == 9.0 and type(value) is np.float64
    assert grad == [3.0, 3.0] and all(type(g) is np.float64 for g in grad)
    assert astad.jvp(f, (xs,), ([1.0, 0.0],))[1] == 3.0
    # numpy's arithmetic, as in the original: a division by zero is inf, not an error
    with np.errstate(all="ignore"):
        assert astad.reverse_diff(lambda v: v[0] / (v[1] - v[1])).grad(xs)[0] == np.inf


def test_np_block_of_floats_and_of_arrays_of_different_shapes():
    """np.block's nested lists are not made one array (their arrays differ in shape); a
    float in them is a 0-d array, as numpy takes it."""
    def floats(a, b):
        return np.sum(np.block([[a, b], [2.0, a * b]]) ** 2)  # a^2 + b^2 + 4 + a^2 b^2
    assert astad.grad(floats, argnums=(0, 1))(1.0, 2.0) == (10.0, 8.0)
    assert astad.jvp(floats, (1.0, 2.0), (1.0, 0.0)) == (13.0, 10.0)

    def arrays(x):
        return np.sum(np.block([[np.outer(x, x), np.ones((2, 1))], [x, 3.0]]))
    x = np.array([1.0, 2.0])
    # sum(outer) = (x0 + x1)^2, plus x0 + x1: gradient 2 (x0 + x1) + 1 for each
    assert np.array_equal(astad.grad(arrays)(x), [7.0, 7.0])
