"""Scalar code with control flow, specialised for float arguments: no duals, no calls.

When every value a function computes on is a float held in a local name (no list, no
object, no call of user code), and its arguments are floats, the kind of every operand
is known: each active local ``x`` can be two locals, its float ``x`` and its tape index
``x_i``. Each float statement then becomes inline code: the primal operations exactly as
Python would run them, one tape entry with the partials of the whole expression
(statement-level preaccumulation, fuse.py), and the new index. No dual is created, no
rule is called, and comparisons and ``if``/``while`` tests read the floats directly.
The tape and the backward sweep are the ordinary ones (runtime.py): this is the same
algorithm with the operand kinds resolved when the code is generated, not at run time.

A name that holds a constant (``x = 0.0``, later ``x = x + v * dt``) gets the index of a
slot reserved for constants, after the arguments' slots: the sweep never reaches it, so
whatever reaches its adjoint is dropped, as a constant gets no parent in an entry.

Eligible statements: assignments of float expressions (those fuse.py fuses) to names,
assignments to inactive names (loop counters, constants), ``if``, ``while``,
``for ... in range(...)``, ``break``, ``continue``, ``pass`` and ``return <float
expression>``. ``value_and_grad`` uses the generated function only when every argument
is exactly a float (api.py); otherwise the ordinary transformed code runs.
"""
from __future__ import annotations

import ast
import linecache
import re

import gast

from .fuse import Const, Leaf, differentiate
from .primitives import rule_namespace
from .straightline import _NotStraight, _tidy, _tree

_PURE = (gast.Compare, gast.BoolOp, gast.UnaryOp, gast.BinOp, gast.Name, gast.Constant,
         gast.Call, gast.IfExp, gast.expr_context, gast.cmpop, gast.boolop, gast.unaryop,
         gast.operator)
_PLAIN_BUILTINS = ("len", "range", "int", "abs", "min", "max")


class _Locals(dict):
    """The names an expression tree may have as leaves: the function's own locals."""

    def __init__(self, names):
        super().__init__()
        self.names = names

    def __contains__(self, name):
        return name in self.names


class _Writer:
    def __init__(self, rule_name, static_callee, activity, filename, names, local_names):
        self.rule_name = rule_name
        self.static_callee = static_callee
        self.filename = filename
        self.lines: list = []   # (text, user line)
        self.counter = [0]
        self.names = names
        self.local_names = local_names
        self.tape = names["tape"]
        self.sink = names["sink"]
        # every active local is a float with an index variable (activity analysis)
        self.index = {n: n + names["suffix"] for n in sorted(local_names)
                      if n not in activity.inactive}

    def emit(self, depth: int, text: str, lineno: int) -> None:
        self.lines.append(("    " * depth + text, lineno))

    def builtin(self, func, name: str) -> bool:
        import builtins
        return self.static_callee(func) is getattr(builtins, name)

    # -- expressions ---------------------------------------------------------------------
    def plain(self, node) -> str:
        """An expression run as Python on floats (a test, a range bound): only names of
        locals, constants, operators and pure functions."""
        callees = set()
        for n in gast.walk(node):
            if isinstance(n, gast.Call):
                if n.keywords or any(isinstance(a, gast.Starred) for a in n.args) or not (
                        self.rule_name(n.func) is not None or
                        any(self.builtin(n.func, b) for b in _PLAIN_BUILTINS)):
                    raise _NotStraight
                callees.update(id(c) for c in gast.walk(n.func))
            elif id(n) in callees:
                continue
            elif not isinstance(n, _PURE) or (isinstance(n, gast.Name) and
                                              n.id not in self.local_names):
                raise _NotStraight
        return ast.unparse(gast.gast_to_ast(node))

    def value(self, node, depth: int, lineno: int):
        """Emit the computation of float expression ``node``; return (value, index)."""
        leaves: list = []
        tree = _tree(node, leaves, _Locals(self.local_names), self.rule_name)
        if isinstance(tree, Const):
            return repr(tree.value), self.sink
        if isinstance(tree, Leaf):
            name = tree.node.id
            return name, self.index.get(name, self.sink)
        values = {leaf.index: leaf.node.id for leaf in leaves}
        lines, result, partials = differentiate(tree, values, self.counter)
        for line in lines:
            self.emit(depth, self.rename(_tidy(line)), lineno)
        pairs = []
        for leaf in leaves:
            name = leaf.node.id
            if name in self.index:
                partial = " + ".join(partials.get(leaf.index, ["0.0"]))
                pairs += [self.index[name], self.rename(_tidy(partial))]
        if not pairs:
            return self.rename(result), self.sink
        self.emit(depth, f"{self.names['append']}(({', '.join(pairs)}))", lineno)
        return self.rename(result), f"len({self.tape}) - 1"

    def rename(self, code: str) -> str:
        """fuse.differentiate's temporaries (t0, g1) under this function's fresh prefix."""
        return re.sub(r"\b([tg])(\d+)\b", lambda m: f"{self.names['temp']}{m.group(1)}"
                      f"{m.group(2)}", code)

    # -- statements ----------------------------------------------------------------------
    def block(self, body, depth: int) -> None:
        if not body:
            self.emit(depth, "pass", 0)
        for stmt in body:
            self.statement(stmt, depth)

    def statement(self, stmt, depth: int) -> None:
        line = stmt.lineno
        text = linecache.getline(self.filename, line).strip()
        compound = isinstance(stmt, (gast.If, gast.While, gast.For))
        if text and not compound:
            more = " ..." if getattr(stmt, "end_lineno", line) != line else ""
            self.emit(depth, f"# {text}{more}", line)
        if isinstance(stmt, gast.Assign):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], gast.Name):
                raise _NotStraight
            target = stmt.targets[0].id
            if target not in self.index:  # an int counter, a constant
                self.emit(depth, f"{target} = {self.plain(stmt.value)}", line)
                return
            value, index = self.value(stmt.value, depth, line)
            self.emit(depth, f"{target} = {value}", line)
            self.emit(depth, f"{self.index[target]} = {index}", line)
        elif isinstance(stmt, gast.Return):
            if stmt.value is None:
                raise _NotStraight
            value, index = self.value(stmt.value, depth, line)
            self.emit(depth, f"return gradient_of({self.tape}, {value}, {index}, "
                             f"{self.names['n']})", line)
        elif isinstance(stmt, (gast.If, gast.While)):
            keyword = "if" if isinstance(stmt, gast.If) else "while"
            self.emit(depth, f"{keyword} {self.plain(stmt.test)}:", line)
            self.block(stmt.body, depth + 1)
            if stmt.orelse:
                self.emit(depth, "else:", line)
                self.block(stmt.orelse, depth + 1)
        elif isinstance(stmt, gast.For):
            it = stmt.iter
            if not (isinstance(stmt.target, gast.Name) and stmt.target.id not in self.index
                    and isinstance(it, gast.Call) and self.builtin(it.func, "range")):
                raise _NotStraight
            self.emit(depth, f"for {stmt.target.id} in {self.plain(it)}:", line)
            self.block(stmt.body, depth + 1)
            if stmt.orelse:
                self.emit(depth, "else:", line)
                self.block(stmt.orelse, depth + 1)
        elif isinstance(stmt, (gast.Break, gast.Continue, gast.Pass)):
            self.emit(depth, type(stmt).__name__.lower(), line)
        else:
            raise _NotStraight


def write_scalar_loops(root, rule_name, static_callee, activity, local_names: set,
                       filename: str):
    """The float-specialised value-and-gradient function of ``root`` (a normalized
    gast.FunctionDef, before the transform), as ``(ast.FunctionDef, text)``, or None if
    its body is not scalar code of this kind."""
    args = root.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        return None
    params = [a.id for a in args.posonlyargs + args.args]
    user_names = {n.id for n in gast.walk(root) if isinstance(n, gast.Name)} | set(params)
    if not params or (set(local_names) | set(params)) & set(rule_namespace()):
        return None  # a user name would hide a math function the entries use
    if not any(isinstance(n, (gast.While, gast.For)) for n in gast.walk(root)):
        return None  # straight-line code has its own, tapeless version (straightline.py)
    body = [s for s in root.body if not (isinstance(s, gast.Expr) and isinstance(
        s.value, gast.Constant) and isinstance(s.value.value, str))]
    if not body or not isinstance(body[-1], gast.Return):
        return None  # falling off the end returns None, not a float
    names = {"tape": "_tape", "append": "_append", "temp": "_v", "suffix": "_i"}
    for key in ("tape", "append", "temp"):
        while any(n.startswith(names[key]) for n in user_names):
            names[key] += "_"
    while any(n + names["suffix"] in user_names for n in user_names):
        names["suffix"] += "_"
    names["n"] = names["sink"] = str(len(params))
    writer = _Writer(rule_name, static_callee, activity, filename, names,
                     set(local_names) | set(params))
    if any(p not in writer.index for p in params):
        return None
    try:
        writer.block(body, 1)
    except _NotStraight:
        return None
    first = root.lineno
    n = len(params)
    head = [
        (f"def {root.name}_floats({', '.join(params)}):", first),
        ("    # every argument a float: each float is a local and its tape index", first),
        ("    if " + " or ".join(f"type({p}) is not float" for p in params) + ":", first),
        ("        return None  # not all floats: the transformed code runs instead", first),
        (f"    {names['tape']} = [(){', ()' * n}]  # the arguments' slots, then one for "
         "constants", first),
        (f"    {names['append']} = {names['tape']}.append", first),
        (f"    {', '.join(writer.index[p] for p in params)}{',' if n == 1 else ''} = "
         f"{', '.join(str(k) for k in range(n))}{',' if n == 1 else ''}", first)]
    lines = head + writer.lines
    text = "\n".join(line for line, _ in lines) + "\n"
    function = ast.parse(text).body[0]
    user_line = [lineno or first for _, lineno in lines]
    for node in ast.walk(function):  # a traceback names the user's file and statement
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = user_line[node.lineno - 1]
            node.col_offset = node.end_col_offset = 0
    return function, text
