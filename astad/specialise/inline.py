"""Calls of helper functions in the float-specialised code: the helper's body, inlined.

A call ``g(a, b)`` of a plain Python function (a global of the caller, resolved when the
code is written, rebuilt if the name is rebound or ``g``'s code changes) is written as
``g``'s own body: its parameters bound to the arguments' values, whatever their kinds
(a float and its handle, a list argument, a tuple, a dataclass kept as its fields), its
locals renamed ``g_<name>``, its ``return`` the value of the call. So a helper is
specialised for the kinds it is called with, and costs no call, no tuple and no object
at run time. The same holds for:

- a helper that returns from branches (``if v > 1.0: return 1.0`` ... ``return v * v``):
  each return binds the result, the statements after an ``if`` moved into its branches;
- a dataclass's method (``p.dist(q)``), its class known when the code is written (the
  entry checks an argument's class);
- a function the code defines (``def g(t): ...``, ``g = lambda t: ...``), its free names
  read where it is defined, at the call, as Python reads a closure's.

A helper that calls itself (directly or through another helper), or returns inside a
loop, is a nested function written for its arguments' kinds; one that takes ``*args``,
and a local function used as a value, leave the function to the ordinary code.
"""
from __future__ import annotations

import dataclasses
import inspect
import types
import weakref

import gast

from ..front import fence
from ..front.activity import bound_names
from ..front.normalize import normalize
from ..front.source import parse_function
from ..registry import rule_name
from .value_kinds import (FREE_CONSTANTS, Alias, Float, FloatLocal, FreeFunction,
                          LocalFunction, Plain, PlainLocal, RecordArg, RecordVal, Resolver,
                          constant_global, plain_data, plain_record_class)
from .scope import Scope, rule_helpers, seeded_activity
from .expressions import CannotSpecialise

_MAX_DEPTH = 12          # helpers inlined inside one another
_MAX_LINES = 4000        # generated lines: beyond, the ordinary code is smaller


class Inliner:
    """The writer's half that inlines calls (scalarloops.Writer)."""

    def inline(self, node, callee, depth: int, line: int, cells: str | None = None):
        """Emit the body of ``callee`` for the call ``node``; return the call's value.
        ``cells``: the written code's expression of the closure of a function held in a
        closure cell (inline_free), whose own free names are read through it."""
        if len(self.inlining) >= _MAX_DEPTH or len(self.lines) > _MAX_LINES or \
                not isinstance(callee, types.FunctionType) or \
                callee.__code__.co_freevars and cells is None:
            raise CannotSpecialise  # a global closure, or too much code: the ordinary code
        root, filename = _helper_tree(callee)
        args = root.args
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise CannotSpecialise
        params = [a.id for a in args.posonlyargs + args.args]
        values = self.arguments(node, callee, params, len(args.posonlyargs), depth, line)
        body = _statements(root.body)
        recursion = callee in self.inlining or callee.__code__ is self.fn.__code__
        one_return = _one_return(body)
        branches = None if recursion or one_return else _returns_as_branches(body)
        if recursion or not one_return and branches is None:
            if cells is not None:
                raise CannotSpecialise  # (a function of its own reads no cell)
            # a recursion, or a return inside a loop: a function of its own
            return self.specialised_call(callee, root, filename, params, values, body,
                                         depth, line)
        dependencies = self.scope.resolver.dependencies
        if cells is None:  # (a closure's function: its code is checked when the code runs)
            dependencies.append((weakref.ref(callee), "__code__", callee.__code__))
        return self.inlined(callee, root.name, root, params, values, body, branches,
                            Resolver(callee, dependencies, cells), filename, None, depth,
                            line)

    # -- closures: the cells of the function written, read when its code runs ----------
    def free_value(self, name: str):
        """The value of ``name``, a free name of the function being written (a closure
        variable of the user's function, or of a function held in one of its cells):
        read from its cell at the start of the written code, and its kind checked there,
        so that every function of the same code, over other cells, runs this code (or,
        given other kinds, the transformed code). A number, a string or None is a plain
        value (a closure's float is not differentiated: a gradient is of the arguments);
        a function is inlined where it is called (``FreeFunction``)."""
        resolver = self.scope.resolver
        fn = resolver.fn
        if not self.reads_cells or name == "__class__":
            raise CannotSpecialise
        k = fn.__code__.co_freevars.index(name)
        try:
            value = fn.__closure__[k].cell_contents
        except ValueError:
            raise CannotSpecialise from None  # an empty cell
        text = name if resolver.cells is None else f"{resolver.cells}[{k}].cell_contents"
        known = self.free.get(text)
        if known is not None:
            return known
        if resolver.cells is None:
            if name in rule_helpers():
                raise CannotSpecialise  # (it would hide a function the written code calls)
            local = name  # (the written code is a closure over the same cells)
            self.cells.append(name)
        else:
            local = self.fresh(f"{self.names['temp']}free_{name}")
            self.prologue.append(f"{local} = {text}")
        if type(value) in FREE_CONSTANTS:
            known = Plain(local)
            self.prologue.append(f"if type({local}) not in ad.free_constants:")
        elif plain_data(value):  # a list or tuple of data: read, never written
            known = Plain(local)
            self.prologue.append(f"if not ad.plain_data({local}):")
        elif isinstance(value, types.FunctionType) and value.__defaults__ is None and \
                value.__kwdefaults__ is None and rule_name(value)[0] is None:
            code = self.fresh(f"{self.names['temp']}code_{name}")
            namespace = self.fresh(f"{self.names['temp']}globals_{name}")
            self.classes[code], self.classes[namespace] = value.__code__, value.__globals__
            known = FreeFunction(local, value)
            self.prologue.append(
                f"if type({local}) is not ad.function or {local}.__code__ is not {code} or "
                f"{local}.__globals__ is not {namespace} or {local}.__defaults__ is not None "
                f"or {local}.__kwdefaults__ is not None or {local} in ad.rule_records:")
        else:
            raise CannotSpecialise  # (a list, an array, an object: the ordinary code)
        self.prologue.append("    return None  # a closure over other kinds of values: the "
                             "transformed code runs instead")
        self.free[text] = known
        return known

    def inline_free(self, node, free, depth: int, line: int):
        """A call of a function held in a closure cell: its body inlined for its code,
        its own free names read through its closure."""
        if free.fn in self.inlining:
            raise CannotSpecialise  # a recursion through a closure: the ordinary code
        return self.inline(node, free.fn, depth, line, cells=f"{free.name}.__closure__")

    def inlined(self, key, name, root, params, values, body, branches, resolver, filename,
                parent, depth, line):
        """Emit ``body`` (of the function ``root``, named ``name``) with ``params`` bound
        to ``values``; return its value: that of its last ``return``, or of the result
        each of ``branches`` binds. ``parent``: the scope a local function's free names
        are read in (None for a global function's)."""
        # (an argument's handle may be the index of the last entry: the body may record
        # entries before it reads the parameter)
        values = {p: self.saved(v, depth, line) for p, v in values.items()}
        local_names = bound_names(root) | set(params)
        plain = {p for p, v in values.items() if isinstance(v, Plain)}
        activity = seeded_activity(root, local_names, params, plain)
        scope = Scope(self.scope.fn if parent is not None else key, root, resolver, activity,
                      local_names, filename, prefix=f"{name}_", call_line=line,
                      same_file=filename == self.filename)
        scope.writer, scope.parent = self, parent
        assigned = {n.id for n in gast.walk(root) if isinstance(n, gast.Name) and
                    isinstance(n.ctx, gast.Store)}
        self.emit(depth, f"# inlined: {name}({', '.join(params)})", line)
        caller, self.scope = self.scope, scope
        self.inlining.append(key)
        try:
            for p in params:
                if p in assigned:  # a parameter it rebinds: a local of its own
                    self.bind(scope.local(p, values[p]), values[p], depth, line)
                else:
                    scope.vars[p] = Alias(values[p])
            if branches is not None:  # returns in branches: each binds the result
                for stmt in branches:
                    self.statement(stmt, depth)
                return scope.vars[_RESULT].read()
            for stmt in body[:-1]:
                self.statement(stmt, depth)
            last = body[-1]
            self.comment(last, depth, scope.user_line(last.lineno))
            return self.evaluate(last.value, depth, scope.user_line(last.lineno))
        finally:
            self.inlining.pop()
            self.scope = caller

    # -- functions the code defines ---------------------------------------------------------
    def define(self, name: str, node) -> None:
        """``def name(...)`` or ``name = lambda ...`` (``node`` its FunctionDef): bound to
        a LocalFunction of the scope being written."""
        args = node.args
        if name in self.scope.vars or node.decorator_list or args.vararg or args.kwarg or \
                args.kwonlyargs or args.defaults or any(
                    isinstance(n, (gast.Nonlocal, gast.Global, gast.Yield, gast.YieldFrom))
                    for n in gast.walk(node)):
            raise CannotSpecialise  # rebound, decorated, or more than plain parameters
        self.scope.vars[name] = LocalFunction(node, self.scope)

    def inline_local(self, node, function, depth: int, line: int):
        """A call of a function the code defines: its body inlined, its free names read
        where it was defined."""
        root = function.node
        params = [a.id for a in root.args.posonlyargs + root.args.args]
        if node.keywords or len(node.args) != len(params) or function in self.inlining or \
                any(isinstance(a, gast.Starred) for a in node.args) or \
                len(self.inlining) >= _MAX_DEPTH or len(self.lines) > _MAX_LINES:
            raise CannotSpecialise  # keywords, a recursion, or too much code
        values = dict(zip(params, self.evaluate_all(list(node.args), depth, line)))
        body = _statements(root.body)
        one_return = _one_return(body)
        branches = None if one_return else _returns_as_branches(body)
        if not one_return and branches is None:
            raise CannotSpecialise  # a return inside a loop
        parent = function.scope
        return self.inlined(function, root.name, root, params, values, body, branches,
                            parent.resolver, parent.filename, parent, depth, line)

    def method_call(self, node, depth: int, line: int):
        """``p.dist(q)``, ``p`` a dataclass (an argument or one the code made): the
        method's body inlined with ``self`` bound to ``p``, as a helper's is."""
        record = self.container(node.func.value, depth, line, "record")
        if isinstance(record, RecordVal):
            cls = record.cls
        elif isinstance(record, RecordArg):
            cls = record.cls or self.argument_class(record, node.func.attr)
        else:
            raise CannotSpecialise  # a method of a list, a float...
        method = inspect.getattr_static(cls, node.func.attr, None)
        if not isinstance(method, types.FunctionType):
            raise CannotSpecialise  # a field, a property, a static or class method
        self.scope.resolver.dependencies.append((weakref.ref(cls), node.func.attr, method))
        if isinstance(record, RecordArg) and record.cls is None:
            record.cls, record.cls_name = cls, self.fresh(f"{self.names['temp']}{cls.__name__}")
            self.classes[record.cls_name] = cls
        call = gast.Call(node.func, [node.func.value, *node.args], node.keywords)
        return self.inline(gast.copy_location(call, node), method, depth, line)

    def argument_class(self, record, method: str):
        """The class of the dataclass argument ``record`` whose method ``method`` is
        called: the parameter's annotation, else the one dataclass among the function's
        globals with such a method (or the base of all those that have it). The entry
        checks it (any other class: the ordinary code runs)."""
        fn = self.fn
        hint = fn.__annotations__.get(record.param) if hasattr(fn, "__annotations__") else None
        if isinstance(hint, str):
            hint = fn.__globals__.get(hint)
        if isinstance(hint, type) and plain_record_class(hint):
            return hint
        found = {id(v): v for v in list(fn.__globals__.values())
                 if isinstance(v, type) and dataclasses.is_dataclass(v) and
                 isinstance(inspect.getattr_static(v, method, None), types.FunctionType)}
        bases = [c for c in found.values() if all(issubclass(o, c) for o in found.values())]
        if len(bases) != 1:
            raise CannotSpecialise  # no such class, or several unrelated ones
        cls = bases[0]
        if not plain_record_class(cls):
            raise CannotSpecialise
        return cls

    def specialised_call(self, callee, root, filename, params, values, body, depth, line):
        """A call of ``callee`` that cannot be inlined (it recurses, or returns inside a
        loop): a nested function written for the kinds of its arguments (floats and
        plain values), once per kinds, called with each float's handle beside it."""
        if self.static_binding:
            raise CannotSpecialise  # (straight-line code has no calls)
        kinds = []
        for p in params:
            value = values[p]
            if isinstance(value, Float):
                kinds.append(("float", None))
            elif isinstance(value, Plain):
                kinds.append(("plain", value.param))
            else:
                raise CannotSpecialise  # a list, a tuple or a record argument: not (yet)
        key = (callee.__code__, tuple(kinds))
        name = self.functions.get(key)
        if name is None:
            name = self.functions[key] = self.fresh(f"{self.names['temp']}{callee.__name__}")
            self.write_function(name, callee, root, filename, params, kinds, body, line)
        args = []
        for p in params:
            value = values[p]
            args.append(value.value)
            if isinstance(value, Float):
                args.append(value.handle or self.constant)
        result = self.temp("r")
        handle = self.fresh(result + self.names["suffix"])
        self.emit(depth, self.call_text(name, args, result, handle), line)
        return Float(result, handle)

    def write_function(self, name, callee, root, filename, params, kinds, body, line):
        local_names = bound_names(root) | set(params)
        reserved = {self.names[k] for k in ("tape", "record", "sink", "last", "layout")}
        if local_names & (rule_helpers() | reserved) or any(
                n.startswith(self.names["temp"]) for n in local_names):
            raise CannotSpecialise  # a name would hide one the generated code uses
        plain = {p for p, (kind, _) in zip(params, kinds) if kind == "plain"}
        activity = seeded_activity(root, local_names, params, plain)
        dependencies = self.scope.resolver.dependencies
        dependencies.append((weakref.ref(callee), "__code__", callee.__code__))
        scope = Scope(callee, root, Resolver(callee, dependencies), activity, local_names,
                       filename, call_line=line, same_file=filename == self.filename)
        scope.writer = self
        saved = self.lines, self.scope, self.loops, self.function, self.returns_from
        self.lines, self.scope, self.loops, self.function = [], scope, 1, name
        self.returns_from = scope
        self.inlining.append(callee)
        try:
            formal = []
            for p, (kind, taint) in zip(params, kinds):
                if kind == "float":
                    local = FloatLocal(p, self.fresh(p + self.names["suffix"]))
                    formal += [local.name, local.handle]
                else:
                    local = PlainLocal(p)
                    local.param = taint
                    formal.append(p)
                scope.vars[p] = local
            self.block(body, 2)
            first = scope.user_line(root.lineno)
            self.functions_text += [
                (f"    # {callee.__name__}({', '.join(params)}), written for its arguments' "
                 "kinds (it recurses, or returns inside a loop)", first),
                (f"    {self.function_header(name, formal)}", first)] + self.lines
        finally:
            self.inlining.pop()
            self.lines, self.scope, self.loops, self.function, self.returns_from = saved

    def arguments(self, node, callee, params, positional_only, depth, line) -> dict:
        """The values of the call's arguments (in Python's order), by parameter."""
        if any(isinstance(a, gast.Starred) for a in node.args) or \
                len(node.args) > len(params):
            raise CannotSpecialise
        order = params[:len(node.args)]
        for keyword in node.keywords:
            name = keyword.arg
            if name is None or name in order or name not in params or \
                    params.index(name) < positional_only:
                raise CannotSpecialise
            order.append(name)
        values = dict(zip(order, self.evaluate_all(
            list(node.args) + [k.value for k in node.keywords], depth, line)))
        defaults = callee.__defaults__ or ()
        first_default = len(params) - len(defaults)
        for k, p in enumerate(params):
            if p in values:
                continue
            if k < first_default or not constant_global(defaults[k - first_default]):
                raise CannotSpecialise
            self.scope.resolver.dependencies.append(
                (weakref.ref(callee), "__defaults__", callee.__defaults__))
            from .expressions import literal
            values[p] = Plain(literal(defaults[k - first_default]))
        return values


_RESULT = "return"  # the helper's result, as a user name (a keyword: never the user's)


def _statements(body: list) -> list:
    """A function's statements without its docstring and bare constants."""
    return [s for s in body if not (isinstance(s, gast.Expr) and isinstance(
        s.value, gast.Constant))]


def _one_return(body: list) -> bool:
    """Does ``body`` return a value at its end, and only there?"""
    return bool(body) and isinstance(body[-1], gast.Return) and \
        body[-1].value is not None and \
        not any(isinstance(n, gast.Return) for s in body[:-1] for n in gast.walk(s))


def lambda_function(name: str, node):
    """``name = lambda args: body`` as the FunctionDef it stands for."""
    fields = dict.fromkeys(gast.FunctionDef._fields)
    fields.update(name=name, args=node.args, decorator_list=[], type_params=[],
                  body=[gast.copy_location(gast.Return(node.body), node)])
    return gast.copy_location(gast.FunctionDef(**fields), node)


def _returns_as_branches(body: list):
    """``body`` with each ``return e`` an assignment of the result and the statements
    after an ``if`` that returns moved into its branches, so that every path ends by
    binding the result; None if a return is inside a loop (or anything else) or a path
    falls off the end (a None result)."""
    out = []
    for k, stmt in enumerate(body):
        if isinstance(stmt, gast.Return):
            if stmt.value is None:
                return None
            result = gast.Name(_RESULT, gast.Store(), None, None)
            out.append(gast.copy_location(gast.Assign([result], stmt.value, None), stmt))
            return out  # (what follows never runs)
        if isinstance(stmt, gast.If) and any(isinstance(n, gast.Return)
                                             for n in gast.walk(stmt)):
            rest = body[k + 1:]
            then, orelse = _returns_as_branches(stmt.body + rest), \
                _returns_as_branches(stmt.orelse + rest)
            if then is None or orelse is None:
                return None
            out.append(gast.copy_location(gast.If(stmt.test, then, orelse), stmt))
            return out
        if any(isinstance(n, gast.Return) for n in gast.walk(stmt)):
            return None
        out.append(stmt)
    return None


def _helper_tree(callee):
    """The helper's syntax tree, checked and normalized as the transform does, or
    CannotSpecialise if its source cannot be read or holds what astad does not support."""
    try:
        parsed = parse_function(callee)
        root = parsed.node  # (found by its code object: decorators changed nothing)
        if isinstance(root, gast.Lambda):
            root = lambda_function("_lambda", root)
        if not isinstance(root, gast.FunctionDef):
            raise CannotSpecialise
        fence.check(root, parsed.filename)
    except CannotSpecialise:
        raise
    except Exception:  # noqa: BLE001 (no source, unsupported syntax: the ordinary code)
        raise CannotSpecialise from None
    taken = {n.id for n in gast.walk(root) if isinstance(n, gast.Name)}
    prefix = "_tmp"
    while any(n.startswith(prefix) for n in taken):
        prefix += "_"
    normalize(root, prefix)
    return root, parsed.filename
