"""Phase 6, runtime: duals, the tape, the backward sweep, interleave and rebuild.

The representation (paper sections 7, 8.1, 8.2, Figure 12):
- a dual is a ``Dual`` object holding the primal float ``v`` and its tape index ``i``;
  a plain float is a constant (no tape entry), so D of a float literal costs nothing;
- the tape is a Python list with one slot per index. Input slots hold ``()``; every
  primitive operation appends one flat tuple ``(parent_index, partial, ...)`` holding its
  local partial derivatives, computed in the forward pass (defunctionalised
  backpropagators, section 8.2);
- one backward sweep walks the tape from the highest index down (the "resolve order" of
  section 4), so each entry runs at most once and the sweep is linear in the tape.
Every gradient call owns its tape (it is passed explicitly as the first argument of
every transformed function), so threads and nested gradient calls never share state.
"""
from __future__ import annotations

import math

from .errors import AstadError, InputError


class Dual:
    """A differentiated float: primal value ``v`` and tape index ``i``.

    Comparisons, truth tests, hashing and formatting use the primal value, so control
    flow follows the primal (paper section 3) and untransformed code that only compares,
    sorts, prints or hashes values keeps working. Anything that would silently drop the
    derivative (``float(dual)`` inside untransformed code, arithmetic outside the
    transform) raises instead.
    """

    __slots__ = ("v", "i")

    def __init__(self, v: float, i: int):
        self.v = v
        self.i = i

    def __lt__(self, other):
        return self.v < (other.v if type(other) is Dual else other)

    def __le__(self, other):
        return self.v <= (other.v if type(other) is Dual else other)

    def __gt__(self, other):
        return self.v > (other.v if type(other) is Dual else other)

    def __ge__(self, other):
        return self.v >= (other.v if type(other) is Dual else other)

    def __eq__(self, other):
        return self.v == (other.v if type(other) is Dual else other)

    def __ne__(self, other):
        return self.v != (other.v if type(other) is Dual else other)

    def __hash__(self):
        return hash(self.v)

    def __bool__(self):
        return self.v != 0.0

    def __repr__(self):
        return repr(self.v)

    def __str__(self):
        return str(self.v)

    def __format__(self, spec):
        return format(self.v, spec)

    # Not differentiable: these give ints, exactly as for the primal float.
    def __int__(self):
        return int(self.v)

    def __trunc__(self):
        return math.trunc(self.v)

    def __floor__(self):
        return math.floor(self.v)

    def __ceil__(self):
        return math.ceil(self.v)

    def __round__(self, ndigits=None):
        return round(self.v, ndigits)

    # float's own attributes: the real part of a real number is itself
    @property
    def real(self):
        return self

    @property
    def imag(self):
        return 0.0

    def conjugate(self):
        return self

    def is_integer(self):
        return self.v.is_integer()

    def __getattr__(self, name):
        raise AstadError(
            f"float attribute {name!r} of a differentiated value is not supported by astad")

    def __float__(self):
        raise AstadError(
            "a differentiated value was converted to a plain float by code astad did not "
            "transform (a builtin or C function), which would lose its derivative. "
            "Call that function on inactive values only, or register a derivative for it.")

    def _outside(self, *_):
        raise AstadError(
            "arithmetic on a differentiated value happened in code astad did not transform "
            "(for example through operator.add or a C function); its derivative would be lost")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _outside
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _outside
    __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = _outside
    __matmul__ = __rmatmul__ = __complex__ = _outside


new_dual = object.__new__  # Dual creation without __init__: measurably faster in hot paths


# ---------------------------------------------------------------------------
# The backward sweep (section 4 "resolve order", section 8.2)

def sweep(tape: list, adjoint: list, first: int) -> None:
    """Propagate ``adjoint`` from the last tape entry down to index ``first``.

    Entry ``k`` holds flat (parent, partial) pairs; it runs once, in descending order, and
    only when its adjoint is non-zero (a zero cotangent contributes nothing, so it is
    skipped even where a partial is infinite; documented in docs/design.md).
    """
    for k, e in zip(range(len(tape) - 1, first - 1, -1), reversed(tape)):
        g = adjoint[k]
        if g:
            n = len(e)
            if n == 4:
                i, a, j, b = e
                adjoint[i] += a * g
                adjoint[j] += b * g
            elif n == 2:
                adjoint[e[0]] += e[1] * g
            elif n == 6:
                i, a, j, b, l, c = e
                adjoint[i] += a * g
                adjoint[j] += b * g
                adjoint[l] += c * g
            else:
                for m in range(0, n, 2):
                    adjoint[e[m]] += e[m + 1] * g


# ---------------------------------------------------------------------------
# Interleave (Figure 7 / Appendix A): give every float leaf of an argument a fresh
# input index; rebuild: turn the input indices' adjoints into a gradient shaped like
# the argument.

_NO_ENTRY = ()


def interleave(value, tape: list, path: str):
    """Return ``value`` with each float leaf replaced by a Dual with a fresh input slot.

    ``path`` names the argument in error messages (``args[0]``).
    """
    t = type(value)
    if t is float or (isinstance(value, float) and t is not bool):
        d = new_dual(Dual)
        d.v = float(value)
        d.i = len(tape)
        tape.append(_NO_ENTRY)
        return d
    if t is list or t is tuple:
        out = []
        for k, x in enumerate(value):
            if type(x) is float:  # the common case, inline: no call per element
                d = new_dual(Dual)
                d.v = x
                d.i = len(tape)
                tape.append(_NO_ENTRY)
                out.append(d)
            else:
                out.append(interleave(x, tape, f"{path}[{k}]"))
        return out if t is list else tuple(out)
    if t is dict:
        return {key: interleave(x, tape, f"{path}[{key!r}]") for key, x in value.items()}
    if t is Dual:
        raise InputError(
            f"{path} is already being differentiated by an enclosing gradient call; astad "
            "does not compute higher-order derivatives (a gradient of a gradient)")
    if t is complex:
        raise InputError(f"{path} is a complex number; astad differentiates real floats only")
    return value


def contains_float(value) -> bool:
    t = type(value)
    if t is Dual:
        return True  # (interleave then refuses it: it belongs to an enclosing gradient)
    if t is float or (isinstance(value, float) and t is not bool):
        return True
    if t in (list, tuple):
        return any(contains_float(x) for x in value)
    if t is dict:
        return any(contains_float(x) for x in value.values())
    return False


def contains_dual(value, _depth: int = 0) -> bool:
    t = type(value)
    if t is Dual:
        return True
    if t in (list, tuple, set, frozenset):
        return any(contains_dual(x) for x in value)
    if t is dict:
        return any(contains_dual(x) for x in value.values())
    return False


def _is_float(value) -> bool:
    return type(value) is float or (isinstance(value, float) and type(value) is not bool)


def rebuild(original, adjoint: list, position: int):
    """The gradient of argument ``original``, whose float leaves were given the input
    slots ``position, position + 1, ...`` by ``interleave`` (same traversal order).

    It reads the caller's argument, never the duals the function ran on, so a function
    that mutates its (copied) argument cannot disturb the gradient. Returns the gradient
    and the next unused position.
    """
    t = type(original)
    if _is_float(original):
        g = adjoint[position]
        return (g if t is float else t(g)), position + 1
    if t is list or t is tuple:
        out = []
        for x in original:
            if type(x) is float:  # the common case, inline
                out.append(adjoint[position])
                position += 1
            else:
                g, position = rebuild(x, adjoint, position)
                out.append(g)
        return (out if t is list else tuple(out)), position
    if t is dict:
        out = {}
        for key, x in original.items():
            out[key], position = rebuild(x, adjoint, position)
        return out, position
    return original, position


def rebuild_arguments(args, positions, adjoint: list) -> list:
    """Gradients of ``args[k]`` for each k in ``positions`` (interleaved in that order)."""
    grads, position = [], 0
    for k in positions:
        g, position = rebuild(args[k], adjoint, position)
        grads.append(g)
    return grads


def primal(value):
    """The result with every Dual replaced by its primal float."""
    t = type(value)
    if t is Dual:
        return value.v
    if t is list:
        return [primal(x) for x in value]
    if t is tuple:
        return tuple(primal(x) for x in value)
    if t is dict:
        return {k: primal(x) for k, x in value.items()}
    return value


def seed(result, cotangent, adjoint: list, path: str = "result") -> None:
    """Deinterleave: add the cotangent of each Dual in ``result`` into its adjoint slot."""
    t = type(result)
    if t is Dual:
        if cotangent is None:
            return
        if isinstance(cotangent, bool) or not isinstance(cotangent, (int, float)):
            raise InputError(f"the cotangent at {path} should be a float, got "
                             f"{type(cotangent).__name__} {cotangent!r}")
        adjoint[result.i] += float(cotangent)
        return
    if t in (list, tuple):
        if cotangent is None:
            return
        if type(cotangent) not in (list, tuple) or len(cotangent) != len(result):
            raise InputError(
                f"the cotangent at {path} should be a {t.__name__} of length {len(result)} "
                f"like the result, got {type(cotangent).__name__} {_short(cotangent)}")
        for k, (r, c) in enumerate(zip(result, cotangent)):
            seed(r, c, adjoint, f"{path}[{k}]")
        return
    if t is dict:
        if cotangent is None:
            return
        if type(cotangent) is not dict or cotangent.keys() != result.keys():
            raise InputError(f"the cotangent at {path} should be a dict with keys "
                             f"{sorted(map(repr, result))}, got {_short(cotangent)}")
        for k, r in result.items():
            seed(r, cotangent[k], adjoint, f"{path}[{k!r}]")
        return


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
