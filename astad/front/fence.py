"""Phase 2, fence: reject every construct astad cannot differentiate, before anything runs.

One visitor, one rule per unsupported construct. Each error names the construct and
points at the user's file, line and column with the source line and a caret.
"""
from __future__ import annotations

import gast

from ..errors import UnsupportedSyntaxError

# Calls that would run code astad never sees (so it could not transform it).
_FORBIDDEN_CALLS = {
    "exec": "exec(), which runs code astad cannot read",
    "eval": "eval(), which runs code astad cannot read",
    "compile": "compile(), which builds code astad cannot read",
}


class Fence(gast.NodeVisitor):
    def __init__(self, filename: str, root: gast.AST):
        self.filename = filename
        self.root = root

    def reject(self, node: gast.AST, construct: str, hint: str = "") -> None:
        raise UnsupportedSyntaxError(construct, self.filename, getattr(node, "lineno", None),
                                     getattr(node, "col_offset", None), hint)

    # Generators and coroutines suspend mid-computation; the tape would outlive the call.
    def visit_Yield(self, node):
        self.reject(node, "'yield' (generator functions)",
                    "return a list instead, or differentiate the code that consumes it")

    def visit_YieldFrom(self, node):
        self.reject(node, "'yield from' (generator functions)")

    def visit_Await(self, node):
        self.reject(node, "'await' (coroutines)")

    def visit_AsyncFunctionDef(self, node):
        self.reject(node, "'async def' (coroutines)")

    def visit_AsyncFor(self, node):
        self.reject(node, "'async for'")

    def visit_AsyncWith(self, node):
        self.reject(node, "'async with'")

    # A differentiated value stored in a global would outlive the gradient call and
    # be read later by code that knows nothing of its tape.
    def visit_Global(self, node):
        self.reject(node, "the 'global' statement",
                    "pass the value in as an argument and return the new value instead")

    def visit_Nonlocal(self, node):
        if self._is_top_level(node):
            self.reject(node, "'nonlocal' rebinding of a variable outside the differentiated "
                              "function", "return the new value instead")
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        self.reject(node, "a class definition inside a differentiated function",
                    "define the class at module level")

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, gast.Name) and func.id in _FORBIDDEN_CALLS:
            self.reject(node, _FORBIDDEN_CALLS[func.id])
        self.generic_visit(node)

    def _is_top_level(self, target: gast.AST) -> bool:
        """True when ``target`` sits in the root function itself, not a nested def."""
        stack = [(self.root, True)]
        while stack:
            node, top = stack.pop()
            if node is target:
                return top
            for child in gast.iter_child_nodes(node):
                nested = isinstance(child, (gast.FunctionDef, gast.Lambda))
                stack.append((child, top and not nested))
        return False


def check(node: gast.AST, filename: str) -> None:
    """Raise UnsupportedSyntaxError for the first unsupported construct in ``node``."""
    fence = Fence(filename, node)
    if isinstance(node, gast.AsyncFunctionDef):
        fence.reject(node, "'async def' (coroutines)")
    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        fence.visit(stmt)
