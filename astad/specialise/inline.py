"""Calls of helper functions in the float-specialised code: the helper's body, inlined.

A call ``g(a, b)`` of a plain Python function (a global of the caller, resolved when the
code is written, rebuilt if the name is rebound or ``g``'s code changes) is written as
``g``'s own body: its parameters bound to the arguments' values, whatever their kinds
(a float and its handle, a list argument, a tuple, a dataclass kept as its fields), its
locals renamed ``g_<name>``, its ``return`` the value of the call. So a helper is
specialised for the kinds it is called with, and costs no call, no tuple and no object
at run time. A helper that returns before its last statement, calls itself (directly or
through another helper), or takes ``*args`` is not inlined: the ordinary code runs.
"""
from __future__ import annotations

import types
import weakref

import gast

from ..front import fence
from ..front.activity import bound_names
from ..front.normalize import normalize
from ..front.source import parse_function
from .value_kinds import Alias, Float, FloatLocal, Plain, PlainLocal, Resolver, constant_global
from .scope import Scope, rule_helpers, seeded_activity
from .expressions import CannotSpecialise

_MAX_DEPTH = 12          # helpers inlined inside one another
_MAX_LINES = 4000        # generated lines: beyond, the ordinary code is smaller


class Inliner:
    """The writer's half that inlines calls (scalarloops.Writer)."""

    def inline(self, node, callee, depth: int, line: int):
        """Emit the body of ``callee`` for the call ``node``; return the call's value."""
        if len(self.inlining) >= _MAX_DEPTH or len(self.lines) > _MAX_LINES or \
                not isinstance(callee, types.FunctionType) or callee.__code__.co_freevars:
            raise CannotSpecialise  # a closure, or too much code: the ordinary code
        root, filename = _helper_tree(callee)
        args = root.args
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise CannotSpecialise
        params = [a.id for a in args.posonlyargs + args.args]
        values = self.arguments(node, callee, params, len(args.posonlyargs), depth, line)
        body = [s for s in root.body if not (isinstance(s, gast.Expr) and isinstance(
            s.value, gast.Constant))]
        if callee in self.inlining or callee.__code__ is self.fn.__code__ or not body or \
                not isinstance(body[-1], gast.Return) or body[-1].value is None or \
                any(isinstance(n, gast.Return) for s in body[:-1] for n in gast.walk(s)):
            # a recursion, or a return before the end: a function of its own
            return self.specialised_call(callee, root, filename, params, values, body,
                                         depth, line)
        # (an argument's handle may be the index of the last entry: the body may record
        # entries before it reads the parameter)
        values = {p: self.saved(v, depth, line) for p, v in values.items()}
        local_names = bound_names(root) | set(params)
        plain = {p for p, v in values.items() if isinstance(v, Plain)}
        activity = seeded_activity(root, local_names, params, plain)
        dependencies = self.scope.resolver.dependencies
        dependencies.append((weakref.ref(callee), "__code__", callee.__code__))
        scope = Scope(callee, root, Resolver(callee, dependencies), activity, local_names,
                       filename, prefix=f"{callee.__name__}_", call_line=line,
                       same_file=filename == self.filename)
        scope.writer = self
        assigned = {n.id for n in gast.walk(root) if isinstance(n, gast.Name) and
                    isinstance(n.ctx, gast.Store)}
        self.emit(depth, f"# inlined: {callee.__name__}({', '.join(params)})", line)
        caller, self.scope = self.scope, scope
        self.inlining.append(callee)
        try:
            for p in params:
                if p in assigned:  # a parameter it rebinds: a local of its own
                    self.bind(scope.local(p, values[p]), values[p], depth, line)
                else:
                    scope.vars[p] = Alias(values[p])
            for stmt in body[:-1]:
                self.statement(stmt, depth)
            last = body[-1]
            self.comment(last, depth, scope.user_line(last.lineno))
            return self.evaluate(last.value, depth, scope.user_line(last.lineno))
        finally:
            self.inlining.pop()
            self.scope = caller

    def specialised_call(self, callee, root, filename, params, values, body, depth, line):
        """A call of ``callee`` that cannot be inlined (it recurses, or returns early): a
        nested function written for the kinds of its arguments (floats and plain
        values), once per kinds, called with each float's handle beside it."""
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
        reserved = {self.names[k] for k in ("tape", "extend", "sink", "last", "layout")}
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
                 "kinds (it recurses, or returns early)", first),
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


def _helper_tree(callee):
    """The helper's syntax tree, checked and normalized as the transform does, or
    CannotSpecialise if its source cannot be read or holds what astad does not support."""
    try:
        parsed = parse_function(callee)
        root = parsed.node  # (found by its code object: decorators changed nothing)
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
