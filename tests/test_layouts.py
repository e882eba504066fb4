"""Source as people lay it out: every program of the random-program generators (the
scalar programs of tests/test_specialised_fuzz.py, the numpy programs of
tests/numpy_programs.py) laid out again by ``black`` and ``ruff format`` at a narrow line
length and by a random re-layout that splits statements at every kind of legal point
(tests/layouts.py), and checked against the same program as generated: the same value,
gradient (specialised code, the tape, one entry per operation) and forward-mode
derivative, bit for bit (a layout changes positions only). Also the layouts the
formatters write most, as regression tests, on every path (tests/paths.py).

Budget: ``ASTAD_LAYOUT_FUZZ`` programs of each generator (default 12) from seed
``ASTAD_LAYOUT_SEED`` (default 0); a long search: ``ASTAD_LAYOUT_FUZZ=500``."""
from __future__ import annotations

import importlib.util
import math
import os
import random
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import astad
from layouts import layouts
from numpy_programs import HEADER, load, programs
from paths import check_every_path
from test_specialised_fuzz import Program, _finite_value

COUNT = int(os.environ.get("ASTAD_LAYOUT_FUZZ", "12"))
SEED = int(os.environ.get("ASTAD_LAYOUT_SEED", "0"))


def _module(source, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _results(f, args, direction):
    """What astad computes of ``f`` on every path taken by a layout's positions."""
    value, gradient = astad.reverse_diff(f).value_and_grad(*args)
    plain = astad.reverse_diff(f, preaccumulate=False).value_and_grad(*args)
    transform = astad.value_and_grad(f, argnums=(0, 1, 2, 3))(*args)
    forward = astad.jvp(f, args, direction)
    return value, gradient, plain, transform, forward


@pytest.mark.parametrize("k", [k if k == 0 else pytest.param(k, marks=pytest.mark.slow)
                               for k in range(COUNT)])  # the quick run: the first program
def test_scalar_programs_in_every_layout(k, tmp_path):
    rng = random.Random(SEED * 7717 + k)
    source = Program(rng).source()
    args = (rng.uniform(-1.5, 1.5), rng.uniform(-1.5, 1.5),
            [rng.uniform(-1.5, 1.5) for _ in range(rng.randint(2, 4))],
            [[rng.uniform(-1.5, 1.5) for _ in range(2)]], rng.randint(1, 3))
    direction = (rng.uniform(-1, 1), rng.uniform(-1, 1), [rng.uniform(-1, 1) for _ in args[2]],
                 [[rng.uniform(-1, 1) for _ in row] for row in args[3]], None)
    original = _module(source, tmp_path, f"layout_original_{k}")
    _finite_value(original.f, args)
    expected = _results(original.f, args, direction)
    for n, (name, text) in enumerate(layouts(source, SEED * 31 + k).items()):
        module = _module(text, tmp_path, f"layout_{k}_{n}")
        assert _results(module.f, args, direction) == expected, f"{name}:\n{text}"


@pytest.mark.slow
@settings(max_examples=COUNT, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(program=programs())
def test_numpy_programs_in_every_layout(program):
    args = tuple(v for _, v in program.spec)
    argnums = tuple(range(len(args)))
    original = load(program.rendered())
    with np.errstate(all="ignore"):
        value = original.f(*[np.copy(a) for a in args])
    assume(np.isfinite(value))
    direction = tuple(np.ones_like(a) if isinstance(a, np.ndarray) else 1.0 for a in args)

    def results(f):
        given = [np.copy(a) for a in args]
        found = astad.value_and_grad(f, argnums)(*given)
        return found, given, astad.jvp(f, [np.copy(a) for a in args], direction)

    try:
        expected = results(original.f)
    except astad.NotDifferentiableError:
        assume(False)  # (a write astad refuses: tests/test_property_numpy.py)
    for name, text in layouts(HEADER + program.rendered(), len(program.source)).items():
        module = load(text[len(HEADER):] if text.startswith(HEADER) else text)
        (v, g), given, (out, tangent) = results(module.f)
        (v0, g0), given0, (out0, tangent0) = expected
        assert v == v0 and out == out0 and tangent == tangent0, f"{name}:\n{text}"
        for a, b in zip(g + tuple(given), g0 + tuple(given0)):
            np.testing.assert_array_equal(a, b, err_msg=f"{name}:\n{text}")


# -- the layouts formatters write most, on every path ----------------------------------------
def closing_bracket_left_of_its_expression(a, b):
    return a + (
        b * b
    )


def black_style_call(a, b):
    total = a * 2.0 + math.sin(
        b
    ) * (
        a
        - b
    )
    return total


def hanging_indent_and_comments(a, b):
    value = (a * b  # the product
             +

             math.exp(a)  # and an exponential
             )
    return value


def backslash_continuations(a, b):
    value = a * \
        b + \
            math.cos(a)
    return value


def one_line_compound(a, b):
    if a > b: return a * b  # noqa: E701
    while a < b: a = a * 2.0  # noqa: E701
    return a + b


def black_ternary(a, b):
    return (
        a * b
        if a > 0.0
        else b - a
    )


@pytest.mark.parametrize("f, gradient", [
    (closing_bracket_left_of_its_expression, lambda a, b: (1.0, 2 * b)),
    (black_style_call, lambda a, b: (2.0 + math.sin(b), math.cos(b) * (a - b) - math.sin(b))),
    (hanging_indent_and_comments, lambda a, b: (b + math.exp(a), a)),
    (backslash_continuations, lambda a, b: (b - math.sin(a), a)),
    (black_ternary, lambda a, b: (b, a)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_formatter_layouts_on_every_path(f, gradient):
    a, b = 0.7, 1.3
    check_every_path(f, (a, b), f(a, b), gradient(a, b))


def test_one_line_compound_statements():
    check_every_path(one_line_compound, (0.4, 1.3), one_line_compound(0.4, 1.3), (4.0, 1.0))
    check_every_path(one_line_compound, (1.5, 0.5), one_line_compound(1.5, 0.5), (0.5, 1.5))


def test_a_traceback_through_a_formatted_statement_names_the_users_line():
    def f(a, b):
        return a + (
            math.log(b)
        )

    with pytest.raises(ValueError) as info:
        astad.grad(f)(1.0, -1.0)
    frames = [frame for frame in info.traceback if str(frame.path) == __file__]
    assert frames and frames[-1].lineno + 1 in range(f.__code__.co_firstlineno,
                                                     f.__code__.co_firstlineno + 4)


def _lambda_over_lines(k):
    inner = lambda q: (  # noqa: E731 (black's layout of long lambdas)
        k * k
    ) - (
        q[0] * q[0]
        + q[1] * q[1]
    )
    return (
        lambda v: -inner(v)
        * k
    )


def _lambda_argument_over_lines(k):
    return list(map(
        lambda v: v
        * k
        + 1.0,
        [k],
    ))[0]


def test_a_lambda_whose_body_goes_on_past_its_first_line():
    """inspect gives a lambda's first line alone, which parses without what follows
    inside the brackets around it: the lambda is read as the whole file has it (before,
    ``* k`` was lost: a wrong value and gradient)."""
    f = _lambda_over_lines(1.5)
    v = [0.3, 0.4]
    value, g = astad.value_and_grad(f)(v)
    assert value == f(v) == -(1.5 * 1.5 - 0.25) * 1.5
    assert g == pytest.approx([2 * 0.3 * 1.5, 2 * 0.4 * 1.5], rel=1e-14)
    assert astad.jvp(f, (v,), ([1.0, -1.0],))[1] == pytest.approx(1.5 * (0.6 - 0.8),
                                                                 rel=1e-14)
    assert astad.grad(astad.grad(lambda k: _lambda_argument_over_lines(k)))(2.0) == \
        pytest.approx(2.0, rel=1e-14)  # d2/dk2 (k * k + 1)
