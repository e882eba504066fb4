"""Normalize, activity and the transform rules, checked on the generated code."""
import ast
import math

import gast
import pytest

import astad
from astad.front.activity import Activity, bound_names
from astad.compile.calls import build
from astad.front.normalize import normalize


def activity_of(src: str) -> Activity:
    fn = gast.parse(src).body[0]
    return Activity(fn, bound_names(fn))


def test_activity_finds_int_counters_and_lengths_inactive():
    act = activity_of(
        "def f(x, xs):\n"
        "    n = len(xs)\n"
        "    k = 0\n"
        "    for i in range(n):\n"
        "        k = k + i * 2\n"
        "    y = x * 2\n"
        "    for j, v in enumerate(xs):\n"
        "        pass\n"
        "    return y\n")
    assert {"n", "k", "i", "j"} <= act.inactive
    assert not {"x", "xs", "y", "v"} & act.inactive


def test_activity_is_conservative_for_containers_and_rebinding():
    act = activity_of(
        "def f(x):\n"
        "    acc = []\n"
        "    acc.append(x)\n"
        "    k = 0\n"
        "    k = x\n"
        "    m = 1\n"
        "    m += x\n"
        "    return acc, k, m\n")
    assert not {"acc", "k"} & act.inactive


def test_normalize_evaluates_computed_targets_once():
    fn = gast.parse("def f(x, xs, i):\n    xs[g(i)] += x\n    return xs\n").body[0]
    normalize(fn, "_tmp")
    text = ast.unparse(gast.gast_to_ast(fn))
    assert "_tmp0 = g(i)" in text and "xs[_tmp0] = xs[_tmp0] + x" in text


def counter_loop(x, n):
    total = 0.0
    i = 0
    while i < n:
        total = total + x
        i = i + 1
    return total


def aug_in_list(xs, x):
    ys = [1.0]
    ys += [x]
    ys[0] *= x
    return ys[0] + ys[1]


def test_generated_code_keeps_int_arithmetic_plain():
    source = build(counter_loop, preaccumulate=False).source
    assert "i = i + 1" in source and "total = ad.add(_tape, total, x)" in source


def test_inplace_list_extend_keeps_python_semantics():
    f = astad.reverse_diff(aug_in_list)
    value, grads = f.value_and_grad([2.0], 3.0)
    assert value == aug_in_list([2.0], 3.0) == 6.0
    assert grads == ([0.0], 2.0)


def test_math_primitives_are_resolved_statically_and_others_dynamically():
    def f(x, g):
        return math.sin(x) + g(x)
    source = build(f, preaccumulate=False).source
    assert "(ad.sin if math.sin is _sin else ad.rev(math.sin))(_tape, x)" in source
    assert "ad.rev(g)(_tape, x)" in source
    assert astad.reverse_diff(f, argnums=0).grad(0.5, math.cos) == pytest.approx(
        math.cos(0.5) - math.sin(0.5))


def newton_sqrt(a, x0):
    """Newton iterations for sqrt(a) with a data-dependent stopping test."""
    x = x0
    while True:
        step = (x * x - a) / (2.0 * x)
        x = x - step
        if abs(step) < 1e-12 * a and -step * 2.0 < 1.0:
            break
    return x


def test_comparison_operands_run_on_primal_values():
    source = build(newton_sqrt).source
    # (the rule of abs on the primal: for a float it is abs itself, and a list or an object
    # still holding duals meets the rule's own handling, not untransformed code)
    assert "if (ad.abs if abs is _abs else ad.rev(abs))(_tape, ad.value(step)) < 1e-12 * " \
        "ad.value(a) and -ad.value(step) * 2.0 < 1.0:" in source
    f = astad.reverse_diff(newton_sqrt)
    value, (da, dx0) = f.value_and_grad(2.0, 1.0)
    assert value == pytest.approx(math.sqrt(2.0), rel=1e-14)
    # the unrolled iterations converge to sqrt: d/da = 1 / (2 sqrt a); x0 barely matters
    assert da == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-9)
    assert abs(dx0) < 1e-9
    # the comparisons record nothing: per iteration x * x, - a, 2.0 * x, /, x - step
    unfused = astad.reverse_diff(newton_sqrt, preaccumulate=False)
    _, pullback = unfused.vjp(2.0, 1.0)
    iterations, x = 0, 1.0
    while True:
        step = (x * x - 2.0) / (2.0 * x)
        x = x - step
        iterations += 1
        if abs(step) < 1e-12 * 2.0 and -step * 2.0 < 1.0:
            break
    assert iterations > 3 and pullback.tape_length == 5 * iterations


class Meters:
    """A user class whose operators run transformed (not pure arithmetic on floats)."""

    def __init__(self, v):
        self.v = v

    def __sub__(self, other):
        return self.v - other.v


def test_comparisons_on_other_values_keep_their_meaning():
    def f(x, y):
        total = x * y
        if Meters(x) - Meters(y) > 0.0:  # a call of a user class: transformed as before
            total = total + x
        if [x * 2.0] == [y * 2.0]:  # lists of duals compare by value
            total = total * 3.0
        return total
    g = astad.reverse_diff(f)
    assert g.grad(3.0, 2.0) == (3.0, 3.0)
    assert g.grad(2.0, 2.0) == (6.0, 6.0)
    assert g.grad(1.0, 2.0) == (2.0, 1.0)
