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
- the float-specialised code (specialise/loops.py) keeps no tuple per entry: its tape
  (``float_tape``) holds (parent, partial) pairs one after another, the same number per
  entry: a flat list here (sweep_flat), C arrays on the native runtime (_float_tape.c);
  ``float_adjoints`` sweeps either.
Every gradient call owns its tape (it is passed explicitly as the first argument of
every transformed function), so threads and nested gradient calls never share state.
Interleave, rebuild and seed, which walk the user's data, are in core/boundary.py.
"""
from __future__ import annotations

import numpy as np

from . import build_record
from .duals import DUAL_TYPES, Dual, PrimalView, new_dual  # noqa: F401  (where they were first)


# ---------------------------------------------------------------------------
# The backward sweep (section 4 "resolve order", section 8.2)

UNDO = object()  # seeded as the adjoint of a write's entry (rules/array_writes.py): it
                 # always runs, and undoes the write


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


def sweep_general(tape: list, adjoint: list, first: int, arrays: dict,
                  width: int | None = None) -> None:
    """``sweep`` for tapes and adjoints that may hold more than floats: partials that are
    duals of an enclosing differentiation (a derivative of a derivative: every product
    below is then recorded at that level), or, with ``width``, vectors of adjoints (a
    Jacobian's ``width`` rows in one sweep: each scalar adjoint a vector, each array
    cotangent with one leading axis per row). An entry is skipped only for an adjoint
    that is a plain zero: an adjoint whose primal is 0 may still have a derivative at the
    enclosing level. A plain infinite or NaN partial against zero adjoints passes zero,
    as in ``sweep``."""
    for k in range(len(tape) - 1, first - 1, -1):
        e = tape[k]
        g = adjoint[k]
        if type(g) is float and g == 0.0:
            if k in arrays:
                _entry(e, adjoint, arrays, k, width)
            continue
        n = len(e)
        if n == 3 and callable(e[0]):
            _entry(e, adjoint, arrays, k, width)
            continue
        for m in range(0, n, 2):
            a = e[m + 1]
            if type(a) is float and a - a != 0.0 and type(g) is not float:  # inf or nan
                term = _zero_where_zero(a, g)
            else:
                term = a * g
            i = e[m]
            adjoint[i] = adjoint[i] + term


# The batched form of every array entry's backward step (a cotangent with one leading
# axis per row; registered beside the step, made of runtime/array_rows.py): backward ->
# ``rows(adjoint, arrays, k, parents, context, width)``, which returns False, having
# changed nothing, where it cannot (a dual of an enclosing level: a derivative of a
# derivative); the entry then runs once per row, as a step with no batched form does (a
# custom_vjp's bwd, the user's code for one cotangent).
BATCHED_BACKWARDS: dict = {}


def _entry(e, adjoint, arrays, k, width):
    """Run an array or custom entry; for vectors of adjoints, on all rows at once where
    its backward step can (BATCHED_BACKWARDS), else once per row (its backward step is
    written for one cotangent), each row's reads and writes going to that row."""
    if width is None:
        e[0](adjoint, arrays, k, e[1], e[2])
        return
    batched = BATCHED_BACKWARDS.get(e[0])
    if batched is not None and batched(adjoint, arrays, k, e[1], e[2], width):
        return
    rows = []
    for j in range(width):
        view = _Row(adjoint, arrays, j)
        e[0](view, view.arrays, k, e[1], e[2])
        rows.append(view)
    for slot in set().union(*[row.written for row in rows]):
        adjoint[slot] = _stack([row.written[slot] if slot in row.written else
                                _component(adjoint[slot], j) for j, row in enumerate(rows)])
    for slot in set().union(*[row.arrays.written for row in rows]):
        base = arrays.get(slot)
        arrays[slot] = _stack([row.arrays.written[slot] if slot in row.arrays.written else
                               base[j] for j, row in enumerate(rows)])
    for slot in set().union(*[row.arrays.popped for row in rows]):
        if not any(slot in row.arrays.written for row in rows):
            arrays.pop(slot, None)


def _component(value, j):
    """Row ``j`` of a vector of adjoints: an array's (or an array dual's, a Jacobian of a
    derivative) first axis; a float is a zero of every row."""
    t = type(value)
    if t is np.ndarray:
        return value[j]
    if t is float or t not in DUAL_TYPES:
        return value
    return value[j] if np.ndim(value.v) else value


def _stack(values):
    first = values[0]
    if all(v is first for v in values) and type(first) not in (float, int, np.ndarray):
        return first  # a marker (a custom entry's trigger), the same for every row
    return np.stack([np.asarray(v, dtype=float) if type(v) in (float, int) else v
                     for v in values])


class _Row:
    """The adjoint list of a vector sweep as one row sees it: reads give that row's
    component, writes are kept apart until every row has run."""

    def __init__(self, adjoint, arrays, j):
        self.base, self.j, self.written = adjoint, j, {}
        self.arrays = _RowArrays(arrays, j)

    def __getitem__(self, slot):
        if type(slot) is slice:  # (a run of slots: a structured result's floats)
            return [self[k] for k in range(*slot.indices(len(self.base)))]
        if slot in self.written:
            return self.written[slot]
        return _component(self.base[slot], self.j)

    def __setitem__(self, slot, value):
        self.written[slot] = value

    def __len__(self):
        return len(self.base)


class _RowArrays:
    """The array cotangents of a vector sweep as one row sees them (see _Row). An array
    updated in place is the row's view of the stacked array, so it updates it."""

    def __init__(self, arrays, j):
        self.base, self.j, self.written, self.popped = arrays, j, {}, set()

    def get(self, slot, default=None):
        if slot in self.written:
            return self.written[slot]
        if slot in self.popped or slot not in self.base:
            return default
        return _component(self.base[slot], self.j)

    def pop(self, slot, default=None):
        value = self.get(slot, default)
        self.written.pop(slot, None)
        self.popped.add(slot)
        return value

    def __setitem__(self, slot, value):
        self.written[slot] = value

    def __getitem__(self, slot):
        value = self.get(slot, _MISSING)
        if value is _MISSING:
            raise KeyError(slot)
        return value

    def __contains__(self, slot):
        return self.get(slot, _MISSING) is not _MISSING


_MISSING = object()


def _zero_where_zero(partial, g):
    """``partial * g`` with 0 where ``g`` is 0, for a vector ``g`` (a zero adjoint passes
    nothing on, even through an infinite partial)."""
    if type(g) is np.ndarray:
        return np.where(g != 0, partial * g, 0.0)
    return partial * g


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
    """``sweep_and_free`` for the flat tape of the float-specialised code (specialise/loops.py):
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


class FlatTape(list):
    """The tape of the code for floats on the Python runtime: a flat list of (slot,
    partial) pairs, which ``record(slot, partial, ...)`` extends (the native runtime's is
    a FloatTape of C arrays, _float_tape.c, whose ``record`` takes the same arguments)."""

    __slots__ = ()

    def record(self, *pairs):
        self.extend(pairs)


float_tape = FlatTape


def float_adjoints(tape: list, width: int, seed: int, first: int, last: bool) -> list:
    """The adjoints of the slots below ``first`` (the arguments') from one sweep of the
    code for floats' tape (``width`` pairs an entry, entry ``first`` first), seeded with
    1.0 at slot ``seed``. A sweep frees what it passed: unless it is the ``last`` one, it
    sweeps a copy. (The native runtime's tape is a FloatTape of C arrays, swept by
    _float_tape.c in the same order: bit-identical adjoints.)"""
    adjoint = [0.0] * (first + len(tape) // (2 * width))
    adjoint[seed] = 1.0
    sweep_flat(tape if last else list(tape), width, adjoint, first)
    del adjoint[first:]
    return adjoint


def gradient_of(tape: list, width: int, value, index: int, sink: int, layout: tuple):
    """``(value, gradients)`` for float code specialised by specialise/loops.py, whose flat
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
        # the install tried and failed: say so, once (this module is imported once)
        build_record.warn_if_failed(build_record.read())
        return "python", None
    return "native", _native


python_sweeps = (sweep, sweep_and_free, sweep_flat)  # the reference implementations
python_float_tape = (float_tape, float_adjoints)
RUNTIME, native = _select_runtime()  # "native" or "python"
if native is not None:
    sweep, sweep_and_free, sweep_flat = native.sweep, native.sweep_and_free, native.sweep_flat
    float_tape, float_adjoints = native.FloatTape, native.float_adjoints
