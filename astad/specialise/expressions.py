"""Expressions of the float-specialised code: the writer's half that reads values.

``Expressions`` is the base of scalarloops' writer. It turns an expression of the user's
code into a value of a known kind (specialise/value_kinds.py): a float expression into the primal
operations, in Python's order, and its derivative (one tape entry, a tangent, or an
adjoint, by the writer's ``combine``); a value with no derivative into Python code as
the user wrote it, its names translated; an element or field read into a local and its
handle; a call of a helper function into its body, inlined (inline.py).
"""
from __future__ import annotations

import ast
import builtins
import math
import re
import types
import weakref

import gast

from ..transform.preaccumulate import Const, Leaf, Op, differentiate
from .value_kinds import (Alias, Float, FloatLocal, FreeFunction, ListArg, ListLocal,
                          LocalFunction, MatrixArg, Plain, PlainLocal, RecordArg,
                          RecordLocal, RecordVal, Row, RowLocal, TupleLocal, TupleVal, ABSENT,
                          CannotSpecialise, constant_global, nonnegative,
                          plain_record_class, record_fields)
from ..registry import formula, total
from ..rules.scalar import rule_namespace

_BINOPS = {gast.Add: "add", gast.Sub: "sub", gast.Mult: "mul", gast.Div: "truediv",
           gast.Mod: "mod"}
_UNARYOPS = {gast.USub: "neg", gast.UAdd: "pos"}
_OPERATORS = {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.Mod: "%",
              gast.FloorDiv: "//", gast.Pow: "**", gast.LShift: "<<", gast.RShift: ">>",
              gast.BitAnd: "&", gast.BitOr: "|", gast.BitXor: "^", gast.MatMult: "@"}
# builtins plain code may call (on values with no derivative, or to compare)
_PLAIN_BUILTINS = ("len", "range", "int", "abs", "min", "max", "round", "bool", "float")
# calls whose result carries no derivative whatever their arguments
_NO_DERIVATIVE = ("len", "int", "round", "bool", "floor", "ceil", "trunc", "isinstance",
                  "isfinite", "isinf", "isnan")


class Retry(Exception):
    """An argument's kind was guessed wrong: write the code again with ``kind``."""

    def __init__(self, param: str, kind: str):
        super().__init__(param, kind)
        self.param, self.kind = param, kind


class Expressions:
    """What reads values; the writer (scalarloops.Writer) adds statements, and each
    mode (tape, tangents, straight-line adjoints) the hooks at the end of this class."""

    scope = None  # the function body being written (scalarloops.Scope)

    # -- names ---------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A new name for generated code: ``base`` or ``base_1``, ``base_2``...; never a
        user's name, nor one the rules' expressions use."""
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def temp(self, letter: str) -> str:
        name = f"{self.names['temp']}{letter}{self.counter[0]}"
        self.counter[0] += 1
        return name

    def read(self, name: str):
        """The value of the user's name ``name`` in the scope being written (or, in a
        local function, the one it is defined in)."""
        scope = self.scope.owner(name)
        if scope is None and name in self.scope.resolver.free:  # a closure's: its cell
            value = self.free_value(name)
            if isinstance(value, FreeFunction):
                raise CannotSpecialise  # (a function used as a value)
            return value
        if scope is None:  # a global: a constant written into the code (rebuilt if rebound)
            value = self.scope.resolver.value(name)
            if value is ABSENT or not constant_global(value):
                raise CannotSpecialise
            return Plain(literal(value))
        local = scope.vars.get(name)
        if local is None:
            local = scope.local(name, None)
        return local.read()

    # -- what an expression is -----------------------------------------------------------
    def active(self, node) -> bool:
        """May ``node``'s value carry a derivative (or hold values that do)?"""
        if isinstance(node, gast.Name):
            if self.scope.owner(node.id) is None:
                return False
            return not isinstance(self.read(node.id), Plain)
        if isinstance(node, (gast.Compare, gast.Constant)) or (
                isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not)):
            return False
        if isinstance(node, gast.BinOp) and isinstance(node.op, gast.FloorDiv):
            return False
        if isinstance(node, gast.Call):
            if self.local_function(node.func) is not None or \
                    self.free_function(node.func) is not None:
                return True  # (its free names may carry derivatives)
            if self.no_derivative(node):
                return False
            return any(self.active(a) for a in node.args) or any(
                self.active(k.value) for k in node.keywords) or self.makes_floats(node) or (
                    isinstance(node.func, gast.Attribute) and self.active(node.func.value))
        if isinstance(node, (gast.Subscript, gast.Attribute)):
            return self.active(node.value)
        return any(self.active(child) for child in gast.iter_child_nodes(node)
                   if isinstance(child, gast.expr))

    def no_derivative(self, node) -> bool:
        if not isinstance(node.func, (gast.Name, gast.Attribute)) or self.is_local(node.func):
            return False
        callee = self.scope.resolver.callee(node.func)
        name = getattr(callee, "__name__", None)
        return name in _NO_DERIVATIVE and callee is getattr(
            builtins if name in dir(builtins) else math, name, None)

    def makes_floats(self, node) -> bool:
        """A call that builds a record or calls a helper: its value may be a record."""
        if self.is_local(node.func):
            return False
        callee = self.scope.resolver.callee(node.func)
        return callee is float or isinstance(callee, types.FunctionType) or (
            isinstance(callee, type) and callee.__module__ != "builtins")

    def is_local(self, func) -> bool:
        root = func
        while isinstance(root, gast.Attribute):
            root = root.value
        return isinstance(root, gast.Name) and self.scope.owner(root.id) is not None

    def local_function(self, func):
        """The LocalFunction ``func`` names, or None."""
        if not isinstance(func, gast.Name):
            return None
        scope = self.scope.owner(func.id)
        local = scope.vars.get(func.id) if scope is not None else None
        return local if isinstance(local, LocalFunction) else None

    def free_function(self, func):
        """The FreeFunction ``func`` names (a function in a closure cell), or None."""
        if not isinstance(func, gast.Name) or func.id not in self.scope.resolver.free or \
                self.scope.owner(func.id) is not None:
            return None
        value = self.free_value(func.id)
        return value if isinstance(value, FreeFunction) else None

    # -- values of any kind --------------------------------------------------------------
    volatile = None  # a handle only valid until the next tape entry (scalarloops: _vlast)

    def evaluate_all(self, nodes: list, depth: int, line: int) -> list:
        """The values of ``nodes``, in order. A value whose handle is the index of the
        last entry, followed by a value that records entries, gets its handle saved
        into a local right after it is computed."""
        marks, values = [], []
        for node in nodes:
            values.append(self.evaluate(node, depth, line))
            marks.append((len(self.lines), self.entries()))
        if self.volatile is None:
            return values
        for k in range(len(values) - 2, -1, -1):
            if marks[k][1] != marks[-1][1] and _mentions(values[k], self.volatile):
                saved = self.temp("i")
                self.lines.insert(marks[k][0], ("    " * depth +
                                                f"{saved} = {self.volatile}", line))
                values[k] = _renamed(values[k], self.volatile, saved)
        return values

    def entries(self) -> int:
        return self.counter[0]

    def saved(self, value, depth: int, line: int):
        """``value`` with a handle that is the index of the last entry saved in a local
        (entries are recorded before it is read)."""
        if self.volatile is None or not _mentions(value, self.volatile):
            return value
        saved = self.temp("i")
        self.emit(depth, f"{saved} = {self.volatile}", line)
        return _renamed(value, self.volatile, saved)

    def evaluate(self, node, depth: int, line: int):
        """Emit what computes ``node``; return its value (specialise/value_kinds.py)."""
        if isinstance(node, gast.Name):
            return self.read(node.id)
        if isinstance(node, gast.Constant):
            if not constant_global(node.value):
                raise CannotSpecialise
            return Plain(literal(node.value))
        if isinstance(node, gast.Tuple) and isinstance(node.ctx, gast.Load):
            return TupleVal(self.evaluate_all(node.elts, depth, line))
        if isinstance(node, gast.ListComp):  # (a helper's argument, say)
            return self.made_list(node, depth, line)
        form = self.written_reduction(node)  # np.dot(y, w), y @ w, y.mean()...
        if form is not None:
            return self.reduce_written(form, depth, line)
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
                isinstance(node.func.value, gast.Name) and self.is_local(node.func.value):
            return self.method_call(node, depth, line)  # p.dist(q)
        local_function = self.local_function(node.func) if isinstance(node, gast.Call) \
            else None
        if local_function is not None:
            return self.inline_local(node, local_function, depth, line)
        free = self.free_function(node.func) if isinstance(node, gast.Call) else None
        if free is not None:
            return self.inline_free(node, free, depth, line)
        if isinstance(node, gast.Call) and not self.is_local(node.func) and \
                not self.no_derivative(node):
            callee = self.scope.resolver.callee(node.func)
            if callee is float and len(node.args) == 1 and not node.keywords:
                inner = self.evaluate(node.args[0], depth, line)
                if isinstance(inner, Float):  # float(x): a float of x's value, x's derivative
                    return Float(self.stable(f"float({inner.value})", depth, line),
                                 inner.handle)
                if isinstance(inner, Plain):
                    return Plain(f"float({inner.value})")
                raise CannotSpecialise
            if isinstance(callee, type) and callee.__module__ != "builtins":
                return self.construct(node, callee, depth, line)
            if self.is_comprehension_sum(node, callee):
                return self.comprehension_sum(node, depth, line)
            if isinstance(callee, types.FunctionType) and \
                    self.scope.resolver.rule_name(node.func) is None:
                return self.inline(node, callee, depth, line)
        if isinstance(node, gast.Subscript) and isinstance(node.ctx, gast.Load) and \
                not isinstance(node.slice, gast.Slice):
            return self.element(node, depth, line)
        if isinstance(node, gast.Attribute) and isinstance(node.ctx, gast.Load):
            return self.field(node, depth, line)
        if isinstance(node, gast.IfExp):
            return self.conditional(node, depth, line)
        if isinstance(node, gast.Call) and len(node.args) == 2 and not node.keywords and \
                not self.is_local(node.func) and self.active(node) and \
                self.scope.resolver.callee(node.func) in (min, max):
            return self.extreme(node, depth, line)
        if self.active(node):
            return self.float_value(node, depth, line)
        return self.plain_value(node, depth, line)

    taint = None  # the last argument taken for an int whose value plain code used

    def flows(self, param: str) -> None:
        """An argument taken for an int (a plain value) is used other than by a test or a
        comparison: unless the code also uses it as an int (a bound, an index...), take it
        for a float (which also takes an int); else it takes only ints and the like."""
        if param not in self.int_names:
            raise Retry(param, "float")
        self.flowing.add(param)

    def plain_value(self, node, depth: int, line: int):
        """``node`` as plain code, and the argument (taken for an int) its value comes
        from, if any: used as a float later, it makes that argument a float one."""
        saved, self.taint = self.taint, None
        try:
            text = self.plain(node, depth, line)
            return Plain(text, self.taint)
        finally:
            self.taint = saved

    def container(self, node, depth, line, kind: str = "list"):
        """The list, row, matrix, tuple or record ``node`` reads elements of (or None).
        An argument taken for a number read as a ``kind`` makes it one (Retry)."""
        if isinstance(node, gast.Name):
            value = self.read(node.id)
        elif isinstance(node, (gast.Call, gast.Subscript, gast.Attribute)):
            if kind == "list" and isinstance(node, gast.Subscript):
                inner = self.container(node.value, depth, line)
                if isinstance(inner, ListArg):  # xs[i][j]: a list of lists
                    raise Retry(inner.param, "matrix")
            value = self.evaluate(node, depth, line)
        else:
            return None
        if isinstance(value, Plain) and value.param is not None:
            raise Retry(value.param, kind)
        if isinstance(value, Float) and value.param is not None and kind == "list":
            raise Retry(value.param, "matrix")  # an element of a list parameter, as a list
        return value if isinstance(value, (ListArg, MatrixArg, Row, TupleVal, RecordVal,
                                           RecordArg, ListLocal)) else None

    def plain_container(self, node) -> bool:
        """Is ``node`` (a name, or an element of one) a value with no derivative that no
        parameter stands behind: a closure's list, or an element read from one?"""
        while isinstance(node, gast.Subscript) and not isinstance(node.slice, gast.Slice):
            node = node.value
        if not isinstance(node, gast.Name):
            return False
        value = self.read(node.id)
        return isinstance(value, Plain) and value.param is None

    def constant_index(self, node, length: int) -> int:
        if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
            k = -self.constant_index(node.operand, length)
        elif isinstance(node, gast.Constant) and type(node.value) is int:
            k = node.value
        else:
            raise CannotSpecialise  # a tuple's element by a computed index
        if not -length <= k < length:
            raise CannotSpecialise  # (Python raises IndexError: the ordinary code does)
        return k % length

    def field(self, node, depth, line):
        """``p.x``: a field of a dataclass argument (read on entry) or of one the code made."""
        record = self.container(node.value, depth, line, "record")
        if isinstance(record, RecordArg):
            local = record.fields.get(node.attr)
            if local is None:
                local = record.fields[node.attr] = self.record_field(record, node.attr)
            return local.read()
        if isinstance(record, RecordVal) and node.attr in record.fields:
            return record.fields[node.attr]
        if isinstance(record, (ListArg, MatrixArg)):
            raise Retry(record.param, "record")
        raise CannotSpecialise

    def construct(self, node, cls, depth, line):
        """``Vec3(a, b, c)`` of a plain dataclass: one value per field, no object."""
        fields = record_fields(cls) if plain_record_class(cls) else None
        if fields is None or any(isinstance(a, gast.Starred) for a in node.args):
            raise CannotSpecialise
        self.scope.resolver.dependencies.append((weakref.ref(cls), "__init__", cls.__init__))
        given = {}
        positional = [name for name, _, kw_only in fields if not kw_only]
        if len(node.args) > len(positional):
            raise CannotSpecialise
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg in positional[:len(node.args)] or \
                    keyword.arg not in {name for name, _, _ in fields}:
                raise CannotSpecialise
        order = positional[:len(node.args)] + [k.arg for k in node.keywords]
        given = dict(zip(order, self.evaluate_all(
            list(node.args) + [k.value for k in node.keywords], depth, line)))
        values = {}
        for name, default, _ in fields:
            if name in given:
                values[name] = given[name]
            elif default is not ABSENT:
                values[name] = Plain(literal(default))
            else:
                raise CannotSpecialise
        return RecordVal(cls, values)

    def conditional(self, node, depth, line):
        """``a if test else b``: an ``if`` statement assigning one local."""
        test = self.plain(node.test, depth, line, quiet=True)
        target = self.temp_local(node, depth, line)
        self.emit(depth, f"if {test}:", line)
        self.bind(target, self.evaluate(node.body, depth + 1, line), depth + 1, line)
        self.emit(depth, "else:", line)
        self.bind(target, self.evaluate(node.orelse, depth + 1, line), depth + 1, line)
        return target.read()

    def extreme(self, node, depth, line):
        """``min(a, b)``: ``b if b < a else a`` (Python's min keeps the first of equals;
        max with ``>``), each argument computed once."""
        a, b = self.evaluate_all(node.args, depth, line)
        if not all(isinstance(v, (Float, Plain)) for v in (a, b)):
            raise CannotSpecialise
        op = "<" if self.scope.resolver.callee(node.func) is min else ">"
        a_text, b_text = self.stable(a.value, depth, line), self.stable(b.value, depth, line)
        a = Float(a_text, a.handle) if isinstance(a, Float) else Plain(a_text, a.param)
        b = Float(b_text, b.handle) if isinstance(b, Float) else Plain(b_text, b.param)
        target = self.temp_local(node, depth, line)
        self.emit(depth, f"if {b_text} {op} {a_text}:", line)
        self.bind(target, b, depth + 1, line)
        self.emit(depth, "else:", line)
        self.bind(target, a, depth + 1, line)
        return target.read()

    def temp_local(self, node, depth, line):
        if not self.active(node):
            return PlainLocal(self.temp("c"))
        name = self.temp("c")
        return FloatLocal(name, self.fresh(name + self.names["suffix"]))

    # -- float expressions ----------------------------------------------------------------
    def float_value(self, node, depth: int, line: int):
        """Emit the computation of the float expression ``node``: its leaves (names,
        element reads, calls of helpers...) in Python's order, then the operations and
        the partials of the whole expression (fuse.differentiate); its value."""
        leaves: list = []
        tree = self.tree(node, leaves)
        if isinstance(tree, Const):
            return Plain(literal(tree.value))
        if isinstance(tree, Leaf) and tree.node is node:  # (an active value of a kind this
            raise CannotSpecialise                         # code does not read: np.sum(a))
        if not _order_is_safe(tree):  # a call would run before an operation that raises
            return self.in_order(node, depth, line)  # first: the operands one by one
        values, handles = {}, {}
        for leaf, value in zip(leaves, self.evaluate_all([leaf.node for leaf in leaves],
                                                         depth, line)):
            if isinstance(value, Float):
                values[leaf.index] = self.stable(value.value, depth, line)
                handles[leaf.index] = value.handle
            elif isinstance(value, Plain):
                if value.param is not None:
                    raise Retry(value.param, "float")  # an argument used as a float
                values[leaf.index] = self.stable(value.value, depth, line)
                handles[leaf.index] = None
            else:
                raise CannotSpecialise  # a list or a record used as a number
        if isinstance(tree, Leaf):
            value = values[tree.index]
            handle = handles[tree.index]
            return Float(value, handle) if handle is not None else Plain(value)
        lines, result, partials = differentiate(tree, values, self.counter,
                                                self.names["temp"], self.zero_guards)
        for text in lines:
            self.emit(depth, tidy(text), line)
            self.check_real(tree, text, depth, line)
        pairs = []
        for leaf in leaves:
            if handles[leaf.index] is not None:
                partial = " + ".join(partials.get(leaf.index, ["0.0"]))
                pairs.append((handles[leaf.index], tidy(partial)))
        if not pairs:
            return Plain(result)
        return Float(result, self.combine(pairs, depth, line))

    def in_order(self, node, depth: int, line: int):
        """``node`` (an operation) with its operands computed first, each to a local,
        in Python's order: a call among them runs after what Python runs before it."""
        if isinstance(node, gast.BinOp):
            operands = [node.left, node.right]
        elif isinstance(node, gast.UnaryOp):
            operands = [node.operand]
        elif isinstance(node, gast.Call):
            operands = list(node.args)
        else:
            raise CannotSpecialise
        computed = [o for o in operands if _number(o) is None]  # (numbers stay numbers)
        values = iter(self.evaluate_all(computed, depth, line))
        names = []
        for operand in operands:
            if _number(operand) is not None:
                names.append(operand)
                continue
            name = self.temp("o")
            self.scope.vars[name] = Alias(next(values))
            self.scope.local_names.discard(name)
            names.append(gast.Name(name, gast.Load(), None, None))
        if isinstance(node, gast.BinOp):
            new = gast.BinOp(names[0], node.op, names[1])
        elif isinstance(node, gast.UnaryOp):
            new = gast.UnaryOp(node.op, names[0])
        else:
            new = gast.Call(node.func, names, [])
        return self.float_value(gast.copy_location(new, node), depth, line)

    def stable(self, value: str, depth, line) -> str:
        """A name or a number holding ``value`` (partials may read it more than once)."""
        if re.fullmatch(r"[A-Za-z_]\w*|-?[\d.]+(e-?\d+)?", value):
            return value
        var = self.temp("x")
        self.emit(depth, f"{var} = {value}", line)
        return var

    def check_real(self, tree, text: str, depth, line) -> None:
        """After ``x ** 0.5``: a negative base gives a complex number, which the ordinary
        code refuses with an error; here too (float() of it raises)."""
        for op in _ops(tree):
            if (op.rule == "power" or op.rule == "pow" and
                    not float(op.exponent).is_integer()) and text.startswith(f"{op.var} ="):
                self.emit(depth, f"{op.var} = float({op.var})", line)

    def tree(self, node, leaves: list):
        """The expression tree of ``node`` (transform/preaccumulate.py's Op, Leaf,
        Const); leaves are every operand that is not an operation the rules
        differentiate."""
        if isinstance(node, gast.Constant) and type(node.value) in (int, float):
            return Const(node.value)
        if isinstance(node, gast.BinOp):
            if type(node.op) in _BINOPS and self.active(node):
                return Op(_BINOPS[type(node.op)], [self.tree(node.left, leaves),
                                                   self.tree(node.right, leaves)], node)
            if isinstance(node.op, gast.Pow) and self.active(node.left) and \
                    _number(node.right) is not None and not self.active(node.right):
                return Op("pow", [self.tree(node.left, leaves)], node, _number(node.right))
            if isinstance(node.op, gast.Pow) and self.active(node):  # (x ** n, x ** p, 2 ** x)
                return Op("power", [self.tree(node.left, leaves),
                                    self.tree(node.right, leaves)], node)
        if isinstance(node, gast.UnaryOp) and type(node.op) in _UNARYOPS and \
                self.active(node):
            return Op(_UNARYOPS[type(node.op)], [self.tree(node.operand, leaves)], node)
        if isinstance(node, gast.Call) and not node.keywords and \
                not any(isinstance(a, gast.Starred) for a in node.args) and \
                not self.is_local(node.func) and self.active(node):
            rule = self.scope.resolver.rule_name(node.func, floats=True)
            rule = "log1" if rule == "log" and len(node.args) == 1 else rule
            rule = "hypot2" if rule == "hypot" and len(node.args) == 2 else rule
            if len(node.args) == 1 and formula(rule, 1) is not None:
                return Op(rule, [self.tree(node.args[0], leaves)], node)
            if len(node.args) == 2 and formula(rule, 2) is not None:
                return Op(rule, [self.tree(a, leaves) for a in node.args], node)
            if rule == "log" and len(node.args) == 2:
                return Op("log_base", [self.tree(a, leaves) for a in node.args], node)
            if rule in ("pow", "math_pow") and len(node.args) == 2:  # (Python's **; where
                # math.pow raises instead, ** raises or its result is complex: the ordinary
                # code runs and raises math.pow's error)
                return Op("power", [self.tree(a, leaves) for a in node.args], node)
            if rule in ("min", "max") and len(node.args) == 2 or \
                    self.is_comprehension_sum(node, self.scope.resolver.callee(node.func)) \
                    or self.written_reduction(node) is not None:
                leaf = Leaf(node, len(leaves))  # (written by extreme())
                leaves.append(leaf)
                return leaf
            if rule is not None:
                raise CannotSpecialise  # a rule the fused code does not know (pow, sum...)
        if isinstance(node, gast.Name):  # one leaf per name (a name has no side effect)
            for leaf in leaves:
                if isinstance(leaf.node, gast.Name) and leaf.node.id == node.id:
                    return leaf
        leaf = Leaf(node, len(leaves))
        leaves.append(leaf)
        return leaf

    # -- plain code ------------------------------------------------------------------------
    def plain(self, node, depth: int, line: int, quiet: bool = False) -> str:
        """``node``, a value with no derivative, as Python code (its names translated,
        calls of helpers inlined). ``quiet``: the value is only tested, counted or
        compared (an ``if`` test, a bound, an index), so it may read floats; otherwise
        a float is read only under a comparison, ``int()``, ``//`` and the like, and an
        argument taken for an int that is used as a number makes it a float argument."""
        return tidy(self._plain(node, depth, line, quiet))

    def _plain(self, node, depth, line, quiet) -> str:
        if isinstance(node, gast.Constant):
            if not constant_global(node.value):
                raise CannotSpecialise
            return literal(node.value)
        if isinstance(node, gast.Name):
            return self._plain_value(self.read(node.id), quiet, node.id)
        sub = lambda n, q=quiet: self._plain(n, depth, line, q)  # noqa: E731
        form = self.written_reduction(node)
        if form is not None:  # (compared, say)
            return self._plain_value(self.reduce_written(form, depth, line), quiet, None)
        if isinstance(node, gast.Compare):
            parts = [sub(node.left, True)]
            for op, right in zip(node.ops, node.comparators):
                parts.append(f"{_COMPARE[type(op)]} {sub(right, True)}")
            return "(" + " ".join(parts) + ")"
        if isinstance(node, gast.BoolOp):
            word = " and " if isinstance(node.op, gast.And) else " or "
            return "(" + word.join(sub(v) for v in node.values) + ")"
        if isinstance(node, gast.UnaryOp):
            if isinstance(node.op, gast.Not):
                return f"(not {sub(node.operand, True)})"
            symbol = {gast.USub: "-", gast.UAdd: "+", gast.Invert: "~"}[type(node.op)]
            return f"({symbol}{sub(node.operand)})"
        if isinstance(node, gast.BinOp):
            floor = quiet or isinstance(node.op, gast.FloorDiv)  # (x // y: derivative 0)
            return f"({sub(node.left, floor)} {_OPERATORS[type(node.op)]} " \
                   f"{sub(node.right, floor)})"
        if isinstance(node, gast.IfExp):
            return f"({sub(node.body)} if {sub(node.test, True)} else {sub(node.orelse)})"
        if isinstance(node, gast.Subscript) and isinstance(node.ctx, gast.Load) and \
                not isinstance(node.slice, gast.Slice):
            return self._plain_value(self.element(node, depth, line), quiet, None)
        if isinstance(node, gast.Attribute):
            return self._plain_value(self.field(node, depth, line), quiet, None)
        if isinstance(node, gast.Call):
            return self.plain_call(node, depth, line, quiet)
        raise CannotSpecialise

    def _plain_value(self, value, quiet: bool, name) -> str:
        if isinstance(value, Plain):
            if value.param is not None and not quiet:  # (its value flows on: say so)
                self.flows(value.param)
                self.taint = value.param
            return value.value if re.fullmatch(r"[\w.]+", value.value) else \
                f"({value.value})"
        if quiet and isinstance(value, (Float, Row)):
            return value.value
        if quiet and isinstance(value, (ListArg, MatrixArg, ListLocal)) and \
                not getattr(value, "array", False):
            return value.name  # (an array as a list would answer differently: y == 0)
        raise CannotSpecialise  # a derivative would be lost (or a record used as a value)

    def plain_call(self, node, depth, line, quiet) -> str:
        if node.keywords or any(isinstance(a, gast.Starred) for a in node.args) or \
                self.is_local(node.func):
            raise CannotSpecialise
        free = self.free_function(node.func)
        if free is not None:
            return self._plain_value(self.inline_free(node, free, depth, line), quiet, None)
        callee = self.scope.resolver.callee(node.func)
        name = getattr(callee, "__name__", "")
        if callee is builtins.pow and len(node.args) == 2:  # (the rules' pow is math's)
            power = gast.BinOp(node.args[0], gast.Pow(), node.args[1])
            return self._plain(gast.copy_location(power, node), depth, line, quiet)
        if isinstance(callee, types.FunctionType) and \
                self.scope.resolver.rule_name(node.func) is None:
            return self._plain_value(self.inline(node, callee, depth, line), quiet, None)
        if self.is_comprehension_sum(node, callee):
            return self._plain_value(self.comprehension_sum(node, depth, line), quiet, None)
        if name == "len" and callee is len and len(node.args) == 1:
            value = self.container(node.args[0], depth, line)
            if isinstance(value, TupleVal):
                return str(len(value.items))
            if isinstance(value, (RecordArg, RecordVal)):
                raise CannotSpecialise
            if isinstance(value, ListLocal) and value.array:
                return f"len({value.name})"
        if _in_rules(node.func) is not callee or callee is None or not (
                name in _PLAIN_BUILTINS and callee is getattr(builtins, name, None) or
                self.scope.resolver.rule_name(node.func, floats=True) is not None or
                name in _NO_DERIVATIVE):
            raise CannotSpecialise
        inner = quiet or name in _NO_DERIVATIVE
        args = ", ".join(self._plain(a, depth, line, inner) for a in node.args)
        return f"{ast.unparse(gast.gast_to_ast(node.func))}({args})"

    # -- element reads ---------------------------------------------------------------------
    def index(self, node, letter: str, depth: int, line: int) -> str:
        """An index, in a temporary unless it is a name or a number."""
        text = self.plain(node, depth, line, quiet=True)
        return self.stable(text, depth, line) if not re.fullmatch(r"-?\w+", text) else text

    def is_nonnegative(self, node) -> bool:
        return nonnegative(node, self.scope.nonnegative)

    def element(self, node, depth: int, line: int):
        """``xs[k]``, ``row[k]``, ``m[i][j]``, ``m[i]``, ``t[0]``: the element's value
        (a float element read into a local, with its handle)."""
        if self.plain_container(node.value):  # (a closure's data: a plain value)
            index = self.plain(node.slice, depth, line, quiet=True)
            return Plain(f"{self.plain(node.value, depth, line, quiet=True)}[{index}]")
        container = self.container(node.value, depth, line)
        if isinstance(container, TupleVal):
            return container.items[self.constant_index(node.slice, len(container.items))]
        if isinstance(container, ListLocal):
            return self.list_element(container, self.index(node.slice, "k", depth, line),
                                     depth, line)
        if not isinstance(container, (ListArg, Row, MatrixArg)):
            raise CannotSpecialise
        k = self.index(node.slice, "k", depth, line)
        nonnegative_k = self.is_nonnegative(node.slice)
        if isinstance(container, MatrixArg):  # a row
            return Row(f"{container.name}[{k}]",
                       self.row_derivative(container, k, nonnegative_k))
        x = self.temp("x")
        if isinstance(container, Row):
            row = self.stable(container.value, depth, line)
            container = Row(row, container.handle)
        read = container.value if isinstance(container, Row) else container.name
        self.emit(depth, f"{x} = {read}[{k}]", line)
        return Float(x, self.element_derivative(container, k, nonnegative_k),
                     container.param if isinstance(container, ListArg) else None)


def parse_with_user_lines(lines: list, default_line: int | None = None,
                          names: dict | None = None, cells: tuple = ()):
    """The function written as ``lines`` of (text, user line), parsed, each node carrying
    the user's line (``default_line`` where a line has none), so a traceback through it
    names the user's file and statement; and its text. ``names``: the objects its text
    names beside astad's rules (the classes whose methods it inlined); ``cells``: the
    user's closure variables it reads by name (compiled as a closure over their cells)."""
    text = "\n".join(line for line, _ in lines) + "\n"
    function = ast.parse(text).body[0]
    function.astad_callees = dict(names or {})
    function.astad_cells = tuple(cells)
    user_line = [lineno or default_line for _, lineno in lines]
    for node in ast.walk(function):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = user_line[node.lineno - 1]
            node.col_offset = node.end_col_offset = 0
    return function, text


def tidy(code: str) -> str:
    """``code`` as ``ast.unparse`` writes it (no redundant parentheses)."""
    try:
        return ast.unparse(ast.parse(code, mode="eval"))
    except SyntaxError:  # an assignment
        return ast.unparse(ast.parse(code))


def _mentions(value, name: str) -> bool:
    if isinstance(value, (Float, Row)):
        return value.handle == name
    if isinstance(value, TupleVal):
        return any(_mentions(v, name) for v in value.items)
    if isinstance(value, RecordVal):
        return any(_mentions(v, name) for v in value.fields.values())
    return False


def _renamed(value, name: str, new: str):
    if isinstance(value, Float) and value.handle == name:
        return Float(value.value, new, value.param)
    if isinstance(value, Row) and value.handle == name:
        return Row(value.value, new)
    if isinstance(value, TupleVal):
        return TupleVal([_renamed(v, name, new) for v in value.items])
    if isinstance(value, RecordVal):
        return RecordVal(value.cls, {k: _renamed(v, name, new)
                                     for k, v in value.fields.items()})
    return value


def _ops(tree):
    if isinstance(tree, Op):
        yield tree
        for operand in tree.operands:
            yield from _ops(operand)


def _order_is_safe(tree) -> bool:
    """No operation that can raise runs, in Python's order, before a call of a helper or
    a conditional expression (evaluated first here: it may run for long, or raise)."""
    risky = False
    for n in _postorder(tree):
        if isinstance(n, Op) and not total(n.rule) and not (
                n.rule == "pow" and n.exponent in (1, 2, 3)):
            risky = True
        elif isinstance(n, Leaf) and risky and isinstance(n.node, (gast.Call, gast.IfExp)):
            return False
    return True


def _postorder(tree):
    if isinstance(tree, Op):
        for operand in tree.operands:
            yield from _postorder(operand)
    yield tree


def _number(node):
    if isinstance(node, gast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def literal(value) -> str:
    if type(value) is float and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def _in_rules(func):
    """What ``func`` names in the rules' namespace (the generated code's globals)."""
    namespace = rule_namespace()
    if isinstance(func, gast.Name):
        return namespace.get(func.id, getattr(builtins, func.id, None))
    if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name):
        return getattr(namespace.get(func.value.id), func.attr, None)
    return None


_COMPARE = {gast.Eq: "==", gast.NotEq: "!=", gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">",
            gast.GtE: ">=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
            gast.NotIn: "not in"}


__all__ = ["Expressions", "Retry", "Alias", "RecordLocal", "RowLocal", "TupleLocal"]
