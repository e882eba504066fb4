"""Which reads of a name are certain to find it bound.

Statement-level preaccumulation (transform/preaccumulate.py) passes the leaves of an expression to
its rule as arguments, so they are all read before any operation runs. Python reads a
name only when it gets to it: in ``w / x + y`` with ``x == 0`` and ``y`` unbound, Python
raises ZeroDivisionError, not NameError. A fused rule may read a name early only where
the read cannot raise: a parameter, or a local assigned on every path before the
statement (definite assignment, as compilers compute it, conservatively). Globals and
builtins may be missing, and names of enclosing functions may not be bound yet, so
their reads are never certain.
"""
from __future__ import annotations

import gast

_JUMPS = (gast.Return, gast.Raise, gast.Continue, gast.Break)


def certain_reads(root) -> set:
    """``id()`` of every ``Name`` load in ``root`` (a function) that cannot raise."""
    found: set = set()
    _function(root, found)
    return found


def _params(args) -> set:
    names = {a.id for a in args.posonlyargs + args.args + args.kwonlyargs}
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            names.add(extra.id)
    return names


def _function(node, found: set) -> None:
    bound = _params(node.args)
    if isinstance(node, gast.Lambda):
        _expression(node.body, bound, found)
    else:
        _block(node.body, bound, found)


def _targets(target) -> set:
    return {n.id for n in gast.walk(target) if isinstance(n, gast.Name)
            and isinstance(n.ctx, gast.Store)}


def _expression(node, bound: set, found: set) -> None:
    """Record the certain reads of an expression evaluated with ``bound`` names bound."""
    if node is None:
        return
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, gast.Name):
            if isinstance(n.ctx, gast.Load) and n.id in bound:
                found.add(id(n))
        elif isinstance(n, (gast.Lambda, gast.FunctionDef)):
            _function(n, found)  # its own scope (defaults evaluated here are not seen)
        elif isinstance(n, (gast.ListComp, gast.SetComp, gast.GeneratorExp, gast.DictComp)):
            inner = set(bound)
            for generator in n.generators:
                _expression(generator.iter, inner, found)
                inner |= _targets(generator.target)
                for condition in generator.ifs:
                    _expression(condition, inner, found)
            for part in ("elt", "key", "value"):
                _expression(getattr(n, part, None), inner, found)
        else:
            stack.extend(gast.iter_child_nodes(n))


def _block(body: list, bound: set, found: set) -> set:
    """Record the certain reads of a block; return the names bound after it on every
    path that reaches its end."""
    bound = set(bound)
    for stmt in body:
        bound = _statement(stmt, bound, found)
    return bound


def _branch(body: list, bound: set, found: set):
    """The names bound at the end of a block, or None if it never falls off its end."""
    after = _block(body, bound, found)
    return None if body and isinstance(body[-1], _JUMPS) else after


def _statement(stmt, bound: set, found: set) -> set:
    if isinstance(stmt, gast.Assign):
        _expression(stmt.value, bound, found)
        for target in stmt.targets:
            if not isinstance(target, gast.Name):
                _expression(target, bound, found)  # (obj.a = v reads obj)
        return bound | set().union(*[_targets(t) for t in stmt.targets])
    if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef)):
        for part in stmt.args.defaults + [d for d in stmt.args.kw_defaults if d is not None]:
            _expression(part, bound, found)
        _function(stmt, found)
        return bound | {stmt.name}
    if isinstance(stmt, gast.If):
        _expression(stmt.test, bound, found)
        ends = [b for b in (_branch(stmt.body, bound, found),
                            _branch(stmt.orelse, bound, found)) if b is not None]
        return set.intersection(*ends) if ends else bound
    if isinstance(stmt, (gast.For, gast.AsyncFor)):
        _expression(stmt.iter, bound, found)
        _block(stmt.body, bound | _targets(stmt.target), found)
        _block(stmt.orelse, bound, found)
        return bound
    if isinstance(stmt, gast.While):
        _expression(stmt.test, bound, found)
        _block(stmt.body, bound, found)
        _block(stmt.orelse, bound, found)
        return bound
    if isinstance(stmt, (gast.With, gast.AsyncWith)):
        inner = set(bound)
        for item in stmt.items:
            _expression(item.context_expr, inner, found)
            if item.optional_vars is not None:
                inner |= _targets(item.optional_vars)
        return _block(stmt.body, inner, found)
    if isinstance(stmt, gast.Try):
        _block(stmt.body, bound, found)
        for handler in stmt.handlers:
            _expression(handler.type, bound, found)
            name = handler.name
            names = {name} if isinstance(name, str) else (
                _targets(name) if name is not None else set())
            _block(handler.body, bound | names, found)
        _block(stmt.orelse, bound, found)
        return _block(stmt.finalbody, bound, found)
    if isinstance(stmt, gast.Match):
        _expression(stmt.subject, bound, found)
        for case in stmt.cases:
            captured = {n.name for n in gast.walk(case.pattern)
                        if isinstance(n, (gast.MatchAs, gast.MatchStar)) and n.name}
            captured |= {n.rest for n in gast.walk(case.pattern)
                         if isinstance(n, gast.MatchMapping) and n.rest}
            _expression(case.guard, bound | captured, found)
            _block(case.body, bound | captured, found)
        return bound
    if isinstance(stmt, gast.Delete):
        for target in stmt.targets:
            if not isinstance(target, gast.Name):
                _expression(target, bound, found)
        return bound - set().union(*[{t.id} for t in stmt.targets
                                     if isinstance(t, gast.Name)])
    if isinstance(stmt, (gast.Global, gast.Nonlocal)):
        return bound - set(stmt.names)
    if isinstance(stmt, (gast.Import, gast.ImportFrom)):
        return bound | {(a.asname or a.name).split(".")[0] for a in stmt.names}
    # expression statements, return, raise, assert, pass, break, continue...
    for child in gast.iter_child_nodes(stmt):
        if isinstance(child, gast.expr):
            _expression(child, bound, found)
    return bound
