"""Normalize, activity and the transform rules, checked on the generated code."""
import ast
import math

import gast
import pytest

import astad
from astad.activity import Activity, bound_names
from astad.codegen import build
from astad.normalize import normalize


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
    assert "ad.sin(_tape, x)" in source and "ad.rev(g)(_tape, x)" in source
    assert astad.reverse_diff(f, argnums=0).grad(0.5, math.cos) == pytest.approx(
        math.cos(0.5) - math.sin(0.5))
