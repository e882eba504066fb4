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
"""
from __future__ import annotations

import gast
import numpy as np

from ..front.activity import bound_names
from .expressions import CannotSpecialise
from .value_kinds import Alias, Float, ListLocal, Plain

_COMPREHENSIONS = (gast.GeneratorExp, gast.ListComp, gast.SetComp, gast.DictComp)


class Comprehensions:
    """The writer's half that writes ``sum`` of a generator or list comprehension."""

    def is_comprehension_sum(self, node, callee) -> bool:
        """``sum(<generator>)``, or ``sum(xs)`` of a name (a list: its generator); or
        ``np.sum(y)`` of a new array the code writes by element (a list here)."""
        if callee is np.sum:
            return not node.keywords and len(node.args) == 1 and \
                isinstance(node.args[0], gast.Name) and \
                isinstance(self.scope.vars.get(node.args[0].id), ListLocal) and \
                self.scope.vars[node.args[0].id].array
        return callee is sum and not node.keywords and 1 <= len(node.args) <= 2 and \
            isinstance(node.args[0], (gast.GeneratorExp, gast.ListComp, gast.Name))

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
            # above, which gives the derivative: a partial 1 for each term); np.sum's as
            # numpy's pairwise sum rounds it, of the same float64 values in the same order
            if self.scope.resolver.callee(node.func) is np.sum:
                self.emit(depth, f"{local.name} = ad.numpy_sum({terms})", line)
            else:
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
