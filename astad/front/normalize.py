"""Phase 3, normalize: rewrite a few constructs into simpler ones the transform handles.

- ``t op= v`` becomes ``t = t op v``, marked in-place so the transform keeps Python's
  in-place semantics for containers (``xs += [y]`` still extends the same list).
  A subscript or attribute target with a computed object or index is evaluated once,
  into a temporary, as Python does.
- Annotations are dropped: they play no part in the computation.
Names stay the user's; temporaries are numbered deterministically.
"""
from __future__ import annotations

import gast

INPLACE = "_astad_inplace"


def _simple(node) -> bool:
    return isinstance(node, (gast.Name, gast.Constant))


class Normalize(gast.NodeTransformer):
    def __init__(self, temp_prefix: str):
        self.temp_prefix = temp_prefix
        self.count = 0

    def _temp(self) -> str:
        name = f"{self.temp_prefix}{self.count}"
        self.count += 1
        return name

    def _bind(self, expr, pre: list, like):
        """``expr`` if it is a name or constant, else a temporary assigned in ``pre``."""
        if _simple(expr):
            return expr
        name = self._temp()
        assign = gast.Assign(targets=[gast.Name(name, gast.Store(), None, None)], value=expr,
                             type_comment=None)
        pre.append(gast.copy_location(assign, like))
        return gast.Name(name, gast.Load(), None, None)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        target, pre = node.target, []
        if isinstance(target, gast.Name):
            store = target
            load = gast.Name(target.id, gast.Load(), None, None)
        elif isinstance(target, gast.Subscript):
            obj = self._bind(target.value, pre, node)
            index = target.slice if isinstance(target.slice, gast.Slice) else \
                self._bind(target.slice, pre, node)
            store = gast.Subscript(obj, index, gast.Store())
            load = gast.Subscript(obj, index, gast.Load())
        else:  # Attribute
            obj = self._bind(target.value, pre, node)
            store = gast.Attribute(obj, target.attr, gast.Store())
            load = gast.Attribute(obj, target.attr, gast.Load())
        value = gast.BinOp(load, node.op, node.value)
        setattr(value, INPLACE, True)
        assign = gast.Assign(targets=[store], value=value, type_comment=None)
        for new in (store, load, value, assign):
            gast.copy_location(new, node)
        return pre + [assign]

    def visit_AnnAssign(self, node):
        self.generic_visit(node)
        if node.value is None:
            return None
        assign = gast.Assign(targets=[node.target], value=node.value, type_comment=None)
        return gast.copy_location(assign, node)

    def visit_arguments(self, node):
        for arg in node.args + node.posonlyargs + node.kwonlyargs + [node.vararg, node.kwarg]:
            if arg is not None:
                arg.annotation = None
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node):
        node.returns = None
        self.generic_visit(node)
        return node


def normalize(node, temp_prefix: str):
    Normalize(temp_prefix).visit(node)
    gast.fix_missing_locations(node)
    return node
