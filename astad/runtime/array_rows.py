"""A Jacobian's rows in one backward sweep (``astad.jacrev``): what the batched backward
steps (runtime/tape.BATCHED_BACKWARDS) are made of.

jacrev sweeps the tape once with ``width`` rows of adjoints: a scalar's adjoint is a
vector ``(width,)``, an array's cotangent ``(width, *shape)``. Every array entry's backward
step has a batched form, registered beside it, that runs on all the rows at once: it
reads the rows' cotangent, sums what numpy broadcast, indexes with the rows first, and
adds into each parent's rows. A batched step returns False, having changed nothing, where
the rows hold a dual of an enclosing level (a derivative of a derivative); the sweep then
runs the entry once per row.
"""
from __future__ import annotations

import numpy as np


def rows_cotangent(adjoint, arrays, k, width):
    """Entry ``k``'s cotangent for all rows, ``(width, *shape)``, without taking it; None
    if it is not a plain array of rows (a dual of an enclosing level)."""
    g = arrays.get(k)
    if g is None:
        g = adjoint[k]
    if type(g) is not np.ndarray or g.dtype.kind not in "fc" or g.shape[:1] != (width,):
        return None
    return g


def unbroadcast_rows(g, shape, width):
    """``unbroadcast`` of each row: ``g`` (``(width, *result)``) summed over the axes numpy
    broadcast to reach the result from ``shape`` (None: a scalar), as ``(width, *shape)``."""
    if shape is None:
        return g.reshape(width, -1).sum(axis=1) if g.ndim > 1 else g
    inner = g.shape[1:]
    if inner == shape:
        return g
    lead = len(inner) - len(shape)
    if lead < 0:  # fewer axes than the parent: numpy broadcasts it
        return np.broadcast_to(g.reshape((width,) + (1,) * -lead + inner), (width,) + shape)
    axes = tuple(range(1, 1 + lead)) + tuple(1 + lead + axis for axis, size in
                                             enumerate(shape) if size == 1 and
                                             inner[lead + axis] != 1)
    return np.reshape(np.sum(g, axis=axes), (width,) + shape) if axes else g


def accumulate_rows(adjoint, arrays, parent, value, width, fresh=False) -> None:
    """``accumulate`` of each row: ``value`` is ``(width,)`` for a scalar parent, else
    ``(width, *shape)``, or broadcasts to it; ``fresh``: made by the caller and held by
    no one else (kept, not copied, where it has the shape and dtype)."""
    index, shape, dtype = parent
    if type(value) is np.ndarray and value.dtype.kind == "c" and (shape is None or
                                                                  dtype.kind != "c"):
        value = value.real  # (a real parent: the real part, runtime/array_dual.real_part)
    if shape is None:
        adjoint[index] = adjoint[index] + value
        return
    existing = arrays.get(index)
    if existing is not None:
        existing += value
    elif fresh and value.shape == (width,) + shape and value.dtype == dtype and \
            value.flags.writeable:
        arrays[index] = value
    else:
        arrays[index] = np.array(np.broadcast_to(value, (width,) + shape), dtype=dtype)


def rows_accept(arrays, parents, width) -> bool:
    """Do the parents' cotangents so far hold plain arrays of rows (no dual)?"""
    for parent in parents:
        index, shape, _ = parent
        if shape is not None:
            existing = arrays.get(index)
            if existing is not None and (type(existing) is not np.ndarray or
                                         existing.shape != (width,) + shape):
                return False
    return True


def is_rows_of(value, parent, width) -> bool:
    """Is ``value`` a plain float array of rows for ``parent`` (``(width,)`` for a scalar,
    ``(width, *shape)`` or, with the leading axis, broadcasting to it)?"""
    if type(value) is not np.ndarray or value.dtype.kind not in "fc":
        return False
    shape = parent[1]
    if shape is None:
        return value.shape == (width,)
    return value.ndim == len(shape) + 1 and value.shape[0] == width and all(
        a == b or a == 1 for a, b in zip(value.shape[1:], shape))


def add_rows(adjoint, arrays, k, parents, width, parts, fresh=False) -> bool:
    """The batched step of a backward that adds a part of its cotangent ``g`` into each of
    its ``parents`` (``(position, parent)`` pairs), where ``parts(g)`` gives the parts
    (indexed by position), is linear in ``g`` and takes it with a leading axis of rows
    (splits, einsum's partials, batched vjps): every part is checked to be a plain array
    of rows before any is added. ``fresh``: a part owning its memory was made by
    ``parts`` (kept, not copied)."""
    g = rows_cotangent(adjoint, arrays, k, width)
    if g is None or not rows_accept(arrays, [parent for _, parent in parents], width):
        return False
    values = parts(g)
    try:
        pieces = [(parent, values[position]) for position, parent in parents]
    except (KeyError, IndexError):  # (parts gave up: a dual, a list)
        return False
    if not all(is_rows_of(value, parent, width) for parent, value in pieces):
        return False
    arrays.pop(k, None)
    for parent, value in pieces:
        accumulate_rows(adjoint, arrays, parent, value, width,
                        fresh and value.base is None and value is not g)
    return True


def rows_index(index) -> tuple:
    """``(rows, axis)``: ``index`` (of one row) with a leading ``:`` for every row, and
    the axis of ``x[rows]`` holding the rows. It is 0, unless the advanced indices (integer
    and boolean arrays, and the integers among them) are not next to each other: numpy then
    puts their broadcast axes first, and the rows after them."""
    parts = index if type(index) is tuple else (index,)
    rows = (slice(None),) + parts
    if not any(isinstance(p, (list, np.ndarray)) for p in parts):
        return rows, 0  # (basic indexing: integers, slices, None, Ellipsis)
    advanced = [j for j, p in enumerate(parts) if isinstance(p, (list, np.ndarray, int,
                                                                 np.integer, np.bool_))]
    if advanced[-1] - advanced[0] + 1 == len(advanced):
        return rows, 0
    return rows, max(1 if np.asarray(parts[j]).dtype.kind == "b" else np.ndim(parts[j])
                     for j in advanced)


def rows_first(value, axis):
    """``value`` (``x[rows]`` of ``rows_index``) with the rows on its first axis."""
    return value if axis == 0 else np.moveaxis(value, axis, 0)


def rows_at(g, axis):
    """``g`` (rows first) laid out as ``x[rows]`` is: the rows at ``axis``."""
    return g if axis == 0 else np.moveaxis(g, 0, axis)


def gather_rows(a, index):
    """``a[index]`` of every row of ``a`` (a leading axis), the rows first."""
    rows, axis = rows_index(index)
    return rows_first(a[rows], axis)


def on_leading_rows(g, core_ndim, fn):
    """``fn(a, rows)`` of ``g`` (``(*lead, *core)``, ``core_ndim`` axes in the core): of
    ``g`` itself when it has no leading axes (``rows`` False), else of its leading axes
    made one axis of rows (``fn`` gives its result with the rows first), put back. A
    backward step's own primitive (a scatter, a view's region) has a batched vjp so."""
    lead = np.shape(g)[:np.ndim(g) - core_ndim]
    if not lead:
        return fn(g, False)
    out = fn(np.reshape(g, (int(np.prod(lead)),) + np.shape(g)[len(lead):]), True)
    return np.reshape(out, lead + np.shape(out)[1:])


def each_leading_row(t, core_ndim, one, at_once):
    """``one(t)`` (a scatter, a view's region) of ``t`` with leading axes (the tangents of
    a Jacobian's columns, a jvp's batch): ``at_once(rows)`` on a plain array of rows, else
    (a derivative of a derivative) ``one`` of each row, stacked."""
    def fn(a, rows):
        if not rows:
            return one(a)
        if type(a) is np.ndarray:
            return at_once(a)
        return np.stack([one(a[j]) for j in range(len(a))])
    return on_leading_rows(t, core_ndim, fn)


def broadcast_rows(g, ndim):
    """``g`` (rows first) with unit axes after its rows, so that each row has ``ndim``
    axes: each row then broadcasts into a region as one value of lower rank does."""
    missing = ndim - (np.ndim(g) - 1)
    if missing <= 0:
        return g
    return np.reshape(g, np.shape(g)[:1] + (1,) * missing + np.shape(g)[1:])


def scatter_rows(g, index, shape, dtype):
    """An array of ``shape`` per row of ``g`` (a leading axis), zeros but for the row added
    at ``index`` (broadcast there as one row would be): index_scatter of every row at once."""
    out = np.zeros((len(g),) + tuple(shape), dtype=dtype)
    rows, axis = rows_index(index)
    np.add.at(out, rows, rows_at(broadcast_rows(g, np.ndim(out[0][index])), axis))
    return out
