"""Complex values, with JAX's convention: a cotangent ``w`` of a complex value pairs with
a change ``dz`` as ``Re(sum(w * dz))``, without conjugation. Then a holomorphic function's
vjp is ``w * f'(z)`` and a linear map's is its transpose: the formula of the real rule, so
the rules below marked ``complex`` serve complex values as they are; a real value's
cotangent is the real part of what reaches it (``runtime/array_dual.real_part``); and the
gradient of a real function of ``z = x + iy`` is ``df/dx - i df/dy`` (``jax.grad``'s).

Every other rule holds for real values only and is refused naming its function when a
complex value reaches it (``runtime/array_dual.dispatch``), except the functions that are
not holomorphic and have a rule of their own for complex values (``|z|``, ``real``,
``imag``, ``conj``, ``angle``, ``real_if_close``, ``vdot``), and the holomorphic ones whose
real formula does not extend (``arccosh``'s branch, ``power``'s exponent, ``tanh`` and
``arcsinh`` far out): a function of
their own, registered like any other, that dispatch takes when an operand is complex.
"""
from __future__ import annotations

import cmath
import math

import numpy as np

from ..registry import RECORDS, record
from .array import batched_vjps, register_elementwise, register_jvp, register_vjp
from .array_axes import swap_last
from .linalg_decompositions import eigen_gaps, register_outputs

# -- the rules that hold for complex values as they are ----------------------------------
_HOLOMORPHIC = (
    "add subtract multiply divide true_divide negative positive square "
    "reciprocal exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan arcsin arccos arctan "
    "sinh cosh arctanh")
_LINEAR = (  # (or multilinear, with real coefficients; or piecewise constant: round)
    "sum mean prod cumsum cumprod nansum nanmean nanprod nancumsum nancumprod average "
    "trace diff gradient reshape ravel transpose swapaxes moveaxis rollaxis expand_dims "
    "squeeze broadcast_to flip fliplr flipud rot90 roll repeat tile diag diagflat "
    "diagonal tril triu take take_along_axis concatenate stack hstack vstack dstack "
    "column_stack row_stack block split array_split hsplit vsplit dsplit unstack "
    "atleast_1d atleast_2d atleast_3d pad copy asarray asanyarray ascontiguousarray "
    "asfortranarray require where select append zeros_like ones_like "
    "empty_like full_like linspace matmul dot inner outer tensordot einsum kron cross "
    "matrix_transpose permute_dims trim_zeros around round rint")
_LINALG = "inv solve det matrix_power multi_dot"


def _numpy(names, module=np):
    return [getattr(module, name) for name in names.split() if hasattr(module, name)]


def holds_for_complex(*fns) -> None:
    """The rules of ``fns`` hold for complex values as they are (JAX's convention)."""
    for fn in fns:
        found = RECORDS[fn]  # (a rule of its own first)
        found.complex = True


holds_for_complex(*_numpy(_HOLOMORPHIC), *_numpy(_LINEAR), *_numpy(_LINALG, np.linalg),
                  (np.add, "reduce"), (np.add, "accumulate"), (np.add, "outer"),
                  (np.add, "reduceat"), (np.multiply, "reduce"), (np.multiply, "outer"),
                  (np.subtract, "outer"), (np.add, "at"), np.copyto, np.put,
                  np.put_along_axis,
                  np.lib.stride_tricks.as_strided, np.lib.stride_tricks.sliding_window_view)


def _astad_functions():
    """The functions astad itself dispatches as (indexing, writes, conversions: linear;
    the product of the others: holomorphic)."""
    from ..runtime.array_dual import take_index
    from .array_shapes import as_dtype, index_scatter
    from .array_views import region_add
    from .array_writes import zero_region
    from .numpy_values import as_array
    from .array_reductions import others_product  # (np.prod's: a polynomial)
    return take_index, as_dtype, index_scatter, region_add, zero_region, as_array, \
        others_product


holds_for_complex(*_astad_functions())


# -- the functions that are not holomorphic: a rule of their own for complex values -------
def for_complex(fn, copy=False):
    """A function standing for ``fn`` on complex values, whose rule is registered on it
    (``fn``'s record names it, so dispatch takes it when an operand is complex). It is
    named as numpy's, so that errors name the function the user called. ``copy``: its
    result a copy, where numpy's is a view of another dtype (``np.real(z)``), which the
    memory model does not follow."""
    def twin(*args, **kwargs):
        return np.copy(fn(*args, **kwargs)) if copy else fn(*args, **kwargs)
    twin.__name__ = twin.__qualname__ = fn.__name__
    twin.__module__ = "numpy"  # (numpy's dispatch takes values of enclosing levels)
    record(fn).complex = twin
    return twin


def _where_nonzero(z, value):
    """``value`` where ``z != 0``, 0 where it is (the derivative JAX gives at 0)."""
    nonzero = z != 0
    return np.where(nonzero, value(np.where(nonzero, z, 1.0)), 0.0)


# |z|: d|z| = Re(conj(z) dz) / |z|
absolute = for_complex(np.absolute)
register_vjp(absolute, lambda g, r, z: g * _where_nonzero(z, lambda s: np.conj(s) / np.abs(s)))
register_jvp(absolute, lambda t, r, z: np.real(
    _where_nonzero(z, lambda s: np.conj(s) / np.abs(s)) * t), batched=True)

# arccosh: the real partial 1 / sqrt(z^2 - 1) is not the derivative of numpy's branch,
# 1 / (sqrt(z - 1) sqrt(z + 1)), off the real line
arccosh = for_complex(np.arccosh)
register_elementwise(arccosh, lambda z, r: 1.0 / (np.sqrt(z - 1.0) * np.sqrt(z + 1.0)))

# tanh and arcsinh: the real partials switch, for large |x|, to forms of |x| (sech^2 by
# exp(-2|x|), 1 / |x|), which are not the complex derivative; here the one formula
tanh = for_complex(np.tanh)
register_elementwise(tanh, lambda z, r: 1.0 - r * r)
arcsinh = for_complex(np.arcsinh)
register_elementwise(arcsinh, lambda z, r: 1.0 / np.sqrt(1.0 + z * z))

# x ** y: the real rule's exponent partial reads log(x) only where x > 0; for complex
# values it is r log(x) (numpy's principal branch) wherever r is not 0
def _power_partials(fn):
    def base(x, y, r):  # y x^(y-1); at x = 0: 1 for y = 1, 0 for y = 0 or Re y > 1
        nonzero = x != 0
        at_zero = np.where(y == 1, 1.0, np.where((y == 0) | (np.real(y) > 1), 0.0, np.inf))
        return np.where(nonzero, y * fn(np.where(nonzero, x, 1.0), y - 1.0), at_zero)
    twin = for_complex(fn)
    register_elementwise(
        twin, base,
        lambda x, y, r: np.where(r != 0, r * np.log(np.where(x != 0, x, 1.0)), 0.0))
    return twin


power, float_power = _power_partials(np.power), _power_partials(np.float_power)

# real, imag, conj: real-linear maps (real(z) = x, imag(z) = y: Re(w dz) = w dx needs w,
# w dy needs -i w; conj: Re(w conj(dz)) = Re(conj(w) dz))
real = for_complex(np.real, copy=True)
register_vjp(real, lambda g, r, z: g + 0j)
register_jvp(real, lambda t, r, z: np.real(t), batched=True)
imag = for_complex(np.imag, copy=True)
register_vjp(imag, lambda g, r, z: -1j * g)
register_jvp(imag, lambda t, r, z: np.imag(t), batched=True)
conjugate = for_complex(np.conjugate)
register_vjp(conjugate, lambda g, r, z: np.conj(g))
register_jvp(conjugate, lambda t, r, z: np.conj(t), batched=True)


def _real_if_close_vjp(g, r, z, tol=100):
    return g if np.iscomplexobj(r) else g + 0j  # (numpy gave z, or its real part)


def _real_if_close_jvp(t, r, z, tol=100):
    return t if np.iscomplexobj(r) else np.real(t)


real_if_close = for_complex(np.real_if_close, copy=True)
register_vjp(real_if_close, _real_if_close_vjp)
register_jvp(real_if_close, _real_if_close_jvp, batched=True)


# angle(z) = atan2(y, x): d angle = Im(dz / z) = Re(-i dz / z); 0 for a real array (as
# its piecewise-constant angle), so one rule serves both
def _angle_factor(z, deg):
    return _where_nonzero(z, lambda s: -1j / s) * (180.0 / np.pi if deg else 1.0)


register_vjp(np.angle, lambda g, r, z, deg=False: g * _angle_factor(z, deg))
register_jvp(np.angle, lambda t, r, z, deg=False: np.real(_angle_factor(z, deg) * t),
             batched=True)
holds_for_complex(np.angle)


# vdot(a, b) = sum(conj(a) * b), flattened
def _vdot_vjp(k):
    def vjp(g, r, a, b):
        g = np.expand_dims(g, -1)
        part = np.conj(g * np.ravel(b)) if k == 0 else g * np.ravel(np.conj(a))
        return np.reshape(part, np.shape(g)[:-1] + np.shape((a, b)[k]))
    return vjp


def _vdot_jvp(k):
    def jvp(t, r, a, b):
        flat = np.reshape(t, np.shape(t)[:np.ndim(t) - np.ndim((a, b)[k])] + (-1,))
        return np.sum(np.conj(flat) * np.ravel(b), axis=-1) if k == 0 else \
            np.sum(np.ravel(np.conj(a)) * flat, axis=-1)
    return jvp


vdot = for_complex(np.vdot)
register_vjp(vdot, _vdot_vjp(0), _vdot_vjp(1))
register_jvp(vdot, _vdot_jvp(0), _vdot_jvp(1), batched=True)
batched_vjps(absolute, real, imag, conjugate, real_if_close, np.angle, vdot)
holds_for_complex(absolute, arccosh, tanh, arcsinh, power, float_power, real, imag, conjugate,
                  real_if_close, vdot)


# -- eig, eigvals: a = v diag(w) v^-1, holomorphic in a. numpy's eigenvectors have unit
# length and their largest component real (LAPACK's choice of phase): their derivative
# keeps both, so it is the derivative of what numpy gives.
def _largest(v):
    """A mask of each column's largest component, and that component (a row)."""
    mask = np.arange(np.shape(v)[-1])[:, None] == np.argmax(np.abs(v), axis=-2)[..., None, :]
    return mask, np.sum(v * mask, axis=-2, keepdims=True)


def _eig_vjp(gs, results, a):
    gw, gv = gs
    w, v = results
    inner = 0.0
    if gw is not None:
        inner = np.expand_dims(gw, -2) * np.eye(np.shape(w)[-1])
    if gv is not None:
        if np.iscomplexobj(v):  # the phase's part: Im(dv_k / v_k) of each column removed
            mask, top = _largest(v)
            gv = gv - mask * (1j * np.imag(np.sum(gv * v, axis=-2, keepdims=True)) / top)
        # the length's part: Re(sum(conj(v) * dv)) of each column removed
        held = np.real(np.sum(gv * v, axis=-2, keepdims=True))
        inner = inner + eigen_gaps(w) * (swap_last(v) @ (gv - np.conj(v) * held))
    vt = swap_last(v)
    return np.linalg.solve(vt, inner @ vt)


def _eig_jvp(t, results, a):
    w, v = results
    y = np.linalg.solve(v, t @ v)
    dv = v @ (eigen_gaps(w) * y)
    dv = dv - v * np.real(np.sum(np.conj(v) * dv, axis=-2, keepdims=True))
    if np.iscomplexobj(v):
        mask, top = _largest(v)
        dv = dv - 1j * v * np.imag(np.sum(dv * mask, axis=-2, keepdims=True) / top)
    return np.diagonal(y, axis1=-2, axis2=-1), dv


def _eigvals_vjp(g, r, a):
    w, v = np.linalg.eig(a)
    vt = swap_last(v)
    return np.linalg.solve(vt, (np.expand_dims(g, -2) * np.eye(np.shape(w)[-1])) @ vt)


def _eigvals_jvp(t, r, a):
    w, v = np.linalg.eig(a)
    return np.diagonal(np.linalg.solve(v, t @ v), axis1=-2, axis2=-1)


register_outputs(np.linalg.eig, (_eig_vjp,), (_eig_jvp,), outputs=(0, 1))
register_vjp(np.linalg.eigvals, _eigvals_vjp)
register_jvp(np.linalg.eigvals, _eigvals_jvp, batched=True)
batched_vjps(np.linalg.eigvals)
holds_for_complex(np.linalg.eig, np.linalg.eigvals)


# -- cmath: the holomorphic functions of one number, and phase ---------------------------------
_CMATH = {  # f'(z, r) of each, r = f(z)
    "exp": lambda z, r: r,
    "log10": lambda z, r: 1.0 / (z * np.log(10.0)), "sqrt": lambda z, r: 0.5 / r,
    "sin": lambda z, r: np.cos(z), "cos": lambda z, r: -np.sin(z),
    "tan": lambda z, r: 1.0 + r * r, "sinh": lambda z, r: np.cosh(z),
    "cosh": lambda z, r: np.sinh(z), "tanh": lambda z, r: 1.0 - r * r,
    "asin": lambda z, r: 1.0 / np.sqrt(1.0 - z * z),
    "acos": lambda z, r: -1.0 / np.sqrt(1.0 - z * z),
    "atan": lambda z, r: 1.0 / (1.0 + z * z),
    "asinh": lambda z, r: 1.0 / np.sqrt(1.0 + z * z),
    "acosh": lambda z, r: 1.0 / (np.sqrt(z - 1.0) * np.sqrt(z + 1.0)),
    "atanh": lambda z, r: 1.0 / (1.0 - z * z),
}


def _cmath_rules():
    for name, derivative in _CMATH.items():
        fn = getattr(cmath, name)
        register_vjp(fn, lambda g, r, z, d=derivative: g * d(z, r))
        register_jvp(fn, lambda t, r, z, d=derivative: t * d(z, r), batched=True)
        holds_for_complex(fn)
    register_vjp(cmath.phase, lambda g, r, z: g * _angle_factor(z, False))
    register_jvp(cmath.phase, lambda t, r, z: np.real(_angle_factor(z, False) * t),
                 batched=True)
    # log(z, base) = ln z / ln base
    register_vjp(cmath.log, lambda g, r, z, base=math.e: g / (z * np.log(base)),
                 lambda g, r, z, base=math.e: -g * r / (base * np.log(base)))
    register_jvp(cmath.log, lambda t, r, z, base=math.e: t / (z * np.log(base)),
                 lambda t, r, z, base=math.e: -t * r / (base * np.log(base)), batched=True)
    # rect(modulus, phase) = modulus e^(i phase)
    register_vjp(cmath.rect, lambda g, r, modulus, phase: g * np.exp(1j * phase),
                 lambda g, r, modulus, phase: 1j * g * r)
    register_jvp(cmath.rect, lambda t, r, modulus, phase: t * np.exp(1j * phase),
                 lambda t, r, modulus, phase: 1j * t * r, batched=True)
    holds_for_complex(cmath.phase, cmath.log, cmath.rect)


_cmath_rules()


# complex(re, im) = re + i im: re's cotangent is w's real part (taken as it reaches a real
# value), im's that of i w
register_vjp(complex, lambda g, r, re=0.0, im=0.0: g, lambda g, r, re=0.0, im=0.0: 1j * g)
register_jvp(complex, lambda t, r, re=0.0, im=0.0: t + 0j,
             lambda t, r, re=0.0, im=0.0: 1j * t, batched=True)
holds_for_complex(complex)
