"""Temporaries folded into their one reader in the code for floats
(specialise/folding.py, for reverse mode's code as for forward mode's): what is folded,
what is left, and that the values and gradients stay those of the user's code to the last
bit."""
import math

import pytest

import astad
from astad.compile import calls as codegen
from astad.specialise.folding import inline_single_uses


def texts(lines):
    return [(text, 1) for text in lines]


def test_a_chain_of_temporaries_becomes_the_users_expression():
    lines = texts(["    _vt2 = _vx0 * _vx1", "    _vt3 = s + _vt2",
                   "    _record(s_i, 1.0, i, _vx1, j, _vx0)", "    _vlast += 1",
                   "    s = _vt3", "    s_i = _vlast"])
    assert [t for t, _ in inline_single_uses(lines, "_v")] == [
        "    _record(s_i, 1.0, i, _vx1, j, _vx0)", "    _vlast += 1",
        "    s = s + _vx0 * _vx1", "    s_i = _vlast"]


def test_the_order_of_operations_is_kept_by_parentheses():
    lines = texts(["_vt1 = a + b", "_vt2 = c - _vt1", "x = _vt2 * d"])
    assert [t for t, _ in inline_single_uses(lines, "_v")] == ["x = (c - (a + b)) * d"]


@pytest.mark.parametrize("lines", [
    ["_vt1 = a * b", "_record(a_i, _vt1, b_i, _vt1)", "x = _vt1"],  # read twice
    ["_vt1 = a * b", "a = 2.0", "x = _vt1"],  # an operand assigned between
    ["_vt1 = a * b", "a, c = f()", "x = _vt1"],
    ["_vt1 = a * b", "_vt1 = float(_vt1)", "x = _vt1"],  # assigned twice
    ["_vt1 = a * b", "if a > 0.0:", "    x = _vt1"],  # another block
    ["    _vt1 = a * b", "x = _vt1"],
    ["_vt1 = a * b", "_record(_vt1, 1.0)", "x = a"],  # read by a call
    ["_vt1 = a * b", "xs[0] = 1.0", "x = _vt1"],  # a write into a list
    ["_vx1 = xs[i]", "_record(a_i, 1.0)", "x = _vx1"],  # an element, past a call
    ["_vt1 = np.exp(a)", "_record(a_i, 1.0)", "x = _vt1"],  # an attribute, past a call
    ["_vt1 = a * b", "a += 1.0", "x = _vt1"],  # an operand augmented
    ["_vt1 = a * b", "x = _vt1 + 1.0", "y = _vt1"],  # read twice
])
def test_what_is_not_a_single_use_in_the_same_block_stays(lines):
    assert [t for t, _ in inline_single_uses(texts(lines), "_v")] == lines


def test_a_temporary_moves_past_the_entry_and_into_a_return():
    lines = texts(["    _vx0 = -k", "    _vt1 = _vx0 * a", "    _record(a_i, _vx0)",
                   "    _vlast += 1", "    return ad.tape_gradient_of(_tape, 1, _vt1, _vlast)"])
    assert [t for t, _ in inline_single_uses(lines, "_v")] == ["    _vx0 = -k",
        "    _record(a_i, _vx0)", "    _vlast += 1",
        "    return ad.tape_gradient_of(_tape, 1, _vx0 * a, _vlast)"]


def loops(xs, ys, k):
    s, t = 0.0, 1.0
    for i in range(len(xs)):
        u = xs[i] * ys[i] - k / (1.0 + xs[i] ** 2)
        s = s + u * t + math.sin(u) * ys[i] / 3.0
        t = t * 0.5 + xs[i] * k - math.sqrt(abs(u) + 1.0)
        if s > 10.0:
            s = s - t * (u + 1.0) / 7.0
    return s * t - (s - t) / (1.0 + s * s)


def test_folded_code_gives_the_users_value_and_the_tapes_gradient_bit_for_bit():
    source = codegen.build(loops).specialised_source
    assert "_vt" not in source.split("s = s + ")[1].split("\n")[0]  # (folded: one line)
    xs = [0.3, -1.7, 2.2, 0.01, -0.4, 5.0]
    ys = [1.1, 0.2, -0.9, 3.3, 0.7, -2.5]
    f = astad.reverse_diff(loops)
    value, grads = f.value_and_grad(xs, ys, 0.8)
    assert value == loops(xs, ys, 0.8)  # (the same operations, in the same order)
    taped = f.value_and_grad.__self__._value_and_grad_taped((xs, ys, 0.8), {})
    assert value == taped[0] and grads == taped[1]
