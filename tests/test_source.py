"""Source: reading and parsing a function keeps the user's file positions."""
import math

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


# -- lambdas that share a line --------------------------------------------------------------
def test_two_lambdas_on_one_line_are_told_apart():
    k = 3.0
    square, shifted = (lambda t: t * t), (lambda t: t * k + t)  # noqa: E731
    assert astad.reverse_diff(square).grad(2.0) == 4.0
    assert astad.reverse_diff(shifted).grad(2.0) == 4.0  # k + 1
    alike = [lambda t: t * t * t, lambda t: t * t * t]  # the same text: either one is right
    assert [astad.reverse_diff(f).grad(2.0) for f in alike] == [12.0, 12.0]


def test_the_lambda_whose_code_it_is_by_compiling_each():
    # what Python 3.10 relies on (its code objects have no columns): each candidate on the
    # line compiled in a scope like the function's, compared with the code that runs
    from astad.front.source import _at_first_line, _best_by_code
    scale = 2.0
    first, second = (lambda t: t * scale), (lambda t: t + scale)  # noqa: E731
    import inspect
    lines, line = inspect.getsourcelines(first.__code__)
    module = gast.parse("".join(lines).strip())
    gast.increment_lineno(module, line - 1)
    candidates = [node for node in gast.walk(module) if isinstance(node, gast.Lambda)]
    for node in candidates:
        node.col_offset += len(lines[0]) - len(lines[0].lstrip())
    assert len(candidates) == 2
    assert _best_by_code(first, candidates) == [candidates[0]]
    assert _best_by_code(second, candidates) == [candidates[1]]
    assert isinstance(_at_first_line(second, lines, line), gast.Lambda)


# -- definitions that are not where their code object says ----------------------------------
MOVING = '''\
import math


class Base:
    def scale(self):
        return 2.0


class Spring(Base):
    def __init__(self, k):
        self.__k = k

    def energy(self, x):
        return 0.5 * self.__k * super().scale() * x * x


def loss(x):
    return (x
            * math.sin(x) + Spring(3.0).energy(x))
'''


def _load(path, name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines_above(path, n):
    import os
    path.write_text("# a comment\n" * n + path.read_text())
    os.utime(path, (path.stat().st_mtime + 10,) * 2)


def test_definitions_found_after_lines_are_inserted_above_them(tmp_path):
    # the code objects name their old lines; the file has moved them down
    path = tmp_path / "moving.py"
    path.write_text(MOVING)
    module = _load(path, "moving_down")
    _lines_above(path, 3)
    x = 0.7
    expected = math.sin(x) + x * math.cos(x) + 6.0 * x  # d/dx of x sin x + 3 x^2
    assert astad.reverse_diff(module.loss).grad(x) == pytest.approx(expected)
    parsed = parse_function(module.Spring.energy)  # a method: private name and super()
    assert parsed.node.lineno == MOVING.splitlines().index("    def energy(self, x):") + 4
    first, lines = astad.front.source.definition_lines(module.loss)
    assert lines[0] == "def loss(x):" and first == module.loss.__code__.co_firstlineno + 3


def test_definition_recompiled_from_reprinted_text_is_found(tmp_path):
    # IPython's deduperreload recompiles an edited function from ast.unparse's text, with
    # the file's name: its code names a line of that text, and its instructions may differ
    # from the file's (Python 3.13 fuses loads on one line, and the text has one line)
    import ast
    import textwrap
    path = tmp_path / "reprinted.py"
    path.write_text(MOVING)
    module = _load(path, "reprinted")
    tree = ast.parse(MOVING)
    definition = next(node for node in tree.body if getattr(node, "name", "") == "loss")
    code = compile(textwrap.dedent(ast.unparse(definition)), str(path), "exec")
    namespace = {}
    exec(code, module.__dict__, namespace)
    module.loss.__code__ = namespace["loss"].__code__
    assert module.loss.__code__.co_firstlineno == 1
    x = 1.3
    expected = math.sin(x) + x * math.cos(x) + 6.0 * x
    assert astad.reverse_diff(module.loss).grad(x) == pytest.approx(expected)


def test_definition_found_after_the_file_shrank_below_its_old_line(tmp_path):
    path = tmp_path / "shrinking.py"
    path.write_text("def unused():\n" + "    pass\n" * 40 + "\n\n" + MOVING)
    module = _load(path, "shrinking")
    path.write_text(MOVING)  # the old first line of loss is now past the end of the file
    import os
    os.utime(path, (path.stat().st_mtime + 10,) * 2)
    x = 0.4
    expected = math.sin(x) + x * math.cos(x) + 6.0 * x
    assert astad.reverse_diff(module.loss).grad(x) == pytest.approx(expected)
