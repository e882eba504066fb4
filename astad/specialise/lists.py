"""Lists of floats the code makes, in the float-specialised code.

``ys = []`` (or ``[a, b]``, ``[0.0] * n``, ``[e for ...]``), then ``ys.append(v)`` or
``ys[i] = v``, then reads of ``ys[k]``, ``for y in ys``, ``len(ys)`` and ``sum(ys)``: the
list is a ``ListLocal``, two lists side by side in the written code, its values and each
value's handle (its tape slot, or its tangent), so a write is two stores and a read two
loads, with no tape entry of its own. A value written is read back with the handle it
was written with, as the taped code reads the dual it stored. Anything else done with
the list (it is returned, passed where its values are not read one by one, bound to a
second name) leaves the function to the ordinary code.
"""
from __future__ import annotations

import gast
import numpy as np

from .value_kinds import CannotSpecialise, Float, ListLocal, Plain


class Lists:
    """The writer's half that makes and writes lists (loops.Writer)."""

    def make_list(self, name: str, node, depth: int, line: int) -> bool:
        """``name = [a, b, ...]`` (``[]`` too), ``name = [c] * n`` (``c`` a number) or
        ``name = [e for ...]``: a ListLocal, and True; False if ``node`` makes no such
        list."""
        size, array = None, False  # (a display or a comprehension: no size given)
        if self.makes_zeros(node):  # np.zeros(n): numpy.float64 zeros, written by element
            size = f"ad.vector_size({self.plain(node.args[0], depth, line, quiet=True)})"
            fill, array = "ad.float64(0.0)", True
            self.arrays = True
        elif isinstance(node, gast.BinOp) and isinstance(node.op, gast.Mult) and \
                isinstance(node.left, gast.List) and len(node.left.elts) == 1 and \
                isinstance(node.left.elts[0], gast.Constant) and \
                type(node.left.elts[0].value) in (int, float):
            size = self.plain(node.right, depth, line, quiet=True)
            fill = repr(node.left.elts[0].value)
        elif not (isinstance(node, gast.ListComp) or isinstance(node, gast.List) and not any(
                isinstance(e, gast.Starred) for e in node.elts)):
            return False
        if self.static_binding:
            raise CannotSpecialise  # (straight-line code: handles are names, not lists)
        local = self.scope.vars.get(name)
        if local is None:
            if self.scope.owner(name) is not self.scope:
                raise CannotSpecialise  # (a local function's: not its own name)
            base = self.scope.prefix + name
            local = self.scope.vars[name] = ListLocal(
                base if not self.scope.prefix else self.fresh(base),
                self.fresh(f"{base}{self.names['suffix']}s"), array)
        elif not isinstance(local, ListLocal) or local.array != array:
            raise CannotSpecialise  # a name bound to a float elsewhere, or an argument
        if isinstance(node, gast.ListComp):
            self.fill_list(local, node, depth, line)
        elif size is None:  # (a display: its elements evaluated first, as Python does)
            pairs = [self.stored(e, depth, line) for e in node.elts]
            self.emit(depth, f"{local.name} = [{', '.join(v for v, _ in pairs)}]", line)
            self.emit(depth, f"{local.handles} = [{', '.join(h for _, h in pairs)}]", line)
        else:
            size = self.stable(size, depth, line)
            self.emit(depth, f"{local.name} = [{fill}] * {size}", line)
            self.emit(depth, f"{local.handles} = [{self.constant}] * {size}", line)
        return True

    def makes_zeros(self, node) -> bool:
        """``np.zeros(n)``: one size, numpy's float64."""
        return isinstance(node, gast.Call) and len(node.args) == 1 and not node.keywords \
            and not isinstance(node.args[0], (gast.Tuple, gast.List, gast.Starred)) and \
            not self.is_local(node.func) and self.scope.resolver.callee(node.func) is np.zeros

    def made_list(self, node, depth: int, line: int):
        """A list comprehension used as a value (a helper's argument): a ListLocal of
        its own."""
        if self.static_binding:
            raise CannotSpecialise
        name = self.fresh(f"{self.names['temp']}list")
        local = ListLocal(name, self.fresh(f"{name}{self.names['suffix']}s"))
        self.fill_list(local, node, depth, line)
        return local

    def listed(self, node):
        """The ListLocal ``node`` names (through a helper's parameter too), or None."""
        if not isinstance(node, gast.Name) or self.scope.owner(node.id) is None:
            return None
        value = self.read(node.id)
        return value if isinstance(value, ListLocal) else None

    def stored(self, node, depth: int, line: int):
        """The value of ``node`` as a (value, handle) pair of names, to be stored."""
        value = self.saved(self.evaluate(node, depth, line), depth, line)
        if isinstance(value, Float):
            return self.stable(value.value, depth, line), value.handle or self.constant
        if isinstance(value, Plain):
            if value.param is not None:
                self.flows(value.param)
            return self.stable(value.value, depth, line), self.constant
        raise CannotSpecialise  # a list of tuples, lists or records

    def append(self, stmt, depth: int, line: int) -> bool:
        """``ys.append(v)`` of a ListLocal: True once written, else False."""
        call = stmt.value
        if not (isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) and
                call.func.attr == "append" and len(call.args) == 1 and not call.keywords):
            return False
        local = self.listed(call.func.value)
        if local is None:
            return False
        if local.array:
            raise CannotSpecialise  # (an array has no append: the ordinary code raises)
        value, handle = self.stored(call.args[0], depth, line)
        self.emit(depth, f"{local.name}.append({value})", line)
        self.emit(depth, f"{local.handles}.append({handle})", line)
        return True

    def write_element(self, target, value_node, depth: int, line: int) -> bool:
        """``ys[i] = v`` of a ListLocal: True once written, else False."""
        if not isinstance(target, gast.Subscript) or isinstance(target.slice, gast.Slice):
            return False
        local = self.listed(target.value)
        if local is None:
            return False
        value, handle = self.stored(value_node, depth, line)  # (Python: the value first)
        k = self.index(target.slice, "k", depth, line)
        if local.array:  # (numpy stores a float64: the value read back is one)
            value = f"ad.float64({value})"
        self.emit(depth, f"{local.name}[{k}] = {value}", line)
        self.emit(depth, f"{local.handles}[{k}] = {handle}", line)
        return True

    def list_element(self, local, k: str, depth: int, line: int):
        """``ys[k]`` of a ListLocal: its value and the handle stored with it, read now."""
        x, h = self.temp("x"), self.temp("h")
        self.emit(depth, f"{x} = {local.name}[{k}]", line)
        self.emit(depth, f"{h} = {local.handles}[{k}]", line)
        return Float(x, h)
