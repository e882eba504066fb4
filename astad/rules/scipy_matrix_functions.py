"""scipy.linalg's matrix functions and matrix equations: expm, sqrtm, solve_sylvester and
solve_continuous_lyapunov, each a primitive with one vjp and one jvp per argument.

Unlike the solvers of rules/scipy_linalg.py these are not written in numpy's operations:
scipy computes the value, and each derivative is again a call of one of these functions,
so a derivative of a derivative is one more call of the same rules, at any depth and in
both modes:

- ``expm``: its Fréchet derivative ``L(A, E)`` is the upper right block of
  ``expm([[A, E], [0, A]])`` (Higham, *Functions of Matrices*, 2008, thm. 3.6); the vjp is
  ``L(A^T, G)``, as ``<G, L(A, E)> = <L(A^T, G), E>``.
- ``sqrtm``: ``X X = A`` gives ``dX X + X dX = dA``, a Sylvester equation for ``dX``; the
  vjp solves the transposed one, ``X^T W + W X^T = G``.
- ``solve_sylvester(A, B, Q)``, ``X`` with ``A X + X B = Q``: ``dX`` solves
  ``A dX + dX B = dQ - dA X - X dB``; with ``W`` solving ``A^T W + W B^T = G`` the
  cotangents are ``Q: W``, ``A: -W X^T``, ``B: -X^T W``.
- ``solve_continuous_lyapunov(A, Q)`` is ``solve_sylvester(A, A^T, Q)`` (real matrices).

Cotangents and tangents may carry leading axes (every row of a Jacobian at once); scipy's
Sylvester solver takes one matrix, so those are solved one by one. A complex result
(``sqrtm`` of a matrix with a negative eigenvalue) is refused, as every rule's is; a real
root that scipy before 1.16 returns as a complex array is taken as real (``real_sqrtm``).
Registered on first use with scipy.linalg's other rules (rules/scipy_loader.py).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

from ..core.boundary import contains_dual
from ..errors import NotDifferentiableError, user_location
from ..registry import RECORDS, define, has_rule
from ..runtime.array_dual import dispatch
from .array import (NEW_ARRAYS, batched_vjps, refuse_arguments, register_jvp, register_vjp,
                    result_kinds)


def _call(fn, *args):
    """``fn(*args)`` through its rule when a differentiated value is among ``args`` (a
    derivative of a derivative), scipy's own call otherwise."""
    return dispatch(fn, args, {}) if contains_dual(args) else fn(*args)


def _t(a):
    return np.swapaxes(a, -1, -2)


def _lead(*arrays):
    return np.broadcast_shapes(*[np.shape(a)[:-2] for a in arrays])


def _expand(a, lead):
    return np.broadcast_to(a, lead + np.shape(a)[-2:])


# -- expm ---------------------------------------------------------------------------------------
def frechet_expm(a, e):
    """``L(a, e)``, the derivative of expm at ``a`` in direction ``e``: the upper right
    block of expm of the block matrix ``[[a, e], [0, a]]``."""
    n, lead = np.shape(a)[-1], _lead(a, e)
    a = _expand(a, lead)
    top = np.concatenate([a, _expand(e, lead)], axis=-1)
    bottom = np.concatenate([np.zeros(lead + (n, n)), a], axis=-1)
    return _call(sl.expm, np.concatenate([top, bottom], axis=-2))[..., :n, n:]


# -- Sylvester equations --------------------------------------------------------------------------
def _solve_plain(a, b, q):
    """scipy's solver, one matrix at a time over leading axes."""
    lead = _lead(a, b, q)
    if not lead:
        return sl.solve_sylvester(a, b, q)
    a, b, q = (_expand(m, lead) for m in (a, b, q))
    out = np.empty(lead + q.shape[-2:])
    for index in np.ndindex(*lead):
        out[index] = sl.solve_sylvester(a[index], b[index], q[index])
    return out


def sylvester(a, b, q):
    """``x`` with ``a x + x b = q`` (leading axes allowed), through astad's rule when a
    differentiated value is among the arguments."""
    if contains_dual((a, b, q)):
        return dispatch(sl.solve_sylvester, (a, b, q), {})
    return _solve_plain(a, b, q)


def _sylvester_adjoint(g, a, b):
    return sylvester(_t(a), _t(b), g)


def real_sqrtm(a, *args, **kwargs):
    """scipy.linalg.sqrtm's root, real where it is real: scipy before 1.16 gives a
    complex array for a real matrix with complex eigenvalues even when the root is real
    (its imaginary part rounding error), where scipy 1.16 gives the real part."""
    root = sl.sqrtm(a, *args, **kwargs)
    if type(root) is np.ndarray and root.dtype.kind == "c" and np.isrealobj(a):
        size = max(1.0, float(np.max(np.abs(root.real), initial=0.0)))
        if float(np.max(np.abs(root.imag), initial=0.0)) <= 1e-10 * size:
            return root.real.copy()
    return root


def _sqrtm_vjp(g, x, a, *args, **kwargs):
    return _sylvester_adjoint(g, x, x)


def _sqrtm_jvp(t, x, a, *args, **kwargs):
    return sylvester(x, x, t)


def _sylvester_vjps():
    def q(g, x, a, b, q_):
        return _sylvester_adjoint(g, a, b)

    def a_(g, x, a, b, q_):
        return -(_sylvester_adjoint(g, a, b) @ _t(x))

    def b_(g, x, a, b, q_):
        return -(_t(x) @ _sylvester_adjoint(g, a, b))
    return a_, b_, q


def _sylvester_jvps():
    def a_(t, x, a, b, q):
        return sylvester(a, b, -(t @ x))

    def b_(t, x, a, b, q):
        return sylvester(a, b, -(x @ t))

    def q_(t, x, a, b, q):
        return sylvester(a, b, t)
    return a_, b_, q_


def _lyapunov_vjps():
    def a_(g, x, a, q):  # d(A X + X A^T) = dA X + X dA^T: both terms of dA
        w = _sylvester_adjoint(g, a, _t(a))
        return -(w @ _t(x)) - _t(_t(x) @ w)

    def q_(g, x, a, q):
        return _sylvester_adjoint(g, a, _t(a))
    return a_, q_


def _lyapunov_jvps():
    def a_(t, x, a, q):
        return sylvester(a, _t(a), -(t @ x) - x @ _t(t))

    def q_(t, x, a, q):
        return sylvester(a, _t(a), t)
    return a_, q_


def _no_tuple(name):
    def check(args, kwargs):
        if kwargs.get("disp", True) is False or len(args) > 1 and args[1] is False:
            raise NotDifferentiableError(
                f"astad differentiates scipy.linalg.{name} with disp=True (its matrix "
                "alone), not the pair disp=False gives", *user_location())
        return args, kwargs
    return check


# name: (vjps, jvps)
RULES = {
    "expm": ((lambda g, r, a: frechet_expm(_t(a), g),),
             (lambda t, r, a: frechet_expm(a, t),)),
    "sqrtm": ((_sqrtm_vjp,), (_sqrtm_jvp,)),
    "solve_sylvester": (_sylvester_vjps(), _sylvester_jvps()),
    "solve_continuous_lyapunov": (_lyapunov_vjps(), _lyapunov_jvps()),
}


# name: (differentiable in, limits), as docs/numpy.md lists them
TABLE = {
    "expm": ("A", "any order: its derivative is expm of a block matrix"),
    "sqrtm": ("A", "real square roots (a complex one is refused); disp=True"),
    "solve_sylvester": ("a, b, q", "-"),
    "solve_continuous_lyapunov": ("a, q", "real matrices"),
}


def register_all(registered: list) -> None:
    """Register every rule here (a rule the user registered first is kept), appending
    the functions given rules to ``registered``."""
    for name, (vjps, jvps) in RULES.items():
        fn = getattr(sl, name)
        if has_rule(fn):
            continue
        primitive = real_sqrtm if name == "sqrtm" else fn  # (scipy's calls reach it)
        register_vjp(primitive, *vjps)
        register_jvp(primitive, *jvps, batched=True)
        result_kinds(NEW_ARRAYS, primitive)
        batched_vjps(primitive)
        if name == "sqrtm":
            RECORDS[primitive].check = _no_tuple(name)
            refuse_arguments(primitive, {}, "scipy.linalg.sqrtm")  # (its name in errors)
            define("scipy_linalg_sqrtm", lambda tape, *args, **kwargs: dispatch(
                real_sqrtm, args, kwargs), fn)
        registered.append(fn)
