"""Straight-line float functions: value and gradient in one generated function, no tape.

A function whose body is only assignments of float expressions to local names, ending in
``return <float expression>``, is, once its arguments are floats, one expression DAG.
Statement-level preaccumulation (fuse.py) already differentiates each statement's tree
at transform time; here the statements are chained in one function: the forward half
runs the primal operations exactly as Python would (same operations, same order, every
value in a fresh local), and the backward half is the tape sweep written out, one block
per statement in reverse order, the partials reading those locals. No dual, no tape
entry, no sweep loop (the paper's section 5 linear factoring, applied to the whole body).

The generated function is used by ``value_and_grad``/``grad`` only when every positional
argument is exactly a float and no keyword is passed (api.py); any other call runs the
ordinary transformed code. As in the sweep (runtime.py), a statement whose adjoint is
zero contributes nothing, even where one of its partials is infinite.

Eligible expressions are those fuse.py fuses: ``+ - * /``, ``**`` by an int constant,
unary ``-``/``+``, one-argument math rules; leaves are the parameters, names assigned
earlier in the body, and int or float constants.
"""
from __future__ import annotations

import ast
import linecache
import re

import gast

from .fuse import _BINOPS, _UNARYOPS, Const, Leaf, Op, differentiate
from ..rules.scalar import UNARY_RULES


class _NotStraight(Exception):
    pass


def _tree(node, leaves: list, env: dict, rule_name):
    """The expression tree of ``node``; leaves are names bound in ``env``."""
    if isinstance(node, gast.Constant) and type(node.value) in (int, float):
        return Const(node.value)
    if isinstance(node, gast.BinOp):
        if type(node.op) in _BINOPS:
            return Op(_BINOPS[type(node.op)][0], [_tree(node.left, leaves, env, rule_name),
                                                  _tree(node.right, leaves, env, rule_name)],
                      node)
        if isinstance(node.op, gast.Pow) and isinstance(node.right, gast.Constant) \
                and type(node.right.value) is int:  # a float power of a negative is complex
            return Op("pow", [_tree(node.left, leaves, env, rule_name)], node,
                      node.right.value)
    if isinstance(node, gast.UnaryOp) and type(node.op) in _UNARYOPS:
        return Op(_UNARYOPS[type(node.op)][0], [_tree(node.operand, leaves, env, rule_name)],
                  node)
    if isinstance(node, gast.Call) and not node.keywords and len(node.args) == 1 \
            and not isinstance(node.args[0], gast.Starred):
        rule = rule_name(node.func)
        if rule == "log":
            rule = "log1"
        if rule in UNARY_RULES:
            return Op(rule, [_tree(node.args[0], leaves, env, rule_name)], node)
    if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id in env:
        for leaf in leaves:
            if isinstance(leaf.node, gast.Name) and leaf.node.id == node.id:
                return leaf
        leaf = Leaf(node, len(leaves))
        leaves.append(leaf)
        return leaf
    if isinstance(node, gast.Subscript) and getattr(env, "element", None) is not None \
            and env.element(node):  # an element of a list argument (scalarloops.py)
        leaf = Leaf(node, len(leaves))
        leaves.append(leaf)
        return leaf
    raise _NotStraight


def write_straight_line(root, rule_name, filename: str):
    """The value-and-gradient function of ``root`` (a normalized gast.FunctionDef, before
    the transform), as ``(ast.FunctionDef, its text)``, or None if the body is not
    straight-line. ``rule_name`` resolves a callee to its registered rule name."""
    args = root.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        return None
    params = [a.id for a in args.posonlyargs + args.args]
    if not params:
        return None
    env = {p: f"a{k}" for k, p in enumerate(params)}  # user name -> variable holding it
    active = set(env.values())
    counter = [0]
    forward: list = []
    blocks: list = []  # (user line, result variable, [(leaf variable, partial expression)])
    result = None
    body = [s for s in root.body if not (isinstance(s, gast.Expr) and isinstance(
        s.value, gast.Constant) and isinstance(s.value.value, str)) and
        not isinstance(s, gast.Pass)]
    if not body or not isinstance(body[-1], gast.Return) or body[-1].value is None:
        return None
    try:
        for stmt in body:
            if isinstance(stmt, gast.Assign):
                if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], gast.Name):
                    return None
                target = stmt.targets[0].id
            elif not isinstance(stmt, gast.Return):
                return None
            leaves: list = []
            tree = _tree(stmt.value, leaves, env, rule_name)
            forward.append((f"# {_line(filename, stmt)}", stmt.lineno))
            if isinstance(tree, Const):
                var = f"t{counter[0]}"
                counter[0] += 1
                forward.append((f"{var} = {tree.value!r}", stmt.lineno))
            elif isinstance(tree, Leaf):
                var = env[tree.node.id]  # a plain alias: no operation, no entry
            else:
                values = {leaf.index: env[leaf.node.id] for leaf in leaves}
                lines, var, partials = differentiate(tree, values, counter)
                forward += [(_tidy(line), stmt.lineno) for line in lines]
                parents = [(values[leaf.index], " + ".join(partials.get(leaf.index, ["0.0"])))
                           for leaf in leaves if values[leaf.index] in active]
                if parents:
                    active.add(var)
                    blocks.append((stmt, var, parents))
            if isinstance(stmt, gast.Return):
                result = var
                break
            env[target] = var
    except _NotStraight:
        return None
    ends = [k for k, (_, var, _) in enumerate(blocks) if var == result]
    if result is None or not ends:
        return None  # returns an argument itself, or a constant: the tape path handles it
    blocks = blocks[:ends[0] + 1]  # later statements do not reach the result
    adjoints = {var: f"d{var}" for var in sorted(active, key=_order)}
    first = root.lineno
    backward = [("# backward: the sweep of the entries above, last first", first)]
    # The result's adjoint is 1.0, so its entry sets its parents' adjoints to the partials
    # themselves; every other adjoint starts at 0.0.
    assigned = {parent for parent, _ in blocks[-1][2]}
    rest = [adjoints[v] for v in adjoints if v != result and v not in assigned]
    if rest:
        backward.append((" = ".join(rest) + " = 0.0", first))
    for stmt, var, parents in reversed(blocks):
        backward.append((f"# {_line(filename, stmt)}", stmt.lineno))
        if var == result:
            seen = set()  # two names for one value (``v = p; p + v``) add up
            for parent, partial in parents:
                sign = "+=" if parent in seen else "="
                seen.add(parent)
                backward.append((f"{adjoints[parent]} {sign} {_tidy(partial)}", stmt.lineno))
            continue
        backward.append((f"if {adjoints[var]}:", stmt.lineno))
        for parent, partial in parents:
            partial = _tidy(partial)
            if partial in ("1.0", "-1.0"):  # exact: 1.0 * g == g
                update = f"{'+' if partial == '1.0' else '-'}= {adjoints[var]}"
            elif re.fullmatch(r"-?[\w.]+", partial):
                update = f"+= {partial} * {adjoints[var]}"
            else:
                update = f"+= ({partial}) * {adjoints[var]}"
            backward.append((f"    {adjoints[parent]} {update}", stmt.lineno))
    gradient = ", ".join(adjoints[f"a{k}"] for k in range(len(params)))
    lines = [(f"def {root.name}_floats({', '.join(f'a{k}' for k in range(len(params)))}):",
              first),
             ("    # " + ", ".join(f"a{k} = {p}" for k, p in enumerate(params)), first),
             ("    if " + " or ".join(f"type(a{k}) is not float" for k in range(len(params)))
              + ":", first),
             ("        return None  # not all floats: the transformed code runs instead", first)]
    lines += [(f"    {text}", lineno) for text, lineno in forward + backward]
    lines.append((f"    return {result}, ({gradient}{',' if len(params) == 1 else ''})",
                  body[-1].lineno))
    return parse_with_user_lines(lines)


def parse_with_user_lines(lines: list, default_line: int | None = None):
    """The function written as ``lines`` of (text, user line), parsed, each node carrying
    the user's line (``default_line`` where a line has none), so a traceback through it
    names the user's file and statement; and its text."""
    text = "\n".join(line for line, _ in lines) + "\n"
    function = ast.parse(text).body[0]
    user_line = [lineno or default_line for _, lineno in lines]
    for node in ast.walk(function):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = user_line[node.lineno - 1]
            node.col_offset = node.end_col_offset = 0
    return function, text


def _tidy(code: str) -> str:
    """``code`` as ``ast.unparse`` writes it (no redundant parentheses)."""
    try:
        return ast.unparse(ast.parse(code, mode="eval"))
    except SyntaxError:  # an assignment
        return ast.unparse(ast.parse(code))


def _order(var: str):
    return (var[0] != "a", int(var[1:]))


def _line(filename: str, stmt) -> str:
    return linecache.getline(filename, stmt.lineno).strip() or f"line {stmt.lineno}"
