"""Source: reading and parsing a function keeps the user's file positions."""
import gast
import pytest

import astad
from astad.front.source import parse_function


def top_level(x):
    return x * 2.0


class Holder:
    def method(self, x):
        y = x + 1.0
        return y


square = lambda x: x * x  # noqa: E731


def test_top_level_function_positions():
    parsed = parse_function(top_level)
    assert isinstance(parsed.node, gast.FunctionDef) and parsed.node.name == "top_level"
    assert parsed.filename == __file__
    assert parsed.node.lineno == top_level.__code__.co_firstlineno
    ret = parsed.node.body[0]
    assert ret.lineno == top_level.__code__.co_firstlineno + 1 and ret.col_offset == 4


def test_indented_method_columns_are_the_files():
    parsed = parse_function(Holder.method)
    assign = parsed.node.body[0]
    assert assign.col_offset == 8  # as in this file, not as in the dedented text
    assert assign.lineno == Holder.method.__code__.co_firstlineno + 1


def test_lambda_on_its_own_line():
    parsed = parse_function(square)
    assert isinstance(parsed.node, gast.Lambda)
    assert astad.reverse_diff(square).grad(3.0) == 6.0


def test_unreadable_source_is_a_clear_error():
    namespace = {}
    exec("def made_at_runtime(x):\n    return x\n", namespace)
    with pytest.raises(astad.SourceUnavailableError, match="made_at_runtime"):
        parse_function(namespace["made_at_runtime"])
    with pytest.raises(astad.AstadError, match="Python function"):
        astad.reverse_diff(len)
