"""Comparing generated source with a snapshot, whichever Python printed it.

astad prints generated code with the standard library's ``ast.unparse``, whose layout
differs between Python versions for the same tree (3.10 writes ``(x, y) = t`` and
``for (x, y) in ...`` where 3.11 writes ``x, y = t``). A snapshot is written once; the code
matches it when the text is the same, or when the syntax tree and every comment (astad's
``# original line`` comments) on its line are.
"""
from __future__ import annotations

import ast
import io
import tokenize


def tree_and_comments(text: str) -> tuple[str, list]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    comments = [(token.start[0], token.string) for token in tokens
                if token.type == tokenize.COMMENT]
    return ast.dump(ast.parse(text)), comments


def assert_same_code(actual: str, expected: str, message: str = "") -> None:
    if actual != expected and tree_and_comments(actual) == tree_and_comments(expected):
        return  # the same code, laid out by another Python's ast.unparse
    assert actual == expected, message
