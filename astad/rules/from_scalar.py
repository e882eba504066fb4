"""Element-wise numpy partials derived from the scalar rules' text: one formula per
derivative.

A scalar rule (rules/scalar.py) gives its partials as text in ``x``, ``y`` and the result
``r``: ``tanh``'s is ``1.0 - r * r if -0.5 < x < 0.5 else _sech2(x)``. The numpy function
that computes the same thing element by element (``np.tanh``) gets its partial from that
text, read with numpy's functions: the same operations in the same order on each
element, so ``grad(math.tanh)`` and ``grad(np.tanh)`` differ only where numpy's own
elementary functions (its ``tanh`` for the primal, its ``exp``) round differently from
the C library's. The translation:

- ``math``'s functions are numpy's (``atan`` is ``np.arctan``), the helpers ``_inv``,
  ``_sign`` and ``_sech2`` their element-wise forms, the constants (``LN2``) their values;
- ``a if c else b`` computes ``a`` where ``c`` holds and ``b`` elsewhere, each on its
  own elements only (no warning or overflow from the branch not taken);
- a chained comparison is the ``&`` of its links, ``and``/``or`` are ``&``/``|`` of
  truth values.
"""
from __future__ import annotations

import ast
import linecache
import math

import numpy as np

from .. import registry
from ..runtime.tape import native

# math's functions as numpy's, where a scalar rule's text calls them
_FUNCTIONS = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "exp": np.exp,
    "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "cbrt": np.cbrt, "hypot": np.hypot, "copysign": np.copysign,
    "abs": np.abs, "fabs": np.fabs, "round": np.round,
}


def _inv(z):
    """1/z, and +inf where z == 0 (either sign), as rules/scalar_general._inv."""
    if np.ndim(z) == 0:
        return 1.0 / z if z else math.inf
    with np.errstate(divide="ignore"):
        out = np.true_divide(1.0, z)
    if type(out) is np.ndarray and not all_finite(out):  # (1 / -0.0 is -inf)
        out[z == 0] = math.inf
    return out


def _sign(x):
    """1, -1, or 0 (at 0 and at nan), as rules/scalar_general._sign."""
    return (x > 0.0) * 1.0 - (x < 0.0) * 1.0


def _sech2(x):
    """sech^2 x = 4 e / (1 + e)^2 with e = exp(-2|x|), as rules/scalar._sech2."""
    e = np.exp(-2.0 * np.abs(x))
    return 4.0 * e / ((1.0 + e) * (1.0 + e))


def _float(x):
    """float(x) of the text: an array stays an array of floats (its values, here
    piecewise-constant ones, as they are)."""
    if type(x) is np.ndarray:
        return x.astype(float, copy=False)
    return float(x) if type(x) in _PLAIN else x


def all_finite(array) -> bool:
    found = native.all_finite(array) if native is not None else None
    return bool(np.isfinite(array).all()) if found is None else found


_PLAIN = frozenset({np.ndarray, float, int, np.float64, np.float32, np.float16})


def _branch(test, values: tuple, then, otherwise):
    """``then(*values)`` where ``test(*values)`` holds, ``otherwise(*values)`` elsewhere
    (``a if c else b`` of a scalar rule's text, element by element). The first branch is
    computed on every element, with numpy's warnings off (where the test does not hold
    it may overflow; its value there is replaced), the second on the elements where the
    test does not hold only. Differentiated values (a derivative of a derivative: the
    rules call this on them as it is) take ``np.where``, whose rule follows them."""
    with np.errstate(all="ignore"):  # (1e150 as a float32 in a test overflows)
        holds = test(*values)
        if np.ndim(holds) == 0:
            scalar = True
        else:
            scalar = False
            out = then(*values)
            if not all(type(v) in _PLAIN for v in values):
                return np.where(holds, out, otherwise(*values))
    if scalar:
        return then(*values) if holds else otherwise(*values)
    rest = ~holds
    if not rest.any():
        return out
    shape = holds.shape
    if type(out) is not np.ndarray or out.shape != shape or not out.flags.c_contiguous or \
            not out.flags.writeable or any(out is v for v in values):
        out = np.array(np.broadcast_to(out, shape), dtype=np.result_type(out, *values))
    where = np.flatnonzero(rest)  # (few, mostly: taken by position)
    out.reshape(-1)[where] = otherwise(*[np.ravel(np.broadcast_to(v, shape))[where]
                                         for v in values])
    return out


_NAMESPACE = {**_FUNCTIONS, "_inv": _inv, "_sign": _sign, "_sech2": _sech2,
              "float": _float, "_branch": _branch, "np": np,
              "LN2": math.log(2.0), "LN10": math.log(10.0), "DEG": 180.0 / math.pi,
              "RAD": math.pi / 180.0, "TWO_OVER_SQRTPI": 2.0 / math.sqrt(math.pi)}


class _ElementWise(ast.NodeTransformer):
    """A scalar rule's expression, rewritten to run element by element on arrays."""

    def __init__(self, parameters: str):
        self.parameters = parameters

    def visit_IfExp(self, node):
        self.generic_visit(node)
        args = ast.parse(self.parameters, mode="eval").body
        args = args.elts if isinstance(args, ast.Tuple) else [args]
        branch = ast.parse(f"lambda {self.parameters}: 0", mode="eval").body
        test, then, otherwise = (ast.Lambda(args=branch.args, body=b) for b in
                                 (self._truth(node.test), node.body, node.orelse))
        return ast.Call(ast.Name("_branch", ast.Load()),
                        [test, ast.Tuple(args, ast.Load()), then, otherwise], [])

    def visit_Compare(self, node):
        self.generic_visit(node)
        links, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            links.append(ast.Compare(left, [op], [right]))
            left = right
        return self._all(links)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        op = ast.BitAnd() if isinstance(node.op, ast.And) else ast.BitOr()
        values = [self._truth(v) for v in node.values]
        out = values[0]
        for v in values[1:]:
            out = ast.BinOp(out, op, v)
        return out

    @staticmethod
    def _all(links):
        out = links[0]
        for link in links[1:]:
            out = ast.BinOp(out, ast.BitAnd(), link)
        return out

    @staticmethod
    def _truth(node):
        """A test as a truth value of each element (``x or y``: x != 0 | y != 0)."""
        if isinstance(node, (ast.Compare, ast.BinOp)) and (
                not isinstance(node, ast.BinOp) or isinstance(node.op, (ast.BitAnd,
                                                                        ast.BitOr))):
            return node
        return ast.Compare(node, [ast.NotEq()], [ast.Constant(0.0)])


def partial_function(name: str, text: str, parameters: str):
    """The partial given as ``text`` (in ``parameters`` and ``r``) of the scalar rule
    ``name``, element by element: ``f(*args, r)`` on arrays (and numbers). Its text is
    readable (linecache), so that astad differentiates it again."""
    names = parameters + ", r"
    tree = ast.parse(text, mode="eval")
    tree = ast.fix_missing_locations(_ElementWise(names).visit(tree))
    source = (f"def {name}_partial({names}):\n"
              f"    # {text}\n"
              f"    return {ast.unparse(tree.body)}\n")
    filename = f"<astad element-wise partial of {name}: {text}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(_NAMESPACE)
    exec(compile(source, filename, "exec"), namespace)  # astad's own rule text
    function = namespace[f"{name}_partial"]
    function.text = text
    return function


def partials_of(name: str) -> tuple:
    """The element-wise partials of the scalar rule ``name``, from its text."""
    found = registry.named(name)
    if found is None or found.formula is None:
        raise KeyError(f"no scalar rule {name!r} given as text")
    _, partials, parameters = found.formula
    return tuple(partial_function(name, text, parameters) for text in partials)
