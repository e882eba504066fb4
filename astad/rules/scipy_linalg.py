"""scipy.linalg's solvers and factorisations: solve, solve_triangular, cholesky,
cho_factor, cho_solve, lu_factor, lu_solve, inv and det.

Each is written here as a plain function of numpy's operations that astad already
differentiates (``np.linalg.solve``, ``np.linalg.cholesky``, ``np.where``, indexing), as
scipy.stats' distributions are (rules/scipy_stats.py): by numpy's dispatch, in both modes
and at any depth of nesting, with no vjp of its own. A call of scipy's function is a call
of the rule registered for it here: scipy's own function when no differentiated value is
among the arguments (the same values, bit for bit), the function here otherwise.

The matrix is read as scipy reads it: the triangle ``lower`` names for a symmetric or
positive definite matrix (``assume_a="pos"``, ``cholesky``, ``cho_factor``), the triangle
of a triangular one, with ones on the diagonal for ``unit_diagonal=True``. Entries scipy
does not read get a zero gradient. ``lu_factor``'s pivots are LAPACK's row swaps, read
from scipy's own factorisation of the values: the derivative holds where they do not
change. ``overwrite_a``, ``overwrite_b`` and ``check_finite`` are accepted and ignored.

expm, sqrtm and the Sylvester and Lyapunov equations are primitives with rules of their
own (rules/scipy_matrix_functions.py). Other functions of scipy.linalg that call LAPACK
(``logm``, ``qr``, ``svd``, ...) are refused by name when a differentiated value reaches
them. Registered on first use (rules/scipy_loader.py): ``import astad`` does not import scipy.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

from ..core.boundary import contains_dual
from ..errors import NotDifferentiableError, user_location
from ..registry import ad, define, has_rule
from ..runtime.array_dual import plain_array
from ..runtime.duals import DUAL_TYPES


# -- values ---------------------------------------------------------------------------------
def _array(value):
    """An array (dual or plain) of ``value``: lists holding duals become array duals."""
    if type(value) in DUAL_TYPES:
        return value
    if contains_dual(value):
        return ad.np_asarray(None, value)
    return np.asarray(value, dtype=float)


def _refuse(name, why):
    raise NotDifferentiableError(f"scipy.linalg.{name}: {why}", *user_location())


def _transpose(a):
    return np.swapaxes(a, -1, -2)


def _eye(a):
    return np.eye(np.shape(a)[-1], dtype=bool)


def _triangle(a, lower, unit_diagonal=False):
    """The triangle of ``a`` scipy reads, zeros elsewhere (ones on a unit diagonal)."""
    n = np.shape(a)[-1]
    keep = np.tri(n, dtype=bool) if lower else np.tri(n, dtype=bool).T
    if unit_diagonal:
        return np.where(keep & ~_eye(a), a, 0.0) + np.eye(n)
    return np.where(keep, a, 0.0)


def _symmetric(a, lower):
    """The symmetric matrix scipy reads from the triangle ``lower`` names of ``a``."""
    n = np.shape(a)[-1]
    strict = np.tri(n, k=-1, dtype=bool)
    if not lower:
        strict = strict.T
    part = np.where(strict, a, 0.0)
    return part + _transpose(part) + np.where(_eye(a), a, 0.0)


_SYMMETRIC = {"sym", "symmetric", "her", "hermitian", "pos", "positive definite"}
_GENERAL = {None, "gen", "general", "banded"}  # (a band scipy finds holds every nonzero)


def _structured(name, a, assume_a, lower):
    """``a`` as scipy reads it for ``assume_a``."""
    if assume_a in _GENERAL:
        return a
    if assume_a in _SYMMETRIC:
        return _symmetric(a, lower)
    if assume_a == "diagonal":
        return np.where(_eye(a), a, 0.0)
    if assume_a == "tridiagonal":
        n = np.shape(a)[-1]
        i = np.arange(n)
        return np.where(np.abs(i[:, None] - i[None, :]) <= 1, a, 0.0)
    if assume_a in ("upper triangular", "lower triangular"):
        return _triangle(a, assume_a == "lower triangular")
    _refuse(name, f"assume_a={assume_a!r} is not differentiated")


def _trans(name, trans):
    if trans in (0, "N", "n"):
        return False
    if trans in (1, 2, "T", "C", "t", "c"):
        return True
    _refuse(name, f"trans={trans!r} is not one of 0, 1, 2, 'N', 'T', 'C'")


# -- the functions, as numpy code -----------------------------------------------------------
def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    a = _structured("solve", _array(a), assume_a, lower)
    if transposed:
        a = _transpose(a)
    return np.linalg.solve(a, _array(b))


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    t = _triangle(_array(a), lower, unit_diagonal)
    if _trans("solve_triangular", trans):
        t = _transpose(t)
    return np.linalg.solve(t, _array(b))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    factor = np.linalg.cholesky(_symmetric(_array(a), lower))
    return factor if lower else _transpose(factor)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    a = _array(a)
    factor = cholesky(a, lower)
    # the other triangle as scipy leaves it: a's own entries (older scipy), or what
    # its version puts there (zeros, a constant of a's values)
    n = np.shape(a)[-1]
    other = np.tri(n, k=-1, dtype=bool)
    if lower:
        other = other.T
    plain = np.array(plain_array(a), dtype=float)
    theirs = sl.cho_factor(plain, lower)[0]
    kept = np.array_equal(theirs[other], plain[other])
    return factor + np.where(other, a if kept else theirs, 0.0), lower


def _pair(name, pair):
    if type(pair) not in (tuple, list) or len(pair) != 2:
        _refuse(name, "its first argument is not the pair its factorisation returns")
    return pair


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = _pair("cho_solve", c_and_lower)
    low = _triangle(_array(c), lower)  # a = low low^T, read from c's triangle
    if not lower:
        low = _transpose(low)
    return np.linalg.solve(_transpose(low), np.linalg.solve(low, _array(b)))


def _permutation(piv):
    """The rows of ``a`` in the order LAPACK's row swaps ``piv`` put them."""
    perm = np.arange(len(piv))
    for i, j in enumerate(np.asarray(piv)):
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def lu_factor(a, overwrite_a=False, check_finite=True):
    a = _array(a)
    if np.ndim(a) != 2 or np.shape(a)[0] != np.shape(a)[1]:
        _refuse("lu_factor", "a matrix that is not square (or a stack of them) is not "
                             "differentiated")
    _, piv = sl.lu_factor(np.asarray(plain_array(a)), check_finite=False)
    n = np.shape(a)[0]
    s = a[_permutation(piv)]  # LU of the rows in pivot order, without pivoting
    rows, columns = [], []
    for k in range(n):
        rows.append(np.concatenate([np.zeros(k), s[0]]))
        if k + 1 < n:
            below = s[1:, 0] / s[0, 0]
            columns.append(np.concatenate([np.zeros(k + 1), below]))
            s = s[1:, 1:] - below[:, None] * s[0, 1:][None, :]
    lu = np.stack(rows)
    if columns:
        lu = lu + np.concatenate([np.stack(columns, axis=1), np.zeros((n, 1))], axis=1)
    return lu, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = _pair("lu_solve", lu_and_piv)
    lu, b = _array(lu), _array(b)
    perm = _permutation(piv)
    low, up = _triangle(lu, True, unit_diagonal=True), _triangle(lu, False)
    if not _trans("lu_solve", trans):  # a[perm] = low up
        return np.linalg.solve(up, np.linalg.solve(low, b[perm]))
    w = np.linalg.solve(_transpose(low), np.linalg.solve(_transpose(up), b))
    return w[np.argsort(perm)]


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    return np.linalg.inv(_structured("inv", _array(a), assume_a, lower))


def det(a, overwrite_a=False, check_finite=True):
    return np.linalg.det(_array(a))


# -- the table ------------------------------------------------------------------------------
# name: (the function here, differentiable in, limits)
FUNCTIONS = {
    "solve": (solve, "a, b", "assume_a: the triangle `lower` names for sym, her, pos; "
                             "diagonal, tridiagonal, triangular read so"),
    "solve_triangular": (solve_triangular, "a, b", "the triangle `lower` names is read "
                                                   "(and not a unit diagonal)"),
    "cholesky": (cholesky, "a", "the triangle `lower` names is read"),
    "cho_factor": (cho_factor, "a", "the triangle `lower` names is read"),
    "cho_solve": (cho_solve, "c, b", "c's triangle is read"),
    "lu_factor": (lu_factor, "a", "square matrices; where the pivots do not change"),
    "lu_solve": (lu_solve, "lu, b", "-"),
    "inv": (inv, "a", "assume_a as for solve"),
    "det": (det, "a", "-"),
}

# functions of scipy.linalg that call LAPACK with no rule here: refused by name
REFUSED = ("logm", "funm", "expm_frechet", "lu", "qr", "rq", "svd",
           "svdvals", "eig", "eigh", "eigvals", "eigvalsh", "schur", "hessenberg", "pinv",
           "pinvh", "lstsq", "polar", "ldl", "solve_banded", "solveh_banded",
           "cholesky_banded", "cho_solve_banded", "solve_discrete_lyapunov", "solve_toeplitz",
           "solve_circulant")


def _rule(name, function):
    scipy_function = getattr(sl, name)

    def rule(tape, *args, **kwargs):
        if not contains_dual(args) and not contains_dual(kwargs):
            return scipy_function(*args, **kwargs)  # (scipy's own values)
        return function(*args, **kwargs)
    rule.__name__ = name
    return rule


def _refusal(name):
    scipy_function = getattr(sl, name)

    def rule(tape, *args, **kwargs):
        if not contains_dual(args) and not contains_dual(kwargs):
            return scipy_function(*args, **kwargs)
        raise NotDifferentiableError(
            f"a differentiated value is passed to scipy.linalg.{name}, which astad does "
            f"not differentiate. Give astad its derivative with "
            f"astad.register_vjp(scipy.linalg.{name}, ...) or @astad.custom_vjp (README: "
            f"Custom derivatives); or pass it only values that do not depend on the "
            f"differentiated inputs", *user_location())
    rule.__name__ = name
    return rule


REGISTERED: list = []  # the callables given astad's rules (not a user's own)


def register_all() -> None:
    """Register every rule here (a rule the user registered first is kept)."""
    for name, (function, _, _) in FUNCTIONS.items():
        fn = getattr(sl, name)
        if not has_rule(fn):
            define(f"scipy_linalg_{name}", _rule(name, function), fn)
            REGISTERED.append(fn)
    for name in REFUSED:
        fn = getattr(sl, name, None)
        if fn is not None and not has_rule(fn):
            define(f"scipy_linalg_{name}", _refusal(name), fn)
            REGISTERED.append(fn)
