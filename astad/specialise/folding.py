"""Temporaries folded into their one reader, in the code written for floats.

The writers compute each float expression into temporaries (``_vt2 = _vx0 * _vx1``,
``_vt3 = s + _vt2``), then bind the result (``s = _vt3``), because a tangent or a tape
entry written between reads the operands as they were. A temporary read once, by a later
assignment or return of the same block, is written into its reader: ``s = s + _vx0 *
_vx1``, what the user wrote. Each local stored and loaded costs little, but a float kept
in a local cannot be reused in place, and from Python 3.12 every float made and freed
costs more (docs/design-log.md, sections 20 and 21). Forward mode's code
(specialise/forward.py), the Hessian-vector code (api/hvp.py) and reverse mode's
(specialise/loops.py) are folded here.

The value is the same: the same operations on the same operands in the same order (the
expression moved whole, parenthesised as its reader needs). Only when it is computed
moves: past assignments of names it does not read, and past a call statement (the tape's
entry) only when it reads names alone, no element or attribute a call could change. A
float operation has no other effect, and one that raises makes the ordinary code run
either way.
"""
from __future__ import annotations

import ast
import re

_SIMPLE = re.compile(r"( *)([A-Za-z_][\w, ]*) = (.+)")  # an assignment: indent, targets, value


def names_in(text: str) -> list:
    return re.findall(r"[A-Za-z_]\w*", text)


def inline_single_uses(lines: list, prefix: str) -> list:
    """The lines with each temporary the writer made (``{prefix}t3 = ...``) that is read
    once, by an assignment or a return later in the same block, written into that
    reader. A temporary read twice stays: its value is shared.

    One pass, first line first: a reader is always later than what it reads, so a chain
    of temporaries folds into its last reader as the pass reaches each of them."""
    temp = re.compile(re.escape(prefix) + r"[tgxd]\d+")
    lines = list(lines)
    words = [names_in(text) if not text.lstrip().startswith("#") else [] for text, _ in lines]
    counts: dict = {}
    for found in words:
        for word in found:
            counts[word] = counts.get(word, 0) + 1
    k = 0
    while k < len(lines):
        match = _SIMPLE.fullmatch(lines[k][0])
        reader = None
        if match and temp.fullmatch(match.group(2)) and counts[match.group(2)] == 2:
            reader = _reader(lines, words, k, *match.groups())
        if reader is None:
            k += 1
            continue
        indent, name, value = match.groups()
        new = re.sub(rf"\b{name}\b", f"({value})", lines[reader][0])
        lines[reader] = (indent + ast.unparse(ast.parse(new.strip())), lines[reader][1])
        words[reader] = names_in(lines[reader][0])
        del lines[k], words[k]  # (the line now at k is looked at next)
    return lines


def _reader(lines: list, words: list, k: int, indent: str, name: str, value: str):
    """The index of the line that reads temporary ``name`` (assigned ``value`` at line
    ``k``) if it may take ``value`` in its place, else None."""
    reads = set(names_in(value))
    names_only = None  # (does the value read names alone? found when first needed)
    for u in range(k + 1, len(lines)):
        if not words[u]:
            continue  # (a comment)
        text = lines[u][0]
        use = _SIMPLE.fullmatch(text)
        is_return = text.startswith(f"{indent}return ")
        if (use is None or use.group(1) != indent) and not is_return:
            if name in words[u] or not text.startswith(indent) or \
                    text[len(indent):len(indent) + 1] == " ":
                return None  # (a block begins or ends: the value stays where it is)
            statement = _statement(text)
            if isinstance(statement, ast.AugAssign) and \
                    isinstance(statement.target, ast.Name) and statement.target.id not in reads:
                continue  # (the entries' count)
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                if names_only is None:
                    names_only = _reads_names_alone(value)
                if names_only:
                    continue  # (the tape's entry)
            return None
        if name in words[u]:
            return u
        if is_return or reads & set(names_in(use.group(2))):
            return None  # (a name the value reads is assigned before the reader)
    return None


def _statement(text: str):
    try:
        return ast.parse(text.strip()).body[0]
    except SyntaxError:  # (a line that opens a block)
        return None


def _reads_names_alone(value: str) -> bool:
    """Does the expression ``value`` read only names (and call functions they name), no
    element or attribute, which a call between could change?"""
    try:
        tree = ast.parse(value, mode="eval")
    except SyntaxError:
        return False
    return not any(isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred,
                                     ast.NamedExpr, ast.Lambda, ast.Await))
                   for node in ast.walk(tree))
