"""Scalar code with control flow, specialised for float arguments: no duals, no calls.

When every value a function computes on is a float held in a local name (no list, no
object, no call of user code), and its arguments are floats, the kind of every operand
is known: each active local ``x`` can be two locals, its float ``x`` and its tape index
``x_i``. Each float statement then becomes inline code: the primal operations exactly as
Python would run them, one tape entry with the partials of the whole expression
(statement-level preaccumulation, fuse.py), and the new index. No dual is created, no
rule is called, and comparisons and ``if``/``while`` tests read the floats directly.
This is the same algorithm with the operand kinds resolved when the code is generated,
not at run time. Only the tape's layout differs (runtime.sweep_flat): one flat list of
(parent slot, partial) pairs, the same number of pairs for every entry of the function
(padded or split), so an entry costs no tuple of its own.

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

from .fuse import Const, Fuser, Leaf, differentiate
from ..rules.scalar import BINARY_RULES, UNARY_RULES, rule_namespace
from .straightline import _NotStraight, _tidy, _tree, parse_with_user_lines

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
        "gradient_of", "len", "type", "float", "list", "set", "map", "accumulate", "all",
        "id"}


class _Locals(dict):
    """The leaves an expression tree may have: the function's own locals, and elements
    of list arguments: ``xs[k]``, ``m[i][j]``, and ``row[j]`` of a local ``row = m[i]``."""

    def __init__(self, names, lists, matrices, rows):
        super().__init__()
        self.names = names
        self.lists, self.matrices, self.rows = lists, matrices, rows

    def __contains__(self, name):
        return name in self.names and name not in self.lists and \
            name not in self.matrices and name not in self.rows

    def element(self, node) -> str | None:
        """"list", "row" or "matrix" if ``node`` reads an element, else None."""
        if not isinstance(node, gast.Subscript) or not isinstance(node.ctx, gast.Load) \
                or isinstance(node.slice, gast.Slice):
            return None
        inner = node.value
        if isinstance(inner, gast.Name):
            return "list" if inner.id in self.lists else (
                "row" if inner.id in self.rows else None)
        if isinstance(inner, gast.Subscript) and isinstance(inner.value, gast.Name) and \
                inner.value.id in self.matrices and not isinstance(inner.slice, gast.Slice):
            return "matrix"
        return None


class _Entry:
    """One tape entry of the generated code, its (parent slot, partial) pairs, written
    out when the function's width is known: narrower entries are padded with pairs
    (constants' slot, 0.0), wider ones split in two (see ``lines``)."""

    def __init__(self, depth: int, pairs: list, in_loop: bool):
        self.depth, self.pairs, self.in_loop = depth, pairs, in_loop

    def lines(self, names: dict, width: int) -> list:
        """Text lines. An entry of more than ``width`` pairs first writes an entry of its
        last pairs, then one of its first ``width - 1`` pairs and (that entry, 1.0): the
        sweep then adds the same products to each adjoint in the same order."""
        pairs, lines = self.pairs, []
        if len(pairs) > width:
            lines = _Entry(self.depth, pairs[width - 1:], self.in_loop).lines(names, width)
            pairs = pairs[:width - 1] + [(names["last"], "1.0")]
        pairs = pairs + [(names["sink"], "0.0")] * (width - len(pairs))
        fields = ", ".join(f"{slot}, {partial}" for slot, partial in pairs)
        indent = "    " * self.depth
        return lines + [f"{indent}{names['extend']}(({fields}))",
                        f"{indent}{names['last']} += 1"]


class _Writer:
    def __init__(self, rule_name, static_callee, activity, filename, names, local_names,
                 lists, matrices, rows):
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
                      if n not in activity.inactive and n not in lists and n not in matrices
                      and n not in rows}
        self.lists = lists  # list argument -> (its first slot, its length) variables
        self.matrices = matrices  # list of lists -> (its rows' first slots, its length)
        self.rows = {r: r + names["suffix"] for r in rows}  # row local -> its first slot
        self.leaves = _Locals(local_names, lists, matrices, rows)
        self.loops = 0  # how many loops the statement being written is in

    def emit(self, depth: int, text: str, lineno: int) -> None:
        self.lines.append(("    " * depth + text, lineno))

    def builtin(self, func, name: str) -> bool:
        import builtins
        return self.static_callee(func) is getattr(builtins, name)

    def same_in_rules(self, func) -> bool:
        """Does ``func``, written as is in the generated function (whose globals are the
        rules' namespace), name the callable it names in the user's code? Not for
        ``m.sin`` after ``import math as m``, nor a user's function called ``gamma``."""
        import builtins
        namespace = rule_namespace()
        if isinstance(func, gast.Name):
            found = namespace.get(func.id, getattr(builtins, func.id, None))
        elif isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name):
            found = getattr(namespace.get(func.value.id), func.attr, None)
        else:
            return False
        return found is not None and found is self.static_callee(func)

    # -- expressions ---------------------------------------------------------------------
    def plain(self, node) -> str:
        """An expression run as Python on floats (a test, a range bound): only names of
        locals, constants, operators and pure functions."""
        callees = set()
        for n in gast.walk(node):
            if isinstance(n, gast.Call):
                if n.keywords or any(isinstance(a, gast.Starred) for a in n.args) or not (
                        self.rule_name(n.func) is not None or
                        any(self.builtin(n.func, b) for b in _PLAIN_BUILTINS)) or \
                        not self.same_in_rules(n.func):
                    raise _NotStraight
                callees.update(id(c) for c in gast.walk(n.func))
            elif id(n) in callees:
                continue
            elif self.leaves.element(n):  # its slices are checked as the walk goes on
                callees.add(id(n.value))
                if isinstance(n.value, gast.Subscript):
                    callees.add(id(n.value.value))
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
            # xs[k]: read the element; its derivative (here its slot) from xs's and k's
            kind = self.leaves.element(leaf.node)
            x = f"{self.names['temp']}x{self.counter[0]}"
            k = self.subscript(leaf.node.slice, "k", depth, lineno)
            if kind == "list":
                self.emit(depth, f"{x} = {leaf.node.value.id}[{k}]", lineno)
                indices[leaf.index] = self.element_derivative(kind, leaf.node.value.id, k)
            elif kind == "row":
                row = leaf.node.value.id
                self.emit(depth, f"{x} = {row}[{k}]", lineno)
                indices[leaf.index] = self.element_derivative(kind, row, k)
            else:  # m[i][j]
                matrix = leaf.node.value.value.id
                i = self.subscript(leaf.node.value.slice, "i", depth, lineno)
                row = f"{self.names['temp']}row{self.counter[0]}"
                self.emit(depth, f"{row} = {matrix}[{i}]", lineno)
                self.emit(depth, f"{x} = {row}[{k}]", lineno)
                indices[leaf.index] = self.element_derivative(kind, matrix, k, i, row)
            self.counter[0] += 1
            values[leaf.index] = x
        if isinstance(tree, Leaf):
            return values[tree.index], indices[tree.index] or self.constant
        lines, result, partials = differentiate(tree, values, self.counter,
                                                self.names["temp"])
        for line in lines:
            self.emit(depth, _tidy(line), lineno)
        pairs = []
        for leaf in leaves:
            if indices[leaf.index] is not None:
                partial = " + ".join(partials.get(leaf.index, ["0.0"]))
                pairs.append((indices[leaf.index], _tidy(partial)))
        if not pairs:
            return result, self.constant
        return result, self.combine(pairs, depth, lineno)

    # -- what reverse mode records (a forward-mode writer says otherwise: forward/floats.py)
    @property
    def constant(self) -> str:
        """The derivative a constant has: here the slot of constants."""
        return self.sink

    def element_derivative(self, kind: str, container: str, k: str, i=None, row=None):
        """The slot of ``container[k]`` (a list argument, a row local, or ``m[i][k]``)."""
        if kind == "list":
            start, length = self.lists[container]
            return f"{start} + {k} % {length}"
        if kind == "row":
            return f"{self.rows[container]} + {k} % len({container})"
        starts, length = self.matrices[container]
        return f"{starts}[{i} % {length}] + {k} % len({row})"

    def combine(self, pairs: list, depth: int, lineno: int) -> str:
        """A float expression's (slot, partial) pairs: one tape entry, written out once
        every entry is known (each takes the function's width); its index."""
        self.lines.append((_Entry(depth, pairs, self.loops > 0), lineno))
        return self.names["last"]

    def row_assignment(self, target: str, matrix: str, i: str, depth: int, line: int):
        starts, length = self.matrices[matrix]
        self.emit(depth, f"{target} = {matrix}[{i}]", line)
        self.emit(depth, f"{self.rows[target]} = {starts}[{i} % {length}]", line)

    def return_statement(self, value: str, index: str, depth: int, line: int):
        self.emit(depth, f"return gradient_of({self.tape}, {self.names['width']}, "
                         f"{value}, {index}, {self.sink}, {self.names['layout']})", line)

    def constant_only(self, node) -> None:
        """A name the activity analysis found constant is assigned ``node``: refuse if a
        differentiated value could reach it other than through ``len`` or ``int`` (which
        carry no derivative), so that a constant here never hides a derivative, whatever
        the analysis concluded."""
        if isinstance(node, gast.Name):
            if node.id in self.index or node.id in self.lists or node.id in self.matrices \
                    or node.id in self.rows:
                raise _NotStraight
            return
        if isinstance(node, gast.Call) and (self.builtin(node.func, "len") or
                                            self.builtin(node.func, "int")):
            return
        for child in gast.iter_child_nodes(node):
            self.constant_only(child)

    def subscript(self, node, letter: str, depth: int, lineno: int) -> str:
        """An index expression, in a temporary unless it is a name or a constant (which
        nothing rebinds before the entry that uses it)."""
        if isinstance(node, (gast.Name, gast.Constant)):
            return self.plain(node)
        var = f"{self.names['temp']}{letter}{self.counter[0]}"
        self.emit(depth, f"{var} = {self.plain(node)}", lineno)
        return var

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
            if target in self.rows:  # row = m[i]: the row and its first slot
                value = stmt.value
                if not (isinstance(value, gast.Subscript) and isinstance(value.value, gast.Name)
                        and value.value.id in self.matrices):
                    raise _NotStraight
                i = self.subscript(value.slice, "i", depth, line)
                self.counter[0] += 1
                self.row_assignment(target, value.value.id, i, depth, line)
                return
            if target not in self.index:  # an int counter, a constant
                self.constant_only(stmt.value)
                self.emit(depth, f"{target} = {self.plain(stmt.value)}", line)
                return
            value, index = self.value(stmt.value, depth, line)
            assignments = [f"{target} = {value}", f"{self.index[target]} = {index}"]
            if re.search(rf"\b{target}\b", index):  # k = xs[k]: the slot reads the old k
                assignments.reverse()
            for text in assignments:
                self.emit(depth, text, line)
        elif isinstance(stmt, gast.Return):
            if stmt.value is None:
                raise _NotStraight
            value, index = self.value(stmt.value, depth, line)
            self.return_statement(value, index, depth, line)
        elif isinstance(stmt, (gast.If, gast.While)):
            keyword = "if" if isinstance(stmt, gast.If) else "while"
            self.emit(depth, f"{keyword} {self.plain(stmt.test)}:", line)
            self.loops += keyword == "while"
            self.block(stmt.body, depth + 1)
            self.loops -= keyword == "while"
            if stmt.orelse:
                self.emit(depth, "else:", line)
                self.block(stmt.orelse, depth + 1)
        elif isinstance(stmt, gast.For):
            it = stmt.iter
            if not (isinstance(stmt.target, gast.Name) and stmt.target.id not in self.index
                    and isinstance(it, gast.Call) and self.builtin(it.func, "range")):
                raise _NotStraight
            self.emit(depth, f"for {stmt.target.id} in {self.plain(it)}:", line)
            self.loops += 1
            self.block(stmt.body, depth + 1)
            self.loops -= 1
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
    names = {"tape": "_tape", "extend": "_extend", "temp": "_v", "suffix": "_i"}
    for key in ("tape", "extend", "temp"):
        while any(n.startswith(names[key]) for n in user_names):
            names[key] += "_"
    while any(n + names["suffix"] in user_names for n in user_names):
        names["suffix"] += "_"
    temp = names["temp"]
    names["sink"] = f"{temp}sink"
    names["layout"] = f"{temp}layout"
    names["last"] = f"{temp}last"
    list_params, matrix_params, rows = _read_only_lists(root, params, local_names)
    lists = {p: (f"{temp}at_{p}", f"{temp}n_{p}") for p in list_params}
    matrices = {p: (f"{temp}rows_{p}", f"{temp}n_{p}") for p in matrix_params}
    writer = _Writer(rule_name, static_callee, activity, filename, names,
                     set(local_names) | set(params), lists, matrices, rows)
    if any(p not in writer.index and p not in lists and p not in matrices for p in params):
        return None
    names["width"] = "_width_"  # a placeholder until every entry is known
    try:
        writer.block(body, 1)
    except _NotStraight:
        return None
    width = _width([e for e, _ in writer.lines if isinstance(e, _Entry)])
    lines = []
    for text, line in writer.lines:
        if isinstance(text, _Entry):
            lines += [(t, line) for t in text.lines(names, width)]
        else:
            lines.append((text.replace(f"gradient_of({names['tape']}, _width_,",
                                       f"gradient_of({names['tape']}, {width},"), line))
    writer.lines = lines
    first = root.lineno
    checks = []
    for p in params:
        if p in lists:
            checks += [f"type({p}) is not list", f"not set(map(type, {p})) <= {{float}}"]
        elif p in matrices:
            checks += [f"type({p}) is not list", f"not all(type({temp}r) is list and "
                       f"set(map(type, {temp}r)) <= {{float}} for {temp}r in {p})"]
        else:
            checks.append(f"type({p}) is not float")
    kinds = "a float" + (" or a list of floats" if lists else "") + (
        " or a list of lists of floats" if matrices else "")
    head = [
        (f"def {root.name}_floats({', '.join(params)}):", first),
        (f"    # every argument {kinds}: each float is a local and its tape index", first),
        ("    if " + " or ".join(checks) + ":", first),
        ("        return None  # other arguments: the transformed code runs instead", first)]
    if len(lists) + len(matrices) > 1 or matrices:
        every = ", ".join([*lists, *matrices] + [f"*{m}" for m in matrices])
        head += [
            (f"    {temp}lists = ({every}{',' if every.count(',') == 0 else ''})", first),
            (f"    if len(set(map(id, {temp}lists))) != len({temp}lists):", first),
            ("        return None  # a list reached twice: the transformed code keeps the "
             "aliasing", first)]
    slot, layout = "0", []
    for p in params:  # the arguments' slots, in order, then one for constants
        if p in lists:
            start, length = lists[p]
            head += [(f"    {length} = len({p})", first), (f"    {start} = {slot}", first)]
            layout.append(f"({start}, {length})")
            slot = f"{start} + {length}"
        elif p in matrices:
            starts, length = matrices[p]
            head += [(f"    {length} = len({p})", first),
                     (f"    {starts} = list(accumulate(map(len, {p}), initial={slot}))",
                      first)]
            layout.append(f"({starts}, None)")
            slot = f"{starts}[-1]"
        else:
            head.append((f"    {writer.index[p]} = {slot}", first))
            layout.append(f"({writer.index[p]}, -1)")
            slot = str(int(slot) + 1) if slot.isdigit() else f"{writer.index[p]} + 1"
    head += [
        (f"    {names['sink']} = {slot}  # the slot of constants: the sweep stops above it",
         first),
        (f"    {names['layout']} = ({', '.join(layout)}{',' if len(layout) == 1 else ''})",
         first),
        (f"    {names['tape']} = []  # the entries, one after another: {width} (slot, "
         "partial) pairs each", first),
        (f"    {names['extend']} = {names['tape']}.extend", first),
        (f"    {names['last']} = {names['sink']}  # the index of the last entry", first)]
    return parse_with_user_lines(head + writer.lines, first)


def _width(entries: list) -> int:
    """The number of (parent, partial) pairs of every entry of the flat tape: the most
    any entry in a loop has (those are the entries that repeat), at most 4 (the sweep's
    unrolled cases, runtime.sweep_flat), at least 2 if a wider entry has to be split."""
    repeated = [len(e.pairs) for e in entries if e.in_loop] or \
        [len(e.pairs) for e in entries] or [1]
    width = min(max(repeated), 4)
    if any(len(e.pairs) > width for e in entries):
        width = max(width, 2)
    return width


def _read_only_lists(root, params: list, local_names: set) -> tuple:
    """The parameters only read as lists of floats (``xs[k]``, ``len(xs)``), those only
    read as lists of lists (``m[i][j]``, ``row = m[i]``, ``len(m)``), and the locals that
    hold a row (``row = m[i]``, then only ``row[j]`` and ``len(row)``)."""
    parents = {}
    for node in gast.walk(root):
        for child in gast.iter_child_nodes(node):
            parents[id(child)] = node

    def element(n):  # n[k], read, no slice
        parent = parents.get(id(n))
        return parent if isinstance(parent, gast.Subscript) and parent.value is n and \
            isinstance(parent.ctx, gast.Load) and not isinstance(parent.slice, gast.Slice) \
            else None

    def length(n):
        parent = parents.get(id(n))
        return isinstance(parent, gast.Call) and isinstance(parent.func, gast.Name) and \
            parent.func.id == "len" and parent.args == [n] and not parent.keywords

    names = [n for n in gast.walk(root) if isinstance(n, gast.Name)]
    rows = set()
    for r in set(local_names) - set(params):
        uses = [n for n in names if n.id == r]
        stores = [n for n in uses if not isinstance(n.ctx, gast.Load)]
        ok = bool(stores) and all(
            isinstance(parents.get(id(n)), gast.Assign) and parents[id(n)].targets == [n]
            and isinstance(parents[id(n)].value, gast.Subscript)
            and isinstance(parents[id(n)].value.value, gast.Name)
            and parents[id(n)].value.value.id in params for n in stores)
        ok = ok and all(length(n) or (element(n) is not None and element(element(n)) is None)
                        for n in uses if isinstance(n.ctx, gast.Load))
        if ok:
            rows.add(r)
    lists, matrices = set(), set()
    for p in params:
        uses = [n for n in names if n.id == p and not isinstance(n.ctx, gast.Param)]
        kinds = set()
        for n in uses:
            sub = element(n) if isinstance(n.ctx, gast.Load) else None
            if length(n):
                continue
            if sub is None:
                kinds.add("other")
            elif isinstance(parents.get(id(sub)), gast.Assign) and \
                    parents[id(sub)].value is sub and len(parents[id(sub)].targets) == 1 \
                    and isinstance(parents[id(sub)].targets[0], gast.Name) and \
                    parents[id(sub)].targets[0].id in rows:
                kinds.add("matrix")
            elif element(sub) is not None:
                kinds.add("matrix" if element(element(sub)) is None else "other")
            else:
                kinds.add("list")
        if kinds == {"list"}:
            lists.add(p)
        elif kinds == {"matrix"}:
            matrices.add(p)
    rows = {r for r in rows if all(parents[id(n)].value.value.id in matrices
                                   for n in names if n.id == r and
                                   not isinstance(n.ctx, gast.Load))}
    return ([p for p in params if p in lists], [p for p in params if p in matrices], rows)
