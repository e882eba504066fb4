"""Element-wise numpy partials derived from the scalar rules' text: one formula per
derivative.

A scalar rule (rules/scalar.py) gives its partials as text in ``x``, ``y`` and the result
``r``: ``tanh``'s is ``1.0 - r * r if -3.0 < x < 3.0 else _sech2(x)``. The numpy function
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
  truth values;
- a division is numpy's (inf or nan at a zero divisor, where Python raises);
- an arithmetic operation on a temporary of the formula (``1.0 - r * r``: ``r * r``)
  writes its result into that temporary when it is a large float64 array: the same
  operations, with one array allocated where the text has several (on arrays of a
  hundred thousand elements a new array costs more than the arithmetic).
"""
from __future__ import annotations

import ast
import linecache
import math
import operator

import numpy as np

from .. import registry
from ..runtime.tape import native
from .scalar_general import numpy_divide

# math's functions as numpy's, where a scalar rule's text calls them
NUMPY_FUNCTIONS = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "exp": np.exp,
    "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "cbrt": np.cbrt, "hypot": np.hypot, "copysign": np.copysign,
    "abs": np.abs, "fabs": np.fabs, "round": np.rint,  # (both round half to even)
}


def _inv(z, fresh=False):
    """1/z, and +inf where z == 0 (either sign), as rules/scalar_general._inv. ``fresh``:
    z is a temporary of the formula, which may take the result."""
    if np.ndim(z) == 0:
        return 1.0 / z if z else math.inf
    if type(z) is not np.ndarray:  # (a differentiated array: a derivative's derivative)
        with np.errstate(divide="ignore"):
            return np.true_divide(1.0, z)
    if z.all():  # no zero (the usual case): one division
        return np.true_divide(1.0, z, out=z if fresh and _reusable(z) else None)
    with np.errstate(divide="ignore"):
        out = np.true_divide(1.0, z)
    out[z == 0] = math.inf  # (1 / -0.0 is -inf)
    return out


def _sech2(x, fresh=False):
    """sech^2 x = 4 e / (1 + e)^2 with e = exp(-2|x|), as rules/scalar._sech2."""
    e = np.exp(-2.0 * np.abs(x))
    if type(e) is not np.ndarray:
        return 4.0 * e / ((1.0 + e) * (1.0 + e))
    one_plus = np.add(1.0, e)  # (the same operations, in two arrays)
    np.multiply(one_plus, one_plus, out=one_plus)
    np.multiply(4.0, e, out=e)
    return np.true_divide(e, one_plus, out=e)


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


_F64 = np.dtype(np.float64)
_OPERATORS = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
              np.true_divide: operator.truediv, np.negative: operator.neg}
_REUSE_SIZE = 4096  # (below, a new array costs less than these checks)


def _reusable(t) -> bool:
    return t.dtype == _F64 and t.flags.writeable


def _into(ufunc, a, b, fresh: int):
    """``a op b`` where operand ``fresh`` (0: a, 1: b) is a temporary of the formula: into
    it when it is a large float64 array the result fills exactly (same shape, a float64
    result), else a new value as the operator gives it."""
    t = b if fresh else a
    if type(t) is np.ndarray and _reusable(t):
        other = a if fresh else b
        kind = type(other)
        if kind is float or kind is int or (kind is np.ndarray and other.shape == t.shape
                                            and other.dtype.kind in "fiub"
                                            and other.dtype.itemsize <= 8):
            return ufunc(a, b, out=t)
    return _OPERATORS[ufunc](a, b)


def _and(a, b):
    """``a & b`` of two tests (a chained comparison's links), into ``a``'s array."""
    if type(a) is np.ndarray and a.dtype == bool and type(b) is np.ndarray and \
            b.shape == a.shape:
        return np.logical_and(a, b, out=a)
    return a & b


def _call_into(ufunc, fresh: int, *args):
    """``ufunc(*args)`` where argument ``fresh`` is a temporary of the formula: into it
    when it is a large float64 array the result fills exactly."""
    t = args[fresh]
    if type(t) is np.ndarray and _reusable(t) and all(
            type(a) is float or type(a) is int or a is t or (
                type(a) is np.ndarray and a.shape == t.shape and a.dtype.kind in "fiub"
                and a.dtype.itemsize <= 8) for a in args):
        return ufunc(*args, out=t)
    return _OPERATORS.get(ufunc, ufunc)(*args)


def _branch(test, values: tuple, then, otherwise):
    """``then(*values)`` where ``test(*values)`` holds, ``otherwise(*values)`` elsewhere
    (``a if c else b`` of a scalar rule's text, element by element). The first branch is
    computed on every element, with numpy's warnings off where the test does not hold
    everywhere (there it may overflow; its value there is replaced), the second on the
    elements where the test does not hold only. Differentiated values (a derivative of a
    derivative: the rules call this on them as it is) take ``np.where``, whose rule
    follows them."""
    doubles = all(type(v) is not np.ndarray or v.dtype == _F64 for v in values)
    if doubles:
        holds = test(*values)
    else:
        with np.errstate(all="ignore"):  # (1e150 as a float32 in a test overflows)
            holds = test(*values)
    if np.ndim(holds) == 0:
        return then(*values) if holds else otherwise(*values)
    if not all(type(v) in _PLAIN for v in values):
        with np.errstate(all="ignore"):
            out = then(*values)
        return np.where(holds, out, otherwise(*values))
    if doubles and holds.all():  # (the usual case: a warning would be the formula's own)
        return then(*values)
    with np.errstate(all="ignore"):
        out = then(*values)
    if type(holds) is np.ndarray and holds.dtype == bool and \
            not any(holds is v for v in values):
        rest = np.logical_not(holds, out=holds)  # (the test's own array)
    else:
        rest = ~holds
    if not rest.any():
        return out
    shape = holds.shape
    if type(out) is not np.ndarray or out.shape != shape or not out.flags.c_contiguous or \
            not out.flags.writeable or any(out is v for v in values):
        out = np.array(np.broadcast_to(out, shape), dtype=np.result_type(out, *values))
    where = np.flatnonzero(rest)  # (few, mostly: taken by position)
    out.reshape(-1)[where] = otherwise(*[_elements(v, shape, where) for v in values])
    return out


def _elements(value, shape, where):
    """The elements at flat positions ``where`` of ``value`` broadcast to ``shape``."""
    if type(value) is np.ndarray and value.shape == shape:
        return value.reshape(-1)[where]
    if np.ndim(value) == 0:
        return value
    return np.ravel(np.broadcast_to(value, shape))[where]


_NAMESPACE = {**NUMPY_FUNCTIONS, "_inv": _inv, "_np_div": numpy_divide, "_sign": np.sign,
              "_sech2": _sech2,
              "float": _float, "_branch": _branch, "_into": _into, "_call_into": _call_into,
              "_and": _and,
              "np": np,
              "LN2": math.log(2.0), "LN10": math.log(10.0), "DEG": 180.0 / math.pi,
              "RAD": math.pi / 180.0, "TWO_OVER_SQRTPI": 2.0 / math.sqrt(math.pi)}


class _ElementWise(ast.NodeTransformer):
    """A scalar rule's expression, rewritten to run element by element on arrays."""

    def __init__(self, parameters: str, reuse: bool):
        self.parameters = parameters
        self.reuse = reuse  # write into the formula's temporaries (large arrays)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        args = ast.parse(self.parameters, mode="eval").body
        args = args.elts if isinstance(args, ast.Tuple) else [args]
        branch = ast.parse(f"lambda {self.parameters}: 0", mode="eval").body
        test, then, otherwise = (ast.Lambda(args=branch.args, body=b) for b in
                                 (self._truth(node.test), node.body, node.orelse))
        return ast.Call(ast.Name("_branch", ast.Load()),
                        [test, ast.Tuple(args, ast.Load()), then, otherwise], [])

    def visit_BinOp(self, node):
        """An operation on a temporary (the result of an operation or of a function of
        numpy) may write into it (``_into``)."""
        self.generic_visit(node)
        if not self.reuse:
            if isinstance(node.op, ast.Div):  # (numpy's division: inf at a float 0)
                return ast.Call(ast.Name("_np_div", ast.Load()), [node.left, node.right], [])
            return node
        ufunc = _UFUNC_OF.get(type(node.op))
        fresh = [k for k, side in enumerate((node.left, node.right)) if _is_temporary(side)]
        if ufunc is None or not fresh:
            return node
        return ast.Call(ast.Name("_into", ast.Load()),
                        [ast.Attribute(ast.Name("np", ast.Load()), ufunc, ast.Load()),
                         node.left, node.right, ast.Constant(fresh[0])], [])

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if self.reuse and isinstance(node.op, ast.USub) and _is_temporary(node.operand):
            return self._call_into("negative", 0, [node.operand])
        return node

    def visit_Call(self, node):
        """A helper or a numpy function given a temporary may write its result into it."""
        self.generic_visit(node)
        if not self.reuse or not isinstance(node.func, ast.Name) or node.keywords:
            return node
        fresh = [k for k, a in enumerate(node.args) if _is_temporary(a)]
        if node.func.id in ("_inv", "_sech2") and fresh:
            node.keywords.append(ast.keyword("fresh", ast.Constant(True)))
        elif isinstance(NUMPY_FUNCTIONS.get(node.func.id), np.ufunc) and fresh:
            return self._call_into(NUMPY_FUNCTIONS[node.func.id].__name__, fresh[0], node.args)
        return node

    @staticmethod
    def _call_into(ufunc: str, fresh: int, args):
        return ast.Call(ast.Name("_call_into", ast.Load()),
                        [ast.Attribute(ast.Name("np", ast.Load()), ufunc, ast.Load()),
                         ast.Constant(fresh), *args], [])

    def visit_Compare(self, node):
        self.generic_visit(node)
        bound = _symmetric_bound(node)
        if bound is not None:  # -c < x < c: abs(x) < c, one comparison (nan: False too)
            return ast.Compare(ast.Call(ast.Name("abs", ast.Load()), [node.comparators[0]], []),
                               [node.ops[1]], [bound])
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
            out = ast.Call(ast.Name("_and", ast.Load()), [out, link], [])
        return out

    @staticmethod
    def _truth(node):
        """A test as a truth value of each element (``x or y``: x != 0 | y != 0)."""
        if isinstance(node, (ast.Compare, ast.BinOp)) and (
                not isinstance(node, ast.BinOp) or isinstance(node.op, (ast.BitAnd,
                                                                        ast.BitOr))):
            return node
        return ast.Compare(node, [ast.NotEq()], [ast.Constant(0.0)])


_UFUNC_OF = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "true_divide"}


def _constant(node):
    """The number a constant (or a negated one) of the text stands for, or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _symmetric_bound(node):
    """``c`` of a test ``-c < x < c`` (or with ``<=`` twice), c > 0; else None."""
    if len(node.ops) != 2 or type(node.ops[0]) is not type(node.ops[1]) or \
            not isinstance(node.ops[0], (ast.Lt, ast.LtE)):
        return None
    low, high = _constant(node.left), _constant(node.comparators[1])
    if low is None or high is None or high <= 0 or low != -high:
        return None
    return node.comparators[1]


def _is_temporary(node) -> bool:
    """Is ``node``'s value a new array of the formula's own (no one else holds it)?"""
    if isinstance(node, ast.BinOp):
        return type(node.op) in _UFUNC_OF
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in NUMPY_FUNCTIONS or node.func.id in ("_into", "_call_into", "_inv",
                                                              "_sech2", "_sign")
    return False


def partial_function(name: str, text: str, parameters: str):
    """The partial given as ``text`` (in ``parameters`` and ``r``) of the scalar rule
    ``name``, element by element: ``f(*args, r)`` on arrays (and numbers). Its text is
    readable (linecache), so that astad differentiates it again."""
    names = parameters + ", r"
    plain, reusing = (ast.unparse(_ElementWise(names, reuse).visit(ast.parse(text, mode="eval")))
                      for reuse in (False, True))
    source = f"def {name}_partial({names}):\n    # {text}\n"
    if reusing != plain:
        source += (f"    if type(r) is np.ndarray and r.size >= {_REUSE_SIZE}:\n"
                   f"        return {reusing}\n")
    source += f"    return {plain}\n"
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
