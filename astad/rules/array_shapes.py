"""The derivative rules of numpy's shape functions, of building arrays from pieces
(concatenate, stack, np.array of scalar duals), of indexing, and the operators and
methods of ``ArrayDual`` (``x + y``, ``x.sum()``, ``x.T``, ``x.item()``).

Shape functions and indexing move cotangents without arithmetic; reading one element
(``x[i]``) gives a scalar dual whose backward step adds into that one element.
"""
from __future__ import annotations

import numpy as np

from .array import NEW_ARRAYS, RESULT_KIND, SHAPES_ONLY, VIEWS_OF_G, refuse_keywords, \
    register_jvp, register_vjp
from ..runtime.array_dual import (ARRAY_RULES, ArrayDualBase, accumulate, add_check,
                                  cotangent, dispatch, is_active, new_array, new_scalar,
                                  parent_of, plain_array, primal_of, unbroadcast)
from ..errors import NotDifferentiableError, user_location
from ..runtime.duals import DUAL_TYPES, ScalarDual


# -- shape --------------------------------------------------------------------------------
def _inverse_axes(axes, ndim):
    if axes is None:
        return None
    return tuple(np.argsort([a % ndim for a in axes]))


register_vjp(np.transpose, lambda g, r, a, axes=None: np.transpose(
    g, _inverse_axes(axes, np.ndim(a))))
# reshape and ravel read and write elements in C or F order; the cotangent goes back in
# the same order (the rules below pass it resolved, as a keyword)
register_vjp(np.reshape, lambda g, r, a, shape=None, order="C", **kw: np.reshape(
    g, np.shape(a), order=order))
register_vjp(np.ravel, lambda g, r, a, order="C": np.reshape(g, np.shape(a), order=order))
register_vjp(np.moveaxis, lambda g, r, a, source, destination: np.moveaxis(g, destination,
                                                                          source))
register_vjp(np.swapaxes, lambda g, r, a, axis1, axis2: np.swapaxes(g, axis1, axis2))
register_vjp(np.squeeze, lambda g, r, a, *args, **kw: np.reshape(g, np.shape(a)))
register_vjp(np.expand_dims, lambda g, r, a, *args, **kw: np.reshape(g, np.shape(a)))
register_vjp(np.broadcast_to, lambda g, r, a, *args, **kw: unbroadcast(g, np.shape(a)))
register_vjp(np.copy, lambda g, r, a, *args, **kw: g)
register_vjp(np.flip, lambda g, r, m, axis=None: np.flip(g, axis))


def _cumsum_vjp(g, r, a, axis=None, dtype=None, out=None):
    # each input reaches every later output: a cumulative sum from the end
    if axis is None:
        return np.cumsum(np.ravel(g)[::-1])[::-1].reshape(np.shape(a))
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


register_vjp(np.cumsum, _cumsum_vjp)
register_vjp(np.asarray, lambda g, r, a, *args, **kw: g)
RESULT_KIND[np.cumsum] = NEW_ARRAYS
RESULT_KIND.update(dict.fromkeys(
    (np.transpose, np.reshape, np.ravel, np.squeeze, np.expand_dims, np.broadcast_to,
     np.copy, np.flip, np.asarray, np.moveaxis, np.swapaxes), VIEWS_OF_G))
SHAPES_ONLY.update((np.cumsum, np.transpose, np.reshape, np.ravel, np.squeeze,
                    np.expand_dims, np.broadcast_to, np.copy, np.flip, np.asarray,
                    np.moveaxis, np.swapaxes))


def _resolve_order(value, order):
    """numpy's order 'A' and 'K' as the 'C' or 'F' they mean for this array."""
    if order not in ("A", "K"):
        return order
    if value.flags.c_contiguous:
        return "C"
    if value.flags.f_contiguous:
        return "F"
    if order == "A":
        return "C"
    raise NotDifferentiableError("astad differentiates ravel(order='K') of a C- or "
                                 "F-contiguous array only", *user_location())


def _reshape_order(args, kwargs):
    # (resolved from the primal array: a cotangent or tangent has a layout of its own)
    a, shape, *rest = args if len(args) > 1 else (args[0], kwargs.pop("shape", None))
    order = rest[0] if rest else kwargs.pop("order", "C")
    return (a, shape), {**kwargs, "order": _resolve_order(plain_array(a), order)}


def _ravel_order(args, kwargs):
    a, *rest = args
    order = rest[0] if rest else kwargs.pop("order", "C")
    return (a,), {**kwargs, "order": _resolve_order(plain_array(a), order)}


add_check(np.reshape, _reshape_order)
add_check(np.ravel, _ravel_order)


# -- moving elements: sort, take, repeat, diff ---------------------------------------------
def _sort_vjp(g, r, a, axis=-1, kind=None, order=None, **kw):
    # each sorted element came from one place: send its cotangent back there (ties: the
    # stable order numpy's sort gives them)
    if axis is None:
        return _sort_vjp(g, r, np.ravel(a), -1).reshape(np.shape(a))
    grad = np.zeros(np.shape(a), dtype=np.result_type(a, 1.0))
    np.put_along_axis(grad, np.argsort(a, axis=axis, kind="stable"), g, axis=axis)
    return grad


def _take_vjp(g, r, a, indices, axis=None, out=None, mode="raise"):
    grad = np.zeros(np.shape(a), dtype=np.result_type(a, 1.0))
    if axis is None:
        np.add.at(grad.reshape(-1), indices, g)  # (a repeated index adds)
    else:
        np.add.at(grad, (slice(None),) * (axis % grad.ndim) + (indices,), g)
    return grad


def _repeat_vjp(g, r, a, repeats, axis=None):
    # the copies of each element are consecutive: sum them back (one int repeats only)
    if axis is None:
        return np.sum(np.reshape(g, (np.size(a), repeats)), axis=1).reshape(np.shape(a))
    axis %= np.ndim(a)
    shape = np.shape(a)
    return np.sum(np.reshape(g, shape[:axis] + (shape[axis], repeats) + shape[axis + 1:]),
                  axis=axis + 1)


def _diff_vjp(g, r, a, n=1, axis=-1, **kw):
    # diff is x[1:] - x[:-1] along the axis, n times: its transpose, n times
    axis %= np.ndim(a)
    pad = [(0, 0)] * np.ndim(a)
    pad[axis] = (1, 1)
    for _ in range(n):
        g = -np.diff(np.pad(g, pad), axis=axis)
    return g


register_vjp(np.sort, _sort_vjp)
register_vjp(np.take, _take_vjp)
register_vjp(np.repeat, _repeat_vjp)
register_vjp(np.diff, _diff_vjp)
RESULT_KIND.update(dict.fromkeys((np.sort, np.take, np.repeat, np.diff), NEW_ARRAYS))
refuse_keywords(np.take, ("mode",), "an index out of range must raise")
refuse_keywords(np.diff, ("prepend", "append"), "pad the array with np.concatenate")


def _one_repeats_count(args, kwargs):
    a, repeats, *rest = args if len(args) > 1 else (args[0], kwargs.pop("repeats"))
    if np.ndim(repeats) != 0:
        raise NotDifferentiableError("astad differentiates np.repeat with one int repeats "
                                     "count", *user_location())
    return (a, int(repeats), *rest), kwargs


add_check(np.repeat, _one_repeats_count)


# -- building arrays from pieces ----------------------------------------------------------
def _pieces_backward(adjoint, arrays, k, parents, context):
    split, = context
    g = cotangent(adjoint, arrays, k)
    pieces = split(g)
    for position, parent in parents:
        accumulate(adjoint, arrays, parent, pieces[position])


def _join(tape, join, split, items, *args, **kwargs):
    items = list(items)
    values = [primal_of(x, tape) for x in items]
    result = join(values, *args, **kwargs)
    parents = tuple((j, parent_of(x)) for j, x in enumerate(items) if is_active(x, tape))
    return new_array(tape, result, _pieces_backward, parents, (split,))


def _concatenate_rule(tape, arrays_, axis=0, **kwargs):
    items = list(arrays_)
    if axis is None:  # numpy flattens every array first
        items = [ARRAY_RULES[np.ravel](tape, x) if is_active(x, tape) else np.ravel(x)
                 for x in items]
        axis = 0
    sizes = [np.shape(x)[axis] for x in items]
    bounds = np.cumsum(sizes)[:-1]
    return _join(tape, np.concatenate, lambda g: np.split(g, bounds, axis=axis), items,
                 axis=axis, **kwargs)


def _stack_rule(tape, arrays_, axis=0, **kwargs):
    items = list(arrays_)
    return _join(tape, np.stack,
                 lambda g: [np.take(g, j, axis=axis) for j in range(len(items))], items,
                 axis=axis, **kwargs)


ARRAY_RULES[np.concatenate] = _concatenate_rule
ARRAY_RULES[np.stack] = _stack_rule
ARRAY_RULES[np.vstack] = lambda tape, tup, **kw: _concatenate_rule(
    tape, [np.atleast_2d(x) if not is_active(x, tape) else
           (x if np.ndim(x) >= 2 else _reshape(tape, x, (1, -1))) for x in tup],
    axis=0)

ARRAY_RULES[np.hstack] = lambda tape, tup, **kw: _concatenate_rule(
    tape, tup, axis=0 if all(np.ndim(x) == 1 for x in tup) else 1)


def _reshape(tape, x, shape):
    return ARRAY_RULES[np.reshape](tape, x, shape)


def array_from(tape, obj, dtype=None, **kwargs):
    """np.array / np.asarray of (nested lists of) scalar and array duals: one entry that
    scatters the cotangent back to each piece (np.stack of the pieces, at their level)."""
    if type(obj) in DUAL_TYPES and not isinstance(obj, ScalarDual):
        return obj if dtype is None else dispatch(np.asarray, (obj, dtype), {})
    if not isinstance(obj, (list, tuple)) or not _holds_dual(obj):
        return np.array(obj, dtype=dtype, **kwargs)
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise NotDifferentiableError("np.array of differentiated values needs a float dtype",
                                     *user_location())
    return np.stack([array_from(tape, x, dtype) if isinstance(x, (list, tuple)) else x
                     for x in obj])


def _holds_dual(obj) -> bool:
    return any(type(x) in DUAL_TYPES or (isinstance(x, (list, tuple)) and _holds_dual(x))
               for x in obj)


# -- indexing -----------------------------------------------------------------------------
def _index_backward(adjoint, arrays, k, parents, context):
    index, = context
    g = cotangent(adjoint, arrays, k)
    (parent,) = parents
    slot, shape, dtype = parent
    existing = arrays.get(slot)
    if type(g) in DUAL_TYPES or (existing is not None and type(existing) is not np.ndarray):
        # a derivative of a derivative: the scatter is itself a differentiated operation
        accumulate(adjoint, arrays, parent, index_scatter(g, index, shape, dtype))
        return
    if existing is None:
        existing = arrays[slot] = np.zeros(shape, dtype=dtype)
    if _may_repeat(index):
        np.add.at(existing, index, g)  # x[[0, 0]]: each repetition adds
    else:
        existing[index] += g  # ints, slices, None, masks: each element once (faster)


def _may_repeat(index) -> bool:
    """Does ``index`` hold an integer array or list (fancy indexing may repeat)?"""
    for part in index if type(index) is tuple else (index,):
        if isinstance(part, (list, np.ndarray)) and np.asarray(part).dtype.kind != "b":
            return True
    return False


def _scalar_index_backward(adjoint, arrays, k, parents, context):
    index, = context
    (parent,) = parents
    slot, shape, dtype = parent
    existing = arrays.get(slot)
    g = adjoint[k]
    if type(g) in DUAL_TYPES or (existing is not None and type(existing) is not np.ndarray):
        accumulate(adjoint, arrays, parent, index_scatter(g, index, shape, dtype))
        return
    if existing is None:
        existing = arrays[slot] = np.zeros(shape, dtype=dtype)
    existing[index] += g  # O(1): no one-hot array


def index_scatter(g, index, shape, dtype):
    """An array of ``shape`` holding ``g`` added at ``index`` (zeros elsewhere): the
    cotangent of ``x[index]``. A primitive of its own (its vjp is indexing, its jvp
    itself), so that the backward step of indexing can be differentiated again."""
    if type(g) in DUAL_TYPES:
        return dispatch(index_scatter, (g, index, shape, dtype), {})
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, index, g)
    return out


register_vjp(index_scatter, lambda g, r, c, index, shape, dtype: g[index])
register_jvp(index_scatter, lambda t, r, c, index, shape, dtype: index_scatter(
    t, index, shape, dtype))


def getitem(tape, x, index):
    if type(index) in DUAL_TYPES:
        raise NotDifferentiableError("an index must not be a differentiated value",
                                     *user_location())
    if type(index) is tuple:
        index = tuple(primal_of(i) for i in index)
    value = x.v[index]
    parent = (parent_of(x),)
    if np.ndim(value) == 0:  # one element: a scalar dual
        return new_scalar(tape, value, _scalar_index_backward, parent, (index,))
    return new_array(tape, value, _index_backward, parent, (index,))


def take_index(x, index):
    """``x[index]``: the function indexing is dispatched as (a key of ARRAY_RULES, so that
    every mode finds its rule as for a numpy function)."""
    return x[index]


ARRAY_RULES[take_index] = getitem
ArrayDualBase.__getitem__ = lambda self, index: dispatch(take_index, (self, index), {})


# -- operators and methods of array duals: numpy calls, dispatched at their operands' level
def _binary(ufunc, reflected=False):
    if reflected:
        return lambda self, other: dispatch(ufunc, (other, self), {})
    return lambda self, other: dispatch(ufunc, (self, other), {})


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("pow", np.power), ("matmul", np.matmul),
                      ("mod", np.remainder), ("floordiv", np.floor_divide)):
    setattr(ArrayDualBase, f"__{_name}__", _binary(_ufunc))
    setattr(ArrayDualBase, f"__r{_name}__", _binary(_ufunc, reflected=True))
ArrayDualBase.__neg__ = lambda self: dispatch(np.negative, (self,), {})
ArrayDualBase.__pos__ = lambda self: self
ArrayDualBase.__abs__ = lambda self: dispatch(np.absolute, (self,), {})


def _method(fn):
    return lambda self, *args, **kwargs: dispatch(fn, (self,) + args, kwargs)


for _name, _fn in (("sum", np.sum), ("mean", np.mean), ("prod", np.prod), ("max", np.max),
                   ("min", np.min), ("var", np.var), ("std", np.std), ("ravel", np.ravel),
                   ("squeeze", np.squeeze), ("dot", np.dot), ("copy", np.copy),
                   ("trace", np.trace), ("clip", np.clip), ("repeat", np.repeat),
                   ("take", np.take), ("cumsum", np.cumsum), ("swapaxes", np.swapaxes)):
    setattr(ArrayDualBase, _name, _method(_fn))
ArrayDualBase.flatten = _method(np.ravel)
ArrayDualBase.reshape = lambda self, *shape, **kw: dispatch(
    np.reshape, (self, shape[0] if len(shape) == 1 else shape), kw)
ArrayDualBase.transpose = lambda self, *axes: dispatch(
    np.transpose, (self, (axes[0] if len(axes) == 1 else axes) or None), {})
ArrayDualBase.T = property(lambda self: dispatch(np.transpose, (self,), {}))


def _item(self, *args):
    """x.item(), x.item(k) with a flat index, x.item(i, j) or x.item((i, j)): one element
    as a scalar dual, as numpy gives one element as a Python float."""
    shape = self.v.shape
    if not args:
        if self.v.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        index = (0,) * len(shape)
    elif len(args) == 1 and isinstance(args[0], tuple):
        index = args[0]
    elif len(args) == 1:
        index = np.unravel_index(args[0] % self.v.size if args[0] < 0 else args[0], shape)
    else:
        index = args
    return self[tuple(int(i) for i in index)]


ArrayDualBase.item = _item
# a scalar dual from a reduction stands for numpy's float64, which has .item() too
ScalarDual.item = lambda self: self
ArrayDualBase.astype = lambda self, dtype, **kw: dispatch(np.asarray, (self, dtype), {})

# methods whose results carry no derivative (indices, truth values): on the primal
for _name in ("argmax", "argmin", "argsort", "nonzero", "any", "all", "round"):
    setattr(ArrayDualBase, _name, lambda self, *args, _name=_name, **kwargs: getattr(
        plain_array(self), _name)(*args, **kwargs))


class UnsupportedArrayAttribute(NotDifferentiableError, AttributeError):
    """An ndarray attribute astad does not provide on differentiated arrays (an
    AttributeError too, so ``hasattr`` and numpy's protocol probes work as usual)."""


def _missing_attribute(self, name):
    if name.startswith("__"):  # numpy's and Python's protocol probes
        raise AttributeError(name)
    raise UnsupportedArrayAttribute(
        f"ndarray attribute {name!r} of a differentiated array is not supported by "
        "astad; use the numpy function of the same name if astad has its derivative, or "
        "apply it to a value that is not differentiated", *user_location())


ArrayDualBase.__getattr__ = _missing_attribute


def _real_dtype(args, kwargs):
    """np.asarray(x, dtype) and x.astype(dtype): to an int or bool dtype the result is
    piecewise constant (derivative 0, as for int() of a float dual: the rules see an
    integer result); a complex dtype is refused."""
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    if dtype is not None and np.dtype(dtype).kind == "c":
        raise NotDifferentiableError("astad differentiates real float arrays only, not "
                                     f"a conversion to {np.dtype(dtype)}", *user_location())
    return args, kwargs


add_check(np.asarray, _real_dtype)
