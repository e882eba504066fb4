"""The cases of tests/test_systematic.py: at least one per rule in astad's rule table.

A case names the rule (``key``: the callable in the table), the arguments as specs (``F``:
a random float array, differentiated; ``L``: a list of them; ``K``: a constant passed as
it is), keywords, and the callable that runs it (``call``, when the key is not called
directly: indexing, np.r_, np.array of a list).
"""
from __future__ import annotations

import cmath
from dataclasses import dataclass, field

import numpy as np

from astad.rules.array_shapes import as_dtype, index_scatter, take_index
from astad.rules.array_views import View, region_add
from astad.rules.array_writes import Write, zero_region
from astad.rules.array_reductions import others_product
from astad.rules import complex_values as cv
from astad.rules.array_gather import (ADD_ACCUMULATE, ADD_REDUCE, ADD_REDUCEAT,
    MAXIMUM_REDUCE, MINIMUM_REDUCE, MULTIPLY_REDUCE, OUTERS)

try:
    import scipy.special as sc
    from astad.rules import scipy_loader, scipy_special
    scipy_loader.load_rules_for(sc.expit)  # (registered on first use otherwise)
except ImportError:  # scipy is optional
    sc = scipy_special = None


class F:
    """A random float array argument (differentiated): uniform in [lo, hi], or ``make``;
    ``complex=True``: its imaginary part uniform in [lo, hi] too (complex128, or complex64
    where the case runs in float32)."""

    def __init__(self, *shape, lo=-1.0, hi=1.0, make=None, nan=(), complex=False):
        self.shape, self.lo, self.hi, self.make_fn, self.nan = shape, lo, hi, make, nan
        self.complex = complex

    def make(self, rng, dtype):
        value = self.make_fn(rng) if self.make_fn else rng.uniform(self.lo, self.hi,
                                                                   self.shape)
        if self.complex:
            value = np.array(value, dtype=complex) + 1j * rng.uniform(self.lo, self.hi,
                                                                      np.shape(value))
            return value.astype(np.result_type(dtype, np.complex64))
        value = np.array(value, dtype=np.float64)
        for index in self.nan:
            value[index] = np.nan
        return value.astype(dtype)


class L:
    """A list of float arrays (differentiated)."""

    def __init__(self, *items):
        self.items = items

    def make(self, rng, dtype):
        return [item.make(rng, dtype) for item in self.items]


class K:
    """A constant argument."""

    def __init__(self, value):
        self.value = value

    def make(self, rng, dtype):
        return self.value


def make_args(specs, rng, dtype):
    return [spec.make(rng, dtype) if isinstance(spec, (F, L, K)) else spec for spec in specs]


@dataclass
class Case:
    key: object
    args: tuple
    kwargs: dict = field(default_factory=dict)
    call: object = None
    id: str = ""
    f32: bool = True
    jvp: bool = True
    second: bool = True
    rtol: float = 1e-5
    h: float = 1e-6  # the finite-difference step
    seed: int = 0

    @property
    def positions(self):
        return tuple(k for k, a in enumerate(self.args) if isinstance(a, (F, L)))


CASES: list = []


def _name(key):
    if key is take_index:
        return "getitem"
    if isinstance(key, tuple):
        return f"{key[0].__name__}.{key[1]}"
    if key is np.r_ or key is np.c_:
        return "r_" if key is np.r_ else "c_"
    return getattr(key, "__name__", repr(key))


def C(key, *args, call=None, tag="", **options):
    """Add a case; keywords of the function go in ``kw=``."""
    kwargs = options.pop("kw", {})
    name = _name(key) + (f"-{tag}" if tag else "")
    ids = [c.id for c in CASES]
    if name in ids:
        name += f"-{sum(i.startswith(name) for i in ids)}"
    CASES.append(Case(key, args, kwargs, call or key, name, seed=len(CASES), **options))


POS = dict(lo=0.5, hi=2.0)
INSIDE = dict(lo=-0.8, hi=0.8)
WIDE = dict(lo=-5.0, hi=5.0)
BESSEL_POS = dict(lo=0.5, hi=5.0)


# -- element-wise ----------------------------------------------------------------------------------
for _fn, _domain in ((np.negative, {}), (np.positive, {}), (np.absolute, {}), (np.exp, {}),
                     (np.expm1, {}), (np.log, POS), (np.log1p, dict(lo=-0.5)),
                     (np.log2, POS), (np.log10, POS), (np.sqrt, POS), (np.cbrt, POS),
                     (np.square, {}), (np.reciprocal, POS), (np.sin, {}), (np.cos, {}),
                     (np.tan, {}), (np.arcsin, INSIDE), (np.arccos, INSIDE), (np.arctan, {}),
                     (np.sinh, {}), (np.cosh, {}), (np.tanh, {}), (np.exp2, {}),
                     (np.fabs, {}), (np.degrees, {}), (np.rad2deg, {}), (np.radians, {}),
                     (np.deg2rad, {}), (np.arcsinh, {}), (np.arccosh, dict(lo=1.5, hi=3.0)),
                     (np.arctanh, INSIDE), (np.sinc, dict(lo=-2.0, hi=2.0)), (np.real, {}),
                     (np.conjugate, {})):
    C(_fn, F(3, 4, **_domain))
C(np.exp, F(), tag="0d")
for _fn in (np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.fmax, np.fmin,
            np.hypot, np.arctan2, np.logaddexp, np.logaddexp2, np.copysign):
    C(_fn, F(3, 1), F(4), tag="broadcast")
C(np.add, F(2, 3), F(), tag="0d")
C(np.true_divide, F(3, 4), F(4, **POS))
C(np.power, F(3, 4, **POS), F(3, 4))
C(np.power, F(3, 4, **POS), K(3.0), tag="constant-exponent")
C(np.float_power, F(3, 4, **POS), F(4))
C(np.remainder, F(3, 4, lo=-3.0, hi=3.0), F(4, **POS))
C(np.fmod, F(3, 4, lo=-3.0, hi=3.0), F(4, **POS))
C(np.ldexp, F(3, 4), K(np.array([1, 2, -1, 0])))
C(np.where, K(np.array([[True, False, True, False]] * 3)), F(3, 4), F(4))
C(np.nan_to_num, F(3, 4, nan=((0, 1), (2, 2))))

# -- reductions ------------------------------------------------------------------------------------
for _fn in (np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod, np.var, np.std,
            np.ptp):
    C(_fn, F(3, 4))
    C(_fn, F(3, 4), kw=dict(axis=1), tag="axis1")
    C(_fn, F(2, 3, 4), kw=dict(axis=(0, 2), keepdims=True), tag="axes-keepdims")
C(np.sum, F(3, 4), kw=dict(axis=-1, dtype=np.float64), tag="dtype")
C(np.prod, F(3, 4), kw=dict(axis=0, initial=2.0), tag="initial")
# np.prod's backward step's product of the others (its second derivative: pair_products)
C(others_product, F(3, 4), K(1))
C(others_product, F(2, 3, 4), K((0, 2)), tag="axes")
C(others_product, F(3, 4, make=lambda rng: rng.uniform(-1, 1, (3, 4)) * [1.0, 0.0, 1.0, 1.0]),
  K(None), tag="a zero")
C(np.var, F(3, 4), kw=dict(axis=0, ddof=1), tag="ddof")
C(np.std, F(3, 4), kw=dict(correction=1), tag="correction")
C(np.clip, F(3, 4, lo=-2.0, hi=2.0), K(-0.5), K(0.5))
C(np.clip, F(3, 4, lo=-2.0, hi=2.0), F(4, lo=-1.0, hi=-0.5), F(3, 1, lo=0.5, hi=1.0),
  tag="bounds")
C(np.trace, F(3, 4), kw=dict(offset=1))
C(np.trace, F(2, 3, 4), kw=dict(axis1=2, axis2=0), tag="axes")
C(np.cumsum, F(3, 4), kw=dict(axis=1))
C(np.cumsum, F(3, 4), tag="flat")
C(np.cumprod, F(3, 4, lo=0.5, hi=1.5), kw=dict(axis=0))
C(np.cumprod, F(2, 3), tag="flat")
C(np.cumprod, F(make=lambda rng: [0.5, 0.0, 1.5, -0.7]), tag="a-zero")
C(np.median, F(3, 5), kw=dict(axis=1))
C(np.median, F(4, 2), tag="even")
C(np.percentile, F(3, 5), K(np.array([10.0, 50.0, 90.0])), kw=dict(axis=-1, keepdims=True))
C(np.quantile, F(3, 5), K(0.3), kw=dict(axis=0))
for _method in ("lower", "higher", "nearest", "midpoint"):
    C(np.quantile, F(7), K(0.4), kw=dict(method=_method), tag=_method)
C(np.average, F(3, 4), kw=dict(axis=1))
C(np.average, F(3, 4), K(1), F(4, **POS), tag="weights")
C(np.average, F(3, 4), K(0), F(3, 4, **POS), tag="weights-full")
C(np.average, F(2, 3, 4), K((2, 0)), F(4, 2, **POS), kw=dict(keepdims=True),
  tag="weights-along-axes")
_NAN = dict(nan=((0, 1), (2, 3)))
for _fn in (np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanprod, np.nanvar, np.nanstd,
            np.nanmedian):
    C(_fn, F(3, 4, **_NAN))
    C(_fn, F(3, 4, **_NAN), kw=dict(axis=1, keepdims=True), tag="axis")
C(np.nanvar, F(3, 4, **_NAN), kw=dict(axis=0, ddof=1), tag="ddof")
C(np.nanpercentile, F(3, 5, **_NAN), K(np.array([25.0, 60.0])), kw=dict(axis=1))
C(np.nanquantile, F(3, 5, **_NAN), K(0.7))
C(np.nancumsum, F(3, 4, **_NAN), kw=dict(axis=1))
# arguments after the array given by position, as numpy's signatures order them
C(np.nanmax, F(3, 4, **_NAN), K(1), tag="axis-by-position")
C(np.nanvar, F(3, 4, **_NAN), K(0), K(None), K(None), K(1), tag="ddof-by-position")
C(np.median, F(3, 5), K(0), tag="axis-by-position")
C(np.quantile, F(3, 5), K(0.3), K(1), tag="axis-by-position")
C(np.percentile, F(4, 3), K(60.0), K(0), K(None), K(False), K("lower"), K(True),
  tag="all-by-position")
C(np.sum, F(3, 4), K(0), K(None), K(None), K(True), tag="keepdims-by-position")
C(np.std, F(3, 4), K(1), K(None), K(None), K(1), tag="ddof-by-position")
C(np.cumprod, F(3, 4, lo=0.5, hi=1.5), K(1), tag="axis-by-position")
C(np.linalg.norm, F(3, 4), K(2), K(1), K(True), tag="by-position")
C(np.nancumprod, F(3, 4, lo=0.5, hi=1.5, **_NAN), kw=dict(axis=0))
C(np.nancumprod, F(3, 2, lo=0.5, hi=1.5, nan=((1, 0),)), tag="flat")

# -- ufunc methods ---------------------------------------------------------------------------------
C(ADD_REDUCE, F(3, 4), call=np.add.reduce)
C(ADD_REDUCE, F(3, 4), kw=dict(axis=1, keepdims=True), call=np.add.reduce, tag="axis")
C(ADD_ACCUMULATE, F(3, 4), kw=dict(axis=1), call=np.add.accumulate)
C(ADD_REDUCEAT, F(6, 2), K([0, 2, 5]), call=np.add.reduceat)
C(ADD_REDUCEAT, F(6), K([3, 1, 4]), call=np.add.reduceat, tag="unordered")
C(MULTIPLY_REDUCE, F(3, 4), kw=dict(axis=1), call=np.multiply.reduce)
C(MAXIMUM_REDUCE, F(3, 4), call=np.maximum.reduce)
C(MINIMUM_REDUCE, F(3, 4), kw=dict(axis=1), call=np.minimum.reduce)
for _ufunc, _method in OUTERS.items():
    C(_method, F(3), F(2, 2), call=_ufunc.outer)

# -- shapes ----------------------------------------------------------------------------------------
C(np.transpose, F(2, 3, 4))
C(np.transpose, F(2, 3, 4), K((1, 2, 0)), tag="axes")
C(np.reshape, F(3, 4), K((2, 6)))
C(np.reshape, F(3, 4), K((6, -1)), kw=dict(order="F"), tag="F")
C(np.ravel, F(3, 4))
C(np.ravel, F(3, 4), kw=dict(order="F"), tag="F")
C(np.moveaxis, F(2, 3, 4), K(0), K(-1))
C(np.swapaxes, F(2, 3, 4), K(0), K(2))
C(np.squeeze, F(3, 1, 4))
C(np.squeeze, F(1, 3, 1), kw=dict(axis=0), tag="axis")
C(np.expand_dims, F(3, 4), K((0, 2)))
C(np.broadcast_to, F(3, 1), K((2, 3, 4)))
C(np.copy, F(3, 4))
C(np.flip, F(3, 4), kw=dict(axis=1))
C(np.flip, F(3, 4), tag="all")


def _numpy_has_2_vectors_in_cross():
    """numpy < 2.5 takes 2-vectors in np.cross (deprecated in 2.0); later ones refuse them."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            np.cross(np.ones(2), np.ones(2))
        except ValueError:
            return False
    return True


def _as_dtype(x, dtype):
    return np.asarray(x, dtype=dtype)


def _asarray(items):
    return np.asarray(items)


def _array(items):
    return np.array(items)


C(np.asarray, F(3, 4), K(np.float32), call=_as_dtype, h=1e-2)  # (linear: any step)
C(np.asarray, L(F(3), F(3)), call=_asarray, tag="list")
C(np.asanyarray, F(3, 4))
C(np.require, F(3, 4))
C(np.ascontiguousarray, F())  # (a 0-d array: shape (1,))
C(np.ascontiguousarray, F(3, 4), K(np.float32), h=1e-2, tag="dtype")
C(np.asfortranarray, F(3, 4))
C(as_dtype, F(3, 4), K(np.float32), h=1e-2)
C(np.array, L(F(2, 3), F(2, 3), F(2, 3)), call=_array)
C(np.sort, F(3, 4), kw=dict(axis=0))
C(np.sort, F(3, 4), kw=dict(axis=None), tag="flat")
C(np.partition, F(3, 5), K(2))
C(np.partition, F(3, 5), K((1, 3)), kw=dict(axis=None), tag="flat")
C(np.take, F(3, 4), K(np.array([0, 0, 11, 5])))
C(np.take, F(3, 4), K(np.array([[3, 0], [3, 1]])), kw=dict(axis=1), tag="axis")
C(np.take_along_axis, F(3, 4), K(np.array([[0, 0], [3, 1], [2, 2]])), kw=dict(axis=1))
C(np.take_along_axis, F(6), K(np.array([5, 5, 0])), kw=dict(axis=None), tag="flat")
C(np.repeat, F(3, 4), K(2))
C(np.repeat, F(3, 4), K(3), kw=dict(axis=1), tag="axis")
C(np.diff, F(3, 5))
C(np.diff, F(4, 3), kw=dict(n=2, axis=0), tag="n2")
C(np.concatenate, L(F(2, 3), F(4, 3)))
C(np.concatenate, L(F(2, 3), F(4)), kw=dict(axis=None), tag="flat")
C(np.stack, L(F(2, 3), F(2, 3)), kw=dict(axis=1))
C(np.vstack, L(F(3), F(2, 3)))
C(np.hstack, L(F(3), F(2)))
C(np.hstack, L(F(2, 1), F(2, 3)), tag="2d")
C(np.dstack, L(F(3), F(3)))
C(np.column_stack, L(F(3), F(3, 2)))
C(np.block, L(F(2), F(3)))  # (nested lists: tests/test_transforms.py)
if hasattr(np, "row_stack"):
    C(np.row_stack, L(F(2), F(2)), call=np.vstack)
for _fn, _shape in ((np.split, (6, 2)), (np.array_split, (5, 2)), (np.hsplit, (2, 4)),
                    (np.vsplit, (4, 3)), (np.dsplit, (2, 2, 4))):
    C(_fn, F(*_shape), K(2))
C(np.split, F(2, 7), K([2, 3]), kw=dict(axis=1), tag="indices")
C(np.array_split, F(4, 4), K(3), tag="three")
C(np.array_split, F(2, 5), K(3), K(1), tag="axis-by-position")
C(np.roll, F(3, 4), K(2))
C(np.roll, F(3, 4), K((1, -2)), kw=dict(axis=(0, 1)), tag="axes")
C(np.rollaxis, F(2, 3, 4), K(2), K(0))
C(np.tril, F(3, 4), kw=dict(k=1))
C(np.triu, F(2, 3, 3), kw=dict(k=-1))
C(np.tril, F(3), tag="vector")
C(np.diag, F(3), kw=dict(k=1))
C(np.diag, F(3, 4), kw=dict(k=-1), tag="matrix")
C(np.diagonal, F(2, 3, 4), kw=dict(offset=1, axis1=2, axis2=1))
C(np.diagflat, F(2, 2), kw=dict(k=-1))
C(np.fliplr, F(3, 4))
C(np.flipud, F(3, 4))
C(np.rot90, F(3, 4))
C(np.rot90, F(2, 3, 4), kw=dict(k=3, axes=(2, 0)), tag="axes")
C(np.append, F(2, 3), F(4))
C(np.append, F(2, 3), F(1, 3), kw=dict(axis=0), tag="axis")
for _fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    C(_fn, F())
    C(_fn, F(3), tag="1d")
    C(_fn, F(2, 3), tag="2d")
C(np.tile, F(2, 3), K((2, 1, 2)))
C(np.tile, F(3), K(2), tag="int")
C(np.pad, F(3, 4), K(((1, 2), (0, 1))))
for _mode in ("edge", "reflect", "symmetric", "wrap"):
    C(np.pad, F(3, 4), K(2), kw=dict(mode=_mode), tag=_mode)
_CONDITIONS = [np.array([True, False, False, True]), np.array([True, True, False, False])]
C(np.select, K(_CONDITIONS), L(F(4), F(3, 4)), F(4))
C(np.linspace, F(), F(), K(5))
C(np.linspace, F(3), F(2, 3), K(4), kw=dict(endpoint=False, axis=1), tag="arrays")
C(np.gradient, F(6))
C(np.gradient, F(4, 5), K(0.5), kw=dict(axis=1, edge_order=2), tag="axis-spacing")
C(np.gradient, F(5), K(np.array([0.0, 0.5, 1.5, 2.0, 3.5])), tag="coordinates")


def _full(shape, v):
    return np.full(shape, v)


def _full_like(a, v):
    return np.full_like(a, v)


C(np.full, K((2, 3)), F(), call=_full)
C(np.full, K((2, 3)), F(3), call=_full, tag="row")
C(np.full_like, K(np.zeros((2, 3))), F(), call=_full_like)


# -- indexing and index tricks -------------------------------------------------------------------
def _index(x, index):
    return x[index]


for _tag, _index_value in (("slice", (slice(1, 3), slice(None, None, -1))),
                           ("int", (1, 2)), ("fancy-repeated", ([0, 0, 2], [1, 1, 3])),
                           ("mask", np.array([True, False, True])),
                           ("newaxis-ellipsis", (None, Ellipsis, 1)),
                           ("fancy-apart", ([0, 2], slice(None), [1, 0]))):
    C(take_index, F(3, 4, 2) if _tag == "fancy-apart" else F(3, 4), K(_index_value),
      call=_index, tag=_tag)


def _r_two(items):
    return np.r_[items[0], items[1]]


def _c_two(items):
    return np.c_[items[0], items[1]]


C(index_scatter, F(2, 3), K((slice(0, 2), [1, 1, 3])), K((3, 4)), K(np.float64))
# the backward steps of views and writes (rules/array_views.py, rules/array_writes.py),
# differentiable again
C(region_add, F(3, 4), K(View().then("index", (slice(1, 3), 2))), F(2), K((3, 4)),
  K(np.float64))
C(region_add, K(None), K(View().then("transpose", (1, 0))), F(4, 3), K((3, 4)),
  K(np.float64), tag="zeros-base")
C(zero_region, F(3, 4), K(Write(None, (slice(0, 2), [0, 3]), None, None, View(), None,
                                None)))
C(np.r_, L(F(2), F(3)), call=_r_two)
C(np.r_, L(F(), F(3)), call=_r_two, tag="0d")
C(np.c_, L(F(3), F(3, 2)), call=_c_two)

# -- products and linear algebra -------------------------------------------------------------------
C(np.matmul, F(3, 4), F(4, 2))
C(np.matmul, F(4), F(2, 4, 3), tag="vector-stack")
C(np.matmul, F(2, 1, 3, 4), F(4, 2), tag="broadcast")
C(np.matmul, F(4), F(4), tag="vectors")
C(np.matmul, F(3, 4), F(4), tag="matrix-vector")
C(np.dot, F(3, 4), F(4, 2))
C(np.dot, F(), F(3), tag="0d")
C(np.dot, F(4), F(4), tag="vectors")
C(np.dot, F(2, 3, 4), F(5, 4, 2), tag="3d")
C(np.inner, F(2, 3), F(4, 3))
C(np.inner, F(3), F(), tag="0d")
C(np.outer, F(3), F(2, 2))
C(np.vdot, F(2, 3), F(3, 2))
C(np.tensordot, F(2, 3, 4), F(3, 4, 5))
C(np.tensordot, F(2, 3, 4), F(4, 2), K(([0, 2], [1, 0])), tag="pairs")
C(np.tensordot, F(2, 3), F(4), K(0), tag="outer")
C(np.kron, F(2, 3), F(3))
C(np.kron, F(2, 2), F(2, 3), tag="2d")
C(np.cross, F(4, 3), F(3))
C(np.cross, F(3, 2), F(2, 3), kw=dict(axisa=0, axisb=1, axisc=0), tag="axes")
if _numpy_has_2_vectors_in_cross():
    C(np.cross, F(4, 2), F(2), tag="2-vectors")
C(np.einsum, K("ij,jk->ik"), F(3, 4), F(4, 2))
C(np.einsum, K("...ij,...j"), F(2, 3, 4), F(4), tag="ellipsis-implicit")
C(np.einsum, K("ii->i"), F(3, 3), tag="diagonal")
C(np.einsum, K("iij,j"), F(3, 3, 2), F(2), tag="trace-implicit")
C(np.einsum, K("ij,jk,kl->il"), F(2, 3), F(3, 4), F(4, 2), tag="three")
C(np.einsum, K("ij->"), F(3, 4), tag="sum")
C(np.einsum, K("ij,j->ij"), F(3, 4), F(1), tag="broadcast-size-1")
C(np.einsum, F(3, 4), K([0, 1]), F(4, 2), K([1, 2]), K([0, 2]), tag="sublists")
C(np.linalg.multi_dot, L(F(2, 3), F(3, 4), F(4)))
C(np.linalg.multi_dot, L(F(3), F(3, 4), F(4, 2)), tag="vector-first")


def _matrix(n, shift=3.0):
    return lambda rng: rng.uniform(-1.0, 1.0, (n, n)) + shift * np.eye(n)


def _stack(count, n):
    return lambda rng: np.stack([_matrix(n)(rng) for _ in range(count)])


def _spd(n):
    def make(rng):
        a = rng.uniform(-1.0, 1.0, (n, n))
        return a @ a.T + n * np.eye(n)
    return make


def _symmetric_spread(n):
    def make(rng):
        a = rng.uniform(-0.3, 0.3, (n, n))
        return a + a.T + np.diag(np.arange(n) * 1.5)
    return make


def _spread(m, n):
    def make(rng):
        u, _ = np.linalg.qr(rng.standard_normal((m, m)))
        v, _ = np.linalg.qr(rng.standard_normal((n, n)))
        s = np.zeros((m, n))
        k = min(m, n)
        s[np.arange(k), np.arange(k)] = 1.0 + np.arange(k)[::-1] * 0.8
        return u @ s @ v.T
    return make


C(np.linalg.inv, F(make=_matrix(3)))
C(np.linalg.inv, F(make=_stack(2, 3)), tag="stack")
C(np.linalg.det, F(make=_matrix(3)))
C(np.linalg.det, F(make=_stack(2, 2)), tag="stack")
C(np.linalg.slogdet, F(make=_matrix(3, shift=-3.0)))
C(np.linalg.solve, F(make=_matrix(3)), F(3))
C(np.linalg.solve, F(make=_stack(2, 3)), F(2, 3, 2), tag="stack")
C(np.linalg.cholesky, F(make=_spd(3)))
C(np.linalg.cholesky, F(make=_spd(3)), kw=dict(upper=True), tag="upper")
C(np.linalg.eigh, F(make=_symmetric_spread(3)))
C(np.linalg.eigh, F(make=_symmetric_spread(3)), K("U"), tag="upper")
C(np.linalg.eigvalsh, F(make=_symmetric_spread(3)))
C(np.linalg.svd, F(make=_spread(3, 3)))
C(np.linalg.svd, F(make=_spread(4, 3)), kw=dict(full_matrices=False), tag="tall")
C(np.linalg.svd, F(make=_spread(2, 4)), kw=dict(full_matrices=False), tag="wide")
C(np.linalg.svd, F(make=_spread(3, 4)), kw=dict(compute_uv=False), tag="values")
if hasattr(np.linalg, "svdvals"):
    C(np.linalg.svdvals, F(make=_spread(4, 2)))
C(np.linalg.qr, F(make=_spread(4, 3)))
C(np.linalg.qr, F(make=_matrix(3)), kw=dict(mode="complete"), tag="square")
C(np.linalg.qr, F(make=_spread(3, 5)), tag="wide")
C(np.linalg.qr, F(make=_spread(4, 2)), kw=dict(mode="r"), tag="r")
C(np.linalg.pinv, F(make=_spread(4, 3)))
C(np.linalg.pinv, F(make=_spread(2, 3)), tag="wide")
C(np.linalg.matrix_power, F(make=_matrix(3, 1.0)), K(3))
C(np.linalg.matrix_power, F(make=_matrix(3)), K(-2), tag="negative")
C(np.linalg.matrix_power, F(make=_matrix(2)), K(0), tag="zero")
C(np.linalg.lstsq, F(make=_spread(5, 3)), F(5), kw=dict(rcond=None))
C(np.linalg.lstsq, F(make=_spread(5, 2)), F(5, 2), kw=dict(rcond=None), tag="columns")
C(np.linalg.lstsq, F(make=_spread(2, 4)), F(2), kw=dict(rcond=None), tag="wide")
for _ord in (None, 1, 2, 3, 0.5, np.inf, -np.inf):
    C(np.linalg.norm, F(5), K(_ord), tag=f"vector-{_ord}")
for _ord in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
    C(np.linalg.norm, F(make=_spread(3, 4)), K(_ord), tag=f"matrix-{_ord}")
C(np.linalg.norm, F(2, 3, 4), kw=dict(axis=-1, keepdims=True), tag="axis")
C(np.linalg.norm, F(2, 3, 4), K(1), K((2, 0)), tag="matrix-axes")
C(np.linalg.norm, F(2, 3, 4), tag="flat")
if hasattr(np.linalg, "vector_norm"):
    C(np.linalg.vector_norm, F(3, 4), kw=dict(axis=0, ord=3))
    C(np.linalg.matrix_norm, F(2, 3, 4), kw=dict(ord="nuc"))

# -- complex values (rules/complex_values.py) and numpy.fft (rules/fft.py) -----------------------
Z = dict(complex=True)
for _fn, _domain in ((np.exp, {}), (np.log, POS), (np.sqrt, POS), (np.sin, {}),
                     (np.arcsin, INSIDE), (np.arctanh, INSIDE), (np.reciprocal, POS),
                     (np.log1p, POS), (np.square, {})):
    C(_fn, F(3, 4, **_domain, **Z), tag="complex")
for _fn in (np.multiply, np.divide, np.add):
    C(_fn, F(3, 4, **POS, **Z), F(4, **POS, **Z), tag="complex")
C(np.multiply, F(3, 4), F(3, 4, **Z), tag="real-by-complex")
C(np.power, F(3, 4, **POS, **Z), K(3.0), tag="complex")
C(np.sum, F(3, 4, **Z), kw=dict(axis=1), tag="complex")
C(np.cumprod, F(3, 4, **Z), kw=dict(axis=0), tag="complex")
C(np.matmul, F(3, 4, **Z), F(4, 2, **Z), tag="complex")
C(np.einsum, K("ij,jk->ik"), F(3, 4, **Z), F(4, 2), tag="complex")
C(np.linalg.inv, F(make=lambda rng: rng.uniform(-1, 1, (3, 3)) + 3 * np.eye(3), **Z),
  tag="complex")
C(np.linalg.det, F(make=lambda rng: rng.uniform(-1, 1, (3, 3)) + 2 * np.eye(3), **Z),
  tag="complex")
C(take_index, F(3, 4, **Z), K((1, slice(1, 3))), call=lambda x, i: x[i], tag="complex")
C(take_index, F(3, 4, **Z), K((2, 1)), call=lambda x, i: x[i], tag="complex-element")
C(np.concatenate, L(F(2, 3, **Z), F(2, 3)), tag="complex")
C(cv.absolute, F(3, 4, **Z), call=np.absolute)
C(cv.arccosh, F(3, 4, lo=1.5, hi=2.5, **Z), call=np.arccosh)
C(cv.power, F(3, 4, **Z), F(4, **Z), call=np.power)
C(cv.tanh, F(3, 4, lo=-5.0, hi=5.0, **Z), call=np.tanh)
C(cv.arcsinh, F(3, 4, **Z), call=np.arcsinh)
C(cv.power, F(3, 4, lo=0.5, hi=2.0), F(4, **Z), call=np.power, tag="real-base")
C(cv.float_power, F(3, 4, **Z), F(4, **Z), call=np.float_power)
C(cv.real, F(3, 4, **Z), call=np.real)
C(cv.imag, F(3, 4, **Z), call=np.imag)
C(cv.conjugate, F(3, 4, **Z), call=np.conjugate)
C(cv.real_if_close, F(3, 4, **Z), call=np.real_if_close)
C(cv.vdot, F(2, 3, **Z), F(3, 2, **Z), call=np.vdot)
C(cv.vdot, F(6), F(6, **Z), call=np.vdot, tag="real-complex")
C(np.angle, F(3, 4, **Z))
C(np.angle, F(3, 4, **Z), K(True), tag="deg")
C(np.angle, F(3, 4, lo=0.5, hi=1.0), tag="real")
_ROTATION = np.array([[0.0, -2.0, 0.3], [1.5, 0.1, 0.2], [0.4, 0.3, -1.0]])
C(np.linalg.eig, F(make=lambda rng: _ROTATION + 0.1 * rng.uniform(-1, 1, (3, 3))),
  tag="complex-pair")
C(np.linalg.eig, F(make=lambda rng: rng.uniform(-1, 1, (3, 3)), **Z), tag="complex")
C(np.linalg.eig, F(make=_symmetric_spread(3)), tag="real")
C(np.linalg.eigvals, F(make=lambda rng: _ROTATION + 0.1 * rng.uniform(-1, 1, (3, 3))))
C(np.linalg.eigvals, F(make=lambda rng: rng.uniform(-1, 1, (3, 3)), **Z), tag="complex")
for _cname, _domain in (("exp", {}), ("log", POS), ("log10", POS), ("sqrt", POS), ("sin", {}),
                      ("cos", {}), ("tan", {}), ("sinh", {}), ("cosh", {}), ("tanh", {}),
                      ("asin", INSIDE), ("acos", INSIDE), ("atan", INSIDE), ("asinh", {}),
                      ("acosh", dict(lo=1.5, hi=2.5)), ("atanh", INSIDE), ("phase", POS)):
    C(getattr(cmath, _cname), F(**_domain, **Z), f32=False)  # (cmath's results: complex128)
C(cmath.log, F(**POS, **Z), F(lo=1.5, hi=3.0), f32=False, tag="base")
C(cmath.rect, F(**POS), F(), f32=False)
C(complex, F(), F(), f32=False)
C(complex, F(**Z), f32=False, tag="of-complex")
_fft = np.fft
for _tag, _kw in (("", {}), ("n-ortho", dict(n=6, norm="ortho")),
                  ("cut-forward", dict(n=3, norm="forward"))):
    for _fn in (_fft.fft, _fft.ifft):
        C(_fn, F(3, 4, **Z), kw=_kw, tag=_tag)
        C(_fn, F(4, 3), kw=dict(_kw, axis=0), tag=f"{_tag}-real-axis0")
    C(_fft.rfft, F(3, 4), kw=_kw, tag=_tag)
    C(_fft.ihfft, F(3, 4), kw=_kw, tag=_tag)
    C(_fft.irfft, F(3, 4, **Z), kw=_kw, tag=_tag)
    C(_fft.hfft, F(3, 4, **Z), kw=_kw, tag=_tag)
C(_fft.irfft, F(4, 3, **Z), kw=dict(n=5, axis=0), tag="odd-axis0")
for _fn in (_fft.fft2, _fft.ifft2, _fft.fftn, _fft.ifftn):
    C(_fn, F(3, 4, **Z))
    C(_fn, F(2, 3, 4), kw=dict(s=(4, 2), axes=(0, 2), norm="ortho"), tag="s-axes")
for _fn in (_fft.rfft2, _fft.rfftn):
    C(_fn, F(3, 4))
    C(_fn, F(2, 3, 4), kw=dict(s=(3, 5), axes=(2, 1), norm="forward"), tag="s-axes")
for _fn in (_fft.irfft2, _fft.irfftn):
    C(_fn, F(3, 4, **Z))
    C(_fn, F(2, 3, 4, **Z), kw=dict(s=(4, 6), axes=(0, 2)), tag="s-axes")
for _fn in (_fft.fftshift, _fft.ifftshift):
    C(_fn, F(3, 5, **Z))
    C(_fn, F(3, 5), kw=dict(axes=0), tag="axis0")

# -- scipy.special -----------------------------------------------------------------------------
if sc is not None:
    for _fn, _domain in ((sc.expit, {}), (sc.logit, dict(lo=0.1, hi=0.9)),
                         (sc.log_expit, {}), (sc.gammaln, POS), (sc.gamma, POS),
                         (sc.psi, POS), (sc.erf, {}), (sc.erfc, {}), (sc.erfcx, {}),
                         (sc.erfinv, INSIDE), (sc.ndtr, {}), (sc.log_ndtr, {}),
                         (sc.entr, POS)):
        C(_fn, F(3, 4, **_domain))
    C(sc.xlogy, F(3, 4), F(4, **POS))
    C(sc.xlog1py, F(3, 4), F(4, **POS))
    C(sc.betaln, F(3, 4, **POS), F(4, **POS))
    C(scipy_special._zeta, K(3.0), F(3, 4, **POS))
    C(sc.polygamma, K(1), F(3, 4, **POS))
    for _fn, _domain in ((sc.rgamma, dict(lo=-2.5, hi=3.0)), (sc.erfcinv, dict(lo=0.2, hi=1.8)),
                         (sc.j0, WIDE), (sc.j1, WIDE), (sc.y0, BESSEL_POS),
                         (sc.y1, BESSEL_POS), (sc.i0, dict(lo=-2.0, hi=2.0)),
                         (sc.i0e, dict(lo=-2.0, hi=2.0)), (sc.i1, dict(lo=-2.0, hi=2.0)),
                         (sc.i1e, dict(lo=-2.0, hi=2.0)), (sc.k0, BESSEL_POS),
                         (sc.k0e, BESSEL_POS), (sc.k1, BESSEL_POS), (sc.k1e, BESSEL_POS)):
        C(_fn, F(3, 4, **_domain))
    C(sc.rgamma, F(make=lambda rng: np.array([0.0, -1.0, -2.0, -3.0])), tag="poles")
    C(sc.jv, K(1.5), F(3, 4, **BESSEL_POS))
    C(sc.jv, K(np.array([0.0, 1.0, 2.5, -0.5])), F(3, 4, **BESSEL_POS), tag="orders")
    C(sc.jv, K(3), F(3, 4, **WIDE), tag="jn")
    C(sc.yv, K(0.7), F(3, 4, **BESSEL_POS))
    C(sc.yn, K(2), F(3, 4, **BESSEL_POS))
    C(sc.iv, K(1.5), F(3, 4, lo=0.2, hi=3.0))
    C(sc.ive, K(1.0), F(3, 4, lo=-3.0, hi=3.0))
    C(sc.ive, K(2.5), F(3, 4, lo=0.2, hi=3.0), tag="fraction")
    C(sc.kv, K(1.3), F(3, 4, **BESSEL_POS))
    C(sc.kve, K(0.5), F(3, 4, **BESSEL_POS))
    C(sc.kn, K(np.array([0, 1, 2, 3])), F(3, 4, **BESSEL_POS))
    C(sc.gammainc, K(2.5), F(3, 4, lo=0.2, hi=4.0))
    C(sc.gammaincc, K(np.array([0.5, 1.0, 2.5, 7.0])), F(3, 4, lo=0.2, hi=4.0))
    C(sc.betainc, K(2.0), K(3.5), F(3, 4, lo=0.1, hi=0.9)),
    C(sc.betaincc, K(0.7), K(2.5), F(3, 4, lo=0.1, hi=0.9)),
    C(sc.stdtr, K(np.array([1.5, 3.0, 4.0, 9.0])), F(3, 4, lo=-2.0, hi=2.0))
    C(sc.beta, F(3, 4, **POS), F(4, **POS))
    C(sc.multigammaln, F(3, 4, lo=2.0, hi=4.0), K(3))
    C(sc.polygamma, K(np.array([[0], [1], [2]])), F(3, 4, **POS), tag="orders")
    C(sc.polygamma, K(np.array([[0], [3]])), F(4, **POS), tag="broadcast")
    C(sc.logsumexp, F(3, 4))
    C(sc.logsumexp, F(3, 4), K(1), F(4, **POS), kw=dict(keepdims=True), tag="b")
    C(sc.softmax, F(3, 4), kw=dict(axis=1))
    C(sc.log_softmax, F(3, 4), kw=dict(axis=0))

# -- functions with no derivative: the arguments of a call ---------------------------------
_X = F(3, 4)
PLAIN_CASES = {fn: (_X,) for fn in (
    np.isnan, np.isinf, np.isfinite, np.argmax, np.argmin, np.argsort, np.shape, np.ndim,
    np.size, np.zeros_like, np.ones_like, np.empty_like, np.any, np.all, np.count_nonzero,
    np.nonzero, np.sign, np.floor, np.ceil, np.round, np.rint, np.trunc, np.imag,
    np.iscomplexobj, np.isrealobj, np.isreal, np.iscomplex, np.signbit, np.fix, np.around,
    np.logical_not, np.nanargmax, np.nanargmin, np.flatnonzero, np.argwhere, np.isneginf,
    np.isposinf, np.spacing, np.result_type)}
PLAIN_CASES.update({fn: (_X, _X) for fn in (
    np.allclose, np.isclose, np.greater, np.less, np.greater_equal, np.less_equal, np.equal,
    np.not_equal, np.floor_divide, np.heaviside, np.logical_and, np.logical_or,
    np.logical_xor, np.array_equal, np.array_equiv, np.isin, np.may_share_memory,
    np.shares_memory, np.nextafter)})
PLAIN_CASES.update({np.argpartition: (_X, K(1)), np.searchsorted: (F(5), F(3)),
                    np.digitize: (_X, K(np.array([-0.5, 0.0, 0.5])))})
_INTEGERS = K(np.array([3, 5, 6]))
PLAIN_CASES.update({fn: (_X, _INTEGERS) for fn in (np.gcd, np.lcm, np.bitwise_and,
                                                    np.bitwise_or, np.bitwise_xor,
                                                    np.left_shift, np.right_shift)})
PLAIN_CASES[np.invert] = (_X,)
if sc is not None:
    PLAIN_CASES[sc.gammasgn] = (F(3, 4, lo=-2.5, hi=2.5),)
