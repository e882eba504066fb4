"""Phase 6, runtime: duals, the tape and the backward sweep.

The representation (paper sections 7, 8.1, 8.2, Figure 12):
- a dual is a ``Dual`` object holding the primal float ``v`` and its tape index ``i``;
  a plain float is a constant (no tape entry), so D of a float literal costs nothing;
- the tape is a Python list with one slot per index. Input slots hold ``()``; every
  primitive operation appends one flat tuple ``(parent_index, partial, ...)`` holding its
  local partial derivatives, computed in the forward pass (defunctionalised
  backpropagators, section 8.2);
- one backward sweep walks the tape from the highest index down (the "resolve order" of
  section 4), so each entry runs at most once and the sweep is linear in the tape. A
  one-shot gradient frees the entries chunk by chunk as it sweeps (sweep_and_free);
- the float-specialised code (scalarloops.py) keeps no tuple per entry: its tape is one
  flat list of (parent, partial) pairs, the same number per entry (sweep_flat).
Every gradient call owns its tape (it is passed explicitly as the first argument of
every transformed function), so threads and nested gradient calls never share state.
Interleave, rebuild and seed, which walk the user's data, are in structure.py.
"""
from __future__ import annotations

import math

import threading

from ..errors import NotDifferentiableError, user_location


class PrimalView:
    """What a differentiated value shows of itself: its primal value's text, so output
    of the user's code reads as it does without astad."""

    __slots__ = ()

    def __repr__(self):
        return repr(self.v)

    def __str__(self):
        return str(self.v)

    def __format__(self, spec):
        return format(self.v, spec)


class Dual(PrimalView):
    """A differentiated float: primal value ``v`` and tape index ``i``.

    Comparisons, truth tests, hashing and formatting use the primal value, so control
    flow follows the primal (paper section 3) and untransformed code that only compares,
    sorts, prints or hashes values keeps working. Arithmetic reached from code astad did
    not transform (a property getter, a user class's ``__add__``, ``operator.mul`` passed
    to ``functools.reduce``) is recorded on the tape of the gradient call running in this
    thread, by operator overloading (primitives.py installs those operators). Anything
    that would silently drop the derivative (``float(dual)`` in a C function) raises.
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
        if hasattr(float, name):  # a float method with no rule (x.hex(), ...): refuse
            raise NotDifferentiableError(
                f"float attribute {name!r} of a differentiated value is not supported by "
                "astad", *user_location())
        # what a float says, so that hasattr() and duck typing see a float
        raise AttributeError(f"'float' object has no attribute {name!r}")

    def __float__(self):
        raise NotDifferentiableError(
            "a differentiated value was converted to a plain float by code astad did not "
            "transform, which would lose its derivative. Call that function on values that "
            "are not differentiated, or register a derivative for it with "
            "astad.register_scalar", *user_location())

    def __complex__(self):
        raise NotDifferentiableError("complex() of a differentiated value: astad "
                                     "differentiates real floats only", *user_location())


class _Current(threading.local):
    """The tape of the forward pass running in this thread (a stack, for nesting)."""
    tape = None


current = _Current()


new_dual = object.__new__  # Dual creation without __init__: measurably faster in hot paths


# ---------------------------------------------------------------------------
# The backward sweep (section 4 "resolve order", section 8.2)

def sweep(tape: list, adjoint: list, first: int, arrays: dict) -> None:
    """Propagate ``adjoint`` from the last tape entry down to index ``first``.

    Entry ``k`` holds flat (parent, partial) pairs; it runs once, in descending order, and
    only when its adjoint is non-zero (a zero cotangent contributes nothing, so it is
    skipped even where a partial is infinite; documented in docs/design.md). An array
    entry is a triple ``(backward, parents, context)`` (arrays.py); its cotangent may be
    an array in ``arrays`` rather than a float in ``adjoint``.
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
                i, a, j, b, h, c = e
                adjoint[i] += a * g
                adjoint[j] += b * g
                adjoint[h] += c * g
            elif n == 3:
                e[0](adjoint, arrays, k, e[1], e[2])
            else:
                for m in range(0, n, 2):
                    adjoint[e[m]] += e[m + 1] * g
        elif k in arrays:
            e[0](adjoint, arrays, k, e[1], e[2])


_SWEEP_CHUNK = 256  # entries swept, then freed, at a time (sweep_and_free)


def sweep_and_free(tape: list, adjoint: list, first: int, arrays: dict) -> None:
    """``sweep``, for a tape nothing reads again (one gradient call): every chunk of
    entries is deleted from the tape once swept. The adjoints' new floats then take the
    place of the entries freed instead of adding to them, so the peak memory of a call is
    the tape plus the adjoint list as the sweep starts, not that plus every adjoint (about
    a fifth less for dot and sum_matvec, benchmarks/memory.py). No entry's backward reads
    the tape (array and custom_vjp entries read ``adjoint``, ``arrays`` and their own
    context), so freeing the entries above ``k`` cannot change what entry ``k`` does."""
    top = len(tape)
    while top > first:
        top = max(first, top - _SWEEP_CHUNK)
        sweep(tape, adjoint, top, arrays)
        del tape[top:]


def sweep_flat(tape: list, width: int, adjoint: list, first: int) -> None:
    """``sweep_and_free`` for the flat tape of the float-specialised code (scalarloops.py):
    entry ``first + m`` is the ``m``-th run of ``2 * width`` items of ``tape``, its
    (parent slot, partial) pairs. No entry is an array or custom one there. A list item
    costs 8 bytes where a tuple per entry costs 56 more, and grouping the items with
    ``zip`` is faster than unpacking tuples of varying length."""
    size = 2 * width
    top = first + len(tape) // size  # one past the last entry
    while top > first:
        low = max(first, top - _SWEEP_CHUNK)
        it = reversed(tape)  # the pairs of entry k, last pair first
        entries = range(top - 1, low - 1, -1)
        if width == 2:
            for k, b, j, a, i in zip(entries, it, it, it, it):
                g = adjoint[k]
                if g:
                    adjoint[i] += a * g
                    adjoint[j] += b * g
        elif width == 3:
            for k, c, h, b, j, a, i in zip(entries, it, it, it, it, it, it):
                g = adjoint[k]
                if g:
                    adjoint[i] += a * g
                    adjoint[j] += b * g
                    adjoint[h] += c * g
        elif width == 1:
            for k, a, i in zip(entries, it, it):
                g = adjoint[k]
                if g:
                    adjoint[i] += a * g
        else:  # 4, the widest (scalarloops splits wider entries)
            for k, d, m, c, h, b, j, a, i in zip(entries, it, it, it, it, it, it, it, it):
                g = adjoint[k]
                if g:
                    adjoint[i] += a * g
                    adjoint[j] += b * g
                    adjoint[h] += c * g
                    adjoint[m] += d * g
        del tape[(low - first) * size:]
        top = low


def gradient_of(tape: list, width: int, value, index: int, sink: int, layout: tuple):
    """``(value, gradients)`` for float code specialised by scalarloops.py, whose flat
    tape holds ``width`` pairs per entry, entry ``sink + 1`` first: ``layout`` gives each
    argument's first slot and length (-1 for a float), or for a list of lists the first
    slot of each row and None; slot ``sink`` holds the constants and is never swept.
    None for a result that is not a float: the ordinary path then raises its error."""
    if type(value) is not float:
        return None
    adjoint = [0.0] * (sink + 1 + len(tape) // (2 * width))
    adjoint[index] = 1.0
    sweep_flat(tape, width, adjoint, sink + 1)
    return value, tuple([adjoint[start] if n is not None and n < 0 else
                         adjoint[start:start + n] if n is not None else
                         [adjoint[a:b] for a, b in zip(start, start[1:])]  # list of lists
                         for start, n in layout])


# ---------------------------------------------------------------------------
# The runtime in use. The sweeps above are the reference and the fallback; the compiled
# ones (astad/runtime/_native.c, built by `pip install` where a C compiler is available)
# run the same operations in the same order, so their adjoints are bit-identical, and
# replace them unless ASTAD_RUNTIME=python. RUNTIME says which is in use.

def _select_runtime():
    import os
    choice = os.environ.get("ASTAD_RUNTIME", "").strip().lower() or "auto"
    if choice not in ("auto", "native", "python"):
        raise ImportError(f"ASTAD_RUNTIME={choice!r}: use 'native', 'python' or leave it "
                          "unset (the compiled sweep where it was built)")
    if choice == "python":
        return "python", None
    try:
        from . import _native
    except ImportError as error:
        if choice == "native":
            raise ImportError("ASTAD_RUNTIME=native, but astad's compiled sweep "
                              "(astad.runtime._native) was not built; reinstall with a C "
                              "compiler available, or unset ASTAD_RUNTIME") from error
        return "python", None
    return "native", _native


python_sweeps = (sweep, sweep_and_free, sweep_flat)  # the reference implementations
RUNTIME, _native = _select_runtime()  # "native" or "python"
if _native is not None:
    sweep, sweep_and_free, sweep_flat = _native.sweep, _native.sweep_and_free, _native.sweep_flat
