"""The text of a lambda that sits inside a larger expression.

``inspect`` gives a lambda's source as the whole lines it is on, which do not parse on
their own when the lambda is part of a bigger construct: a value in a dict literal
spread over several lines (``"relu": lambda x: ...,``), an argument on a continuation
line. Each lambda on those lines is cut out here, from its ``lambda`` keyword to the
token that ends it (a comma, a closing bracket, a newline or a comment at its own
bracket depth), and parsed alone, keeping the file's line numbers and columns.
"""
from __future__ import annotations

import io
import tokenize

import gast

_OPEN, _CLOSE = "([{", ")]}"


def lambdas_in(text: str, first_line: int) -> list:
    """Every lambda in ``text`` (lines of a file starting at ``first_line``), parsed:
    ``gast.Lambda`` nodes with the file's line numbers and columns."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = _tokens_until_error(text)
    lines = text.splitlines(keepends=True)
    found = []
    for k, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string != "lambda":
            continue
        end = _end_of(tokens, k)
        if end is None:
            continue
        snippet = _text_between(lines, token.start, end)
        try:
            node = gast.parse("(" + snippet + ")", mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, gast.Lambda):
            continue
        _place(node, first_line + token.start[0] - 1, token.start[1])
        found.append(node)
    return found


def _tokens_until_error(text: str) -> list:
    tokens = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            tokens.append(token)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return tokens


def _end_of(tokens: list, start: int):
    """Where the lambda starting at token ``start`` ends: the (row, col) of the first token
    after it that is not part of it (after its parameters: their commas are its own)."""
    depth, k = 0, start + 1
    while k < len(tokens):  # its colon: the first at its own bracket depth
        token = tokens[k]
        k += 1
        if token.type == tokenize.OP and token.string in _OPEN:
            depth += 1
        elif token.type == tokenize.OP and token.string in _CLOSE:
            depth -= 1
        elif depth == 0 and token.type == tokenize.OP and token.string == ":":
            break
    else:
        return None
    for token in tokens[k:]:
        if token.type == tokenize.OP and token.string in _OPEN:
            depth += 1
        elif token.type == tokenize.OP and token.string in _CLOSE:
            if depth == 0:
                return token.start
            depth -= 1
        elif depth == 0 and (
                (token.type == tokenize.OP and token.string in (",", ";")) or
                token.type in (tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER)):
            return token.start
        elif token.type == tokenize.NL and depth == 0:
            return token.start
    return None


def _text_between(lines: list, start: tuple, end: tuple) -> str:
    (row, col), (end_row, end_col) = start, end
    if row == end_row:
        return lines[row - 1][col:end_col]
    parts = [lines[row - 1][col:]] + lines[row:end_row - 1] + [lines[end_row - 1][:end_col]]
    return "".join(parts)


def _place(node, line: int, col: int) -> None:
    """Shift a node parsed as ``(<snippet>)`` to the snippet's place in the file: line 1
    of the parse is ``line``, and columns on that line move by ``col - 1`` (the opening
    parenthesis)."""
    for n in gast.walk(node):
        if getattr(n, "lineno", None) is not None:
            on_first = n.lineno == 1
            n.lineno += line - 1
            if on_first and getattr(n, "col_offset", None) is not None:
                n.col_offset += col - 1
        if getattr(n, "end_lineno", None) is not None:
            on_first_end = n.end_lineno == 1
            n.end_lineno += line - 1
            if on_first_end and getattr(n, "end_col_offset", None) is not None:
                n.end_col_offset += col - 1
