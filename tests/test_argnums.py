"""Issue 12, class 5: ``argnums`` read as JAX reads it, on every path (``reverse_diff`` with
its specialised float code and its tape, the function transforms): negative numbers count
from the end, naming an argument twice is an error (also ``(0, -2)`` for two arguments).
And class 10: the same object at two places (an array, a list, a row shared by two rows)
has a partial derivative at each, as in JAX; a write into it is refused.
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


# -- the same object at two places: JAX's partial derivatives ------------------------------
def array_product(a, b):
    return np.sum(a * b)


def weighted_square(a, b):
    return np.sum(a * b * b)


def test_the_same_array_twice_gives_the_partial_at_each_place():
    v = np.array([1.0, 2.0])
    f = astad.reverse_diff(array_product)
    for got in (f.grad(v, v), f.vjp(v, v)[1](1.0),
                astad.reverse_diff(array_product, preaccumulate=False).grad(v, v),
                astad.grad(array_product, argnums=(0, 1))(v, v)):
        assert np.array_equal(got[0], v) and np.array_equal(got[1], v)  # d/da = b, d/db = a
    # their sum is the total derivative of g(v) = f(v, v): the chain rule
    ga, gb = astad.grad(weighted_square, argnums=(0, 1))(v, v)
    np.testing.assert_array_equal(ga + gb, astad.grad(lambda u: weighted_square(u, u))(v))
    # lists, as arrays
    lists = astad.reverse_diff(lambda a, b: sum(x * y * y for x, y in zip(a, b)))
    same = [1.0, 2.0]
    assert lists.grad(same, same) == ([1.0, 4.0], [2.0, 8.0])


def test_the_same_object_inside_two_structures_has_a_partial_at_each():
    v = np.array([1.0, 2.0])

    def f(pair, d):
        return np.sum(pair[0] * d["w"] * d["w"])
    ga, gd = astad.reverse_diff(f).grad((v, 1.0), {"w": v})
    assert np.array_equal(ga[0], v * v) and np.array_equal(gd["w"], 2.0 * v * v)
    row = [1.0, 2.0]
    matrix = [row, row]  # a row shared by two rows: each its own partial

    def rows(m):
        return m[0][0] * m[1][0] ** 2 + m[1][1]
    assert astad.grad(rows)(matrix) == [[1.0, 0.0], [2.0, 1.0]]


def test_forward_mode_gives_each_place_its_own_tangent():
    """jvp and jacfwd (and hessian, forward over reverse) treat the places as reverse mode
    does: along (t1, t2) the derivative is <d/da, t1> + <d/db, t2>, for an array, a list
    and a row shared by two rows (a list's second place once took the first's tangent)."""
    lists = lambda a, b: sum(x * y * y for x, y in zip(a, b))  # noqa: E731
    same, t1, t2 = [1.0, 2.0], [0.5, -1.0], [2.0, 3.0]
    ga, gb = astad.grad(lists, argnums=(0, 1))(same, same)  # ([1, 4], [2, 8])
    want = sum(g * t for g, t in zip(ga + gb, t1 + t2))
    assert astad.jvp(lists, (same, same), (t1, t2)) == (9.0, want)
    v = np.array(same)
    assert astad.jvp(weighted_square, (v, v), (np.array(t1), np.array(t2)))[1] == want
    assert astad.jacfwd(lists, argnums=(0, 1))(same, same) == ([1.0, 4.0], [2.0, 8.0])
    row = [1.0, 2.0]
    matrix = [row, row]

    def rows(m):
        return m[0][0] * m[1][0] ** 2 + m[1][1]
    assert astad.jacfwd(rows)(matrix) == [[1.0, 0.0], [2.0, 1.0]]
    # d2/dm00 dm10 = 2 m10 = 2, d2/dm10^2 = 2 m00 = 2: each place a row and a column
    hessian = astad.hessian(rows)(matrix)
    assert hessian[0][0] == [[0.0, 0.0], [2.0, 0.0]]
    assert hessian[1][0] == [[2.0, 0.0], [2.0, 0.0]]


def test_a_write_into_an_object_given_twice_is_refused_naming_both_places():
    v = np.array([1.0, 2.0])

    def scale_first(a, b):
        a *= 2.0
        return np.sum(a * b)

    def append_to_first(a, b):
        a.append(1.0)
        return sum(b)
    with pytest.raises(astad.InputError, match=r"args\[0\] and as args\[1\].*changes it"):
        astad.grad(scale_first, argnums=(0, 1))(v, v)
    # forward mode too: the write is seen in the values or the tangent of the place
    with pytest.raises(astad.InputError, match=r"primals\[0\] and as primals\[1\]"):
        astad.jvp(scale_first, (v, v), (v, v))
    with pytest.raises(astad.InputError, match="changes it"):
        astad.jacfwd(scale_first, argnums=(0, 1))(v, v)
    same = [1.0, 2.0]
    with pytest.raises(astad.InputError, match="changes it"):
        astad.grad(append_to_first, argnums=(0, 1))(same, same)
    # a cycle is one object: it keeps its aliasing
    cycle = [1.0]
    cycle.append(cycle)
    assert astad.grad(lambda c: c[0] * c[1][0])(cycle)[0] == 2.0


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


@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "hessian", "jvp", "f.grad"])
def test_partials_at_two_places_in_every_transform(transform):
    """f(a, b) = sum(a * b * b) at a = b = v: d/da = b^2, d/db = 2 a b (JAX's answers)."""
    v = np.array([1.0, 2.0])
    da, db = v * v, 2.0 * v * v
    if transform == "grad":
        got = astad.grad(weighted_square, argnums=(0, 1))(v, v)
    elif transform == "vjp":
        got = astad.vjp(weighted_square, v, v)[1](1.0)
    elif transform == "f.grad":
        got = astad.reverse_diff(weighted_square).grad(v, v)
    elif transform == "jacrev":
        got = astad.jacrev(weighted_square, argnums=(0, 1))(v, v)
    elif transform == "jvp":  # along a's direction only, then b's
        along_a = astad.jvp(weighted_square, (v, v), (np.ones(2), np.zeros(2)))[1]
        along_b = astad.jvp(weighted_square, (v, v), (np.zeros(2), np.ones(2)))[1]
        got = (np.array([along_a]), np.array([along_b]))
        da, db = np.array([np.sum(da)]), np.array([np.sum(db)])
    else:  # the Hessian's blocks: d2/da2 = 0, d2/dadb = diag(2 b), d2/db2 = diag(2 a)
        h = astad.hessian(weighted_square, argnums=(0, 1))(v, v)
        np.testing.assert_array_equal(h[0][0], np.zeros((2, 2)))
        np.testing.assert_array_equal(h[0][1], np.diag(2.0 * v))
        np.testing.assert_array_equal(h[1][1], np.diag(2.0 * v))
        return
    np.testing.assert_array_equal(got[0], da)
    np.testing.assert_array_equal(got[1], db)
