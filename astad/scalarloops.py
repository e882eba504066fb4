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
import itertools
import linecache
import re

import gast

from .fuse import Const, Fuser, Leaf, differentiate
from .primitives import BINARY_RULES, UNARY_RULES
from .straightline import _NotStraight, _tidy, _tree

_PURE = (gast.Compare, gast.BoolOp, gast.UnaryOp, gast.BinOp, gast.Name, gast.Constant,
         gast.Call, gast.IfExp, gast.expr_context, gast.cmpop, gast.boolop, gast.unaryop,
         gast.operator)
_PLAIN_BUILTINS = ("len", "range", "int", "abs", "min", "max")


def _rule_helpers() -> set:
    """The names the rules' primal and partial expressions use (sin, _inv, LN2...)."""
    words = set()
    for rules in (UNARY_RULES, BINARY_RULES):
        for expressions in rules.values():
            for expression in expressions:
                words.update(re.findall(r"[A-Za-z_]\w*", expression))
    return (words - {"x", "y", "r", "if", "else", "or", "and", "not"}) | {
        "gradient_of", "len", "type", "float", "list", "set", "map"}


class _Locals(dict):
    """The leaves an expression tree may have: the function's own locals, and elements
    ``xs[k]`` of list arguments."""

    def __init__(self, names, lists):
        super().__init__()
        self.names = names
        self.lists = lists

    def __contains__(self, name):
        return name in self.names and name not in self.lists

    def element(self, node) -> bool:
        return isinstance(node.value, gast.Name) and node.value.id in self.lists \
            and isinstance(node.ctx, gast.Load) and not isinstance(node.slice, gast.Slice)


class _Writer:
    def __init__(self, rule_name, static_callee, activity, filename, names, local_names,
                 lists):
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
                      if n not in activity.inactive and n not in lists}
        self.lists = lists  # list argument -> (its first slot, its length) variables
        self.leaves = _Locals(local_names, lists)

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
            elif isinstance(n, gast.Subscript) and self.leaves.element(n):
                continue
            elif not isinstance(n, _PURE) or (isinstance(n, gast.Name) and
                                              n.id not in self.local_names):
                raise _NotStraight
        return ast.unparse(gast.gast_to_ast(node))

    def value(self, node, depth: int, lineno: int):
        """Emit the computation of float expression ``node``; return (value, index)."""
        leaves: list = []
        tree = _tree(node, leaves, self.leaves, self.rule_name)
        if isinstance(tree, Const):
            return repr(tree.value), self.sink
        if not Fuser._order_is_safe(tree):
            raise _NotStraight  # reading xs[k] first could change which error is raised
        values, indices = {}, {}
        for leaf in leaves:  # leaves in Python's order of evaluation
            if isinstance(leaf.node, gast.Name):
                values[leaf.index] = leaf.node.id
                indices[leaf.index] = self.index.get(leaf.node.id)
                continue
            # xs[k]: read the element, and its slot is xs's first slot + k (mod len(xs))
            start, length = self.lists[leaf.node.value.id]
            x = f"{self.names['temp']}x{self.counter[0]}"
            if isinstance(leaf.node.slice, (gast.Name, gast.Constant)):
                k = self.plain(leaf.node.slice)  # (nothing rebinds it before the entry)
            else:
                k = f"{self.names['temp']}k{self.counter[0]}"
                self.emit(depth, f"{k} = {self.plain(leaf.node.slice)}", lineno)
            self.counter[0] += 1
            self.emit(depth, f"{x} = {leaf.node.value.id}[{k}]", lineno)
            values[leaf.index] = x
            indices[leaf.index] = f"{start} + {k} % {length}"
        if isinstance(tree, Leaf):
            return values[tree.index], indices[tree.index] or self.sink
        lines, result, partials = differentiate(tree, values, self.counter,
                                                self.names["temp"])
        for line in lines:
            self.emit(depth, _tidy(line), lineno)
        pairs = []
        for leaf in leaves:
            if indices[leaf.index] is not None:
                partial = " + ".join(partials.get(leaf.index, ["0.0"]))
                pairs += [indices[leaf.index], _tidy(partial)]
        if not pairs:
            return result, self.sink
        self.emit(depth, f"{self.names['append']}(({', '.join(pairs)}))", lineno)
        return result, f"len({self.tape}) - 1"

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
                             f"{self.sink}, {self.names['layout']})", line)
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
    if not params or (set(local_names) | set(params)) & _rule_helpers():
        return None  # a user name would hide a function the entries use
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
    temp = names["temp"]
    names["sink"] = f"{temp}sink"
    names["layout"] = f"{temp}layout"
    lists = {p: (f"{temp}at_{p}", f"{temp}n_{p}") for p in params if _read_only_list(root, p)}
    writer = _Writer(rule_name, static_callee, activity, filename, names,
                     set(local_names) | set(params), lists)
    if any(p not in writer.index and p not in lists for p in params):
        return None
    try:
        writer.block(body, 1)
    except _NotStraight:
        return None
    first = root.lineno
    floats = [p for p in params if p not in lists]
    checks = [f"type({p}) is not float" for p in floats]
    for p in lists:
        checks += [f"type({p}) is not list", f"not set(map(type, {p})) <= {{float}}"]
    for a, b in itertools.combinations(list(lists), 2):
        checks.append(f"{a} is {b}")  # one list twice: the ordinary path keeps the aliasing
    head = [
        (f"def {root.name}_floats({', '.join(params)}):", first),
        ("    # every argument a float" + (" or a list of floats" if lists else "")
         + ": each float is a local and its tape index", first),
        ("    if " + " or ".join(checks) + ":", first),
        ("        return None  # other arguments: the transformed code runs instead", first)]
    slot, layout = "0", []
    for p in params:  # the arguments' slots, in order, then one for constants
        if p in lists:
            start, length = lists[p]
            head += [(f"    {length} = len({p})", first), (f"    {start} = {slot}", first)]
            layout.append(f"({start}, {length})")
            slot = f"{start} + {length}"
        else:
            head.append((f"    {writer.index[p]} = {slot}", first))
            layout.append(f"({writer.index[p]}, -1)")
            slot = str(int(slot) + 1) if slot.isdigit() else f"{writer.index[p]} + 1"
    head += [
        (f"    {names['sink']} = {slot}  # the slot of constants: the sweep stops above it",
         first),
        (f"    {names['layout']} = ({', '.join(layout)}{',' if len(layout) == 1 else ''})",
         first),
        (f"    {names['tape']} = [()] * ({names['sink']} + 1)", first),
        (f"    {names['append']} = {names['tape']}.append", first)]
    lines = head + writer.lines
    text = "\n".join(line for line, _ in lines) + "\n"
    function = ast.parse(text).body[0]
    user_line = [lineno or first for _, lineno in lines]
    for node in ast.walk(function):  # a traceback names the user's file and statement
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = user_line[node.lineno - 1]
            node.col_offset = node.end_col_offset = 0
    return function, text


def _read_only_list(root, name: str) -> bool:
    """Is parameter ``name`` only read as ``name[k]`` (no slice) or ``len(name)``?"""
    parents = {}
    for node in gast.walk(root):
        for child in gast.iter_child_nodes(node):
            parents[id(child)] = node
    uses = [n for n in gast.walk(root) if isinstance(n, gast.Name) and n.id == name
            and not isinstance(n.ctx, gast.Param)]
    for use in uses:
        parent = parents.get(id(use))
        if not isinstance(use.ctx, gast.Load):
            return False
        if isinstance(parent, gast.Subscript) and parent.value is use and isinstance(
                parent.ctx, gast.Load) and not isinstance(parent.slice, gast.Slice):
            continue
        if isinstance(parent, gast.Call) and isinstance(parent.func, gast.Name) and \
                parent.func.id == "len" and parent.args == [use] and not parent.keywords:
            continue
        return False
    return bool(uses)
