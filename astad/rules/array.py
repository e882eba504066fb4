"""The derivative rules of numpy functions, registered with the same two functions users
call (``register_elementwise`` and ``register_vjp`` in the style of autograd's defvjp).

- element-wise functions give their partial derivatives as arrays (``np.cos(x)`` for
  ``np.sin``); broadcasting is undone in the backward step;
- every other function gives one vector-Jacobian product per differentiable argument:
  ``vjp(g, result, *args, **kwargs)`` returns the cotangent of that argument, given the
  cotangent ``g`` of the result (args are primal values).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from math import isfinite
from typing import Any, TypeVar

import numpy as np

from . import scalar  # noqa: F401  (the scalar rules, whose text SAME_AS_MATH reads)
from ..registry import RECORDS, publish, record, renew, unique_name
from ..registry import named as registry_named
from .from_scalar import partials_of
from ..runtime.array_dual import (PLAIN_OPERANDS, PLAIN_SCALARS, ArrayDual, made_array,
                                  accumulate, add_check, cotangent, dispatch, index_of,
                                  is_active, new_array, new_scalar, parent_of, primal_of,
                                  unbroadcast)
from ..runtime.array_rows import (accumulate_rows, add_rows, rows_accept, rows_cotangent,
                                  unbroadcast_rows)
from ..runtime.duals import DUAL_TYPES, reverse_dual, running
from ..runtime.tape import BATCHED_BACKWARDS, native
from ..errors import NotDifferentiableError, api_boundary, user_location
from .refusals import (complex_result, not_differentiable, refuse_arguments,  # noqa: F401
                       require)  # (rules import them from here too)
from ..registry import ad as _ad


# -- the two ways to give a rule ----------------------------------------------------------
def quietly(op, *args):
    """``op(*args)`` as numpy computes it under its default error state, whatever the
    user's ``np.errstate``: a derivative's own arithmetic (a partial's inf * 0 where the
    primal is finite) raises nowhere the original does not. Free unless it raises."""
    try:
        return op(*args)
    except FloatingPointError:
        with np.errstate(all="ignore"):
            return op(*args)


class NonFinite:
    """A partial holding inf or nan (sqrt at 0, log of a negative number): where the
    cotangent is 0 the contribution is 0, not 0 * inf = nan, as the scalar sweep skips a
    zero adjoint (``np.where(x > 0, np.sqrt(x), 0.0)`` has gradient 0 at x <= 0)."""

    __slots__ = ("partial",)

    def __init__(self, partial):
        self.partial = partial


_compiled_all_finite = None if native is None else native.all_finite


def all_finite(array: np.ndarray) -> bool:
    """No inf or nan in ``array``? (False may also mean a sum too large for a float: then
    the partial is only treated with the care a non-finite one gets.) The compiled
    runtime reads a contiguous float array itself (``native.all_finite``)."""
    if _compiled_all_finite is not None:
        found = _compiled_all_finite(array)
        if found is not None:
            return found
    if array.size <= 16 and array.dtype.kind == "f":
        # a few elements: Python floats are ~4x quicker than one numpy reduction
        return all(map(isfinite, array.ravel().tolist()))
    return bool(np.isfinite(array.sum()))  # (one pass, reading: an inf or nan makes it so)


def recorder(result):
    """How a rule records ``result``: ``new_array`` for an array, ``new_scalar`` for a
    0-d array or a numpy scalar (a scalar dual, as numpy gives a scalar)."""
    t = type(result)
    if t is np.ndarray:
        return new_array if result.ndim else new_scalar
    if t is np.float64 or t is float:  # (a reduction's scalar: no np.ndim call)
        return new_scalar
    return new_array if np.ndim(result) else new_scalar


def _elementwise_backward(adjoint, arrays, k, parents, partials):
    g = cotangent(adjoint, arrays, k)
    # popped from ``arrays``: nobody else holds it, unless a partial is a dual of an
    # enclosing level, whose tape then keeps g (g * partial records g as a constant):
    # writing into g would change what that level differentiates
    owned = type(g) is np.ndarray and not any(
        type(p) in DUAL_TYPES or (type(p) is NonFinite and type(p.partial) in DUAL_TYPES)
        for p in partials)
    last = len(parents) - 1
    for position, (parent, partial) in enumerate(zip(parents, partials)):
        reuse = owned and position == last  # g is not needed after this: use its buffer
        if type(partial) is NonFinite:
            if type(g) in DUAL_TYPES:  # (a derivative of a derivative: no in-place write)
                value, fresh = np.where(g == 0, 0.0, g * partial.partial), True
            else:
                with np.errstate(invalid="ignore"):  # (0 * inf: set to 0 just below)
                    value, fresh = np.multiply(g, partial.partial), True
                if type(value) is np.ndarray:
                    np.copyto(value, 0.0, where=np.asarray(g) == 0)
                elif g == 0:  # (a 0-d product is a numpy scalar)
                    value = type(value)(0.0)
        elif type(partial) is float:
            if partial == 1.0:
                value, fresh = g, reuse
            else:
                value, fresh = (np.multiply(g, partial, out=g) if reuse else g * partial), True
        elif reuse and type(partial) is np.ndarray and partial.shape == g.shape and \
                partial.dtype == g.dtype:
            value, fresh = np.multiply(g, partial, out=g), True
        else:
            value, fresh = g * partial, True
        reduced = unbroadcast(value, parent[1])
        accumulate(adjoint, arrays, parent, reduced, fresh or reduced is not value)


def _elementwise_rows(adjoint, arrays, k, parents, partials, width) -> bool:
    """_elementwise_backward on all rows of a Jacobian at once (tape.BATCHED_BACKWARDS):
    each partial multiplies every row; False for duals (derivatives of derivatives)."""
    g = rows_cotangent(adjoint, arrays, k, width)
    if g is None or not rows_accept(arrays, parents, width) or \
            any(type(p) in DUAL_TYPES for p in partials):
        return False
    arrays.pop(k, None)
    for parent, partial in zip(parents, partials):
        if type(partial) is NonFinite:  # (a zero cotangent passes nothing on)
            with np.errstate(invalid="ignore"):
                value = np.multiply(g, partial.partial)
            np.copyto(value, 0.0, where=g == 0)
        elif type(partial) is float and partial == 1.0:
            value = g
        else:
            value = g * partial
        reduced = unbroadcast_rows(value, parent[1], width)
        accumulate_rows(adjoint, arrays, parent, reduced, width,
                        fresh=value is not g or reduced is not value)
    return True


BATCHED_BACKWARDS[_elementwise_backward] = _elementwise_rows

F = TypeVar("F", bound=Callable[..., Any])


@api_boundary
def register_elementwise(fn: F, *partials: Callable[..., Any], complex: bool = False) -> F:
    """Register an element-wise function by its partial derivatives.

    ``partials[k](*args, result)`` gives d result / d args[k] element by element (for
    arrays or floats). Broadcasting between arguments is handled. ``complex=True`` says
    the partials hold for complex values too (a holomorphic function's derivative:
    docs/complex.md); without it a complex value reaching ``fn`` is refused.
    """
    found = renew(fn)
    found.refusals = None  # (what astad said of its arguments: a new rule says its own)
    found.complex = True if complex else None
    n_partials = len(partials)
    check_finite = not found.finite
    first = partials[0] if partials else None
    second = partials[1] if n_partials > 1 else None

    def checked(partial):
        if check_finite and type(partial) is np.ndarray and not all_finite(partial):
            return NonFinite(partial)
        return partial

    def rule(tape, *args, **kwargs):
        # one or two operands, arrays of this tape or plain values (np.sin(x), x * 0.5,
        # x + y), the commonest calls: the loop further down written out for them
        if len(args) == 1 and not kwargs and first is not None:
            a = args[0]
            if type(a) is ArrayDual and a.t is tape and type(a.v) is np.ndarray:
                x = a.v
                result = fn(x)
                if type(result) is np.ndarray and result.ndim:
                    parent = (index_of(a), x.shape, x.dtype)
                    try:  # (quietly, without its call where nothing raises)
                        partial = checked(first(x, result))
                    except FloatingPointError:
                        partial = checked(quietly(first, x, result))
                    d = ArrayDual(result, len(tape), tape)
                    tape.append((_elementwise_backward, (parent,), (partial,)))
                    return d
        elif len(args) == 2 and not kwargs and second is not None and first is not None:
            a, b = args
            active_a = type(a) is ArrayDual and a.t is tape and type(a.v) is np.ndarray
            active_b = type(b) is ArrayDual and b.t is tape and type(b.v) is np.ndarray
            if (active_a or type(a) in PLAIN_OPERANDS) and (
                    active_b or type(b) in PLAIN_OPERANDS) and (active_a or active_b):
                x = a.v if active_a else a
                y = b.v if active_b else b
                result = fn(x, y)
                if type(result) is np.ndarray and result.ndim:
                    parents, local = (), ()
                    try:  # (quietly, without its call where nothing raises)
                        if active_a:
                            local += (checked(first(x, y, result)),)
                        if active_b:
                            local += (checked(second(x, y, result)),)
                    except FloatingPointError:
                        local = tuple(checked(quietly(p, x, y, result)) for p, active in
                                      ((first, active_a), (second, active_b)) if active)
                    if active_a:
                        parents += ((index_of(a), x.shape, x.dtype),)
                    if active_b:
                        parents += ((index_of(b), y.shape, y.dtype),)
                    d = ArrayDual(result, len(tape), tape)
                    tape.append((_elementwise_backward, parents, local))
                    return d
        # (primal_of, is_active and parent_of written out: this runs once per operation)
        values = [a.v if type(a) in DUAL_TYPES and a.t is tape else a for a in args]
        result = fn(*values, **kwargs)
        parents, local = [], []
        scalars_only = True
        for k, a in enumerate(args):
            if type(a) in DUAL_TYPES and a.t is tape:
                if k >= n_partials or partials[k] is None:
                    require(fn, partials, k)
                if type(a) is ArrayDual:
                    scalars_only = False
                    parents.append((index_of(a), a.v.shape, a.v.dtype))
                else:
                    parents.append((a.i, None, None))
                local.append(checked(quietly(partials[k], *values, result)))
        if scalars_only and type(result) in PLAIN_SCALARS and all(
                type(p) in PLAIN_SCALARS for p in local):
            # scalars only: an ordinary scalar entry (fast sweep path)
            entry = []
            for parent, partial in zip(parents, local):
                entry += (parent[0], float(partial))
            if not entry:
                return result
            d = reverse_dual(result, len(tape), tape)  # (numpy's float64, as numpy gives)
            tape.append(tuple(entry))
            return d
        # numpy gives a scalar for 0-d operands: a scalar dual then, as numpy would
        return recorder(result)(tape, result, _elementwise_backward, tuple(parents),
                                tuple(local))
    found.partials, found.array = partials, rule  # (forward mode reads the partials)
    return fn


# What astad's own vjps return, so the sweep can keep it instead of copying it:
# NEW_ARRAYS, arrays made by the vjp alone; VIEWS_OF_G, views of the cotangent g (of a
# function with one differentiable argument). A user's vjp may return anything: copied.
# (A record's ``result_kind``.) A function whose vjps read only the shapes and dtypes of
# the arguments (sum, reshape: its record's ``shapes_only``) keeps placeholders on the
# tape, not the arrays (which may be large temporaries).
NEW_ARRAYS, VIEWS_OF_G = "new arrays", "views of g"


_ZERO_BYTES = bytes(16)  # one element of any float dtype, read-only


def _placeholder(value):
    """An array with ``value``'s shape and dtype that holds no memory (zero strides over
    one zero element)."""
    if type(value) is np.ndarray and value.dtype.kind == "f" and value.dtype.itemsize <= 16:
        return np.ndarray(value.shape, value.dtype, _ZERO_BYTES, 0, (0,) * value.ndim)
    return value


def vjp_backward(adjoint, arrays, k, parents, context):
    vjps, result, values, kwargs, kind = context
    g = cotangent(adjoint, arrays, k)
    fresh = kind is NEW_ARRAYS or (kind is VIEWS_OF_G and type(g) is np.ndarray)
    for position, parent in parents:
        accumulate(adjoint, arrays, parent, vjps[position](g, result, *values, **kwargs),
                   fresh)


def batched_vjp_backward(adjoint, arrays, k, parents, context):
    """vjp_backward, for a function whose vjps are batched (the entry's backward says
    so)."""
    vjp_backward(adjoint, arrays, k, parents, context)


def _vjp_rows(adjoint, arrays, k, parents, context, width) -> bool:
    """The vjps on all rows of a Jacobian at once (batched vjps take leading axes)."""
    vjps, result, values, kwargs, kind = context
    if _holds_dual(values, result):  # (a derivative of a derivative)
        return False
    return add_rows(adjoint, arrays, k, parents, width, lambda g: {
        position: vjps[position](g, result, *values, **kwargs) for position, _ in parents},
        fresh=kind is NEW_ARRAYS)


def _vjp_each_row(adjoint, arrays, k, parents, context, width) -> bool:
    """vjp_backward on all rows, for vjps written for one cotangent (a user's own): each
    vjp is called once per row, its results stacked into one array of rows (what
    accumulate makes of one: summed for a scalar, broadcast to an array's shape)."""
    vjps, result, values, kwargs, _ = context
    if _holds_dual(values, result):
        return False

    def parts(g):
        out = {}
        for position, (_, shape, dtype) in parents:
            rows = [vjps[position](g[j], result, *values, **kwargs) for j in range(width)]
            if any(type(row) not in PLAIN_OPERANDS for row in rows):
                return {}  # (a dual, a list: once per row, through the sweep)
            out[position] = np.array([np.sum(row) for row in rows]) if shape is None else \
                np.array([np.broadcast_to(row, shape) for row in rows], dtype=dtype)
        return out
    return add_rows(adjoint, arrays, k, parents, width, parts, fresh=True)


def _holds_dual(values, result) -> bool:
    return type(result) in DUAL_TYPES or any(type(v) in DUAL_TYPES for v in values)


BATCHED_BACKWARDS[vjp_backward] = _vjp_each_row
BATCHED_BACKWARDS[batched_vjp_backward] = _vjp_rows


@api_boundary
def register_vjp(fn: F, *vjps: Callable[..., Any] | None, complex: bool = False) -> F:
    """Register ``fn`` by one vector-Jacobian product per argument (None where the
    argument is not differentiable): ``vjps[k](g, result, *args, **kwargs)``.

    ``fn`` may be a numpy function (numpy's dispatch finds the rule) or the user's own
    Python function (differentiated code then calls the rule instead of transforming it).
    ``complex=True`` says the vjps hold for complex values, with JAX's convention
    (docs/complex.md: ``g`` pairs with a change ``dr`` of the result as
    ``Re(sum(g * dr))``); without it a complex value reaching ``fn`` is refused.
    """
    found = renew(fn)
    found.complex = True if complex else None
    found.result_kind = None  # (astad's own rules say what their vjps return and need)
    found.shapes_only = False
    found.refusals = None
    found.vjps = tuple(vjps)  # (the catalogue, and vjps differentiated again)
    # numpy dispatches values of enclosing levels itself; a Python function is called
    # through its rule at their level (the value of a derivative's derivative)
    through_rule = not is_numpy(fn)

    def rule(tape, *args, **kwargs):
        values = [primal_of(a, tape) for a in args]
        parents = []
        for k, a in enumerate(args):
            if is_active(a, tape):
                require(fn, vjps, k)  # (before the call: refused, whatever fn says of it)
                parents.append((k, parent_of(a)))
            elif isinstance(a, (list, tuple)) and any(is_active(x, tape) for x in a):
                raise NotDifferentiableError(
                    f"{getattr(fn, '__name__', fn)!r}: pass differentiated values to it as "
                    "arrays, not inside a list", *user_location())
        result = call_at_enclosing_levels(fn, values, kwargs, through_rule)
        record = recorder(result)
        kind = getattr(getattr(result, "dtype", None), "kind", "f")
        if not parents or kind in "biu":  # (np.sum(x, dtype=int): integers, no derivative)
            return result
        now = RECORDS.get(fn) or found  # (what astad said of its vjps after this)
        if kind == "c" and now.complex is not True:  # (scipy.linalg.sqrtm of a matrix
            raise complex_result(fn)                 # with a negative eigenvalue)
        backward = batched_vjp_backward if now.batched_vjps else vjp_backward
        if now.shapes_only:
            return record(tape, result, backward, tuple(parents),
                          (vjps, None, [_placeholder(v) for v in values], kwargs,
                           now.result_kind))
        return record(tape, result, backward, tuple(parents),
                      (vjps, result, values, kwargs, now.result_kind))
    found.array = rule
    if not is_numpy(fn):  # a Python function: calls reach it as a primitive (calls.rev),
        # at the level of its arguments, as numpy's dispatch would take it
        name = unique_name("vjp_", fn)
        publish(name, lambda tape, *args, **kwargs: dispatch(fn, args, kwargs))
        found.name, found.call = name, getattr(_ad, name)
        found.formula = found.general = None
    return fn


# Forward mode (astad/forward) reads the same records: a function registered with
# register_vjp gives its jvps with register_jvp; an element-wise function registered by
# its partials needs nothing more (its jvp is the sum of partial * tangent). Rules whose
# vjps (jvps) accept a cotangent (tangent) with extra leading axes, one per direction,
# and give a result with the same leading axes (a Jacobian's rows, or columns, in one
# call) say so (``batched_vjps``, ``batched_jvps``); any other is called once per
# direction.


@api_boundary
def register_jvp(fn: F, *jvps: Callable[..., Any] | None, batched: bool = False) -> F:
    """Register ``fn``'s forward-mode rule: one Jacobian-vector product per argument (None
    where the argument is not differentiable), ``jvps[k](t, result, *args, **kwargs)``,
    the tangent of the result caused by tangent ``t`` of argument ``k`` (shaped like that
    argument). The result's tangent is the sum over the differentiated arguments.

    ``batched=True`` says every jvp also accepts ``t`` with extra leading axes (several
    directions at once) and gives a tangent with the same leading axes.
    Like vjps, jvps must compute with numpy functions astad differentiates (no
    ``np.asarray`` of their inputs, no ``out=``), so that derivatives of derivatives work.
    """
    found = renew(fn)
    found.jvps = tuple(jvps)
    found.batched_jvps = bool(batched)
    return fn


def batched_vjps(*fns) -> None:
    """Astad's own vjps of ``fns`` take cotangents with leading axes (every row of a
    Jacobian at once)."""
    for fn in fns:
        record(fn).batched_vjps = True


def result_kinds(kind, *fns) -> None:
    """What astad's own vjps of ``fns`` return (``NEW_ARRAYS``, ``VIEWS_OF_G``)."""
    for fn in fns:
        record(fn).result_kind = kind


def shapes_only(*fns) -> None:
    """Astad's own vjps of ``fns`` read only the shapes and dtypes of the arguments."""
    for fn in fns:
        record(fn).shapes_only = True


def set_vjps(fn, *vjps) -> None:
    """The vjps of a function whose array rule is written by hand (its rule records them
    itself: the catalogue, forward mode's transposes and derivatives of derivatives read
    them)."""
    record(fn).vjps = tuple(vjps)


def set_rule(fn, rule) -> None:
    """The array rule of ``fn`` written by hand: what numpy's dispatch calls."""
    record(fn).array = rule


def call_at_enclosing_levels(fn, values, kwargs, through_rule: bool):
    """``fn(*values, **kwargs)``, where ``values`` may hold duals of enclosing levels:
    numpy dispatches them itself; a Python function (``through_rule``, one registered with
    register_vjp: scipy.linalg.expm, the user's own) is called through its rule at their
    level, not with them."""
    if through_rule and any(type(v) in DUAL_TYPES for v in values):
        return dispatch(fn, values, kwargs)
    return fn(*values, **kwargs)


def is_numpy(fn) -> bool:
    return type(fn) is np.ufunc or isinstance(fn, tuple) or (  # (a tuple: a ufunc method)
        getattr(fn, "__module__", None) or "").startswith("numpy")


# -- element-wise functions ---------------------------------------------------------------
def finite_partials(*fns) -> None:
    """The partials of ``fns`` are finite wherever their arguments are: no check for inf
    and nan. Every other element-wise rule (log, sqrt, division, the user's own) is
    checked."""
    for fn in fns:
        record(fn).finite = True


finite_partials(np.add, np.subtract, np.multiply, np.negative, np.positive, np.absolute,
                np.exp, np.expm1, np.exp2, np.square, np.sin, np.cos, np.arctan, np.sinh,
                np.cosh, np.tanh, np.maximum, np.minimum, np.fmax, np.fmin, np.where,
                np.logaddexp, np.logaddexp2, np.fabs, np.degrees, np.radians, np.deg2rad,
                np.rad2deg, np.arcsinh, np.copysign)


# Partials written so that they neither overflow, underflow nor cancel where the function
# is fine (as the scalar rules: rules/scalar.py, tests/test_rule_edges.py).
def _inverse(y):
    """1 / y as numpy gives it: inf at 0 (with numpy's warning), where Python raises."""
    if (type(y) is float or type(y) is int) and y != 0:
        return 1.0 / y
    return np.true_divide(1.0, y)


def _power_dx(x, y):
    """y x^(y-1), and 0 where y == 0 (x ** 0 is 1 everywhere, also at x == 0)."""
    if type(y) is int or type(y) is float:  # a constant power: fewer operations to record
        if y == 0 or y == 1:          # when x is a dual of an enclosing differentiation
            return float(y)
        if y == 2:
            return 2.0 * x
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.equal(y, 0), 0.0, y * np.power(x, y - 1.0))


register_elementwise(np.add, lambda x, y, r: 1.0, lambda x, y, r: 1.0)
register_elementwise(np.subtract, lambda x, y, r: 1.0, lambda x, y, r: -1.0)
register_elementwise(np.multiply, lambda x, y, r: y, lambda x, y, r: x)
register_elementwise(np.true_divide, lambda x, y, r: _inverse(y), lambda x, y, r: -r / y)
register_elementwise(np.power, lambda x, y, r: _power_dx(x, y),
                     lambda x, y, r: np.where(r != 0, r * np.log(np.where(x > 0, x, 1.0)), 0.0))
register_elementwise(np.negative, lambda x, r: -1.0)
register_elementwise(np.positive, lambda x, r: 1.0)
register_elementwise(np.square, lambda x, r: 2.0 * x)
register_elementwise(np.reciprocal, lambda x, r: -r * r)
register_elementwise(np.logaddexp, lambda x, y, r: np.exp(x - r), lambda x, y, r: np.exp(y - r))
register_elementwise(np.logaddexp2, lambda x, y, r: np.exp2(x - r),
                     lambda x, y, r: np.exp2(y - r))
# x % y == x - y * floor(x / y)
register_elementwise(np.remainder, lambda x, y, r: 1.0, lambda x, y, r: -np.floor_divide(x, y))
# ties: the first argument takes the gradient, as numpy returns it
register_elementwise(np.maximum, lambda x, y, r: (x >= y) * 1.0, lambda x, y, r: (x < y) * 1.0)
register_elementwise(np.minimum, lambda x, y, r: (x <= y) * 1.0, lambda x, y, r: (x > y) * 1.0)
register_elementwise(np.fmax, lambda x, y, r: (x >= y) * 1.0, lambda x, y, r: (x < y) * 1.0)
register_elementwise(np.fmin, lambda x, y, r: (x <= y) * 1.0, lambda x, y, r: (x > y) * 1.0)

# The functions of ``math`` numpy computes element by element: their partials are the
# scalar rules' own text, read element-wise (rules/from_scalar.py), so that both modes
# and both kinds of argument differentiate them by one formula.
SAME_AS_MATH = {
    np.absolute: "abs", np.fabs: "fabs", np.sin: "sin", np.cos: "cos", np.tan: "tan",
    np.arcsin: "asin", np.arccos: "acos", np.arctan: "atan", np.sinh: "sinh",
    np.cosh: "cosh", np.tanh: "tanh", np.arcsinh: "asinh", np.arccosh: "acosh",
    np.arctanh: "atanh", np.exp: "exp", np.expm1: "expm1", np.log: "log1",
    np.log1p: "log1p", np.log2: "log2", np.log10: "log10", np.sqrt: "sqrt", np.cbrt: "cbrt",
    np.exp2: "exp2", np.degrees: "degrees", np.rad2deg: "degrees", np.radians: "radians",
    np.deg2rad: "radians", np.arctan2: "atan2", np.hypot: "hypot2",
    np.copysign: "copysign", np.fmod: "fmod"}
for _ufunc, _name in SAME_AS_MATH.items():
    if registry_named(_name) is not None:  # (cbrt and exp2: math has them from 3.11)
        register_elementwise(_ufunc, *partials_of(_name))
if registry_named("cbrt") is None:
    register_elementwise(np.cbrt, lambda x, r: 1.0 / (3.0 * r * r))
    register_elementwise(np.exp2, lambda x, r: r * np.log(2.0))
register_elementwise(np.where, None, lambda c, x, y, r: np.asarray(c, dtype=bool) * 1.0,
                     lambda c, x, y, r: (~np.asarray(c, dtype=bool)) * 1.0)


def refuse_keywords(fn, keywords, why):
    """Refuse (when called, in every mode) keyword arguments ``fn``'s rules do not follow."""
    def check(args, kwargs):
        for name in keywords:
            if kwargs.get(name) is not None:
                raise NotDifferentiableError(f"astad does not differentiate "
                                             f"{fn.__name__}(..., {name}=...): {why}",
                                             *user_location())
        return args, kwargs
    add_check(fn, check)


def differentiate_by_keyword(fn, names, check=None):
    """Pass the arguments ``names`` (``fn``'s parameters, in order) given by keyword on by
    position, where the rules record a differentiated one (in every mode); ``check``
    (``check(**arguments)``) may refuse what the rules do not follow, when called."""
    def by_position(args, kwargs):
        args, kwargs = list(args), dict(kwargs)
        for name in names[len(args):]:
            if name not in kwargs:
                break
            args.append(kwargs.pop(name))
        if check is not None:
            check(**dict(zip(names, args)), **kwargs)
        return tuple(args), kwargs
    add_check(fn, by_position)


# -- functions whose result carries no derivative: they see primal values ---------------
def _full_primal(value):
    """The plain value under every level of a dual (and of the duals in a list)."""
    if type(value) in (list, tuple):
        return type(value)(_full_primal(x) for x in value)
    while type(value) in DUAL_TYPES:
        value = value.v
    return value


def is_dual(value) -> bool:
    return type(value) in DUAL_TYPES


def primal_only(fn):
    """``fn``'s result carries no derivative: it sees primal values."""
    found = record(fn)
    found.primal_only = True

    def rule(tape, *args, **kwargs):
        return fn(*[_full_primal(a) for a in args],
                  **{k: _full_primal(v) for k, v in kwargs.items()})
    found.array = rule


for _fn in (np.isnan, np.isinf, np.isfinite, np.argmax, np.argmin, np.argsort, np.shape,
            np.ndim, np.size, np.zeros_like, np.ones_like, np.empty_like, np.allclose,
            np.isclose, np.any, np.all, np.count_nonzero, np.nonzero, np.greater, np.less,
            np.greater_equal, np.less_equal, np.equal, np.not_equal, np.sign, np.floor,
            np.ceil, np.round, np.rint, np.trunc, np.floor_divide):
    primal_only(_fn)


# -- a constant array's methods given a differentiated argument: c.dot(x) ----------------
_CONSTANT_ARRAY_METHODS = {"dot": np.dot, "clip": np.clip}


# ndarray methods that write into the array
IN_PLACE_METHODS = frozenset({"sort", "fill", "partition", "put", "itemset", "byteswap",
                              "setfield", "__setitem__", "__iadd__", "__isub__", "__imul__",
                              "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__"})


def constant_array_method(method):
    """D of a bound method of a constant ndarray (``c.dot``): numpy's function of the same
    name when a differentiated value is among the arguments, so its rule runs."""
    fn = _CONSTANT_ARRAY_METHODS.get(method.__name__)
    array = method.__self__
    if method.__name__ == "copy":  # a new array, differentiated so it may be written into
        return lambda tape, *args, **kwargs: made_array(method(*args, **kwargs))
    if method.__name__ in IN_PLACE_METHODS:  # (logged: rules/array_writes.plain_change)
        return lambda tape, *args, **kwargs: _ad.plain_change(array, method, *args, **kwargs)
    if method.__name__ == "resize":
        raise NotDifferentiableError(
            "astad cannot follow ndarray.resize inside a differentiated function (it "
            "changes the array's shape in place); use np.resize, which makes a new array",
            *user_location())

    def call(tape, *args, **kwargs):
        args, kwargs = _ad.arrays_for(fn, args, kwargs)  # (c.dot(xs): xs an array)
        if any(is_dual(a) for a in args) or any(is_dual(v) for v in kwargs.values()):
            if fn is None:
                raise NotDifferentiableError(
                    f"astad cannot differentiate ndarray.{method.__name__} of a constant "
                    "array with a differentiated argument; use the numpy function "
                    f"np.{method.__name__}(array, ...)", *user_location())
            return fn(array, *args, **kwargs)
        return method(*args, **kwargs)
    return call


def _compiled_elementwise() -> bool:
    """Hand the commonest element-wise rules to the compiled runtime (runtime/_elementwise.c),
    which runs them at once on small float64 arrays while the registry still holds the
    record given here (a user's own rule for the ufunc renews its record: it turns the
    compiled rule off for that ufunc)."""
    if native is None:
        return False
    ops = (np.add, np.subtract, np.multiply, np.true_divide, np.negative, np.square,
           np.sqrt, np.exp, np.log, np.sin, np.cos, np.tanh, np.power)  # (the C enum's order)
    helpers = {np.sin: np.cos, np.cos: np.sin, np.power: np.power,  # the partial's ufunc
               np.tanh: np.exp}
    table = {}
    for op, ufunc in enumerate(ops):
        found = RECORDS[ufunc]
        assert found.check is None and found.view is None and found.writer is None
        table[ufunc] = (op, found, helpers.get(ufunc), not found.finite)
    return native.configure_elementwise(ArrayDual, np.ndarray, np.dtype(np.float64),
                                         np.float64, running, RECORDS, table,
                                         _elementwise_backward, NonFinite, np.arange(3.0),
                                         _numpy_c_api())


def _numpy_c_api():
    """The capsule of numpy's C-API table, which numpy exports for compiled extensions."""
    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            return importlib.import_module(module)._ARRAY_API
        except (ImportError, AttributeError):
            pass
    return None


COMPILED_ELEMENTWISE = _compiled_elementwise()
