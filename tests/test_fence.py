"""Fence: each unsupported construct is named, with file, line, column and a caret."""
import inspect

import pytest

import astad


def uses_yield(x):
    yield x * 2.0


async def uses_async(x):
    return x


def uses_global(x):
    global COUNTER
    COUNTER = x
    return x


def uses_nonlocal():
    y = 1.0

    def inner(x):
        nonlocal y
        y = x
        return x
    return inner


def uses_class(x):
    class Local:
        pass
    return x


def uses_exec(x):
    exec("y = 1")
    return x


def uses_eval(x):
    return eval("x * 2")


def uses_yield_from(xs):
    yield from xs


def uses_await(x):
    async def inner():
        await x
    return x


CASES = [
    (uses_yield, "'yield'", "yield x * 2.0"),
    (uses_async, "'async def'", "async def uses_async(x):"),
    (uses_global, "'global' statement", "global COUNTER"),
    (uses_nonlocal(), "'nonlocal'", "nonlocal y"),
    (uses_class, "class definition", "class Local:"),
    (uses_exec, "exec()", 'exec("y = 1")'),
    (uses_eval, "eval()", 'return eval("x * 2")'),
    (uses_yield_from, "'yield from'", "yield from xs"),
    (uses_await, "'async def'", "async def inner():"),
]


@pytest.mark.parametrize("fn, construct, line", CASES, ids=[c[0].__name__ for c in CASES])
def test_unsupported_construct_is_named_and_located(fn, construct, line):
    with pytest.raises(astad.UnsupportedSyntaxError) as info:
        astad.reverse_diff(fn)
    err = info.value
    assert construct in str(err)
    assert err.filename == __file__
    source_lines, first = inspect.getsourcelines(fn)
    expected_line = next(first + k for k, text in enumerate(source_lines) if line in text)
    assert err.lineno == expected_line
    text = str(err)
    assert f"{__file__}:{expected_line}:{err.col + 1}" in text
    # the source line, then a caret under the construct's column
    shown, caret = text.splitlines()[-2:]
    assert shown.strip() == line
    source_line = source_lines[expected_line - first]
    indent = len(source_line) - len(source_line.lstrip())
    assert caret.index("^") - 4 == err.col - indent
    assert isinstance(err, astad.AstadError)


def test_error_is_raised_at_decoration_not_later():
    with pytest.raises(astad.UnsupportedSyntaxError):
        @astad.reverse_diff
        def f(x):
            yield x


def test_supported_constructs_pass_the_fence():
    @astad.reverse_diff
    def f(x):
        try:
            y = x * 2.0
        finally:
            pass
        with open(__file__):
            z = y + 1.0
        assert z > 0
        del y
        g = lambda t: t * z  # noqa: E731
        return g(x)
    assert f.grad(3.0) == pytest.approx(3.0 * 2.0 + 3.0 * 2.0 + 1.0)


def test_nonlocal_of_the_differentiated_functions_own_variable_is_supported():
    @astad.reverse_diff
    def f(x):
        total = 0.0

        def add(v):
            nonlocal total
            total = total + v * v
        for k in range(3):
            add(x * k)
        return total
    # total = x^2 (0 + 1 + 4) = 5 x^2
    assert f.grad(1.5) == pytest.approx(10.0 * 1.5, rel=1e-15)


def test_a_global_statement_is_refused_even_when_only_reading():
    def reads(x):
        global COUNTER
        return x * COUNTER
    with pytest.raises(astad.UnsupportedSyntaxError, match="'global' statement"):
        astad.reverse_diff(reads)


def test_class_patterns_of_numbers_answer_as_for_the_value():
    """``case float(v)``, ``case int()``, ``case complex()``: a differentiated value matches
    as its primal value does (its __class__), so these are not refused (they were, when a
    dual looked like no float): tests/test_type_tests.py checks the derivatives."""
    def f(x):
        match x:
            case complex():
                return x * 0.0
            case int():
                return x * 0.0
            case float(v):
                return v * v
        return x
    assert astad.reverse_diff(f).grad(3.0) == 6.0
