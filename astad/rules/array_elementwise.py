"""More element-wise functions, by their partial derivatives (forward mode derives their
jvps from the partials): sinc, float_power, ldexp, nan_to_num, real and conj of real
arrays; and the functions whose result carries no derivative (integer, bool or
piecewise-constant results), which see primal values. (The functions ``math`` has too
take the scalar rules' partials: rules/array.py's SAME_AS_MATH.)
"""
from __future__ import annotations

import numpy as np

from .array import (primal_only, finite_partials, register_elementwise)
finite_partials(np.conjugate, np.real, np.nan_to_num)


def _sinc_partial(x, r):
    # sinc(x) = sin(pi x) / (pi x): (cos(pi x) - sinc(x)) / x, and 0 at x = 0
    nonzero = x != 0
    return np.where(nonzero, (np.cos(np.pi * x) - r) / np.where(nonzero, x, 1.0), 0.0)


register_elementwise(np.sinc, _sinc_partial)
register_elementwise(np.float_power,
                     lambda x, y, r: y * np.float_power(x, y - 1.0),
                     lambda x, y, r: np.where(r != 0, r * np.log(np.where(x > 0, x, 1.0)),
                                              0.0))
register_elementwise(np.ldexp, lambda x, i, r: np.ldexp(1.0, i))
# nan_to_num: 1 where x is finite; the replacements are constants
register_elementwise(np.nan_to_num, lambda x, *rest: np.isfinite(x) * 1.0)
# real arrays only reach the rules (a complex array is never differentiated)
register_elementwise(np.real, lambda x, r: 1.0)
register_elementwise(np.conjugate, lambda x, r: 1.0)

for _fn in (np.imag, np.result_type, np.iscomplexobj, np.isrealobj, np.isreal, np.iscomplex,
            np.signbit, np.heaviside, np.fix, np.around, np.logical_and, np.logical_or,
            np.logical_not, np.logical_xor, np.argpartition, np.searchsorted, np.digitize,
            np.nanargmax, np.nanargmin, np.flatnonzero, np.argwhere, np.array_equal,
            np.array_equiv, np.isneginf, np.isposinf, np.isin, np.full_like,
            np.may_share_memory, np.shares_memory, np.spacing, np.nextafter, np.bitwise_and,
            np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
            np.gcd, np.lcm):
    primal_only(_fn)
