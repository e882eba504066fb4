"""``.source`` ends with the generated code of every helper a function calls, however
deep: each once, breadth first, under a comment naming it and where it is called
(compile/helpers.py); the display shows them with the other generated functions."""
from __future__ import annotations

import io
import math
import re

import astad
from astad import display


def squared(a):
    return a * a


def norm_of(x, y):
    return math.sqrt(squared(x) + squared(y))


def scaled(v, k):
    return k * v


@astad.reverse_diff
def with_helpers(x, y):
    d = norm_of(x, y)
    return scaled(d, 2.0) + squared(x)


@astad.reverse_diff
def no_helpers(x, y):
    return x * math.sin(y)


def is_even(n, x):
    return x if n == 0 else is_odd(n - 1, x * x)


def is_odd(n, x):
    return 2.0 * x if n == 0 else is_even(n - 1, x)


@astad.reverse_diff
def alternating(x):
    return is_even(3, x) + x


@astad.reverse_diff
def decorated_helper(x):
    return x * x * x


def calls_decorated(x):
    return decorated_helper(x) + 1.0


def line_of(fn, text: str) -> int:
    """The line of ``fn``'s file that holds ``text`` inside ``fn``."""
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def helpers_of(source: str) -> list:
    """(name, what the heading says in brackets) of each helper in ``source``, in order."""
    return re.findall(r"^# helper: (\w+) \((.*)\)$", source, re.M)


def test_every_helper_reached_is_shown_once_after_the_function():
    source = with_helpers.source
    # the function's own helpers in the order it calls them, then norm_of's (squared,
    # already shown: once)
    assert helpers_of(source) == [
        ("norm_of", f"called at line {line_of(with_helpers, 'd = norm_of')}"),
        ("scaled", f"called at line {line_of(with_helpers, 'return scaled')}"),
        ("squared", f"called at line {line_of(with_helpers, 'return scaled')}")]
    for name in ("norm_of", "scaled", "squared"):
        assert source.count(f"\ndef {name}(_tape, ") == 1
    # each is the code that runs when the function calls it: the transformed function
    # (and its preaccumulated rules), after everything written for the function itself
    helpers = source[source.index("# helper: "):]
    assert source.index("def with_helpers_jvp(") < source.index("# helper: ")
    assert "# return math.sqrt(squared(x) + squared(y))" in helpers
    assert "(D_squared if squared is _squared else ad.rev(squared))(_tape, x)" in helpers
    assert "preaccumulated: return math.sqrt(squared(x) + squared(y))" in helpers
    assert "    # return a * a\n    return ad.mul(_tape, a, a)" in helpers
    assert "def squared_floats(" not in source  # (inlined there: f's own code has it)
    # the same text for the undecorated function, as astad.show transforms it
    assert display.sources(with_helpers.__wrapped__)[1] == source.rstrip("\n")


def test_a_helper_of_a_helper_names_its_caller():
    def outer(x):
        return norm_of(x, 1.0)
    found = helpers_of(astad.reverse_diff(outer).source)
    assert found == [("norm_of", f"called at line {line_of(outer, 'return norm_of')}"),
                     ("squared", f"called by norm_of at line {line_of(norm_of, 'sqrt')}")]


def test_no_helpers_no_heading():
    assert "# helper" not in no_helpers.source


def test_mutual_recursion_shows_both_once():
    source = alternating.source
    assert [name for name, _ in helpers_of(source)] == ["is_even", "is_odd"]
    assert helpers_of(source)[1][1] == f"called by is_even at line {line_of(is_even, 'is_odd(')}"
    assert source.count("\ndef is_even(_tape, ") == source.count("\ndef is_odd(_tape, ") == 1
    assert math.isclose(alternating.grad(1.5), 8.0 * 1.5 ** 3 + 1.0)  # 2 x^4 + x


def test_a_decorated_helper_is_shown_as_it_runs_there():
    source = astad.reverse_diff(calls_decorated).source
    assert [name for name, _ in helpers_of(source)] == ["decorated_helper"]
    assert source.count("\ndef decorated_helper(_tape, x):") == 1


def test_grad_source_ends_with_the_helpers():
    source = astad.grad(with_helpers).source
    assert [name for name, _ in helpers_of(source)] == ["norm_of", "scaled", "squared"]
    assert source.rindex("def ") > source.index("# helper: squared")
    assert source.index("# helper: ") > source.index("def with_helpers_jvp(")


def test_the_display_shows_the_helpers():
    out = io.StringIO()
    display.show(with_helpers, file=out, width=120)
    text = out.getvalue()
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if "more functions generated" in line)
    heading = " ".join(line.strip() for line in lines[start:start + 3]).split(" ---")[0]
    rule = line_of(norm_of, "sqrt")
    assert heading.endswith(f"with_helpers_jvp; the helpers it calls: norm_of, _line{rule}, "
                            "scaled, squared")
    for name in ("norm_of", "scaled", "squared"):
        assert text.count(f"\ndef {name}(_tape, ") == 1
    page = display.html(with_helpers, highlight=False)
    for name in ("norm_of", "scaled", "squared"):
        assert page.count(f"# helper: {name} (") == 1
        assert page.count(f"def {name}(_tape, ") == 1
