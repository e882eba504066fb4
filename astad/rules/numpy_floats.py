"""numpy's element-wise functions of floats, as formulas for the code specialised for floats.

``np.exp(x[i])`` in a loop computes one float from one float. The general path sends it
through numpy's dispatch as a boxed array operation, one per element; the code written
for floats (specialise/) instead writes it as it writes ``math.exp``: the primal and its
partials inline, one tape entry. The formula of each function here is the scalar rule's
text (rules/scalar.py) with numpy's functions in place of math's, so that:

- the primal is the user's own call (``np.exp(x)``, a numpy.float64, with numpy's
  warnings where math would raise), and the partials are the element-wise rule's own
  (rules/from_scalar.py reads the same text with the same functions);
- a division of the text is numpy's (``_np_div``: inf or nan where Python's raises), so
  that a singular point gives what the general path gives, not a ZeroDivisionError.

``np.fmod`` is left to the general path (its partial rounds a NaN at a zero divisor).
"""
from __future__ import annotations

import ast

import numpy as np

from ..registry import float_rule, formula
from .array import SAME_AS_MATH
from .from_scalar import NUMPY_FUNCTIONS


class _WithNumpy(ast.NodeTransformer):
    """A scalar rule's text with numpy's functions and numpy's division."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in NUMPY_FUNCTIONS and \
                node.func.id not in ("abs", "round"):
            node.func = ast.Attribute(ast.Name("np", ast.Load()),
                                      NUMPY_FUNCTIONS[node.func.id].__name__, ast.Load())
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Div):
            return ast.Call(ast.Name("_np_div", ast.Load()), [node.left, node.right], [])
        return node


def _with_numpy(text: str) -> str:
    return ast.unparse(_WithNumpy().visit(ast.parse(text, mode="eval")))


def _register(ufunc, partials: tuple) -> None:
    parameters = "x" if len(partials) == 1 else "x, y"
    float_rule(ufunc, f"numpy_{ufunc.__name__}", f"np.{ufunc.__name__}({parameters})",
               tuple(_with_numpy(p) for p in partials))


for _ufunc, _name in SAME_AS_MATH.items():
    if _ufunc is not np.fmod and formula(_name) is not None:
        _register(_ufunc, formula(_name)[1])
# numpy's own, which math has not (their element-wise rules: rules/array.py)
_register(np.square, ("2.0 * x",))
_register(np.reciprocal, ("-r * r",))
_register(np.negative, ("-1.0",))
_register(np.positive, ("1.0",))
for _ufunc in (np.maximum, np.fmax):  # (ties: the first argument's, as numpy's rule)
    _register(_ufunc, ("1.0 if x >= y else 0.0", "1.0 if x < y else 0.0"))
for _ufunc in (np.minimum, np.fmin):
    _register(_ufunc, ("1.0 if x <= y else 0.0", "1.0 if x > y else 0.0"))
if formula("cbrt") is None:  # (math has cbrt and exp2 from Python 3.11)
    _register(np.cbrt, ("_np_div(1.0, 3.0 * r * r)",))
    _register(np.exp2, ("r * LN2",))
