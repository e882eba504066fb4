"""Phase 1, source: read a function's source text and parse it with gast.

The parsed tree keeps the user's own line numbers and columns (as they are in the
file), so every later error and every traceback through generated code points at the
user's file.
"""
from __future__ import annotations

import inspect
import linecache
import textwrap
from dataclasses import dataclass

import gast

from ..errors import SourceUnavailableError
from .lambdas import lambdas_in


@dataclass
class ParsedFunction:
    """A function's syntax tree together with where it came from."""

    fn: object            # the Python function object
    node: gast.AST        # gast.FunctionDef or gast.Lambda, with file line numbers
    filename: str
    firstlineno: int


def _shift_columns(tree: gast.AST, indent: int) -> None:
    """Undo the dedent: make col_offset refer to the real file's columns."""
    if not indent:
        return
    for node in gast.walk(tree):
        for attr in ("col_offset", "end_col_offset"):
            if getattr(node, attr, None) is not None:
                setattr(node, attr, getattr(node, attr) + indent)


def parse_function(fn) -> ParsedFunction:
    """Parse ``fn``'s source; raise SourceUnavailableError when it cannot be read."""
    code = getattr(fn, "__code__", None)
    if code is None:
        raise SourceUnavailableError(f"{fn!r} is not a Python function; astad reads source text")
    filename = code.co_filename
    try:
        # The source of the code that runs: for a function wrapped by a decorator that
        # uses functools.wraps, ``inspect.getsourcelines(fn)`` would follow __wrapped__
        # and give the wrapped function's source instead of the wrapper's.
        lines, firstlineno = inspect.getsourcelines(code)
    except (OSError, TypeError) as exc:
        raise SourceUnavailableError(
            f"cannot read the source of {getattr(fn, '__qualname__', fn)!r} "
            f"(defined in {filename}): {exc}. astad transforms source text, so the function "
            "must be defined in a file or a notebook cell."
        ) from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    try:
        module = gast.parse(dedented)
    except SyntaxError:
        # A lambda in the middle of an expression: getsourcelines returns whole lines that
        # may not parse on their own (e.g. the continuation of a call). Try wrapping.
        try:
            module = gast.parse("(\n" + dedented + "\n)")
            firstlineno -= 1
        except SyntaxError as exc:
            # (a lambda that is a value in a multi-line dict literal: cut out alone)
            found = lambdas_in(text, firstlineno) if code.co_name == "<lambda>" else []
            if not found:
                raise SourceUnavailableError(
                    f"cannot parse the source of {fn.__qualname__!r} in {filename}: "
                    f"{exc}") from None
            module, indent, firstlineno = gast.Module(body=[gast.Expr(value=lam) for lam in
                                                            found], type_ignores=[]), 0, 1
    gast.increment_lineno(module, firstlineno - 1)
    _shift_columns(module, indent)
    node = _find_definition(module, fn, filename)
    linecache.checkcache(filename)
    return ParsedFunction(fn=fn, node=node, filename=filename, firstlineno=firstlineno)


def _find_definition(module: gast.Module, fn, filename: str) -> gast.AST:
    name = fn.__code__.co_name  # __name__ may have been copied from a wrapped function
    if name == "<lambda>":
        code = fn.__code__
        argnames = list(code.co_varnames[: code.co_argcount])
        matching = [lam for lam in gast.walk(module) if isinstance(lam, gast.Lambda)
                    and [a.id for a in lam.args.args] == argnames
                    and lam.lineno == code.co_firstlineno]
        if len(matching) > 1 and hasattr(code, "co_positions"):
            # several alike lambdas on one line: the one whose body starts where the
            # code object's first instruction does
            starts = {(line, col) for line, _, col, _ in code.co_positions()
                      if line is not None}
            matching = [lam for lam in matching
                        if (lam.body.lineno, lam.body.col_offset) in starts]
        if len(matching) != 1:
            raise SourceUnavailableError(
                f"cannot tell which lambda on {filename}:{fn.__code__.co_firstlineno} is meant; "
                "define it with def, or put it on a line of its own")
        return matching[0]
    for node in module.body:
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)) and node.name == name:
            return node
    for node in gast.walk(module):
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)) and node.name == name:
            return node
    raise SourceUnavailableError(f"cannot find the definition of {name!r} in its source")
