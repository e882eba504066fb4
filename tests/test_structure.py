"""core/boundary.py: interleave plans, rebuild without user code, seed, primal, write-back."""
from __future__ import annotations

from collections import OrderedDict, defaultdict, namedtuple
from dataclasses import dataclass
from typing import Optional

import pytest

import astad
from astad.runtime.tape import Dual
from astad.core.boundary import Interleaving, build_gradient, contains_dual, primal, seed


@dataclass
class Cell:
    head: float
    tail: Optional[Cell] = None


@dataclass(frozen=True, slots=True)
class Checked:
    weight: float
    label: str = "w"

    def __post_init__(self):
        if self.weight < 0:
            raise ValueError("weights are not negative")


Pair = namedtuple("Pair", "a b")


def test_plan_rebuilds_types_without_running_user_code():
    tape = []
    arg = {"c": Checked(2.0), "p": Pair(1.0, 7), "xs": (3.0, 4.0), "od": OrderedDict(k=5.0)}
    copy, plan = Interleaving(tape).interleave(arg, "args[0]")
    assert type(copy["c"]) is Checked and type(copy["c"].weight) is Dual
    adjoint = [-1.0, 10.0, 20.0, 30.0, 40.0]  # a negative weight gradient is allowed
    g = build_gradient(plan, adjoint, {})
    assert type(g["c"]) is Checked and g["c"].weight == -1.0 and g["c"].label == "w"
    assert type(g["p"]) is Pair and g["p"] == (10.0, 7)
    assert g["xs"] == (20.0, 30.0) and type(g["od"]) is OrderedDict and g["od"]["k"] == 40.0


def test_defaultdict_keeps_its_factory():
    tape = []
    arg = defaultdict(float, {"a": 1.0})
    copy, plan = Interleaving(tape).interleave(arg, "x")
    g = build_gradient(plan, [5.0], {})
    assert type(g) is defaultdict and g.default_factory is float and g["a"] == 5.0


@pytest.mark.slow
def test_long_linked_list_needs_no_recursion_limit():
    head = None
    for k in range(20000):
        head = Cell(float(k), head)
    tape = []
    state = Interleaving(tape)
    copy, plan = state.interleave(head, "x")
    assert len(tape) == 20000
    g = build_gradient(plan, [1.0] * 20000, {})
    assert type(g) is Cell and g.tail.tail.head == 1.0
    assert primal(copy, state.originals()) is head
    assert contains_dual(copy)


def test_an_aliased_argument_written_into_is_refused():
    shared = [1.0, 2.0]

    @astad.reverse_diff
    def f(a, b):
        a[0] = a[0] * 3.0   # seen through b too, in Python: no partial at either place
        return b[0] + a[1]
    with pytest.raises(astad.InputError, match=r"args\[0\] and as args\[1\]"):
        f.grad(shared, shared)
    ga, gb = f.grad(shared, list(shared))  # two objects: b does not see the write
    assert ga == [0.0, 1.0] and gb == [1.0, 0.0]


def matrix_rows_times_first_row(m, v):
    s = 0.0
    for i in range(len(m)):
        row = m[i]
        for j in range(len(row)):
            s = s + row[j] * v[j] * m[0][j]
    return s


def test_a_row_shared_by_two_rows_has_a_partial_at_each_place_on_every_path():
    # f = sum_j m0j v_j m0j + sum_j m1j v_j m0j: d/dm0j = (2 m0j + m1j) v_j, d/dm1j =
    # v_j m0j, d/dv_j = m0j^2 + m1j m0j (JAX's partials; their sum over the two places is
    # the derivative along the shared row)
    row = [1.0, 2.0]
    f = astad.reverse_diff(matrix_rows_times_first_row)
    g = f.grad([row, row], [0.5, -1.0])            # lists of floats: the specialised code
    _, pullback = f.vjp([row, row], [0.5, -1.0])   # always the tape
    assert g == pullback(1.0) == ([[1.5, -6.0], [0.5, -2.0]], [2.0, 8.0])


def test_cyclic_structure_argument():
    a = Cell(1.0)
    b = Cell(2.0, a)
    a.tail = b

    @astad.reverse_diff
    def f(c):
        return c.head * c.tail.head * c.tail.tail.head
    g = f.grad(a)
    assert g.head == pytest.approx(2.0 * 2.0) and g.tail.head == 1.0 and g.tail.tail is g


def test_write_back_matches_the_original_for_every_mutable_argument():
    def body(xs, d, cell, out):
        xs.append(xs[0] * 2.0)
        xs.pop(0)
        d["new"] = d["a"] + 1.0
        del d["a"]
        cell.head = cell.head * 5.0
        out.append(cell.head)
        return xs[0] + d["new"] + cell.head
    f = astad.reverse_diff(body, argnums=(0, 1, 2))
    args_astad = ([1.0, 2.0], {"a": 3.0}, Cell(4.0), [])
    args_plain = ([1.0, 2.0], {"a": 3.0}, Cell(4.0), [])
    value, grads = f.value_and_grad(*args_astad)
    assert value == body(*args_plain)
    assert args_astad == args_plain
    for container in args_astad:
        assert not contains_dual(container)
    assert grads == ([0.0, 1.0], {"a": 1.0}, Cell(5.0))


def test_write_back_happens_when_the_function_raises():
    @astad.reverse_diff
    def f(xs):
        xs.append(xs[0] * 2.0)
        raise RuntimeError("stop")
    xs = [1.0]
    with pytest.raises(RuntimeError, match="stop"):
        f.grad(xs)
    assert xs == [1.0, 2.0] and type(xs[1]) is float


def test_returned_argument_is_the_callers_object():
    @astad.reverse_diff
    def f(xs):
        xs.append(xs[0] + 1.0)
        return xs
    xs = [1.0]
    value, pullback = f.vjp(xs)
    assert value is xs and xs == [1.0, 2.0]
    assert pullback([1.0, 1.0]) == [2.0]


def test_unsupported_arguments_are_errors_not_constants():
    class Plain:
        def __init__(self):
            self.x = 1.0
    f = astad.reverse_diff(lambda a: 1.0)
    with pytest.raises(astad.InputError, match="Plain instance holding floats"):
        f.grad(Plain())
    with pytest.raises(astad.InputError, match="set of floats"):
        f.grad({1.0, 2.0})


def test_seed_reports_where_the_cotangent_mismatches():
    tape = []
    result, _ = Interleaving(tape).interleave({"k": [Cell(1.0)]}, "r")
    adjoint = [0.0]
    with pytest.raises(astad.InputError, match=r"result\['k'\]\[0\] should be a Cell"):
        seed(result, {"k": [Pair(1.0, 2.0)]}, adjoint, {})
    with pytest.raises(astad.InputError, match=r"missing \['k'\]"):
        seed(result, {"j": 1.0}, adjoint, {})
    with pytest.raises(astad.InputError, match=r"result\['k'\] .*length 1"):
        seed(result, {"k": []}, adjoint, {})
    seed(result, {"k": None}, adjoint, {})  # None: a zero subtree
    seed(result, {"k": [Cell(None)]}, adjoint, {})
    assert adjoint == [0.0]
    seed(result, {"k": [Cell(2.5)]}, adjoint, {})
    assert adjoint == [2.5]


def test_keyword_and_non_differentiated_arguments_never_receive_duals():
    @astad.reverse_diff(argnums=0)
    def f(x, log, *, trace):
        log.append(x * 2.0)
        trace["last"] = x
        return log[-1]
    log, trace = [], {}
    assert f.grad(1.5, log, trace=trace) == 2.0
    assert log == [3.0] and trace == {"last": 1.5}
    assert type(log[0]) is float and type(trace["last"]) is float
