"""The expressions of the code written for floats, rewritten for numba: the whitelist of
what a kernel computes as Python does (compile/numba_translate.py rewrites the
statements; numba_kernels has the checked operations and functions these call)."""
from __future__ import annotations

import ast
import copy
import math

_SHAPE_NAMES = {"len", "range", "zip", "enumerate", "abs", "float", "bool"}
_BINARY = {ast.Add: "checked_add", ast.Sub: "checked_sub", ast.Mult: "checked_mul",
           ast.Pow: "checked_pow", ast.LShift: "checked_lshift"}
_PLAIN_BINARY = (ast.Div, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr, ast.BitXor,
                 ast.RShift)


class KernelExpressions:
    """The kernel's rewriter (numba_translate._Kernel), for expressions: each form the
    writers emit, or ``refuse``."""

    def visit_BinOp(self, node):
        node.left, node.right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.left, ast.List) and isinstance(node.op, ast.Mult):
            if len(node.left.elts) != 1:
                self.refuse("a list repeated that is not of one item", node)
            return self.call("full", [node.right, node.left.elts[0]], node)
        name = _BINARY.get(type(node.op))
        if name is not None:
            return self.call(name, [node.left, node.right], node)
        if isinstance(node.op, _PLAIN_BINARY):
            return node
        self.refuse(f"the operator in {ast.unparse(node)!r}", node)

    def visit_Subscript(self, node):
        """``a[i]`` checked (numba_kernels.checked_get); ``a[::-1]``, a view, as it is."""
        if isinstance(node.slice, ast.Slice):
            return self.generic_visit(node)
        return self.call("checked_get", [self.visit(node.value), self.visit(node.slice)],
                         node)

    def visit_Constant(self, node):
        if type(node.value) is int and not -2 ** 53 < node.value < 2 ** 53:
            self.refuse(f"the int constant {node.value} (past 2**53)", node)
        if type(node.value) not in (int, float, bool):
            self.refuse(f"the constant {node.value!r}", node)
        return node

    def visit_List(self, node):
        if node.elts:
            if isinstance(node.ctx, ast.Store):
                self.refuse("a list unpacked", node)
            return self.generic_visit(node)  # ([x] * n, above)
        return node  # (an empty list the code appends floats to)

    def visit_Name(self, node):
        name = node.id
        if name in (self.n["tape"], self.n["record"], self.n["layout"]):
            self.refuse("the tape read as a list", node)
        if isinstance(node.ctx, ast.Store) or name in self.arguments or \
                name in self.assigned or name in _SHAPE_NAMES or name in self.functions:
            return node
        value = _known(name)
        if value is not None:  # (a float: a global numba freezes, as Python's never changes)
            self.namespace[name] = value
            return node
        self.refuse(f"the name {name!r}", node)

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "math":
            value = _known(node.attr)
            if value is not None:
                self.namespace[node.attr] = value
                return ast.copy_location(ast.Name(node.attr, ast.Load()), node)
        self.refuse(f"{ast.unparse(node)!r}", node)

    def visit_Call(self, node):
        func = node.func
        if node.keywords:
            self.refuse(f"a call with keywords, {ast.unparse(node)!r}", node)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "ad":
            if func.attr == "numpy_reduced" and len(node.args) == 2 and \
                    isinstance(node.args[0], ast.Constant) and \
                    node.args[0].value in ("sum", "mean"):
                from .numba_kernels import numpy_sum_order
                order = numpy_sum_order()
                if order is None:
                    self.refuse(f"np.{node.args[0].value} of an array written here: this "
                                "numpy adds in another order than its compiled copies", node)
                return self.call(f"numpy_{node.args[0].value}{order}",
                                 [self.visit(node.args[1])], node)
            args = [self.visit(a) for a in node.args]
            if func.attr == "float64" and len(args) == 1:
                return args[0]
            if func.attr == "vector_size":
                return self.call("vector_size", args, node)
            self.refuse(f"astad's helper ad.{func.attr}", node)
        if isinstance(func, ast.Name) and func.id in ("max", "min") and \
                len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args):
            args = [self.visit(a) for a in node.args]
            out = args[0]
            for arg in args[1:]:  # (max(a, b, c): compared left to right, as Python does)
                out = self.call(f"python_{func.id}", [out, arg], node)
            return out
        if isinstance(func, ast.Name) and func.id == "float" and len(node.args) == 1 and \
                isinstance(node.args[0], ast.Constant) and type(node.args[0].value) is str:
            value = float(node.args[0].value)  # (float("inf") of the rules' partials)
            name = {math.inf: "INF", -math.inf: "NEG_INF"}.get(value, "NAN")
            if value == value and name == "NAN":
                return ast.copy_location(ast.Constant(value), node)
            self.namespace[name] = value
            return ast.copy_location(ast.Name(name, ast.Load()), node)
        if isinstance(func, ast.Name) and func.id == "int" and len(node.args) == 1:
            return self.call("to_int", [self.visit(node.args[0])], node)
        if isinstance(func, ast.Name) and func.id == "sum":
            if len(node.args) != 2 or not isinstance(node.args[0], ast.Name):
                self.refuse(f"{ast.unparse(node)!r}", node)
            start = node.args[1]  # (an int start: only the constant 0 is known an int)
            int_start = isinstance(start, ast.Constant) and type(start.value) is int
            if not int_start and not isinstance(start, ast.Name):
                self.refuse(f"{ast.unparse(node)!r}", node)
            return self.call("python_sum", [self.visit(node.args[0]), self.visit(start),
                                            ast.Constant(int_start)], node)
        if isinstance(func, ast.Name) and func.id == "reversed" and len(node.args) == 1:
            return self.reversed(node.args[0], node)
        if isinstance(func, ast.Name) and (func.id in _SHAPE_NAMES or _known(func.id)):
            node.args = [self.visit(a) for a in node.args]
            node.func = self.visit(func)
            return node
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "math":
            node.args = [self.visit(a) for a in node.args]
            node.func = self.visit(func)
            return node
        from . import numba_kernels
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "np" and func.attr in numba_kernels.NUMPY:
            name = f"numpy_{func.attr}"  # (numpy's function of floats: the formula's)
            self.namespace[name] = numba_kernels.NUMPY[func.attr]
            return ast.copy_location(ast.Call(ast.Name(name, ast.Load()),
                                              [self.visit(a) for a in node.args], []), node)
        self.refuse(f"the call {ast.unparse(node)!r}", node)

    def reversed(self, sequence, node):
        """``reversed(a)``: ``a[::-1]``; of a range, the range reversed."""
        if isinstance(sequence, ast.Name):
            return ast.copy_location(ast.Subscript(
                self.visit(sequence), ast.Slice(None, None, ast.Constant(-1)), ast.Load()),
                node)
        if isinstance(sequence, ast.Call) and isinstance(sequence.func, ast.Name) and \
                sequence.func.id == "range" and 1 <= len(sequence.args) <= 3:
            args = [self.visit(a) for a in sequence.args]
            a, b, c = ([ast.Constant(0)] + args + [ast.Constant(1)])[:3] \
                if len(args) == 1 else (args + [ast.Constant(1)])[:3]
            step = ast.UnaryOp(ast.USub(), copy.deepcopy(c))
            return ast.copy_location(ast.Call(ast.Name("range", ast.Load()), [
                self.call("reversed_start", [a, b, c], node),
                self.call("reversed_stop", copy.deepcopy([a, b, c]), node), step], []),
                node)
        self.refuse(f"{ast.unparse(node)!r}", node)

    def call(self, name: str, args: list, node):
        from . import numba_kernels
        self.namespace[name] = getattr(numba_kernels, name)
        return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), args, []), node)

    def generic_visit(self, node):
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.Dict,
                             ast.Set, ast.Starred, ast.NamedExpr, ast.JoinedStr, ast.Await,
                             ast.Yield)):
            self.refuse(f"{type(node).__name__.lower()} {ast.unparse(node)!r}", node)
        return super().generic_visit(node)


def _known(name: str):
    """What ``name`` in the rules' namespace is to numba: a float constant, or numba's
    version of a math function or a helper (numba_kernels); None if it has none."""
    from . import numba_kernels
    from ..rules.scalar import rule_namespace
    if name in numba_kernels.MATH:
        return numba_kernels.MATH[name]
    if name in numba_kernels.HELPERS:
        return numba_kernels.HELPERS[name]
    value = rule_namespace().get(name)
    if isinstance(value, float):
        return value
    return None
