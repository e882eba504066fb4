"""Issue 12, class 5: ``argnums`` read as JAX reads it, on every path (``reverse_diff`` with
its specialised float code and its tape, the function transforms): negative numbers count
from the end, naming an argument twice is an error (also ``(0, -2)`` for two arguments).
And class 10: the same array passed twice is one input, whose whole gradient shows at
each place (the convention for the same list passed twice).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import astad
from astad.argnums import argnums_positions


def product(x, y):
    return x * y


def scalar_loop(x, y):  # specialised float code with a loop (specialise/loops.py)
    total = 0.0
    for _ in range(2):
        total = total + x * y
    return total


@pytest.mark.parametrize("f, scale", [(product, 1.0), (scalar_loop, 2.0)],
                         ids=["straight-line", "loop"])
@pytest.mark.parametrize("argnums, expected", [
    (0, 3.0), (1, 2.0), (-1, 2.0), (-2, 3.0), ((0,), (3.0,)), ((-1,), (2.0,)),
    ((1, 0), (2.0, 3.0)), ((-1, -2), (2.0, 3.0)), ((0, -1), (3.0, 2.0))])
def test_argnums_on_every_path(f, scale, argnums, expected):
    scaled = tuple(scale * e for e in expected) if isinstance(expected, tuple) \
        else scale * expected
    decorated = astad.reverse_diff(f, argnums=argnums)
    assert decorated.grad(2.0, 3.0) == scaled  # specialised float code
    assert decorated.vjp(2.0, 3.0)[1](1.0) == scaled  # the tape
    assert astad.reverse_diff(f, argnums=argnums, preaccumulate=False).grad(2.0, 3.0) == \
        scaled
    assert astad.grad(f, argnums=argnums)(2.0, 3.0) == scaled
    assert astad.value_and_grad(f, argnums=argnums)(2.0, 3.0)[1] == scaled


@pytest.mark.parametrize("argnums", [(0, 0), (1, 1, 0), (-1, -1)])
def test_naming_an_argument_twice_is_refused_when_decorated(argnums):
    with pytest.raises(astad.AstadError, match="more than once"):
        astad.reverse_diff(product, argnums=argnums)
    with pytest.raises(astad.AstadError, match="more than once"):
        astad.grad(product, argnums=argnums)


@pytest.mark.parametrize("argnums", [(0, -2), (-1, 1)])
def test_a_negative_and_a_positive_number_of_one_argument_are_refused_at_the_call(argnums):
    f = astad.reverse_diff(product, argnums=argnums)
    for run in (lambda: f.grad(2.0, 3.0), lambda: f.vjp(2.0, 3.0),
                lambda: astad.grad(product, argnums=argnums)(2.0, 3.0)):
        with pytest.raises(astad.AstadError, match="more than once"):
            run()


@pytest.mark.parametrize("argnums", [2, -3, (0, 5)])
def test_an_argument_that_is_not_there_is_an_input_error(argnums):
    with pytest.raises(astad.InputError, match="positional argument"):
        astad.reverse_diff(product, argnums=argnums).grad(2.0, 3.0)


@pytest.mark.parametrize("argnums", [(), 1.0, True, (0, "1"), [0, None]])
def test_argnums_of_the_wrong_form_are_refused_when_decorated(argnums):
    with pytest.raises(astad.AstadError, match="argnums"):
        astad.reverse_diff(product, argnums=argnums)


def test_one_reading_shared_by_every_entry_point():
    assert argnums_positions(-1, 3) == ((2,), True)
    assert argnums_positions((0, -1), 3) == ((0, 2), False)
    assert astad.api.transforms.argnums_positions is argnums_positions


# -- the same array passed twice ---------------------------------------------------------------
def array_product(a, b):
    return np.sum(a * b)


def test_the_same_array_twice_gives_its_whole_gradient_at_each_place():
    v = np.array([1.0, 2.0])
    want = np.array([2.0, 4.0])  # d/dv sum(v * v)
    f = astad.reverse_diff(array_product)
    for got in (f.grad(v, v), f.vjp(v, v)[1](1.0),
                astad.reverse_diff(array_product, preaccumulate=False).grad(v, v),
                astad.grad(array_product, argnums=(0, 1))(v, v)):
        assert np.array_equal(got[0], want) and np.array_equal(got[1], want)
    # two equal arrays are two inputs
    a, b = f.grad(v, v.copy())
    assert np.array_equal(a, v) and np.array_equal(b, v)
    # as for lists, the documented convention
    lists = astad.reverse_diff(lambda a, b: sum(x * y for x, y in zip(a, b)))
    assert lists.grad([1.0, 2.0], [1.0, 2.0]) == ([1.0, 2.0], [1.0, 2.0])
    same = [1.0, 2.0]
    assert lists.grad(same, same) == ([2.0, 4.0], [2.0, 4.0])


def test_the_same_array_inside_two_structures_is_one_input():
    v = np.array([1.0, 2.0])

    def f(pair, d):
        return np.sum(pair[0] * d["w"])
    ga, gd = astad.reverse_diff(f).grad((v, 1.0), {"w": v})
    assert np.array_equal(ga[0], [2.0, 4.0]) and np.array_equal(gd["w"], [2.0, 4.0])


def test_forward_mode_keeps_one_tangent_per_place():
    """jvp gives d/de f(v + e t1, v + e t2): each place its own tangent, as in JAX."""
    v = np.array([1.0, 2.0])
    _, tangent = astad.jvp(array_product, (v, v), (np.array([1.0, 0.0]), np.zeros(2)))
    assert tangent == 1.0  # b[0], the tangent of the first place only
    hessian = astad.hessian(array_product, argnums=(0, 1))(v, v)
    assert np.array_equal(hessian[0][1], np.eye(2)) and np.array_equal(hessian[0][0],
                                                                       np.zeros((2, 2)))


@dataclasses.dataclass
class _Scaled:
    k: float

    @astad.reverse_diff
    def doubled(self):
        return self.k * 2.0


def test_a_method_with_no_argument_after_the_object():
    """obj.f.grad() has nothing to differentiate (the default argnums is every argument
    after obj): an error that says how to differentiate the object, not an empty argnums."""
    with pytest.raises(astad.InputError, match=r"Class.f.grad\(obj\)"):
        _Scaled(3.0).doubled.grad()
    assert _Scaled.doubled.grad(_Scaled(3.0)).k == 2.0
