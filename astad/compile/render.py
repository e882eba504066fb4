"""What ``.source`` shows: generated code as text, with ``# original line`` before each
statement, printed with the standard library's ``ast.unparse`` (astor cannot print
``match`` statements and has had no release since 2019)."""
from __future__ import annotations

import ast
import copy
import linecache

from .entry import Entry

_COMMENT_MARK = "@astad-comment@"


def readable_source(entry: Entry, unfused: Entry | None) -> str:
    """What ``f.source`` shows: first the code of the paper's transform as a reader
    expects it (one rule call per primitive operation, ``preaccumulate=False``), then,
    each named as such, the code that actually runs: the same with each float expression
    one tape entry (statement-level preaccumulation), the code specialised for float
    arguments, and forward mode's code for float arguments. ``unfused``: the entry
    written with ``preaccumulate=False`` (None if ``entry`` is that one)."""
    unfused = unfused.transformed_source if unfused is not None else None
    parts = [entry.source]
    if unfused is not None and unfused != entry.transformed_source:
        # the paper's transform first (what a reader looks at first), then what runs
        parts = [unfused, "# what runs: the same, with each float expression one tape entry "
                          "(statement-level preaccumulation)\n" + entry.source]
    if entry.forward_source is not None:
        parts.append("# forward mode (section 2), specialised for float arguments: jvp runs "
                     "this when every primal and tangent is a float or a sequence of floats\n"
                     + entry.forward_source)
    return "\n\n".join(part.rstrip("\n") for part in parts) + "\n"


def render(function_ast: ast.FunctionDef, filename: str) -> str:
    """The generated function as text, with ``# original line`` before each statement."""
    display = copy.deepcopy(function_ast)
    seen: set = set()
    _add_comments(display, filename, seen)
    text = ast.unparse(display)
    lines = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.lstrip("'\"").startswith(_COMMENT_MARK):
            indent = line[: len(line) - len(line.lstrip())]
            comment = ast.literal_eval(stripped)[len(_COMMENT_MARK):]
            lines.append(f"{indent}# {comment}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _add_comments(node: ast.AST, filename: str, seen: set) -> None:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
            continue
        new_block = []
        for stmt in block:
            lineno = getattr(stmt, "lineno", None)
            docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str)
            if lineno is not None and lineno not in seen and not docstring:
                seen.add(lineno)
                text = linecache.getline(filename, lineno).strip()
                compound = isinstance(stmt, ast.Match) or any(  # (cases are not statements)
                    isinstance(getattr(stmt, f, None), list) and getattr(stmt, f)
                    and isinstance(getattr(stmt, f)[0], ast.stmt)
                    for f in ("body", "orelse", "handlers"))
                if not compound and getattr(stmt, "end_lineno", lineno) != lineno:
                    text += " ..."
                if text:
                    marker = ast.Expr(ast.Constant(_COMMENT_MARK + text))
                    new_block.append(marker)
            _add_comments(stmt, filename, seen)
            new_block.append(stmt)
        setattr(node, field, new_block)
    for handler in getattr(node, "handlers", []):
        _add_comments(handler, filename, seen)
    for case in getattr(node, "cases", []):
        _add_comments(case, filename, seen)
