"""Temporaries folded into their one use, in the code written for floats.

The writer computes each float expression into temporaries (``_vt2 = _vx0 * _vx1``,
``_vt3 = s + _vt2``), records the entry, then binds the result (``s = _vt3``), because the
entry's partials read the operands as they were. A temporary read once, by a later
assignment of the same block, is folded into it: ``s = s + _vx0 * _vx1``, what the user
wrote. Each local stored and loaded costs little, but an intermediate float kept in a
local cannot be reused in place, and from Python 3.12 every float made and freed costs
more (docs/design-log.md, sections 20 and 21).

The value is the same: the same operations on the same operands in the same order
(the tree is moved whole, parenthesised as its place needs). Only when it is computed
moves, past lines that assign none of the names it reads (the tape entry, the entries'
count); a float operation has no other effect, and one that raises makes the ordinary
code run either way.
"""
from __future__ import annotations

import ast
import re

_ASSIGNMENT = re.compile(r"( *)([A-Za-z_]\w*) = (.+)$")
_WORD = re.compile(r"[A-Za-z_]\w*")


def folded(lines: list, temp: str) -> list:
    """``lines`` (``(text, user line)`` pairs of one generated function) with every
    temporary named ``<temp>t<n>`` that is assigned once and read once, by a later
    ``name = ...`` line of the same block, folded into that line."""
    pattern = re.compile(re.escape(temp) + r"t\d+")
    counts: dict = {}
    for text, _ in lines:
        for word in _WORD.findall(text):
            if pattern.fullmatch(word):
                counts[word] = counts.get(word, 0) + 1
    out = list(lines)
    removed = set()
    for k, (text, _) in enumerate(out):
        found = _ASSIGNMENT.match(text)
        if found is None or counts.get(found[2]) != 2 or ":=" in found[3]:
            continue
        indent, name, value = found.groups()
        use = _single_use(out, k, indent, name, set(_WORD.findall(value)), removed)
        if use is None:
            continue
        new = _substituted(out[use][0], name, value)
        if new is None:
            continue
        out[use] = (indent + new, out[use][1])
        removed.add(k)
    return [line for k, line in enumerate(out) if k not in removed]


def _single_use(lines: list, k: int, indent: str, name: str, reads: set, removed: set):
    """The index of the line after ``k`` that reads ``name``: an assignment at the same
    indentation, with only lines of that block assigning none of ``reads`` between."""
    word = re.compile(r"\b" + re.escape(name) + r"\b")
    for j in range(k + 1, len(lines)):
        if j in removed:
            continue
        text = lines[j][0]
        body = text[len(indent):]
        if not text.startswith(indent) or body[:1] == " " or body.rstrip().endswith(":"):
            return None  # (another block: a loop, a branch, or the block's end)
        if word.search(text):
            found = _ASSIGNMENT.match(text)
            return j if found is not None and found[2] != name else None
        if body.startswith("#"):
            continue
        assigned = _assigned(body)
        if assigned is None or assigned & reads:
            return None  # (assigns what the value reads, or something it cannot tell)
    return None


def _assigned(text: str):
    """The names the simple statement ``text`` assigns (none for a call, as the tape's
    entry), or None for any other statement."""
    try:
        statement = ast.parse(text).body[0]
    except SyntaxError:
        return None
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return set()
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AugAssign):
        targets = [statement.target]
    else:
        return None
    names = set()
    for target in targets:
        for node in ast.walk(target):
            if not isinstance(node, (ast.Name, ast.Tuple, ast.List, ast.Load, ast.Store)):
                return None  # (an element or an attribute)
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names


def _substituted(text: str, name: str, value: str):
    """``text`` (an assignment) with its one read of ``name`` replaced by the expression
    ``value``, unindented; None if either is not plain Python this can read."""
    try:
        statement = ast.parse(text.strip()).body[0]
        expression = ast.parse(value, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None
    reads = [node for node in ast.walk(statement.value)
             if isinstance(node, ast.Name) and node.id == name]
    if len(reads) != 1:
        return None
    if statement.value is reads[0]:
        statement.value = expression
    else:
        for node in ast.walk(statement.value):
            for field, child in ast.iter_fields(node):
                if child is reads[0]:
                    setattr(node, field, expression)
                elif isinstance(child, list) and any(c is reads[0] for c in child):
                    setattr(node, field, [expression if c is reads[0] else c
                                          for c in child])
    return ast.unparse(statement)
