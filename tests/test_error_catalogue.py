"""The error catalogue: every construct astad does not support, and what it says.

For each construct: the error is an astad error of the listed class, its message names
the construct, and it points at this file, the line and column of the construct, with
the source line and a caret under the column. Syntax is refused when the function is
decorated; the other entries when a differentiated value reaches the construct.

docs/supported.md lists the same constructs in its "Not supported" tables; the last
tests parse that page and compare it with this catalogue, so the two cannot drift.
"""
from __future__ import annotations

import array
import dataclasses
import inspect
import os
import re
import struct
import warnings

import numpy as np
import pytest

import astad

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                    "supported.md")


# ---------------------------------------------------------------------------------------
# Syntax astad refuses at decoration

def uses_yield(x):
    yield x * 2.0


def uses_yield_from(xs):
    yield from xs


async def uses_async(x):
    return x


def uses_await_inside(x):
    async def inner():
        await x
    return x


def uses_global(x):
    global COUNTER
    COUNTER = x
    return x


def make_nonlocal():
    y = 1.0

    def rebinds(x):
        nonlocal y
        y = x
        return x
    return rebinds


def uses_class(x):
    class Local:
        pass
    return x


def uses_exec(x):
    exec("y = 1")
    return x


def uses_eval(x):
    return eval("x * 2")


def uses_compile(x):
    compile("x", "<s>", "eval")
    return x


# ---------------------------------------------------------------------------------------
# What astad refuses when a differentiated value reaches it

def uses_c_function(x):
    return struct.unpack("d", struct.pack("d", x))[0]


def uses_float_method(x):
    return float.fromhex(x.hex())


def uses_complex_values(x, c):
    return np.var(x * c)


PLAIN = np.zeros(2)  # made outside the differentiated function


def uses_float_in_library(x):
    PLAIN[0] = x
    return PLAIN[0] * 2.0


def squares(xs):
    for x in xs:
        yield x * x


def uses_generator(x):
    return sum(squares([x, 2.0]))


KEPT = []


def keeps_a_dual(x):
    KEPT.append(iter([x]))  # (an iterator: astad cannot see what it holds, to clean it)
    return x * 2.0


def uses_escaped_dual():
    return next(KEPT[-1]) * 3.0


def escaped_dual():
    astad.reverse_diff(keeps_a_dual).grad(1.5)
    uses_escaped_dual()


@dataclasses.dataclass
class Entry:
    construct: str      # as named in docs/supported.md
    fn: object          # the function holding the construct
    line: str           # its source line
    error: type
    phrase: str         # what the message says about the construct
    trigger: object = None  # for runtime entries: raises the error

    def run(self):
        if self.trigger is None:
            astad.reverse_diff(self.fn)
        else:
            self.trigger()


def grad_of(fn, *args, **options):
    return lambda: astad.reverse_diff(fn, **options).grad(*args)


SYNTAX = [
    Entry("yield", uses_yield, "yield x * 2.0", astad.UnsupportedSyntaxError,
          "'yield' (generator functions)"),
    Entry("yield from", uses_yield_from, "yield from xs", astad.UnsupportedSyntaxError,
          "'yield from' (generator functions)"),
    Entry("async def", uses_async, "async def uses_async(x):", astad.UnsupportedSyntaxError,
          "'async def' (coroutines)"),
    Entry("await, async for, async with", uses_await_inside, "async def inner():",
          astad.UnsupportedSyntaxError, "'async def' (coroutines)"),
    Entry("global", uses_global, "global COUNTER", astad.UnsupportedSyntaxError,
          "the 'global' statement"),
    Entry("nonlocal", make_nonlocal(), "nonlocal y", astad.UnsupportedSyntaxError,
          "'nonlocal' rebinding of a variable outside the differentiated function"),
    Entry("class", uses_class, "class Local:", astad.UnsupportedSyntaxError,
          "a class definition inside a differentiated function"),
    Entry("exec", uses_exec, 'exec("y = 1")', astad.UnsupportedSyntaxError,
          "exec(), which runs code astad cannot read"),
    Entry("eval", uses_eval, 'return eval("x * 2")', astad.UnsupportedSyntaxError,
          "eval(), which runs code astad cannot read"),
    Entry("compile", uses_compile, 'compile("x", "<s>", "eval")',
          astad.UnsupportedSyntaxError, "compile(), which builds code astad cannot read"),
]

RUNTIME = [
    Entry("a function with no source and no derivative (struct.pack)", uses_c_function,
          'return struct.unpack("d", struct.pack("d", x))[0]', astad.NotDifferentiableError,
          "a differentiated value is passed to 'pack', which astad cannot differentiate",
          grad_of(uses_c_function, 1.5)),
    Entry("float methods (x.hex())", uses_float_method, "return float.fromhex(x.hex())",
          astad.NotDifferentiableError, "float attribute 'hex' of a differentiated value",
          grad_of(uses_float_method, 1.5)),
    Entry("complex values reaching a rule for real values only (np.var)",
          uses_complex_values, "return np.var(x * c)", astad.NotDifferentiableError,
          "numpy.var of complex values", grad_of(uses_complex_values, np.array([1.5, 2.0]),
                                                 2j, argnums=0)),
    Entry("a differentiated value written into a plain array made outside",
          uses_float_in_library, "PLAIN[0] = x", astad.NotDifferentiableError,
          "a differentiated value is written into a plain array",
          grad_of(uses_float_in_library, 1.5)),
    Entry("a generator function called with a differentiated value", uses_generator,
          "return sum(squares([x, 2.0]))", astad.NotDifferentiableError,
          "its source uses 'yield' (generator functions)", grad_of(uses_generator, 1.5)),
    Entry("a differentiated value kept after its gradient call", uses_escaped_dual,
          "return next(KEPT[-1]) * 3.0", astad.NotDifferentiableError,
          "call it belongs to has returned", escaped_dual),
]

CATALOGUE = SYNTAX + RUNTIME


def located_line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + k for k, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("entry", CATALOGUE, ids=[e.construct for e in CATALOGUE])
def test_the_error_names_the_construct_and_points_at_it(entry):
    with pytest.raises(entry.error) as info:
        entry.run()
    err = info.value
    assert isinstance(err, astad.AstadError)
    text = str(err)
    assert entry.phrase in text
    # file, line and column
    line = located_line(entry.fn, entry.line)
    assert (err.filename, err.lineno) == (__file__, line)
    if err.col is None and not hasattr(entry.fn.__code__, "co_positions"):
        # Python 3.10: code objects carry no columns, so an error raised while the code
        # runs names the file and line, then shows the line, without a caret
        assert f"  at {__file__}:{line}\n" in text
        assert text.splitlines()[-1].strip() == entry.line.strip()
        return
    assert err.col is not None
    assert f"  at {__file__}:{line}:{err.col + 1}\n" in text
    # the source line, then a caret under the column
    shown, caret = text.splitlines()[-2:]
    assert shown.strip() == entry.line.strip()
    source_line = open(__file__).read().splitlines()[line - 1]
    indent = len(source_line) - len(source_line.lstrip())
    assert caret.strip() == "^"
    assert caret.index("^") - 4 == err.col - indent
    # the caret is under the construct itself (a keyword, a call or an operator)
    assert source_line[err.col:].startswith(_construct_start(entry))


def _construct_start(entry) -> str:
    """The text the caret must point at: the statement for syntax, the call or operand
    of the operation for the rest."""
    return {
        "exec": "exec(", "eval": "eval(", "compile": "compile(",
        "a function with no source and no derivative (struct.pack)": "struct.pack(",
        "float methods (x.hex())": "x.hex",
        "complex values reaching a rule for real values only (np.var)": "np.var(",
        "a differentiated value written into a plain array made outside": "PLAIN[0] = x",
        "a generator function called with a differentiated value": "squares(",
        "a differentiated value kept after its gradient call": "next(KEPT[-1]) * 3.0",
    }.get(entry.construct, entry.line.strip().split("(")[0])


# ---------------------------------------------------------------------------------------
# Arguments astad refuses: the error names the argument's path

class Plain:
    def __init__(self, v):
        self.v = v


def total(value):
    return 1.0


ARGUMENTS = [
    ("a set of floats", grad_of(total, {1.0, 2.0}), "args[0] is a set of floats"),
    ("an object that is not a dataclass, holding floats", grad_of(total, Plain(1.0)),
     "args[0] is a Plain instance holding floats"),
    ("no float to differentiate", grad_of(total, "abc"),
     "no argument chosen for differentiation holds a float"),
    ("an array.array of floats", grad_of(total, array.array("d", [1.0])),
     "args[0] is an array.array of floats"),
    ("a subclass of numpy's ndarray (numpy.matrix)",
     lambda: astad.reverse_diff(total).grad(_matrix()),
     "args[0] is a matrix, a subclass of numpy's ndarray"),
]


def _matrix():
    with warnings.catch_warnings():  # (numpy recommends against the matrix class)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix([[1.0, 2.0]])


@pytest.mark.parametrize("name, trigger, phrase", ARGUMENTS, ids=[a[0] for a in ARGUMENTS])
def test_refused_arguments_are_named_by_path(name, trigger, phrase):
    with pytest.raises(astad.InputError) as info:
        trigger()
    assert phrase in str(info.value)


# ---------------------------------------------------------------------------------------
# docs/supported.md and the catalogue cannot drift

def _table_rows(heading: str) -> list:
    """Rows (lists of cells, backticks removed) of the first table under ``heading``."""
    text = open(DOCS).read()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|[-| :]+\|", line.strip()):
            continue
        rows.append([cell.strip().replace("`", "") for cell in line.strip().strip("|")
                     .split("|")])
    return rows[1:]  # without the header


def test_the_page_lists_exactly_the_catalogue_of_unsupported_constructs():
    rows = _table_rows("Not supported")
    documented = {row[0]: row for row in rows}
    assert len(documented) == len(rows), "a construct is listed twice"
    assert set(documented) == {e.construct for e in CATALOGUE}
    for entry in CATALOGUE:
        construct, error, when, says = documented[entry.construct]
        assert error == entry.error.__name__, entry.construct
        assert when == ("decoration" if entry in SYNTAX else "call"), entry.construct
        assert says.replace("\\|", "|") in entry.phrase, entry.construct


def test_the_page_lists_exactly_the_refused_arguments():
    rows = _table_rows("Arguments astad refuses")
    assert {row[0]: row[1] for row in rows} == {name: phrase for name, _, phrase
                                                in ARGUMENTS}


# ---------------------------------------------------------------------------------------
# Constructs the page lists as supported that the other tests do not exercise

def with_walrus(x):
    if (y := x * 2.0) > 0:
        return y * y
    return y


def with_generator_expression(x):
    return sum(x * k for k in range(3))


def with_match_guard(x):
    match x:
        case v if v > 1.0:
            return v * v
        case _:
            return -x


def with_set_and_starred(x):
    first, *rest = [x, x * 2.0, 3.0]
    return first * sum(rest) + sum({x, 2.0 * x})


def with_local_import(x):
    import math as m
    return m.sin(x)


def with_assert_del_raise(x):
    y = x * x
    assert y >= 0.0
    z = y
    del y
    try:
        raise KeyError(z)
    except KeyError:
        return z * 2.0


SUPPORTED = [with_walrus, with_generator_expression, with_match_guard, with_set_and_starred,
             with_local_import, with_assert_del_raise]


@pytest.mark.parametrize("fn", SUPPORTED, ids=[f.__name__ for f in SUPPORTED])
@pytest.mark.parametrize("x", [0.7, 1.3])
def test_constructs_listed_as_supported_differentiate_correctly(fn, x):
    value, grad = astad.reverse_diff(fn).value_and_grad(x)
    assert value == fn(x)
    h = 1e-6
    assert grad == pytest.approx((fn(x + h) - fn(x - h)) / (2 * h), rel=1e-6, abs=1e-8)
