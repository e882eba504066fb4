"""Forward mode gives what reverse mode gives, on every path (tests/paths.py), and
leaves the caller's tangents as given.

Regressions: the specialised forward code once dropped a statement's tangent when its
expression ended in a constant after a piece computed apart (a ``max``, a conditional
expression), and ``astad.jvp`` once wrote the function's in-place updates into the
caller's tangent array."""
import functools
import importlib.util
import math
import sys

import numpy as np
import pytest

import astad
from astad.api import transforms
from paths import check_every_path


def _load(tmp_path, expression):
    """``h(z)``: ``z`` scaled, then ``z = <expression>``, from a module file (astad reads
    its source)."""
    name = f"forward_code_{abs(hash(expression))}"
    path = tmp_path / f"{name}.py"
    path.write_text(f"import math\n\n\ndef h(z):\n    z = z * 1.5\n    z = {expression}\n"
                    "    return z\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.h


@pytest.mark.parametrize("expression, derivative", [
    ("math.exp(z) + max(z, 0.0) + 1.0", lambda u: math.exp(u) + 1.0),
    ("math.exp(z) + math.exp(0.3)", math.exp),
    ("math.sin(z) + abs(-0.5)", math.cos),
    ("z * z + math.sqrt(1.2)", lambda u: 2.0 * u),
    ("(z if z > 0.0 else -z) + max(0.25, 0.5) + 2.0", lambda u: 1.0),
    ("math.exp(z) + max(z, 0.0) + min(z, 1.0) - 2.0", lambda u: math.exp(u) + 2.0),
])
def test_a_statements_tangent_through_a_constant_after_a_piece(tmp_path, expression,
                                                                derivative):
    h = _load(tmp_path, expression)
    x = 0.3
    check_every_path(h, (x,), h(x), 1.5 * derivative(1.5 * x), rtol=1e-14)


def _square_in_place(x):
    x *= x
    return np.sum(x)


def _square_a_copy(x):
    y = x * 1.0
    y *= y
    return y


@pytest.mark.parametrize("run", [
    lambda x, t: astad.jvp(_square_in_place, (x,), (t,)),
    lambda x, t: astad.jvp(_square_a_copy, (x,), (t,)),
    lambda x, t: astad.jvp(astad.grad(_square_in_place), (x,), (t,)),
    lambda x, t: astad.reverse_diff(_square_in_place).jvp((x,), (t,)),
])
def test_the_callers_tangent_is_left_as_given(run):
    x, t = np.array([1.0, 2.0]), np.array([1.0, 1.0])
    value, tangent = run(x.copy(), t)
    assert np.array_equal(t, [1.0, 1.0])


def test_a_tangent_written_in_place_is_the_functions_own():
    x, t = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    value, tangent = astad.jvp(_square_in_place, (x.copy(),), (t,))
    assert value == 5.0 and tangent == 2.0 * (1.0 * 0.5 + 2.0 * -1.0)
    assert np.array_equal(t, [0.5, -1.0])


def _weighted_exp(x, y):
    s = 0.0
    for a, b in zip(x, y):
        s = s + a * math.exp(b)
    return s + x[0] * x[-1]


SEQUENCES = {"list": list, "tuple": tuple, "array": np.array,
             "list of numpy.float64": lambda v: [np.float64(e) for e in v],
             "tuple of numpy.float64": lambda v: tuple(map(np.float64, v))}


@pytest.mark.parametrize("kind", list(SEQUENCES))
def test_sequences_of_floats_take_the_forward_code(kind, monkeypatch):
    """Tuples, numpy.float64 elements and 1-d float arrays read by element take forward
    mode's code for floats, as lists of floats do (before, a tuple ran every dual: about
    30 times slower); a None tangent of a sequence is its zero."""
    make = SEQUENCES[kind]
    x, y, t = [0.5, 1.5, -0.3], [2.0, -1.0, 0.4], [1.0, 0.5, 2.0]
    args, tangents = (make(x), make(y)), (make(t), None)
    general = astad.jvp(functools.partial(_weighted_exp), args, tangents)
    monkeypatch.setattr(transforms, "forward", None)  # (the duals: not run)
    value, tangent = astad.jvp(_weighted_exp, args, tangents)
    assert (value, tangent) == general
    assert tangent == pytest.approx(sum(ti * math.exp(yi) for ti, yi in zip(t, y)) +
                                    t[0] * x[-1] + x[0] * t[-1], rel=1e-15)
    assert list(args[0]) == x and list(tangents[0]) == t  # (read, not written)


def _tuple_result(x, y, n):
    s = 0.0
    for k in range(n):
        s = s + math.sin(x * k) * y
    return s, (x * y, 2.0), n, x - y


def _branches(x, y):
    if x > 0.0:
        return x * y, math.exp(y)
    return x + y


@pytest.mark.parametrize("args, tangents", [((0.3, 1.7, 4), (1.0, 0.0, None)),
                                            ((0.3, 1.7, 4), (0.25, -2.0, None)),
                                            ((-1.5, 0.5, 0), (None, 1.0, None))])
def test_a_tuple_of_floats_returned_takes_the_forward_code(args, tangents, monkeypatch):
    """jvp of a function returning a tuple (nested, with constants) runs the code for
    floats (before: every dual, about 80 times slower): the same numbers as the duals,
    and as the rows of the reverse code."""
    general = astad.jvp(functools.partial(_tuple_result), args, tangents)
    rows = astad.jacrev(_tuple_result, argnums=(0, 1))(*args)
    monkeypatch.setattr(transforms, "forward", None)  # (the duals: not run)
    value, tangent = astad.jvp(_tuple_result, args, tangents)
    assert (value, tangent) == general
    t = [0.0 if v is None else v for v in tangents[:2]]
    assert tangent[0] == pytest.approx(rows[0][0] * t[0] + rows[0][1] * t[1], rel=1e-14)
    assert tangent[1] == (t[0] * args[1] + args[0] * t[1], 0.0)
    assert tangent[2] == args[2]  # (an int leaf as it is, as the duals give it)
    assert tangent[3] == t[0] - t[1]


def test_a_tuple_in_one_branch_a_float_in_the_other():
    for x in (0.5, -0.5):
        want = astad.jvp(functools.partial(_branches), (x, 1.5), (1.0, 0.5))
        assert astad.jvp(_branches, (x, 1.5), (1.0, 0.5)) == want
    assert astad.jvp(_branches, (0.5, 1.5), (1.0, 0.5))[1] == (1.5 + 0.25, 0.5 * math.exp(1.5))


def test_a_tuple_tangent_that_is_not_finite_is_decided_by_the_duals():
    def root_pair(x):
        return math.sqrt(x), x * 2.0
    general = astad.jvp(functools.partial(root_pair), (0.0,), (0.0,))
    assert astad.jvp(root_pair, (0.0,), (0.0,)) == general
