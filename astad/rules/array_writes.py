"""Writing into arrays: the mutable array tape.

Imperative numpy code fills and updates arrays (``out = np.zeros(n); out[i] = ...``,
``h[t + 1] = np.tanh(W @ h[t])``, ``u[1:-1] += ...``, ``v *= 2.0``). astad follows it
with numpy's own semantics, aliases and views included:

- **Versions.** A write into a differentiated array writes the primal values in place
  (so every alias and view sees them, as in numpy) and records one tape entry: the new
  version of the array that owns the memory (its *root*) from the old version and the
  value written. The root's tape index becomes that entry's. The backward step hands the
  new version's cotangent to the old one with the written region zeroed, in place, and
  gives the value the region's cotangent: work proportional to the region, not to the
  array (linear time for a loop of element writes).
- **Undo and redo.** Entries recorded before a write may hold the array's memory (a
  product keeps its operands). Each write saves the values it overwrites; the sweep puts
  them back when it passes the write, so every entry sees the values it saw, and the
  writes are applied again once the sweep is done, so the arrays end as the function left
  them. Writes into constant arrays are logged the same way (a constant a product kept
  and the function then changed).
- **Views.** ``x[1:]``, ``x.T``, a reshape sharing memory... of a differentiated array is
  a differentiated view: its root and the operations (``View``) from the root to it.
  Reading a view reads the root's current version (runtime/array_dual.index_of); writing
  through a view writes the root's region under it.
- **Where arrays come from.** An array made inside differentiated code by ``np.zeros``,
  ``np.ones``, ``np.empty``, ``np.full``, their ``_like`` forms, ``np.eye``,
  ``np.identity``, ``np.array`` or a ``.copy()`` is a differentiated array already (a
  constant one): any value may be written into it, and any alias of it sees the writes.
  A plain array from elsewhere (an argument not differentiated, a global) that a
  differentiated value is written into is refused with an error at the user's line (other
  names may share it, and could not see the derivative).
- In-place operators (``+=``, ``-=``, ``*=``, ``/=``, ``**=``), ``out=`` of numpy's
  functions and ``np.add.at`` are writes of the same kind.

Forward mode needs no undo: a write writes the primal and the tangent in place.
"""
from __future__ import annotations

import operator

import numpy as np

from ..errors import NotDifferentiableError, user_location
from ..runtime.array_dual import (ARRAY_DUALS, FArrayDual, accumulate, constant, dispatch,
                                  parent_of, plain_array, unbroadcast)
from ..runtime.dependence import carries_derivative
from ..runtime.duals import (DUAL_TYPES, innermost, running)
from .array import batched_vjps, register_jvp, register_vjp
from .array_views import View, is_basic_index
from ..registry import ad, publish
from ..runtime.array_rows import (accumulate_rows, rows_accept, rows_first, rows_index,
                                  unbroadcast_rows)
from ..runtime.tape import BATCHED_BACKWARDS, UNDO


# -- the write entries (reverse mode) --------------------------------------------------------
class Write:
    """One write: where it went (``target`` the ndarray written through, ``index``), the
    values it overwrote and wrote; for a differentiated root, the steps ``view`` from the
    root to the array written through."""

    __slots__ = ("target", "index", "old", "new", "view", "value_shape", "survivors")

    def __init__(self, target, index, old, new, view, value_shape, survivors):
        self.target, self.index, self.old, self.new = target, index, old, new
        self.view, self.value_shape, self.survivors = view, value_shape, survivors

    def region(self, a, rows: bool = False):
        """The values of ``a`` (shaped like the root) where the write went; ``rows``: of
        each row of ``a`` (a leading axis), the rows first."""
        if not rows:
            return self.view(a)[self.index]
        index, axis = rows_index(self.index)
        return rows_first(self.view(a, True)[index], axis)

    def zero(self, a, rows: bool = False) -> None:
        """Set the region of ``a`` (an ndarray shaped like the root, with a leading axis
        of rows if ``rows``) to zero."""
        if rows:
            self.view(a, True)[rows_index(self.index)[0]] = 0.0
        else:
            self.view(a)[self.index] = 0.0

    def undo(self):
        _put_back(self.target, self.index, self.old)

    def redo(self):
        _put_back(self.target, self.index, self.new)


def _put_back(target, index, values) -> None:
    """``target[index] = values`` for a sweep's undo or redo: a change of a plain array
    that an enclosing reverse pass (one running around this sweep) logs like any other
    (its entries recorded around the sweep saw the values of each moment)."""
    if type(target) is np.ndarray and running.stack:
        plain_change(target, target.__setitem__, index, values)
    else:
        target[index] = values




def _write_backward(adjoint, arrays, k, parents, write):
    """The cotangent of a new version: the value gets its region (summed over what
    numpy broadcast), the old version the rest (the region zeroed, in place); then the
    memory gets the values it had before the write back (undo)."""
    g = arrays.pop(k, None)
    if g is not None and g is not UNDO and parents:
        for position, parent in parents:
            if position == 1:  # the value written
                part = write.region(g)
                if write.survivors is not None:  # repeated indices: the last write wins
                    part = part * write.survivors
                elif type(part) is np.ndarray:
                    part = part.copy()
                accumulate(adjoint, arrays, parent,
                           unbroadcast(part, write.value_shape), True)
        for position, parent in parents:
            if position == 0:  # the version written over: the rest of the cotangent
                if type(g) is np.ndarray:
                    write.zero(g)
                    accumulate(adjoint, arrays, parent, g, True)
                else:  # (a derivative of a derivative: no write into a dual)
                    accumulate(adjoint, arrays, parent, zero_region(g, write))
    write.undo()


def _write_rows(adjoint, arrays, k, parents, write, width) -> bool:
    """_write_backward on all rows of a Jacobian at once: the region taken and zeroed in
    every row."""
    g = arrays.get(k)
    if g is not None and g is not UNDO and parents:
        if type(g) is not np.ndarray or g.shape[:1] != (width,) or \
                not rows_accept(arrays, [parent for _, parent in parents], width):
            return False  # (a derivative of a derivative: once per row)
        arrays.pop(k)
        for position, parent in parents:
            if position == 1:  # the value written
                part = write.region(g, rows=True)
                part = part * write.survivors if write.survivors is not None else part.copy()
                accumulate_rows(adjoint, arrays, parent,
                                unbroadcast_rows(part, write.value_shape, width), width, True)
        for position, parent in parents:
            if position == 0:  # the version written over
                write.zero(g, rows=True)
                accumulate_rows(adjoint, arrays, parent, g, width, True)
    else:
        arrays.pop(k, None)
    write.undo()
    return True


BATCHED_BACKWARDS[_write_backward] = _write_rows


def zero_region(g, write, ndim=None):
    """``g`` with the region of ``write`` set to zero (a new array): the differentiable
    form of ``Write.zero``; in every leading row of ``g`` beyond the root's ``ndim``
    axes (None: none)."""
    if type(g) in DUAL_TYPES:
        return dispatch(zero_region, (g, write) if ndim is None else (g, write, ndim), {})
    out = np.array(g)
    lead = 0 if ndim is None else out.ndim - ndim
    if lead:  # (the leading axes as one axis of rows: a view of ``out``, contiguous)
        rows = int(np.prod(out.shape[:lead]))  # (not -1: numpy cannot infer it if empty)
        write.zero(np.reshape(out, (rows,) + out.shape[lead:]), True)
    else:
        write.zero(out)
    return out


def _log(tape, write: Write, parents: tuple) -> int:
    """Append the write's entry and note it for the sweep (undo, then redo)."""
    k = len(tape)
    tape.append((_write_backward, parents, write))
    running.writes[id(tape)].append((k, write))
    return k


def _value_parts(value, level):
    """The value written, at ``level``: (its primal, its dual parent or None, its
    shape)."""
    if type(value) in (list, tuple) and any(type(x) in DUAL_TYPES for x in _flat(value)):
        value = ad.np_array(None, value)  # (np.array of duals: a differentiated array)
    if type(value) in DUAL_TYPES and value.t is level:
        return value.v, value, np.shape(value.v)
    return value, None, np.shape(value)


def _flat(value):
    for x in value:
        if type(x) in (list, tuple):
            yield from _flat(x)
        else:
            yield x


def write(x, index, value) -> None:
    """``x[index] = value`` for an array dual ``x`` (root or view), at the innermost
    level among them; numpy's semantics for the primal, a new version of the root."""
    level = innermost((x, value) if type(value) not in (list, tuple) else
                      [x] + list(_flat(value)))
    if level is not x.t:
        raise NotDifferentiableError(
            "a value of an inner differentiation is written into an array of an enclosing "
            "one (or of none running): create the array inside the inner function",
            *user_location())
    if type(index) is not tuple:
        index = (index,)
    primal, dual_value, value_shape = _value_parts(value, level)
    if type(x) is FArrayDual:
        _write_forward(x, index, primal, dual_value, level)
        return
    root = x.root if x.root is not None else x
    view = x.from_root or View()
    _require_copy_order(root, view, index, value)
    old = _copied(x.v[index])
    x.v[index] = primal  # numpy's write: every alias and view sees it
    new = _copied(x.v[index])
    record = Write(x.v, index, old, new, view, value_shape, _survivors(x.v.shape, index))
    parents = ((0, (root.i, root.v.shape, root.v.dtype)),)
    if dual_value is not None:
        parents += ((1, parent_of(dual_value)),)
    root.i = _log(level, record, parents)
    if type(x.v) is np.ndarray:
        _log_around(level, x.v, index, old, new)


def _log_around(level, target, index, old, new) -> None:
    """A plain array written at ``level``: the reverse passes enclosing it log the change
    as well (their entries may keep the array: a constant of theirs)."""
    for handle in running.stack[:running.depth[id(level)] - 1]:
        if type(handle) is list:
            _log(handle, Write(target, index, old, new, None, None, None), ())


def _copied(region):
    """What a write overwrote or wrote, kept apart from the array: a copy of an ndarray,
    or of an array dual of an enclosing level (a view of it would change with it)."""
    if type(region) is np.ndarray:
        return region.copy()
    if type(region) in ARRAY_DUALS:
        return dispatch(np.copy, (region,), {})
    return region


def _require_copy_order(root, view, index, value) -> None:
    """A value read from the array it is written into (``x[::2] = x[:3]``): numpy copies
    element by element, and where source and target overlap the result may depend on its
    order (it is not always that of copying the value first). The backward step takes the
    value as read before the write; anything else is refused. Decided exactly on a copy of
    the root holding each element's position (forward mode's tangents are written the same
    way as the values, so they follow numpy by construction)."""
    if type(value) not in ARRAY_DUALS or type(value.v) is not np.ndarray or \
            not np.shares_memory(value.v, root.v):
        return
    source = value.root if value.root is not None else value
    if source is root and root.v.flags.c_contiguous:
        positions = np.arange(root.v.size).reshape(root.v.shape)
        after = positions.copy()
        view(after, False)[index] = (value.from_root or View())(after, False)  # numpy's order
        first = positions.copy()
        view(first, False)[index] = (value.from_root or View())(positions, False)  # value first
        if np.array_equal(after, first):
            return
    raise NotDifferentiableError(
        "a value read from the array it is written into overlaps the region written, and "
        "numpy's element-by-element copy then differs from copying the value first; copy "
        "it first: x[...] = value.copy()", *user_location())


def _survivors(shape, index):
    """For an index that may repeat an element (an integer array): a 0/1 mask over the
    written region, 1 where the element's last write is (numpy's last write wins)."""
    if is_basic_index(index) or not any(isinstance(part, (list, np.ndarray)) and
                                        np.asarray(part).dtype.kind in "iu"
                                        for part in index):
        return None
    marks = np.zeros(shape, dtype=np.intp)
    region = np.broadcast_to(np.arange(1, 1 + int(np.prod(np.shape(marks[index]))))
                             .reshape(np.shape(marks[index])), np.shape(marks[index]))
    marks[index] = region
    return (marks[index] == region) * 1.0


def _write_forward(x, index, primal, dual_value, level):
    if type(x.v) is np.ndarray and running.depth[id(level)] > 1:  # (enclosing levels)
        old = _copied(x.v[index])
        x.v[index] = primal
        _log_around(level, x.v, index, old, _copied(x.v[index]))
    else:
        x.v[index] = primal
    root = x.root if x.root is not None else x
    batched = level.width is not None
    view = x.from_root or View()
    tangent = np.zeros(()) if dual_value is None else dual_value.d
    if type(tangent) in DUAL_TYPES and type(root.d) is np.ndarray:
        # a tangent carrying an enclosing level's derivative (forward inside another
        # differentiation): the root's tangent array becomes a constant of the enclosing
        # levels, so that the write is one of theirs too
        enclosing = running.stack[:running.depth[id(level)] - 1]
        root.d = constant(enclosing[-1], root.d)
    if batched and dual_value is not None:  # its directions first, then numpy's broadcast
        region_ndim = np.ndim(x.v[index])
        tangent = np.reshape(tangent, (level.width,) + (1,) * (
            region_ndim - (np.ndim(tangent) - 1)) + np.shape(tangent)[1:])
    region = ((slice(None),) if batched else ()) + index
    if type(root.d) is np.ndarray:  # (a plain array an enclosing reverse pass may keep)
        plain_change(root.d, view(root.d, batched).__setitem__, region, tangent)
    else:
        view(root.d, batched)[region] = tangent


def log_plain_write(tape, target, index) -> Write:
    """Before a plain array written inside a reverse pass: its overwritten values, so the
    sweep can show earlier entries the values they saw."""
    return Write(target, index, _copied(target[index]), None, None, None, None)


def plain_change(target, change, *args, **kwargs):
    """``change(*args, **kwargs)``, which writes into the plain array ``target`` (an
    in-place operator, ``out=``, ``sort``, ``fill``, ``np.put``...): on every reverse
    pass running, an entry holding the values it overwrote and wrote, so that the sweep
    shows the entries recorded before it the values they kept (undo) and leaves the array
    as the function left it (redo). The invariant: a recorded operation never reads a
    buffer changed after it was recorded."""
    tapes = [h for h in running.stack if type(h) is list]
    if not tapes or type(target) is not np.ndarray or target.dtype == object:
        return change(*args, **kwargs)
    old = target.copy()
    result = change(*args, **kwargs)
    new = target.copy()
    for tape in tapes:
        _log(tape, Write(target, Ellipsis, old, new, None, None, None), ())
    return result


publish("plain_change", plain_change)


def setitem(tape, value, obj, index) -> None:
    """``obj[index] = value`` in differentiated code (the transform writes every
    subscript assignment this way: the value is evaluated first, as in Python)."""
    t = type(obj)
    if t is list or t is dict:
        obj[index] = value
        return
    if t is np.ndarray and obj.dtype == object:  # (holds Python objects, as a list does;
        obj[index] = value  # what it keeps is cleaned after the call: core/escape.py)
        return
    if t in ARRAY_DUALS:
        write(obj, index, value)
        return
    if t is np.ndarray:
        values = [value] if type(value) not in (list, tuple) else list(_flat(value))
        if innermost(values) is not None:
            if any(carries_derivative(v) for v in values):
                _refuse_plain_target(obj)
            value = _plain_values(value)  # (constants of the levels: derivative 0)
        if type(tape) is list and id(tape) in running.writes:  # (a reverse pass running)
            record = log_plain_write(tape, obj, index)
            obj[index] = value
            record.new = _copied(obj[index])
            _log(tape, record, ())
            return
    obj[index] = value


def _refuse_plain_target(target):
    if target.dtype.kind != "f":
        kind = {"b": "bool", "i": "integer", "u": "integer", "c": "complex"}.get(
            target.dtype.kind, str(target.dtype))
        raise NotDifferentiableError(
            f"a differentiated value is written into an array of {kind}s ({target.dtype}), "
            f"which numpy converts it to: its derivative would be lost. Make the array a "
            f"float array (np.zeros(n), or dtype=float), or convert on purpose "
            f"({'bool' if kind == 'bool' else 'int'}(value), whose derivative is 0)",
            *user_location())
    raise NotDifferentiableError(
        "a differentiated value is written into a plain array: one no differentiated "
        "value has reached (an argument not differentiated, a global, or an array "
        "computed only from such values, like x * 2.0 of a constant x); other names "
        "may share it and would not see the derivative. Write into a copy made "
        "inside: a = a.copy() (or np.array(a), np.zeros, np.empty, np.zeros_like...)",
        *user_location())


def _plain_values(value):
    if type(value) in (list, tuple):
        return type(value)(_plain_values(v) for v in value)
    return plain_array(value)


publish("setitem", setitem)
publish("slice", slice)
publish("write_array", write)  # ArrayDualBase.__setitem__ and its in-place operators


IN_PLACE = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul,
            "/=": operator.itruediv, "%=": operator.imod, "**=": operator.ipow}


# -- the primitives the backward steps use: differentiable again -------------------------------
register_vjp(zero_region, lambda g, r, value, write, ndim=None: zero_region(
    g, write, np.ndim(value) if ndim is None else ndim))
register_jvp(zero_region, lambda t, r, value, write, ndim=None: zero_region(
    t, write, np.ndim(value) if ndim is None else ndim), batched=True)
batched_vjps(zero_region)
