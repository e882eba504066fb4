"""``sum(<generator>)`` in the float-specialised code: the generator written as the loop
it stands for, accumulating into a local of its own; and a list comprehension as a value,
the loop appending to a list the code makes (specialise/lists.py).

``sum(f(p, x) for p in pts if p[0] > 0.0)`` is written as

    total = 0
    total_terms = []
    for p, p_slot in zip(pts, pts_slots):
        if p[0] > 0.0:
            <f(p, x), its helper inlined, into t>
            total_terms.append(t)
            total = total + t
    total = sum(total_terms, 0)

so a generator over helpers costs what the loop written by hand costs. The fold gives
the derivative (a partial 1 for each term); the value is Python's own ``sum`` of the same
terms, to the last bit (from Python 3.12 a compensated sum, not the fold). The
generator's variables live in their own scope in Python; here they are the function's
locals, so a generator whose variable is also bound or read outside a generator (or a
function defined inside that binds it) is left to the ordinary code.

numpy's reductions to a float of an array the code writes by element (``np.sum(y)``,
``np.mean(y)``, ``y @ w``, ``np.dot``, ``np.inner``, ``np.vdot`` and the methods ``y.sum()``,
``y.mean()``, ``y.dot(w)``; ``w`` such an array or a list argument) are such a sum,
``sum(a * b for a, b in zip(y, w))``, whose value is numpy's own of the same float64
values (``ad.numpy_reduced``), its error too.
"""
from __future__ import annotations

import gast
import numpy as np

from ..front.activity import bound_names
from .expressions import CannotSpecialise
from .value_kinds import Alias, Float, ListArg, ListLocal, Plain

_COMPREHENSIONS = (gast.GeneratorExp, gast.ListComp, gast.SetComp, gast.DictComp)


class Comprehensions:
    """The writer's half that writes ``sum`` of a generator or list comprehension."""

    @staticmethod
    def is_comprehension_sum(node, callee) -> bool:
        """``sum(<generator>)``, or ``sum(xs)`` of a name (a list: its generator)."""
        return callee is sum and not node.keywords and 1 <= len(node.args) <= 2 and \
            isinstance(node.args[0], (gast.GeneratorExp, gast.ListComp, gast.Name))

    def written_reduction(self, node):
        """``np.dot(y, w)``, ``y @ w``, ``y.mean()``...: (numpy's name, the operands) if
        ``node`` is a reduction to a float (_REDUCTIONS) of names, one an array the code
        writes by element, else None. Nothing is emitted: reduce_written checks the
        other operand (a list argument, or another such array)."""
        if isinstance(node, gast.BinOp):
            if not isinstance(node.op, gast.MatMult):
                return None
            callee, operands = np.matmul, [node.left, node.right]
        elif not isinstance(node, gast.Call) or node.keywords:
            return None
        elif isinstance(node.func, gast.Attribute) and self.written_array(node.func.value):
            callee, operands = _METHODS.get(node.func.attr), [node.func.value, *node.args]
        elif self.is_local(node.func) or not isinstance(node.func, (gast.Name, gast.Attribute)):
            return None
        else:
            callee, operands = self.scope.resolver.callee(node.func), node.args
        for function, name, arity in _REDUCTIONS:
            if function is callee and len(operands) == arity and \
                    all(isinstance(o, gast.Name) for o in operands) and \
                    any(self.written_array(o) for o in operands):
                return name, list(operands)
        return None

    def written_array(self, node) -> bool:
        """Is ``node`` the name of an array the code writes by element?"""
        scope = self.scope.owner(node.id) if isinstance(node, gast.Name) else None
        local = scope.vars.get(node.id) if scope is not None else None
        local = local.value if isinstance(local, Alias) else local
        return isinstance(local, ListLocal) and local.array

    def reduce_written(self, form, depth: int, line: int):
        """The value of ``form`` (written_reduction): a loop over the elements (of both
        arrays of a dot, zipped) writing one entry per element, the running total's
        partial 1 and the element's its partner (a dot), 1 (a sum) or 1 / n (a mean);
        the value numpy's own of the same float64 values, computed after the loop, not
        folded in it (lengths that differ: numpy's error there, the code refused and the
        ordinary code raises it, never a loop over the shorter)."""
        name, operands = form
        arrays = [self.container(o, depth, line) for o in operands]
        if not all(isinstance(a, ListArg) or isinstance(a, ListLocal) and a.array
                   for a in arrays):
            raise CannotSpecialise  # (a matrix's row, a list the code made, a float...)
        terms = [self.fresh("term") for _ in operands]
        iterable, target = operands[0], gast.Name(terms[0], gast.Store(), None, None)
        if len(operands) == 2:
            if self.scope.resolver.value("zip") is not zip:
                raise CannotSpecialise  # (a global named zip: not the builtin)
            iterable = gast.Call(_load("zip"), operands, [])
            target = gast.Tuple([gast.Name(t, gast.Store(), None, None) for t in terms],
                                gast.Store())
        generator = gast.GeneratorExp(_load(terms[0]),
                                      [gast.comprehension(target, iterable, [], 0)])
        self.check_comprehension(generator)
        partial = "1.0"
        if name == "mean":  # (empty: ZeroDivisionError, the ordinary code answers)
            partial = self.stable(f"1 / len({arrays[0].name})", depth, line)
        total = self.new_local("total", Float("", ""), True, own=False)
        self.emit(depth, f"{total.handle} = {self.constant}", line)
        inner = self.comprehension_loops(generator, depth, line)
        values = [self.evaluate(_load(t), inner, line) for t in terms]
        if len(values) == 2:  # (a dot: each element's partial its partner's value)
            values = [(values[0], values[1].value), (values[1], values[0].value)]
        else:
            values = [(values[0], partial)]
        pairs = [(total.handle, "1.0")] + [
            (value.handle, p) for value, p in values
            if isinstance(value, Float) and value.handle != self.constant]
        self.emit(inner, f"{total.handle} = {self.combine(pairs, inner, line)}", line)
        self.loops -= len(generator.generators)
        self.emit(depth, f"{total.name} = ad.numpy_reduced({name!r}, "
                         f"{', '.join(a.name for a in arrays)})", line)
        return total.read()

    def comprehension_sum(self, node, depth: int, line: int):
        """The value of ``sum(<generator>[, start])``, its loop emitted before it."""
        generator = node.args[0]
        active = None
        if isinstance(generator, gast.Name):  # sum(xs): sum(x for x in xs)
            active = self.active(generator)
            term = self.fresh("term")
            generator = gast.GeneratorExp(gast.Name(term, gast.Load(), None, None), [
                gast.comprehension(gast.Name(term, gast.Store(), None, None), generator,
                                   [], 0)])
        scope = self.scope
        self.check_comprehension(generator)
        start = self.evaluate(node.args[1], depth, line) if len(node.args) == 2 else \
            Plain("0")
        if active is None:
            active = scope.activity.active(generator.elt)
        active = active or isinstance(start, Float)
        total, item = "sum()", "sum() item"  # (not identifiers: never a user's names)
        local = scope.vars[total] = self.new_local(
            "total", Float("", "") if active else Plain(""), active, own=False)
        try:
            self.bind(local, start, depth, line)
            first = self.stable(start.value, depth, line)
            terms = self.fresh(f"{local.name}_terms")
            self.emit(depth, f"{terms} = []", line)
            inner = self.comprehension_loops(generator, depth, line)
            value = self.saved(self.evaluate(generator.elt, inner, line), inner, line)
            if isinstance(value, Float):
                value = Float(self.stable(value.value, inner, line), value.handle)
            elif isinstance(value, Plain):
                value = Plain(self.stable(value.value, inner, line), value.param)
            else:
                raise CannotSpecialise  # a sum of tuples, lists or records
            self.emit(inner, f"{terms}.append({value.value})", line)
            scope.vars[item] = Alias(value)
            added = gast.BinOp(gast.Name(total, gast.Load(), None, None), gast.Add(),
                               gast.Name(item, gast.Load(), None, None))
            self.assign(gast.Name(total, gast.Store(), None, None),
                        self.evaluate(gast.copy_location(added, generator.elt), inner, line),
                        inner, line)
            self.loops -= len(generator.generators)
            # the value as Python's sum rounds it (from 3.12, compensated: not the fold
            # above, which gives the derivative: a partial 1 for each term)
            self.emit(depth, f"{local.name} = sum({terms}, {first})", line)
            return local.read()
        finally:
            del scope.vars[total]
            scope.vars.pop(item, None)

    def check_comprehension(self, generator) -> None:
        """Refuse what the loop cannot stand for."""
        if self.static_binding or any(g.is_async for g in generator.generators) or \
                not all(_only_in_comprehensions(self.scope.root, name)
                        for g in generator.generators for name in _target_names(g.target)):
            raise CannotSpecialise  # straight-line code, or a name Python keeps apart

    def comprehension_loops(self, generator, depth: int, line: int) -> int:
        """Emit the ``for`` and ``if`` lines of ``generator``; return the depth of its
        element (the caller takes ``self.loops`` back down by the number of ``for``s)."""
        inner = depth
        for comprehension in generator.generators:
            columns, element = self.iteration(comprehension.iter, inner, line)
            targets = self.loop_targets(comprehension.target, element)
            iterable = columns[0] if len(columns) == 1 else f"zip({', '.join(columns)})"
            self.emit(inner, f"for {', '.join(targets)} in {iterable}:", line)
            self.loops += 1
            inner += 1
            for test in comprehension.ifs:
                self.emit(inner, f"if {self.plain(test, inner, line, quiet=True)}:", line)
                inner += 1
        return inner

    def fill_list(self, local, generator, depth: int, line: int) -> None:
        """``[e for ...]``: the ListLocal ``local`` made empty, then appended to by the
        comprehension's loop (specialise/lists.py reads it)."""
        self.check_comprehension(generator)
        self.emit(depth, f"{local.name} = []", line)
        self.emit(depth, f"{local.handles} = []", line)
        inner = self.comprehension_loops(generator, depth, line)
        value, handle = self.stored(generator.elt, inner, line)
        self.emit(inner, f"{local.name}.append({value})", line)
        self.emit(inner, f"{local.handles}.append({handle})", line)
        self.loops -= len(generator.generators)


# numpy's reductions of 1-d arrays to a float written as a generator's sum: the function
# the user calls, its name (the written code calls numpy's for the value: ad.numpy_reduced)
# and the arrays it takes; ``y @ w`` is np.matmul, a method the function of its name
_REDUCTIONS = ((np.sum, "sum", 1), (np.mean, "mean", 1), (np.dot, "dot", 2),
               (np.inner, "inner", 2), (np.vdot, "vdot", 2), (np.matmul, "matmul", 2))
_METHODS = {"sum": np.sum, "mean": np.mean, "dot": np.dot}


def _load(name: str):
    return gast.Name(name, gast.Load(), None, None)


def _target_names(target) -> set:
    return {n.id for n in gast.walk(target) if isinstance(n, gast.Name)}


def _only_in_comprehensions(root, name: str) -> bool:
    """Is every use of ``name`` in ``root`` inside a comprehension that binds it, or a
    function defined inside that binds it (its own local)?"""
    inside = set()
    for node in gast.walk(root):
        if isinstance(node, _COMPREHENSIONS) and any(
                name in _target_names(g.target) for g in node.generators) or \
                isinstance(node, (gast.FunctionDef, gast.Lambda)) and node is not root and \
                name in bound_names(node):
            inside.update(id(n) for n in gast.walk(node) if isinstance(n, gast.Name))
    return all(id(n) in inside for n in gast.walk(root)
               if isinstance(n, gast.Name) and n.id == name)
