"""Scalar code specialised for its arguments' kinds: each float a local and its tape index.

When a function's values are floats, numbers with no derivative, read-only lists of
floats (or lists of such lists), tuples and dataclasses of those, the kind of every
operand is known when the code is written (specialise/value_kinds.py): each float local ``x``
can be two locals, its float ``x`` and its tape index ``x_i``. Each float statement then becomes
inline code: the primal operations exactly as Python would run them, one tape entry
with the partials of the whole expression (statement-level preaccumulation,
transform/preaccumulate.py), and the new index. No dual is created, no rule is called;
comparisons and ``if`` and ``while`` tests read the floats directly; a tuple or a dataclass
the code builds is one local per element or field; a call of a helper function is its body,
inlined with its
parameters bound to the arguments' kinds (specialise/expressions.py). This is the same
algorithm with the operand kinds resolved when the code is generated, not at run time.
Only the tape's layout differs: (parent slot, partial) pairs one after another, the same
number of pairs for every entry of the function (padded or split), on ``ad.float_tape()``
(runtime.tape.float_adjoints): a list on the Python runtime, C arrays on the native one
(runtime/_float_tape.c), where an entry keeps no Python object alive.

Loops: ``for`` over ``range``, over a list argument (``for x in xs``: its slots are a
``range`` zipped beside it), ``zip``, ``enumerate`` and ``reversed`` of those, the rows
of a list of lists (``for row in m``); ``while``; ``break``, ``continue``, ``else``;
``return`` anywhere. A name that holds a constant (``x = 0.0``, later ``x = x + v``) gets
the index of a slot reserved for constants, after the arguments' slots: the sweep never
reaches it. An argument that is an int, a bool, a string or None where the code only
uses it as such (``range(n)``) is a plain value, its gradient itself.

The writer has hooks for what each mode records (``combine``, ``element_derivative``,
``row_derivative``, ``bind_handle``, ``return_statement``, ``constant``, the loops'
``handles``): specialise/forward.py writes forward-mode code from the same writer, and
specialise/straight_line.py code without a tape. ``value_and_grad`` runs the generated function when
the entry's checks accept the arguments (api/diff.py); otherwise, or if it raises, the
ordinary transformed code runs (and raises the user's error at the user's line).
"""
from __future__ import annotations

import copy
import linecache
import re

import gast
import numpy as np

from ..front.activity import shadowed_builtins
from .scope import Scope, rule_helpers, seeded_activity
from .expressions import Expressions, Retry
from .inline import Inliner, lambda_function
from .value_kinds import (Alias, Float, FloatLocal, ListArg, ListLocal, LocalFunction,
                          MatrixArg, Plain, PlainLocal, RecordArg, RecordLocal, RecordVal,
                          Resolver, Row, RowLocal, TupleLocal, TupleVal, int_context_names,
                          parameter_guesses)
from ..registry import publish
from .comprehensions import Comprehensions
from .folding import inline_single_uses
from .lists import Lists
from .expressions import CannotSpecialise, parse_with_user_lines

publish("plain_types", frozenset({int, bool, str, type(None)}))


class Writer(Inliner, Comprehensions, Lists, Expressions):
    """Writes one specialised function: statements here, expressions in specialise/expressions.py,
    inlined calls in inline.py. The default mode records a flat tape."""

    zero_guards = True  # a zero adjoint or tangent passes nothing on (fuse.differentiate)
    reads_cells = True  # a closure's cells read in the prologue (inline.free_value)
    rows = False  # written for a Jacobian's rows: a tuple of floats returned (return_rows)
    returns_tuples = False  # a tuple of floats returned as one value (forward mode's)
    arrays = False  # an array written by element: numpy.float64 partials (make_list)

    def __init__(self, fn, names, taken: set, int_names: set):
        self.fn = fn
        self.names = names
        self.taken = taken
        self.int_names = int_names  # parameters used as ints (range bounds, indices...)
        self.lines: list = []   # (text, user line)
        self.counter = [0]
        self.loops = 0  # how many loops the statement being written is in
        self.inlining: list = []  # the helpers being inlined, innermost last
        self.entry_count = 0
        self.flowing: set = set()  # arguments taken for ints whose values flow on
        self.functions: dict = {}  # (code, argument kinds) -> nested function's name
        self.functions_text: list = []  # their lines, written before the body
        self.function = None  # the nested function being written (None: the body)
        self.returns_from = None  # the scope whose return statements are written as such
        self.classes: dict = {}  # name in the code -> a class whose methods it inlined
        # (or a closure's function's code and globals, which the prologue checks)
        self.free: dict = {}  # a closure cell's expression -> its value (free_value)
        self.prologue: list = []  # what reads and checks them, before the body
        self.cells: list = []  # the user's closure variables the written code reads

    def emit(self, depth: int, text: str, lineno: int) -> None:
        self.lines.append(("    " * depth + text, lineno))

    def new_local(self, base: str, like, active: bool, own: bool):
        """A local of the generated code for a value like ``like``: a float (with its
        handle), a plain value, a row, or one local per element of a tuple or field of a
        record. ``own``: the user's own name (not a helper's, renamed)."""
        if isinstance(like, Row):
            name = base if own else self.fresh(base)
            return RowLocal(name, self.fresh(name + self.names["suffix"]))
        if isinstance(like, TupleVal):
            return TupleLocal([self.new_local(f"{base}_{k}", item, active, False)
                               for k, item in enumerate(like.items)])
        if isinstance(like, RecordVal):
            return RecordLocal(like.cls, {f: self.new_local(f"{base}_{f}", v, active, False)
                                          for f, v in like.fields.items()})
        if isinstance(like, (ListArg, MatrixArg, RecordArg, ListLocal)):
            raise CannotSpecialise  # a list or a record bound to a second name
        if isinstance(like, Float) and not active:
            raise CannotSpecialise  # the analysis found it constant, yet it gets a derivative
        name = base if own else self.fresh(base)
        if active:
            return FloatLocal(name, self.fresh(name + self.names["suffix"]),
                              like.param if isinstance(like, Float) else None)
        return PlainLocal(name)

    def record_field(self, record, name: str):
        """The local of field ``name`` of a dataclass argument (read on entry)."""
        local = self.fresh(f"{record.name}_{name}")
        return FloatLocal(local, self.fresh(local + self.names["suffix"]))

    # -- binding values to locals ----------------------------------------------------------
    def bind(self, local, value, depth: int, line: int) -> None:
        """Emit ``local = value`` (a tuple or a record element by element)."""
        pairs = self.pairs(local, value)
        if self.static_binding:
            return
        pairs = [(t, v) for t, v in pairs if t != v]
        if len(pairs) > 1 and any(re.search(rf"\b{re.escape(t)}\b", v) for t, _ in pairs
                                  for _, v in pairs):
            # (a, b = b, a; k = xs[k] whose slot reads the old k): one assignment
            self.emit(depth, f"{', '.join(t for t, _ in pairs)} = "
                             f"{', '.join(v for _, v in pairs)}", line)
            return
        for target, text in pairs:
            self.emit(depth, f"{target} = {text}", line)

    static_binding = False  # straight-line code binds names, without code (SSA)

    def pairs(self, local, value) -> list:
        """(local name, expression) pairs binding ``value`` to ``local``."""
        if isinstance(local, FloatLocal):
            if isinstance(value, Float):
                return self.bind_float(local, value.value, value.handle)
            if isinstance(value, Plain):
                if value.param is not None:
                    raise Retry(value.param, "float")
                return self.bind_float(local, value.value, self.constant)
        elif isinstance(local, PlainLocal):
            if isinstance(value, Plain):
                self.taint_local(local, value)
                return [(local.name, value.value)]
        elif isinstance(local, RowLocal):
            if isinstance(value, Row):
                return [(local.name, value.value), (local.handle, value.handle)]
        elif isinstance(local, TupleLocal):
            if isinstance(value, TupleVal) and len(value.items) == len(local.items):
                return [p for item, v in zip(local.items, value.items)
                        for p in self.pairs(item, v)]
        elif isinstance(local, RecordLocal):
            if isinstance(value, RecordVal) and value.cls is local.cls:
                return [p for name, item in local.fields.items()
                        for p in self.pairs(item, value.fields[name])]
        raise CannotSpecialise  # a value of another kind than the name holds elsewhere

    def taint_local(self, local, value) -> None:
        """A local bound to an argument taken for an int: reads of it say so."""
        if value.param is not None:
            self.flows(value.param)
            if local.param is None:
                local.param = value.param

    def bind_float(self, local, value: str, handle: str) -> list:
        return [(local.name, value), (local.handle, handle)]

    # -- statements ----------------------------------------------------------------------
    def block(self, body, depth: int) -> None:
        start = len(self.lines)
        for stmt in body:
            self.statement(stmt, depth)
        if all(type(text) is str and text.lstrip().startswith("#")
               for text, _ in self.lines[start:]):
            self.emit(depth, "pass", 0)  # (its statements needed no code here)

    def comment(self, stmt, depth: int, line: int) -> None:
        text = linecache.getline(self.scope.filename, stmt.lineno).strip()
        if text:
            more = " ..." if getattr(stmt, "end_lineno", stmt.lineno) != stmt.lineno and \
                not isinstance(stmt, (gast.If, gast.While, gast.For)) else ""
            self.emit(depth, f"# {text}{more}", line)

    def statement(self, stmt, depth: int) -> None:
        line = self.scope.user_line(stmt.lineno)
        compound = isinstance(stmt, (gast.If, gast.While, gast.For))
        if not compound:
            self.comment(stmt, depth, line)
        if isinstance(stmt, gast.Assign) and isinstance(stmt.value, gast.Lambda) and \
                len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name):
            self.define(stmt.targets[0].id, lambda_function(stmt.targets[0].id, stmt.value))
        elif isinstance(stmt, gast.FunctionDef):
            self.define(stmt.name, stmt)
        elif isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and (
                isinstance(stmt.targets[0], gast.Name) and
                self.make_list(stmt.targets[0].id, stmt.value, depth, line) or
                self.write_element(stmt.targets[0], stmt.value, depth, line)):
            pass  # a list made, or an element of one written (specialise/lists.py)
        elif isinstance(stmt, gast.Expr) and self.append(stmt, depth, line):
            pass
        elif isinstance(stmt, gast.Assign):
            value = self.evaluate(stmt.value, depth, line)
            if len(stmt.targets) > 1 and not isinstance(value, Plain):
                raise CannotSpecialise  # a = b = <float>: one value, two names (rare)
            for target in stmt.targets:
                self.assign(target, value, depth, line)
        elif isinstance(stmt, gast.Return) and self.rows and stmt.value is not None and \
                self.scope is self.returns_from:
            self.return_rows(stmt.value, depth, line)
        elif isinstance(stmt, gast.Return):
            if stmt.value is None or self.scope is not self.returns_from:
                raise CannotSpecialise  # (an inlined helper's return is written by inline.py)
            value = self.evaluate(stmt.value, depth, line)
            if isinstance(value, TupleVal) and self.returns_tuples:
                value = self.returned_tuple(value)
            if isinstance(value, Plain):
                if value.param is not None:
                    raise Retry(value.param, "float")  # the result depends on it
                value = Float(value.value, self.constant)
            if not isinstance(value, Float):
                raise CannotSpecialise  # not a float: the ordinary code says so
            self.return_statement(value.value, value.handle, depth, line)
        elif isinstance(stmt, (gast.If, gast.While)):
            keyword = "if" if isinstance(stmt, gast.If) else "while"
            if keyword == "while":
                self.comment(stmt, depth, line)
            test = self.plain(stmt.test, depth, line, quiet=True)
            if keyword == "if":
                self.comment(stmt, depth, line)
            self.emit(depth, f"{keyword} {test}:", line)
            self.loops += keyword == "while"
            self.block(stmt.body, depth + 1)
            self.loops -= keyword == "while"
            if stmt.orelse:
                self.emit(depth, "else:", line)
                self.block(stmt.orelse, depth + 1)
        elif isinstance(stmt, gast.For):
            self.comment(stmt, depth, line)
            self.for_loop(stmt, depth, line)
        elif isinstance(stmt, (gast.Break, gast.Continue, gast.Pass)):
            self.emit(depth, type(stmt).__name__.lower(), line)
        elif isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Constant):
            pass  # a docstring or a bare constant: nothing to run
        else:
            raise CannotSpecialise

    def assign(self, target, value, depth: int, line: int) -> None:
        if isinstance(target, gast.Name):
            local = self.scope.local(target.id, value)
            if isinstance(local, (Alias, LocalFunction)):
                raise CannotSpecialise
            self.bind(local, value, depth, line)
        elif isinstance(target, (gast.Tuple, gast.List)) and \
                all(isinstance(e, gast.Name) for e in target.elts):
            names = [e.id for e in target.elts]
            if isinstance(value, TupleVal) and len(value.items) == len(names):
                locals_ = [self.scope.local(n, v) for n, v in zip(names, value.items)]
                self.bind(TupleLocal(locals_), value, depth, line)
            elif isinstance(value, (ListArg, Row)):  # a, b = xs: Python checks the length
                locals_ = [self.scope.local(n, Float("", "")) for n in names]
                if not all(isinstance(v, FloatLocal) for v in locals_) or self.static_binding:
                    raise CannotSpecialise
                container = value.name if isinstance(value, ListArg) else value.value
                self.emit(depth, f"{', '.join(v.name for v in locals_)} = {container}", line)
                for k, v in enumerate(locals_):
                    self.emit(depth, f"{v.handle} = "
                                     f"{self.element_derivative(value, str(k), True)}", line)
            elif isinstance(value, Plain):
                if value.param is not None:  # (a, b = state: a sequence, not a quiet value)
                    raise Retry(value.param, "list")
                locals_ = [self.scope.local(n, value) for n in names]
                if not all(isinstance(v, PlainLocal) for v in locals_):
                    raise CannotSpecialise
                self.emit(depth, f"{', '.join(v.name for v in locals_)} = {value.value}", line)
            else:
                raise CannotSpecialise
        else:
            raise CannotSpecialise  # an element or an attribute: the arguments are only read

    # -- loops ---------------------------------------------------------------------------
    def for_loop(self, stmt, depth: int, line: int) -> None:
        columns, element = self.iteration(stmt.iter, depth, line)
        targets = self.loop_targets(stmt.target, element)
        iterable = columns[0] if len(columns) == 1 else f"zip({', '.join(columns)})"
        self.emit(depth, f"for {', '.join(targets)} in {iterable}:", line)
        self.loops += 1
        self.block(stmt.body, depth + 1)
        self.loops -= 1
        if stmt.orelse:
            self.emit(depth, "else:", line)
            self.block(stmt.orelse, depth + 1)

    def loop_targets(self, target, element) -> list:
        """The loop variables binding ``element`` (a template: Float, Plain, Row or a
        TupleVal of those) to ``target``, one per column of the iteration."""
        if isinstance(target, gast.Name):  # (over plain values, a plain local: a float
            local = self.scope.local(  # bound to it later is refused by ``pairs``)
                target.id, element, False if isinstance(element, Plain) else None)
            return self.loop_locals(local, element)
        if isinstance(target, (gast.Tuple, gast.List)) and isinstance(element, TupleVal) \
                and len(target.elts) == len(element.items):
            return [name for t, e in zip(target.elts, element.items)
                    for name in self.loop_targets(t, e)]
        raise CannotSpecialise

    def loop_locals(self, local, element) -> list:
        if isinstance(local, FloatLocal) and isinstance(element, Float):
            return [local.name, local.handle]
        if isinstance(local, PlainLocal) and isinstance(element, Plain):
            return [local.name]
        if isinstance(local, RowLocal) and isinstance(element, Row):
            return [local.name, local.handle]
        if isinstance(local, TupleLocal) and isinstance(element, TupleVal) and \
                len(local.items) == len(element.items):
            return [n for item, e in zip(local.items, element.items)
                    for n in self.loop_locals(item, e)]
        raise CannotSpecialise  # (a float counter over range: the ordinary code)

    def iteration(self, node, depth: int, line: int):
        """The columns a loop over ``node`` zips (iterables, as text) and a template of
        the element: ``for x in xs`` reads x from xs and its handle from a second column
        (its slots, or its tangents)."""
        if isinstance(node, gast.Call) and not node.keywords and \
                not self.is_local(node.func) and \
                not any(isinstance(a, gast.Starred) for a in node.args):
            callee = self.scope.resolver.callee(node.func)
            if callee is range:
                return [self.plain(node, depth, line, quiet=True)], Plain("")
            if callee is zip and node.args:
                parts = [self.iteration(a, depth, line) for a in node.args]
                return [c for cs, _ in parts for c in cs], TupleVal([e for _, e in parts])
            if callee is enumerate and 1 <= len(node.args) <= 2:
                columns, element = self.iteration(node.args[0], depth, line)
                start = self.plain(node.args[1], depth, line, quiet=True) \
                    if len(node.args) == 2 else "0"
                count = f"range({start}, {start} + len({columns[0]}))" if start != "0" \
                    else f"range(len({columns[0]}))"
                return [count] + columns, TupleVal([Plain(""), element])
            if callee is reversed and len(node.args) == 1:
                columns, element = self.iteration(node.args[0], depth, line)
                if isinstance(element, TupleVal):
                    raise CannotSpecialise  # reversed(zip(...)) is an error in Python too
                return [self.reversed_column(c) for c in columns], element
        value = self.evaluate(node, depth, line)
        if isinstance(value, ListArg):
            return [value.name, self.handles(value)], Float("", "", value.param)
        if isinstance(value, ListLocal):
            return [value.name, value.handles], Float("", "")
        if isinstance(value, Row):
            row = self.stable(value.value, depth, line)
            return [row, self.handles(Row(row, value.handle))], Float("", "")
        if isinstance(value, MatrixArg):
            return [value.name, self.handles(value)], Row("", "")
        if isinstance(value, Plain):  # a string, a range held in a name...
            if value.param is not None:
                raise Retry(value.param, "list")
            return [value.value], Plain("")
        if isinstance(value, Float) and value.param is not None:
            raise Retry(value.param, "matrix")  # an element of a list parameter, iterated
        raise CannotSpecialise

    def reversed_column(self, column: str) -> str:
        match = re.fullmatch(r"(\w+)\[:(-?\w+)\]", column)
        if match:  # a matrix's row starts (one more than rows): the rows' own, reversed
            return f"reversed({column})"
        return f"reversed({column})"

    # -- what reverse mode records (specialise/forward.py, straight_line.py say otherwise) --
    @property
    def constant(self) -> str:
        """The handle of a constant: the slot of constants, never swept."""
        return self.names["sink"]

    def combine(self, pairs: list, depth: int, lineno: int) -> str:
        """A float expression's (slot, partial) pairs: one tape entry, written out once
        every entry is known (each takes the function's width); its index."""
        self.lines.append((_Entry(depth, pairs, self.loops > 0), lineno))
        self.entry_count += 1
        return self.names["last"]

    def entries(self) -> int:
        return self.entry_count

    @property
    def volatile(self):
        return self.names["last"]

    def element_derivative(self, container, k: str, nonnegative: bool) -> str:
        """The slot of ``container[k]``, a list argument or a row (``% n``: Python's
        negative indices, unless ``k`` is known to be >= 0)."""
        if isinstance(container, ListArg):
            start = container.start
            wrapped = k if nonnegative else f"{k} % {container.length}"
            return wrapped if start == "0" else f"{start} + {wrapped}"
        wrapped = k if nonnegative else f"{k} % len({container.value})"
        return f"{container.handle} + {wrapped}"

    def row_derivative(self, matrix, i: str, nonnegative: bool) -> str:
        return f"{matrix.starts}[{i if nonnegative else f'{i} % {matrix.length}'}]"

    def handles(self, value) -> str:
        """The column of handles beside a loop over a list, a row or a matrix's rows."""
        if isinstance(value, ListArg):
            start = value.start
            return f"range({value.length})" if start == "0" else \
                f"range({start}, {start} + {value.length})"
        if isinstance(value, Row):
            return f"range({value.handle}, {value.handle} + len({value.value}))"
        return value.starts

    def return_statement(self, value: str, handle: str, depth: int, line: int) -> None:
        if self.function is not None:
            self.emit(depth, f"return {value}, {handle}, {self.names['last']}", line)
            return
        self.emit(depth, f"return ad.tape_gradient_of({self.names['tape']}, _width_, "
                         f"{value}, {handle}, {self.names['sink']}, "
                         f"{self.names['layout']})", line)

    def return_rows(self, node, depth: int, line: int) -> None:
        """``return a, b`` (or ``[a, b]``) in the code written for a Jacobian's rows
        (``rows``): each output's value and handle, each swept once
        (value_kinds.tape_rows_of); ``return np.array([a, b])`` too, an array of them, and
        a list or ``np.zeros(n)`` the code made and wrote (specialise/lists.py)."""
        kind = "list" if isinstance(node, gast.List) else "tuple"
        if self.makes_vector(node):
            node, kind = node.args[0], "array"
        made = self.converted_list(node)  # (tuple(out), np.array(out) of a list it wrote)
        local = self.listed(node if made is None else made[0])
        if local is not None and self.function is None:  # a list (or np.zeros) it wrote
            names = self.names
            kind = made[1] if made is not None else 'array' if local.array else 'list'
            self.emit(depth, f"return ad.tape_rows_of({names['tape']}, _width_, "
                             f"tuple({local.name}), tuple({local.handles}), {names['sink']}, "
                             f"{names['layout']}, {kind!r})", line)
            return
        if self.function is not None or not isinstance(node, (gast.Tuple, gast.List)) or \
                not node.elts or any(isinstance(e, gast.Starred) for e in node.elts):
            raise CannotSpecialise  # (one float: the gradient's own code)
        values, handles = [], []
        for value in [self.saved(v, depth, line)
                      for v in self.evaluate_all(node.elts, depth, line)]:
            if isinstance(value, Plain):
                if value.param is not None:
                    raise Retry(value.param, "float")  # the result depends on it
                value = Float(value.value, self.constant)
            if not isinstance(value, Float):
                raise CannotSpecialise  # a tuple of tuples, lists or records
            values.append(self.stable(value.value, depth, line))
            handles.append(value.handle)
        names = self.names
        self.emit(depth, f"return ad.tape_rows_of({names['tape']}, _width_, "
                         f"{tuple_text(values)}, {tuple_text(handles)}, {names['sink']}, "
                         f"{names['layout']}, {kind!r})", line)

    def converted_list(self, node):
        """``(list, kind)`` of ``tuple(a)``, ``list(a)``, ``np.array(a)`` or
        ``np.asarray(a)`` (one argument, a name): the kind of what it returns; else None."""
        if not (isinstance(node, gast.Call) and len(node.args) == 1 and not node.keywords and
                isinstance(node.args[0], gast.Name) and not self.is_local(node.func)):
            return None
        callee = self.scope.resolver.callee(node.func)
        kind = next((kind for function, kind in _CONVERSIONS if callee is function), None)
        return None if kind is None else (node.args[0], kind)

    def makes_vector(self, node) -> bool:
        """``np.array([...])`` or ``np.asarray((...))``: a 1-d array of the items."""
        if not (isinstance(node, gast.Call) and len(node.args) == 1 and not node.keywords and
                isinstance(node.args[0], (gast.List, gast.Tuple)) and
                not self.is_local(node.func)):
            return False
        callee = self.scope.resolver.callee(node.func)
        return callee is np.array or callee is np.asarray

    def function_header(self, name: str, formal: list) -> str:
        """A nested function's ``def``: it takes the entries' state and gives it back."""
        names = self.names
        return f"def {name}({', '.join(formal + [names['last'], names['record'], names['sink']])}):"

    def call_text(self, name: str, args: list, result: str, handle: str) -> str:
        names = self.names
        # the call records entries: a value computed before it whose handle is the last
        # entry's index must save that index first (evaluate_all compares these counts)
        self.entry_count += 1
        return (f"{result}, {handle}, {names['last']} = {name}("
                f"{', '.join(args + [names['last'], names['record'], names['sink']])})")


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
        indent = "    " * self.depth
        if len(pairs) > width:
            first, last = pairs[:width - 1], names["last"]
            if any(slot == last for slot, _ in first):  # a parent that is the last entry:
                saved = names["parent"]  # its index before the first part's entry
                lines.append(f"{indent}{saved} = {last}")
                first = [(saved if slot == last else slot, p) for slot, p in first]
            lines += _Entry(self.depth, pairs[width - 1:], self.in_loop).lines(names, width)
            pairs = first + [(last, "1.0")]
        pairs = pairs + [(names["sink"], "0.0")] * (width - len(pairs))
        fields = ", ".join(f"{slot}, {partial}" for slot, partial in pairs)
        return lines + [f"{indent}{names['record']}({fields})",
                        f"{indent}{names['last']} += 1"]


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


# what a list the code wrote is returned as, converted (Writer.converted_list)
_CONVERSIONS = ((tuple, "tuple"), (list, "list"), (np.array, "array"), (np.asarray, "array"))


# -- the function: its parameters, then the body -------------------------------------------
def prepare(root, fn, local_names: set, suffix: str):
    """What every mode needs before writing: ``(root, local_names, params, body, names,
    taken)``, the tree and its local names (a local named as a function the generated
    code calls, ``gamma`` or ``exp``, renamed), the parameters, the body, the generated
    code's reserved names; or None if the function cannot be specialised at all."""
    args = root.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        return None
    user_names = {n.id for n in gast.walk(root) if isinstance(n, gast.Name)}
    clash = (set(local_names) | {a.id for a in args.posonlyargs + args.args}) & \
        rule_helpers()
    if clash:  # a user name would hide a function the generated code calls: another one
        code = fn.__code__
        if clash & set(code.co_freevars + code.co_cellvars):
            return None  # (a closure's cell is read by its name)
        root, new = renamed(root, clash, user_names | rule_helpers())
        local_names = set(local_names) - clash | set(new.values())
        user_names = user_names - clash | set(new.values())
        args = root.args
    params = [a.id for a in args.posonlyargs + args.args]
    user_names |= set(params)
    if not params:
        return None
    if shadowed_builtins(fn):
        return None  # (a global named like a builtin: the resolver would see it, not us)
    body = [s for s in root.body if not (isinstance(s, gast.Expr) and isinstance(
        s.value, gast.Constant) and isinstance(s.value.value, str))]
    if not body:
        return None
    names = {"tape": "_tape", "record": "_record", "temp": "_v", "suffix": suffix}
    for key in ("tape", "record", "temp"):
        while any(n.startswith(names[key]) for n in user_names):
            names[key] += "_"
    temp = names["temp"]
    names.update(sink=f"{temp}sink", layout=f"{temp}layout", last=f"{temp}last",
                 parent=f"{temp}parent")
    taken = set(user_names) | set(local_names) | rule_helpers() | {names["parent"]}
    return root, local_names, params, body, names, taken


def renamed(root, names: set, taken: set) -> tuple:
    """A copy of ``root`` whose locals ``names`` are called otherwise (``gamma_``): the
    code written from it reads the same values under names that hide nothing it calls;
    and each name's new one."""
    new = {}
    for name in sorted(names):
        other = name + "_"
        while other in taken or other in new.values():
            other += "_"
        new[name] = other
    root = copy.deepcopy(root)
    for node in gast.walk(root):
        if isinstance(node, gast.Name) and node.id in new:
            node.id = new[node.id]
        elif isinstance(node, (gast.FunctionDef, gast.ClassDef)) and node.name in new:
            node.name = new[node.name]
    return root, new


def write_attempts(write, params: list, root):
    """Write with the parameters' kinds guessed, again with a better guess while the
    writer finds one wrong (``Retry``); None if the code cannot be specialised."""
    kinds = parameter_guesses(root, params)
    int_names = int_context_names(root)
    for p in params:
        if kinds[p] == "scalar":
            kinds[p] = "plain"
    for _ in range(2 * len(params) + 2):
        try:
            return write(kinds, int_names)
        except Retry as retry:
            if kinds.get(retry.param) == retry.kind or retry.param not in kinds:
                return None
            kinds[retry.param] = retry.kind
        except CannotSpecialise:
            import os
            if os.environ.get("FPDEBUG"):
                import traceback
                traceback.print_exc()
            return None
        except RecursionError:
            return None
    return None


def write_scalar_loops(root, fn, local_names: set, filename: str, dependencies: list,
                       rows: bool = False):
    """The specialised value-and-gradient function of ``root`` (a normalized
    gast.FunctionDef of ``fn``, before the transform), with a flat tape, as
    ``(ast.FunctionDef, text)``, or None if its body is not code of this kind. The
    global bindings it was specialised on are added to ``dependencies``. ``rows``: for
    a function returning a tuple of floats, the values and every output's gradient
    (api/jacobians.py; its closure's cells are not read: no recipe binds them)."""
    prepared = prepare(root, fn, local_names, "_i")
    if prepared is None:
        return None
    root, local_names, params, body, names, taken = prepared

    def write(kinds, int_names):
        found: list = []
        writer = Writer(fn, dict(names), set(taken), int_names)
        if rows:
            writer.rows, writer.reads_cells = True, False
        head = _taped_head(writer, root, fn, params, kinds, local_names, filename, found)
        writer.block(body, 1)  # (falling off the end returns None: the ordinary code runs)
        return writer, head(), found

    written = write_attempts(write, params, root)
    if written is None:
        return None
    writer, head, found = written
    dependencies.extend(found)
    body_lines = writer.functions_text + writer.lines
    width = _width([e for e, _ in body_lines if isinstance(e, _Entry)])
    lines = []
    for text, line in body_lines:
        if isinstance(text, _Entry):
            lines += [(t, line) for t in text.lines(writer.names, width)]
        else:
            lines.append((text.replace(", _width_, ", f", {width}, "), line))
    lines = inline_single_uses(lines, writer.names["temp"])  # (s = s + x * y, as written)
    head = [(text.replace("{width}", str(width)), line) for text, line in head]
    function, text = parse_with_user_lines(head + lines, root.lineno, writer.classes,
                                           writer.cells)
    function.astad_names = writer.names  # (its own names: compile/numba_translate reads them)
    return function, text


def user_scope(writer, root, fn, params, kinds, local_names, filename, found):
    """The scope of the user's function, with its parameters bound to their kinds."""
    plain = {p for p in params if kinds[p] == "plain"}
    activity = seeded_activity(root, set(local_names) | set(params), params, plain)
    scope = Scope(fn, root, Resolver(fn, found), activity,
                   set(local_names) | set(params), filename)
    scope.writer = writer
    writer.scope = writer.returns_from = scope
    writer.filename = filename
    return scope


def _taped_head(writer, root, fn, params, kinds, local_names, filename, found):
    """Bind each parameter to its kind; return a function writing the entry's checks,
    slots and layout once the body is written (a record's fields are known then)."""
    scope = user_scope(writer, root, fn, params, kinds, local_names, filename, found)
    names = writer.names
    temp = names["temp"]
    for p in params:
        kind = kinds[p]
        if kind == "plain":
            scope.vars[p] = PlainParam(p)
        elif kind == "float":
            scope.vars[p] = FloatLocal(p, writer.fresh(p + names["suffix"]))
        elif kind == "list":  # (the first list's slots start at 0: xs[i] is slot i)
            start = "0" if not any(kinds[q] == "list" for q in params[:params.index(p)]) \
                else writer.fresh(f"{temp}at_{p}")
            scope.vars[p] = Alias(ListArg(p, start, writer.fresh(f"{temp}n_{p}"), p))
        elif kind == "matrix":
            scope.vars[p] = Alias(MatrixArg(p, writer.fresh(f"{temp}rows_{p}"),
                                            writer.fresh(f"{temp}n_{p}"), p))
        else:
            scope.vars[p] = Alias(RecordArg(p, p))
    first = root.lineno

    def head():
        checks, floats, lists, matrices, layout = [], [], [], [], {}
        for p in params:
            kind = kinds[p]
            if kind == "plain" and p not in writer.flowing:  # only tested, compared
                checks.append(f"type({p}) not in ad.quiet_types")
                layout[p] = f"({p}, -4)"
            elif kind == "plain":
                checks.append(f"type({p}) not in ad.plain_types")
                layout[p] = f"({p}, -2)"
            else:
                {"float": floats, "list": lists, "matrix": matrices}.get(kind, []).append(p)
        text = [f"# every argument {kinds_said(kinds, params)}: each float is a local and "
                "its tape index"]
        if checks:
            text += [f"if {' or '.join(checks)}:",
                     "    return None  # other arguments: the transformed code runs instead"]
        text += writer.prologue
        exact = []  # the names saying that the arguments are the common case
        if floats:  # floats; an int (a constant: its gradient itself), a numpy.float64
            exact.append(f"{temp}floats")
            text += [f"{temp}floats = {' and '.join(f'type({p}) is float' for p in floats)}",
                     f"if not {temp}floats and not ("
                     f"{' and '.join(f'type({p}) in ad.numbers' for p in floats)}):",
                     "    return None  # other arguments: the transformed code runs instead"]
        if lists or matrices:
            exact.append(f"{temp}exact")
            tests = []  # (ad.float_lists: is each a list of floats, exactly those types?)
            if lists:
                tests.append(f"ad.float_lists({', '.join(lists)})")
            tests += [f"ad.float_rows({p})" for p in matrices]
            text += [f"{temp}exact = {' and '.join(tests)}",
                     f"if not {temp}exact and not ad.float_sequences({tuple_text(lists)}, "
                     f"{tuple_text(matrices)}):",
                     "    return None  # not lists of floats: the transformed code runs "
                     "instead"]
        every = lists + matrices + [f"*{m}" for m in matrices]
        if len(every) > 1:
            text += [f"{temp}lists = {tuple_text(every)}",
                     f"if len(set(map(id, {temp}lists))) != len({temp}lists):",
                     "    return None  # a list reached twice: the transformed code keeps "
                     "the aliasing"]
        # the slots: lists first (the first at 0), then lists of lists, floats, fields
        slot = "0"
        exact_layout, like_layout = {}, {}
        for p in lists + matrices:
            value = scope.vars[p].read()
            text.append(f"{value.length} = len({p})")
            if kinds[p] == "list":
                if value.start != "0":
                    text.append(f"{value.start} = {slot}")
                exact_layout[p] = f"({value.start}, {value.length})"
                like_layout[p] = f"({value.start}, {value.length}, {p})"
                slot = value.length if value.start == "0" else \
                    f"{value.start} + {value.length}"
            else:
                text.append(f"{value.starts} = list(accumulate(map(len, {p}), "
                            f"initial={slot}))")
                exact_layout[p] = f"({value.starts}, None)"
                like_layout[p] = f"({value.starts}, None, {p})"
                slot = f"{value.starts}[-1]"

        def take(count: int) -> str:
            nonlocal slot
            first_slot = slot
            slot = str(int(slot) + count) if slot.isdigit() else f"{first_slot} + {count}"
            return first_slot

        for p in params:
            if kinds[p] == "float":
                handle = scope.vars[p].handle
                text.append(f"{handle} = {take(1)}")
                exact_layout[p] = f"({handle}, -1)"
                like_layout[p] = f"({handle}, -5, {p})"
                if not slot.isdigit():
                    slot = f"{handle} + 1"
            elif kinds[p] == "record":
                fields = scope.vars[p].value.fields
                if not fields:
                    raise CannotSpecialise
                values = writer.fresh(f"{temp}fields_{p}")
                text += [f"{values} = {scope.vars[p].value.values()}",
                         f"if {values} is None:",
                         "    return None  # not a dataclass of floats",
                         f"{', '.join(f.name for f in fields.values())}, = {values}"]
                start = take(len(fields))
                for k, f in enumerate(fields.values()):
                    at = str(int(start) + k) if start.isdigit() else f"{start} + {k}"
                    text.append(f"{f.handle} = {at}")
                layout[p] = f"({start}, {tuple(fields)!r}, {p})"
        text.append(f"{names['sink']} = {slot}  # the slot of constants: the sweep stops "
                    "above it")
        if floats:
            text.append(f"if not {temp}floats:  # an int is a constant")
            for p in floats:
                text += [f"    if type({p}) in ad.integers:",
                         f"        {scope.vars[p].handle} = {names['sink']}"]
            if not (lists or matrices or "record" in kinds.values()):
                text += ["    if " + " and ".join(f"type({p}) in ad.integers" for p in floats)
                         + ":", "        return None  # no float: the transformed code "
                         "says so"]
        if "plain" in kinds.values() and not any(kinds[p] in ("float", "record")
                                                 for p in params):
            text += [f"if {names['sink']} == 0:",
                     "    return None  # no float: the transformed code says so"]
        exact_layout.update(layout)
        like_layout.update(layout)
        exact_text = tuple_text([exact_layout[p] for p in params])
        if exact and writer.arrays:  # (a gradient's floats made floats again, as _like)
            text.append(f"{names['layout']} = {tuple_text([like_layout[p] for p in params])}")
        elif exact:
            text.append(f"{names['layout']} = {exact_text} if {' and '.join(exact)} else "
                        f"{tuple_text([like_layout[p] for p in params])}")
        else:
            text.append(f"{names['layout']} = {exact_text}")
        text += [f"{names['tape']} = ad.float_tape()  # the entries, one after another: "
                 "{width} (slot, partial) pairs each",
                 f"{names['record']} = {names['tape']}.record",
                 f"{names['last']} = {names['sink']}  # the index of the last entry"]
        return [(f"def {root.name}_floats({', '.join(params)}):", first)] + [
            (f"    {t}", first) for t in text]
    return head


def tuple_text(items: list) -> str:
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


_KIND_WORDS = {"float": "a float", "list": "a list of floats",
               "matrix": "a list of lists of floats", "record": "a dataclass of floats",
               "plain": "an int, a bool, a string or None (not differentiated)"}


def kinds_said(kinds: dict, params: list) -> str:
    return " or ".join(word for kind, word in _KIND_WORDS.items() if kind in kinds.values())


class PlainParam(PlainLocal):
    """A parameter holding an int, a bool, a string or None: its reads say so, so that
    using it as a float can make it a float parameter instead (floatexpr.Retry)."""
    __slots__ = ()

    def read(self):
        return Plain(self.name, self.name)
