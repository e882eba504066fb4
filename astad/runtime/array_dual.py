"""Float numpy arrays as differentiable values: one dual and one tape entry per array op.

D of a float array is the array plus one tape index (an extension beyond the paper: its
duals are per scalar). An array operation appends ONE tape entry whose backward step is
an array operation, ``(backward, parents, context)``; the sweep (runtime/tape.py) calls it
with the cotangents. Scalar duals and array duals mix freely (``w * x``, ``x[i]``,
``np.array([a, b])``).

Array cotangents live in a dict beside the scalar adjoint list (``arrays``, slot ->
ndarray), so the scalar sweep is untouched. An array stored there is owned by the sweep
(copied when first stored, unless the rule that made it keeps no other reference), so
rules may add into it in place.

numpy calls need no rewriting: ``ArrayDual`` (and ``Dual``) implement numpy's dispatch
protocols (``__array_ufunc__``, ``__array_function__``), so ``np.sin(x)``, ``np.sum(x)``,
``x @ w`` find their rules in the registry (astad/registry.py: a record's ``array``) and
record on the tape of the gradient call
running in this thread. A numpy function without a rule raises an error naming it.
The rules themselves are in ``rules/array.py`` (how rules are given; element-wise
functions, reductions), ``rules/array_shapes.py`` (shapes, joining, indexing, the operators
and methods of ArrayDual) and ``rules/array_linalg.py`` (products, linear algebra, einsum);
users add their own with ``astad.register_vjp`` or ``astad.register_elementwise``.
"""
from __future__ import annotations

import sys

import numpy as np

from ..data.tree import COMPLEX_SCALARS
from ..errors import NotDifferentiableError, user_location
from ..registry import RECORDS, ad, lookup, publish, record
from .tape import BATCHED_BACKWARDS, native
from .duals import (DUAL_TYPES, Dual, NestedDual, PrimalView, conversion_error,
                    innermost, is_forward, reverse_dual, running)

def add_check(fn, step) -> None:
    """Run ``step(args, kwargs) -> (args, kwargs)`` before ``fn``'s rule, in every mode,
    after any step registered before it: what a rule follows, checked (and normalised)
    before either mode runs it (a keyword the rule does not follow is refused, never
    ignored)."""
    found = record(fn)
    before = found.check
    found.check = step if before is None else (
        lambda args, kwargs: step(*before(args, kwargs)))


# the commonest element-wise rules in C (runtime/_elementwise.c; rules/array.py configures)
compiled_elementwise = None if native is None else native.elementwise


def take_index(x, index):
    """``x[index]``: the function indexing is dispatched as (the key of its rule, so that
    every mode finds it as for a numpy function: rules/array_shapes.py)."""
    return x[index]


class UnsupportedArrayAttribute(NotDifferentiableError, AttributeError):
    """An ndarray attribute astad does not provide on differentiated arrays (an
    AttributeError too, so ``hasattr`` and numpy's protocol probes work as usual)."""


def _operators(ufunc):
    """``__name__`` and ``__rname__`` of an array dual: numpy's ``ufunc``, its compiled
    rule first where there is one (one call fewer per operation)."""
    if compiled_elementwise is None:
        return (lambda self, other: dispatch(ufunc, (self, other), {}),
                lambda self, other: dispatch(ufunc, (other, self), {}))

    def forward(self, other):
        result = compiled_elementwise(ufunc, (self, other))
        return dispatch(ufunc, (self, other), {}) if result is NotImplemented else result

    def reflected(self, other):
        result = compiled_elementwise(ufunc, (other, self))
        return dispatch(ufunc, (other, self), {}) if result is NotImplemented else result
    return forward, reflected


def _in_place(ufunc):
    """``x op= y``: a write of the result into the array (rules/array_writes.py)."""
    def operator_(self, other):
        ad.write_array(self, Ellipsis, dispatch(ufunc, (self, other), {}))
        return self
    return operator_


def _method(fn):
    """The method calling numpy's ``fn`` (``x.sum(axis=0)`` is ``np.sum(x, axis=0)``)."""
    return lambda self, *args, **kwargs: dispatch(fn, (self,) + args, kwargs)


def _on_primal(name):
    """A method whose result carries no derivative (indices, truth values): the
    primal's."""
    return lambda self, *args, **kwargs: getattr(plain_array(self), name)(*args, **kwargs)


# numpy functions of an array's layout alone, answered from the primal without dispatch
_OF_THE_PRIMAL = frozenset((np.shape, np.ndim, np.size))


class ArrayDualBase(PrimalView):
    """What every array dual does, whatever its mode: it behaves as its primal array.

    Its operators and methods are numpy calls, so they reach the rules through
    ``dispatch`` like ``np.sin(x)``, at the level of their operands; a write into it is
    rules/array_writes.py's (through ``ad.write_array``)."""

    __slots__ = ()
    __array_priority__ = 100.0

    # shape and friends: from the primal
    shape = property(lambda self: self.v.shape)
    ndim = property(lambda self: self.v.ndim)
    size = property(lambda self: self.v.size)
    dtype = property(lambda self: self.v.dtype)
    strides = property(lambda self: self.v.strides)  # (the memory's: numpy's layout)
    itemsize = property(lambda self: self.v.itemsize)
    nbytes = property(lambda self: self.v.nbytes)
    flags = property(lambda self: self.v.flags)

    def __len__(self):
        return len(self.v)

    def __bool__(self):
        return bool(self.v)

    def __copy__(self):  # copy.copy and copy.deepcopy of an array: numpy's copy
        return dispatch(np.copy, (self,), {})

    def __deepcopy__(self, memo):
        return dispatch(np.copy, (self,), {})

    def __iter__(self):
        for k in range(len(self.v)):
            yield self[k]

    def __array__(self, dtype=None, copy=None):
        raise conversion_error(
            self, "a differentiated array was converted to a plain array by code astad cannot "
            "follow (np.asarray, or a C function), which would lose its derivative")

    def __float__(self):
        raise conversion_error(
            self, "float() of a differentiated array in code astad did not transform would lose "
            "its derivative; use x.item() or x[()] in your function")

    # numpy's dispatch protocols: every numpy call on an array dual comes here
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if compiled_elementwise is not None and method == "__call__" and not kwargs:
            result = compiled_elementwise(ufunc, inputs)  # (its commonest cases, in C)
            if result is not NotImplemented:
                return result
        return dispatch(ufunc if method == "__call__" else (ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in _OF_THE_PRIMAL and len(args) == 1 and args[0] is self and not kwargs:
            return func(self.v)  # (np.shape, np.ndim, np.size: asked often by the rules)
        return dispatch(func, args, kwargs)

    # comparisons give plain bool arrays: control flow and masks follow the primal
    def __lt__(self, other):
        return self.v < primal_of(other)

    def __le__(self, other):
        return self.v <= primal_of(other)

    def __gt__(self, other):
        return self.v > primal_of(other)

    def __ge__(self, other):
        return self.v >= primal_of(other)

    def __eq__(self, other):
        return self.v == primal_of(other)

    def __ne__(self, other):
        return self.v != primal_of(other)

    __hash__ = None

    # -- indexing and writing (a write makes a new version of the array: array_writes.py)
    def __getitem__(self, index):
        if type(index) is int and type(self) is ArrayDual:  # (an element in a loop)
            result = ad.element(self, index)
            if result is not NotImplemented:
                return result
        return dispatch(take_index, (self, index), {})

    def __setitem__(self, index, value):
        ad.write_array(self, index, value)

    # -- operators: numpy's ufuncs
    __add__, __radd__ = _operators(np.add)
    __sub__, __rsub__ = _operators(np.subtract)
    __mul__, __rmul__ = _operators(np.multiply)
    __truediv__, __rtruediv__ = _operators(np.true_divide)
    __pow__, __rpow__ = _operators(np.power)
    __matmul__, __rmatmul__ = _operators(np.matmul)
    __mod__, __rmod__ = _operators(np.remainder)
    __floordiv__, __rfloordiv__ = _operators(np.floor_divide)
    __iadd__ = _in_place(np.add)
    __isub__ = _in_place(np.subtract)
    __imul__ = _in_place(np.multiply)
    __itruediv__ = _in_place(np.true_divide)
    __ipow__ = _in_place(np.power)
    __imod__ = _in_place(np.remainder)
    __ifloordiv__ = _in_place(np.floor_divide)

    def __neg__(self):
        return dispatch(np.negative, (self,), {})

    def __pos__(self):
        return self

    def __abs__(self):
        return dispatch(np.absolute, (self,), {})

    # -- methods: numpy's functions of the same name
    sum, mean, prod = _method(np.sum), _method(np.mean), _method(np.prod)
    max, min, var, std = _method(np.max), _method(np.min), _method(np.var), _method(np.std)
    ravel = _method(np.ravel)

    def flatten(self, order="C"):
        return dispatch(np.copy, (dispatch(np.ravel, (self,), {"order": order}),), {})

    def view(self, dtype=None, type=None):
        if dtype is not None and np.dtype(dtype) != plain_array(self).dtype or \
                type is not None:
            raise NotDifferentiableError(
                "astad differentiates ndarray.view() without a dtype or type (the same "
                "elements); use .astype() for another dtype", *user_location())
        return self[...]
    squeeze, dot, copy = _method(np.squeeze), _method(np.dot), _method(np.copy)
    trace, clip, repeat = _method(np.trace), _method(np.clip), _method(np.repeat)
    take, cumsum, cumprod = _method(np.take), _method(np.cumsum), _method(np.cumprod)
    swapaxes, diagonal = _method(np.swapaxes), _method(np.diagonal)
    conj = conjugate = _method(np.conjugate)
    # results with no derivative (indices, truth values): the primal's
    argmax, argmin, argsort = _on_primal("argmax"), _on_primal("argmin"), _on_primal("argsort")
    nonzero, any, all = _on_primal("nonzero"), _on_primal("any"), _on_primal("all")
    round = _on_primal("round")

    # -- methods writing into the array: writes (rules/array_writes.py)
    def sort(self, axis=-1, kind=None, order=None):
        ad.write_array(self, Ellipsis, dispatch(np.sort, (self,), {"axis": axis,
                                                                   "kind": kind}))

    def partition(self, kth, axis=-1, kind="introselect", order=None):
        ad.write_array(self, Ellipsis, dispatch(np.partition, (self, kth), {"axis": axis}))

    def fill(self, value):
        ad.write_array(self, Ellipsis, value)

    def put(self, indices, values, mode="raise"):
        dispatch(np.put, (self, indices, values), {"mode": mode})

    def reshape(self, *shape, **kwargs):
        return dispatch(np.reshape, (self, shape[0] if len(shape) == 1 else shape), kwargs)

    def transpose(self, *axes):
        return dispatch(np.transpose, (self, (axes[0] if len(axes) == 1 else axes) or None),
                        {})

    @property
    def T(self):
        return dispatch(np.transpose, (self,), {})

    @property
    def real(self):
        return dispatch(np.real, (self,), {}) if plain_array(self).dtype.kind == "c" else self

    @property
    def imag(self):
        if plain_array(self).dtype.kind == "c":
            return dispatch(np.imag, (self,), {})
        return np.zeros(np.shape(self))

    def astype(self, dtype, copy=True, **kwargs):
        if np.dtype(dtype) != plain_array(self).dtype:
            return dispatch(np.asarray, (self, dtype), {})
        return dispatch(np.copy, (self,), {}) if copy else self  # (numpy copies by default)

    def item(self, *args):
        """x.item(), x.item(k) with a flat index, x.item(i, j) or x.item((i, j)): one
        element as a scalar dual, as numpy gives one element as a Python float."""
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

    def __getattr__(self, name):
        if name.startswith("__"):  # numpy's and Python's protocol probes
            raise AttributeError(name)
        raise UnsupportedArrayAttribute(
            f"ndarray attribute {name!r} of a differentiated array is not supported by "
            "astad; use the numpy function of the same name if astad has its derivative, "
            "or apply it to a value that is not differentiated", *user_location())


class ArrayDual(ArrayDualBase):
    """Reverse mode: a differentiated float array, its value ``v`` (an ndarray, or an
    array dual of an enclosing level), tape index ``i`` and level ``t`` (the tape).

    Arrays are mutable (array_writes.py): a write into an array makes a new version of
    it, and ``i`` becomes that version's entry. A *view* (``x[1:]``, ``x.T``, a reshape
    sharing memory) has a ``root`` (the array owning the memory) and ``view``, the
    numpy operations that take the root to it; its own ``i`` is an entry reading the
    root's version ``synced``, recorded again when the root has changed since
    (``index_of``), so a view always sees the writes through any alias."""

    __slots__ = ("v", "i", "t", "root", "from_root", "synced")

    def __init__(self, v, i, t, root=None, from_root=None, synced=None):
        self.v = v
        self.i = i
        self.t = t
        self.root = root
        self.from_root = from_root
        self.synced = synced


class FArrayDual(ArrayDualBase):
    """Forward mode: the array ``v``, its tangent ``d`` (the same shape, with one leading
    axis per direction for a vector of tangents) and its level ``t``. A view (see
    ArrayDual) keeps no tangent of its own: ``tangent_of_array`` reads it through
    ``view`` from its ``root``'s, so a write through any alias is seen by all."""

    __slots__ = ("v", "_d", "t", "root", "from_root")

    def __init__(self, v, d, t, root=None, from_root=None):
        self.v = v
        self._d = d
        self.t = t
        self.root = root
        self.from_root = from_root

    @property
    def d(self):
        if self.root is None:
            return self._d
        root = self.root
        return self.from_root(root.d, root.t.width is not None)

    @d.setter
    def d(self, value):
        if self.root is not None:
            raise AssertionError("the tangent of a view is its root's")  # (never set)
        self._d = value


ARRAY_DUALS = frozenset({ArrayDual, FArrayDual})
DUAL_TYPES.update(ARRAY_DUALS)


def primal_of(value, level=None):
    """The value under ``value``'s level when it is a dual of ``level`` (any dual when
    ``level`` is None); anything else as it is (a dual of an enclosing level stays a dual:
    numpy's dispatch takes it to its own level's rule)."""
    if type(value) in DUAL_TYPES and (level is None or value.t is level):
        return value.v
    return value


def plain_array(value):
    """The plain value under every level of a dual (an ndarray, or a number)."""
    while type(value) in DUAL_TYPES:
        value = value.v
    return value


_NAMED_BY = ("numpy", "numpy.linalg", "numpy.fft", "scipy.special", "scipy.linalg",
             "scipy.stats", "scipy.integrate", "scipy.optimize")


def qualified_name(func) -> str:
    """``scipy.special.jv``, ``numpy.linalg.eig``: a function as the user's code names it
    (a ufunc knows only its short name)."""
    if isinstance(func, tuple):  # (a ufunc method: np.add.reduce)
        return f"numpy.{func[0].__name__}.{func[1]}"
    name = getattr(func, "__name__", None) or repr(func)
    for module_name in _NAMED_BY:
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, name, None) is func:
            return f"{module_name}.{name}"
    module_name = getattr(func, "__module__", None)
    return f"{module_name}.{name}" if module_name else name


def no_rule_message(name: str) -> str:
    """What astad says of a library function ``name`` (as the user's code names it) that
    has no rule, when a differentiated value reaches it."""
    return (f"astad has no derivative for {name} of a differentiated value; give it one "
            f"with astad.register_vjp({name}, vjp_0, vjp_1, ...): one vector-Jacobian "
            "product per argument, vjp_k(g, result, *args), None for an argument that is "
            "not differentiated (docs/custom-derivatives.md)")


def dispatch(func, args, kwargs):
    """Run numpy ``func`` on arguments holding duals through its rule, at the innermost
    level among them: a reverse rule (its record's ``array``) or forward mode
    (astad/forward)."""
    if not kwargs and type(func) is np.ufunc:  # the most common call, checked in one pass
        result = ufunc_at_once(func, args)
        if result is not NotImplemented:
            return result
    out = kwargs.get("out")
    if out is not None:  # numpy's out=: the result, then written into out (array_writes)
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        target = out[0] if type(out) is tuple and len(out) == 1 else out
        if type(target) is tuple:
            raise NotDifferentiableError("astad differentiates out= with one output array",
                                         *user_location())
        result = dispatch(func, args, kwargs)
        ad.setitem(None, result, target, Ellipsis)
        return target
    if kwargs.get("where", True) is not True:
        raise NotDifferentiableError(
            "astad does not differentiate numpy's where= argument; select with np.where "
            "or multiply by the mask instead", *user_location())
    args, kwargs = ad.arrays_for(func, args, kwargs)  # lists holding duals: arrays
    level = innermost(args) if not kwargs else innermost(list(args) + list(kwargs.values()))
    if level is None:  # (numpy asked because of a dual of no level: cannot happen)
        return func(*args, **kwargs)
    found = lookup(func)  # (scipy.special's rules: registered on first use)
    if found is not None and found.complex is not True and holds_complex(args) and (
            found.complex is not None or not found.primal_only):
        func, found = complex_rule(func, found)  # (|z|'s rule is not |x|'s)
    rule = found.array if found is not None else None
    if found is not None and found.check is not None:
        args, kwargs = found.check(args, kwargs)
    writer = found.writer if found is not None else None
    if writer is not None:  # np.add.at, np.copyto, np.put_along_axis: writes (array_writes)
        return writer(*args, **kwargs)
    view = found.view if found is not None else None
    if view is not None and type(args[0]) in ARRAY_DUALS and args[0].t is level:
        result = view(args, kwargs)  # a view of the array (x[1:], x.T): no copy, no entry
        if result is not None:
            return result
    if rule is None:
        raise NotDifferentiableError(no_rule_message(qualified_name(func)),
                                     *user_location())
    if is_forward(level):
        result = ad.forward_array_rule(func, rule, level, args, kwargs)
    else:
        result = rule(level, *args, **kwargs)
    if found.complex is not True and holds_complex((result,)):
        raise complex_refusal(func)  # (np.maximum(x, 1j * c): a complex constant)
    kind = type(result)
    if kind in ARRAY_DUALS:
        value = result.v
        if type(value) is np.ndarray and value.base is None:
            for a in args:
                if type(a) in ARRAY_DUALS and a.v is value:
                    break  # (numpy returned its argument: np.asarray, np.atleast_2d)
            else:
                return result  # (memory of its own: the common case, decided at once)
    elif kind is not tuple and kind is not list:
        return result
    return ad.numpy_memory(result, args, kwargs, level)  # (rules/array_views.py)


def ufunc_at_once(func, args):
    """numpy ufunc ``func`` on positional ``args`` through its rule at once, when they
    are plain arrays and numbers and duals of one running reverse differentiation (no
    list to convert, no level to choose: what ``dispatch`` would do, without its steps);
    NotImplemented otherwise. Generated code calls it before numpy's own dispatch
    (rules/numpy_values.numpy_call), which costs a microsecond per call on small arrays.
    (The commonest cases have a compiled rule, ``compiled_elementwise``, which its callers
    try first.)"""
    tape = _one_tape(args)
    if tape is not None:
        found = RECORDS.get(func)
        if found is not None and found.array is not None and found.check is None and \
                found.view is None and found.writer is None:
            if found.complex is True:
                return found.array(tape, *args)
            if holds_complex(args):
                return NotImplemented  # (dispatch finds the rule for complex values)
            result = found.array(tape, *args)
            if holds_complex((result,)):
                raise complex_refusal(func)
            return result
    return NotImplemented


# -- complex values (rules/complex_values.py: JAX's convention) ----------------------------
def holds_complex(values) -> bool:
    """Is one of ``values`` (or of the tuples and lists among them) a complex array
    dual?"""
    for a in values:
        t = type(a)
        if t is ArrayDual or t is FArrayDual:
            value = a.v
            if type(value) is np.ndarray:
                if value.dtype.kind == "c":
                    return True
            elif is_complex(value):
                return True
        elif (t is tuple or t is list) and holds_complex(a):
            return True
    return False


def complex_rule(func, found):
    """``(func, record)`` of the rule for complex values of ``func`` (the record's
    ``complex``: a function of its own, ``numpy.absolute``'s for complex ``z``), or the
    refusal naming ``func``."""
    twin = found.complex
    if twin is None:
        raise complex_refusal(func)
    return twin, RECORDS[twin]


def complex_refusal(func) -> NotDifferentiableError:
    return NotDifferentiableError(
        f"{qualified_name(func)} of complex values: astad's derivative of it holds for real "
        "values only. Complex values are differentiated through holomorphic functions "
        "(arithmetic, exp, log, sin...), linear maps (sums, products, einsum, numpy.fft), "
        "real, imag, conj, abs and angle (docs/complex.md)", *user_location())


def _one_tape(args):
    """The tape when ``args`` are plain arrays and numbers and duals of one running
    reverse differentiation, the case whose rule ``dispatch`` may call at once (no list
    to convert, no level to choose); else None (the whole of ``dispatch`` runs)."""
    tape = None
    for a in args:
        t = type(a)
        if t is ArrayDual or t is Dual or t is NestedDual:
            if tape is None:
                tape = a.t
            elif a.t is not tape:
                return None
        elif t not in PLAIN_OPERANDS:
            return None
    if type(tape) is list and id(tape) in running.depth:
        return tape
    return None


# numbers and arrays that hold no dual: a rule takes them as constants
PLAIN_SCALARS = frozenset({float, int, np.float64, np.float32, np.int64, np.bool_, bool})
PLAIN_OPERANDS = PLAIN_SCALARS | {np.ndarray}

publish("dispatch", dispatch)


# -- recording (reverse mode) ---------------------------------------------------------------
def is_active(value, tape) -> bool:
    """Is ``value`` a dual of the level ``tape`` (reverse mode: an array or a scalar dual)?"""
    return type(value) in DUAL_TYPES and value.t is tape


def new_array(tape, value, backward, parents, context):
    """Record an array-valued result: one entry, one new ArrayDual (or a plain value)."""
    if not parents:
        return value
    d = ArrayDual(value, len(tape), tape)
    tape.append((backward, parents, context))
    return d


def new_scalar(tape, value, backward, parents, context):
    """Record a scalar result of an array operation (a reduction, an element): a scalar
    dual, or a 0-d array dual for a complex one (scalar duals are real)."""
    if not parents:
        return value
    if type(value) is not np.float64 and is_complex(value):
        if type(value) is complex:  # (cmath's: numpy's type, which has a dtype)
            value = np.complex128(value)
        return new_array(tape, value, backward, parents, context)
    d = reverse_dual(value, len(tape), tape)  # (numpy.float64 stays: numpy's scalar type)
    tape.append((backward, parents, context))
    return d


def cotangent(adjoint, arrays, k):
    """The cotangent of entry ``k``: an array, or a float for a scalar result."""
    g = arrays.pop(k, None)
    return adjoint[k] if g is None else g


def accumulate(adjoint, arrays, parent, value, fresh=False) -> None:
    """Add cotangent ``value`` into ``parent``'s slot: a float slot for a scalar dual
    (summed), an owned array for an array dual (shaped by the caller).

    ``fresh``: the caller made ``value`` and keeps no other reference to it, so the
    first contribution is stored as it is instead of copied (one pass and one
    allocation fewer per operation on large arrays)."""
    index, shape, dtype = parent
    if shape is None:  # a scalar dual (real: complex scalars are array duals)
        total = np.sum(value)
        if type(total) is not np.float64:
            total = real_part(total, _FLOAT)
        adjoint[index] = adjoint[index] + (float(total) if type(total) is np.float64 else total)
        return
    existing = arrays.get(index)
    plain = type(value) is np.ndarray or type(value) in _NUMBERS
    if existing is None:
        if type(value) is np.ndarray and value.shape == shape:
            arrays[index] = value if fresh and value.dtype == dtype and \
                value.flags.writeable else real_part(value, dtype).astype(dtype)  # a copy
        elif plain:  # a broadcast copy
            owned = arrays[index] = np.empty(shape, dtype)
            owned[...] = real_part(value, dtype)
        else:  # a dual of an enclosing level (a derivative of a derivative): no copy
            value = real_part(value, dtype)
            arrays[index] = value if np.shape(value) == shape else np.broadcast_to(value,
                                                                                    shape)
    elif plain and type(existing) is np.ndarray:
        try:
            existing += value
        except TypeError:  # (numpy casts no complex into a float array in place)
            existing += real_part(value, dtype)
    else:  # duals are never added into in place
        arrays[index] = existing + real_part(value, dtype)


_FLOAT = np.dtype(float)


def real_part(value, dtype):
    """A cotangent ``value`` for a parent of ``dtype``: its real part where it is complex
    and the parent real (JAX's convention: a real input's cotangent is the real part of
    what reaches it, as ``x`` enters ``x + 0j`` linearly)."""
    if dtype.kind == "c":
        return value
    t = type(value)
    if t is np.ndarray:
        return value.real if value.dtype.kind == "c" else value
    if t in COMPLEX_SCALARS:
        return value.real
    if t in DUAL_TYPES and is_complex(value):  # (an enclosing level's)
        return np.real(value)
    return value



def is_complex(value) -> bool:
    """Is ``value`` (an array or a number, or a dual of one) complex?"""
    if type(value) in DUAL_TYPES:
        value = plain_array(value)
    t = type(value)
    return t in COMPLEX_SCALARS or (t is np.ndarray and value.dtype.kind == "c")


_NUMBERS = frozenset({float, int, np.float64, np.float32})


def parent_of(value):
    """(slot, shape, dtype) of a dual operand: shape None for a scalar dual."""
    if type(value) is ArrayDual:
        return (index_of(value), value.v.shape, value.v.dtype)
    return (value.i, None, None)


def index_of(value) -> int:
    """The tape index of an array dual as it is now: for a view whose root was written
    since its index was recorded, a new entry reading the root's current version."""
    root = value.root
    if root is not None and value.synced != root.i:
        ad.refresh_view(value)  # (rules/array_writes.py)
    return value.i


def unbroadcast(g, shape):
    """Sum ``g`` over the axes numpy broadcast to reach it from ``shape`` (one pass)."""
    g_shape = g.shape if type(g) is np.ndarray else np.shape(g)
    if shape is None or g_shape == shape:
        return g
    lead = len(g_shape) - len(shape)
    if lead < 0:  # g is a scalar or has fewer axes: numpy broadcasts it on use
        return g
    axes = tuple(range(lead)) + tuple(lead + axis for axis, size in enumerate(shape)
                                      if size == 1 and g_shape[lead + axis] != 1)
    # (np.sum and np.reshape rather than methods: g may be a dual of an enclosing level)
    return np.reshape(np.sum(g, axis=axes), shape) if axes else g


def interleave_array(value, tape):
    """D of a float array argument: an ArrayDual with one input slot."""
    d = ArrayDual(value, len(tape), tape)
    tape.append(())
    return d


# -- arrays made inside differentiated code ---------------------------------------------
def made_array(value):
    """A new float array made by differentiated code (``np.zeros``, ``x.copy()`` of a
    constant): a constant of the innermost level running, not of the tape the code names,
    which is the enclosing one when a closure of differentiated code is differentiated
    again by an inner transform."""
    return constant(None, value)


def constant(tape, value):
    """``value`` (a new float array) as a differentiated constant of the level ``tape``
    (else the innermost running one), so that what is written into it is differentiated.
    Inside nested differentiations it is a constant of every level up to that one (its
    primal a constant of the enclosing level, and so on), so a value of any of them may be
    written into it."""
    if type(value) is not np.ndarray or value.dtype.kind not in "fc":
        return value
    stack = running.stack
    if tape is None or id(tape) not in running.depth:
        if not stack:
            return value
        tape = stack[-1]
    for handle in stack[:running.depth[id(tape)]]:  # outermost first
        value = _constant_of(handle, value)
    return value


def _constant_of(handle, value):
    if is_forward(handle):
        width = handle.width
        shape = np.shape(value)
        return FArrayDual(value, np.zeros(shape if width is None else (width,) + shape,
                                          plain_array(value).dtype), handle)
    d = ArrayDual(value, len(handle), handle)
    handle.append(CONSTANT_ENTRY)  # an entry of its own: what reaches it is dropped
    return d


def _drop(adjoint, arrays, k, parents, context):
    arrays.pop(k, None)


def _drop_rows(adjoint, arrays, k, parents, context, width) -> bool:
    arrays.pop(k, None)
    return True


BATCHED_BACKWARDS[_drop] = _drop_rows

CONSTANT_ENTRY = (_drop, (), None)  # a constant's slot (an input's is ())


def is_numpy_callable(f) -> bool:
    """A numpy function, ufunc or ufunc method: numpy's dispatch finds its rule."""
    return type(f) is np.ufunc or (getattr(f, "__module__", None) or "").startswith("numpy") \
        or type(getattr(f, "__self__", None)) is np.ufunc  # (np.add.reduce: a ufunc method)
