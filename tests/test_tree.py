"""One walker of the user's data (astad/data/tree.py): check_grads sees exactly the leaves
astad.grad differentiates, and a container registered by the user works everywhere."""
from __future__ import annotations

import collections
import concurrent.futures
import math
import multiprocessing
import pickle
import types
from dataclasses import dataclass

import numpy as np
import pytest

import astad
from astad.data import tree
from astad.testing import check_grads

from tree_models import Pair, energy, energy_gradient


# -- a deliberately wrong rule: check_grads must see it wherever astad.grad differentiates --
def cube(x):
    return x * x * x


astad.register_scalar(cube, lambda x: 2.0 * x * x)  # wrong: the derivative is 3 x^2


def right_cube(x):
    return x * x * x


def _uses(rule):
    def f(value):
        return sum(rule(x) for x in tree.leaves(value))
    return f


def through_namespace(ns):
    return cube(ns.a) + ns.b


def right_through_namespace(ns):
    return right_cube(ns.a) + ns.b


def through_user_list(xs):
    return cube(xs[0]) + xs[1] * xs[1]


def right_through_user_list(xs):
    return right_cube(xs[0]) + xs[1] * xs[1]


def through_float32(x):
    return cube(x)


def right_through_float32(x):
    return right_cube(x)


@pytest.mark.parametrize("wrong, right, argument, leaves", [
    (through_namespace, right_through_namespace, types.SimpleNamespace(a=2.0, b=0.5), 2),
    (through_user_list, right_through_user_list, collections.UserList([2.0, 0.5]), 2),
    (through_float32, right_through_float32, np.float32(1.5), 1),
])
def test_check_grads_checks_every_leaf_astad_differentiates(wrong, right, argument, leaves):
    gradient = astad.grad(right)(argument)
    assert len(tree.leaves(gradient)) == leaves  # what astad.grad differentiates
    result = check_grads(right, argument, rtol=1e-3)
    assert result.checked == leaves
    with pytest.raises(AssertionError, match="disagree with central finite differences"):
        check_grads(wrong, argument, rtol=1e-3)


@dataclass
class Cell:
    value: float
    rest: Cell | None


def _linked(n):
    cell = None
    for k in range(n):
        cell = Cell(1.0 + 0.001 * k, cell)
    return cell


def total_of_cubes(cell):
    total = 0.0
    while cell is not None:
        total = total + right_cube(cell.value)
        cell = cell.rest
    return total


def wrong_total_of_cubes(cell):
    total = 0.0
    while cell is not None:
        total = total + cube(cell.value)
        cell = cell.rest
    return total


@pytest.mark.slow
def test_check_grads_on_a_linked_list_3000_deep():
    cells = _linked(3000)
    gradient = astad.grad(total_of_cubes)(cells)
    assert gradient.value == pytest.approx(3.0 * cells.value ** 2)
    result = check_grads(total_of_cubes, cells, max_leaves=10)
    assert result.checked == 10
    assert any("random direction" in c.path for c in result.comparisons)
    with pytest.raises(AssertionError, match="disagree"):
        check_grads(wrong_total_of_cubes, cells, max_leaves=10)


def test_the_random_direction_covers_the_leaves_not_sampled():
    """One wrong leaf among many not checked one by one still fails the check."""
    def f(xs):
        return sum(x * x for x in xs[:-1]) + cube(xs[-1])
    xs = [1.0 + 0.01 * k for k in range(50)]
    with pytest.raises(AssertionError, match="random direction"):
        check_grads(f, xs, max_leaves=5, seed=3)


def test_check_grads_of_nothing_is_a_failure():
    """A check that finds no leaf fails (it can never say OK about nothing), as astad
    itself refuses to differentiate an argument without a float."""
    with pytest.raises((AssertionError, astad.InputError)):
        check_grads(lambda s: len(s) * 1.0, "text")


def test_tree_walks_are_iterative_and_keep_sharing():
    shared = [1.0, 2.0]
    value = {"a": shared, "b": (shared, 3.0), "c": "text"}
    paths = [tree.format_path("x", p) for p, _ in tree.leaf_paths(value)]
    assert paths == ["x['a'][0]", "x['a'][1]", "x['b'][1]"]
    doubled = tree.tree_map(lambda v: 2.0 * v, value)
    assert doubled["a"] is doubled["b"][0] and doubled["a"] == [2.0, 4.0]
    assert doubled["c"] == "text"
    cyclic = [1.0]
    cyclic.append(cyclic)
    copy = tree.tree_map(lambda v: -v, cyclic)
    assert copy[0] == -1.0 and copy[1] is copy
    assert len(tree.leaves(_linked(20000))) == 20000


# -- a container registered by the user ----------------------------------------------------
def test_registered_container_in_grad_and_value_and_grad():
    p = Pair(1.5, 0.7)
    g = astad.grad(energy)(p)
    assert type(g) is Pair
    expected = energy_gradient(p)
    assert (g.first, g.second) == pytest.approx((expected.first, expected.second))
    assert energy.grad(p) == g
    value, g2 = astad.value_and_grad(energy.__wrapped__)(p)
    assert value == pytest.approx(energy(p)) and g2 == g


def test_registered_container_in_jvp_jacrev_and_hessian():
    p = Pair(1.5, 0.7)
    expected = energy_gradient(p)
    value, tangent = astad.jvp(energy, (p,), (Pair(1.0, 0.0),))
    assert value == pytest.approx(energy(p)) and tangent == pytest.approx(expected.first)
    jac = astad.jacrev(energy)(p)
    assert type(jac) is Pair and jac.second == pytest.approx(expected.second)
    jac = astad.jacfwd(energy)(p)
    assert type(jac) is Pair and jac.first == pytest.approx(expected.first)
    h = astad.hessian(energy)(p)  # output structure outside, input inside
    x, y = p.first, p.second
    assert type(h) is Pair and type(h.first) is Pair
    assert (h.first.first, h.first.second) == pytest.approx((0.0, math.cos(y)))
    assert (h.second.first, h.second.second) == pytest.approx(
        (math.cos(y), -x * math.sin(y) + 2.0))


def test_registered_container_as_a_result_and_its_cotangent():
    def swap(p):
        return Pair(p.second * 2.0, p.first * p.second)
    p = Pair(1.5, 0.7)
    value, pullback = astad.vjp(swap, p)
    assert value == Pair(1.4, 1.5 * 0.7)
    (g,) = pullback(Pair(1.0, 1.0))  # (a tuple, one per argument, as in JAX)
    assert (g.first, g.second) == pytest.approx((0.7, 2.0 + 1.5))
    with pytest.raises(astad.InputError, match="should be a Pair"):
        pullback((1.0, 1.0))
    check_grads(swap, p)


def test_registered_container_in_check_grads():
    assert check_grads(energy, Pair(1.5, 0.7)).checked == 2
    with pytest.raises(AssertionError, match="disagree"):
        check_grads(lambda p: cube(p.first) + p.second, Pair(1.5, 0.7))


@pytest.mark.slow
def test_registered_container_pickles_and_runs_in_worker_processes():
    p = Pair(1.5, 0.7)
    again = pickle.loads(pickle.dumps(energy))
    assert again.grad(p) == energy.grad(p)
    assert pickle.loads(pickle.dumps(energy.grad(p))) == energy.grad(p)
    context = multiprocessing.get_context("spawn")  # (a fresh process: it imports by name)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        assert pool.submit(energy.grad, p).result() == energy.grad(p)


def test_a_bad_flatten_function_is_named():
    class Bad:
        def __init__(self, x):
            self.x = x
    astad.register_pytree_node(Bad, lambda b: b.x, lambda aux, children: Bad(*children))
    with pytest.raises(astad.InputError, match="registered for .*Bad must return"):
        astad.grad(lambda b: b.x)(Bad(1.0))
