"""Jacobians at the cost they should have: ``jacfwd`` in ONE forward pass carrying a
tangent per input (a numpy vector of tangents), ``jacrev`` in one forward pass and ONE
sweep carrying an adjoint per output (a numpy vector of adjoints), and ``jacobian``
choosing between them by the shapes, as JAX users would.

The result follows JAX's pytree convention: the output's structure outside, the
structure of the differentiated arguments inside, and at each pair of leaves an array of
shape ``out.shape + in.shape`` (a float for two floats).
"""
from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError, api_boundary, hide_own_frames
from ..core.forward_pass import forward
from ..runtime.array_dual import ArrayDual, index_of
from ..compile.calls import rev as transformed_callable
from ..runtime.duals import SCALAR_DUALS, running
from ..runtime.tape import sweep_general
from ..data.tree import leaves, replace_leaves
from ..core.boundary import (ArrayPlan, NodePlan, argument_gradient, holds_derivative,
                             leaf_slots)
from ..compile import calls as compiled
from ..compile.calls import resolvable_function
from ..compile.numba_backend import check_backend, python_function_of
from ..specialise.value_kinds import floats
from .diff import (ALL_GRADIENTS, selected_rows, selection_of, specialised,
                   specialised_rows)
from .hvp import floats_code, hessian_vector_product
from .transforms import Transform, name_of, split_aux, argnums_positions, reverse


# -- the output's leaves ------------------------------------------------------------------
def _output_leaves(value) -> list:
    """The leaves of a result that have a derivative, in the tree's order."""
    return leaves(value, holds_derivative)


def _rebuild_output(value, blocks) -> Any:
    """``value``'s structure with its k-th leaf that has a derivative replaced by
    ``blocks[k]``."""
    return replace_leaves(value, blocks, holds_derivative)


# -- the arguments' leaves -----------------------------------------------------------------
class _Inputs:
    """The leaves of the differentiated arguments, in slot order, with their offsets in
    the flat vector of all of them."""

    def __init__(self, plans):
        self.plans = plans
        self.leaves = [leaf for plan in plans for leaf in leaf_slots(plan)]
        self.arrays = {slot for plan in plans for slot in _array_slots(plan)}
        self.offsets, total = [], 0
        for _, shape in self.leaves:
            self.offsets.append(total)
            total += int(np.prod(shape))
        self.size = total

    def rebuild(self, blocks: dict, single: bool):
        """The arguments' structure with each leaf's block (a float leaf's block may be an
        array: the output's shape)."""
        adjoint = dict(blocks)
        arrays = {slot: blocks[slot] for slot in self.arrays}
        structures = [argument_gradient(plan, _Slots(adjoint), arrays) for plan in self.plans]
        return structures[0] if single else tuple(structures)


def _array_slots(plan) -> list:
    found, stack = [], [plan]
    while stack:
        p = stack.pop()
        if type(p) is ArrayPlan:
            found.append(p.slot)
        elif type(p) is NodePlan:
            stack.extend(p.children)
    return found


class _Slots(dict):
    """The blocks by slot, read as build_gradient reads adjoints (by index, and slices of
    consecutive slots for a list of floats)."""

    def __getitem__(self, key):
        if type(key) is slice:
            return [dict.__getitem__(self, s) for s in range(key.start, key.stop)]
        return dict.__getitem__(self, key)


def _block(column, out_shape, in_shape, array_input: bool):
    """A (size of the output, size of the input) slice, as out.shape + in.shape (a float
    for a float output and a float input). Inside an enclosing differentiation (a
    Hessian) it is a differentiated value itself."""
    block = np.reshape(column, tuple(out_shape) + tuple(in_shape))
    if np.shape(block) != () or array_input:
        return block
    return float(block) if type(block) in (np.ndarray, np.float64) else block.item()


class _Jacobian(Transform):
    """What ``jacfwd``, ``jacrev`` and ``jacobian`` take: ``argnums``, ``has_aux``,
    ``holomorphic`` (JAX's) and ``compile`` (docs/compiled.md)."""

    def __init__(self, fun, argnums=0, has_aux=False, holomorphic=False,
                 compile=None):  # noqa: A002
        if compile is None and type(argnums) is int and argnums >= 0 and callable(fun):
            self.fun = self.__wrapped__ = fun  # (nothing to check: a transform made inline
            self.options = {"argnums": argnums, "has_aux": bool(has_aux),  # pays no more)
                            "holomorphic": bool(holomorphic)}
            return
        argnums_positions(argnums, 1 << 30)
        super().__init__(python_function_of(fun) if compile else fun, argnums=argnums,
                         has_aux=bool(has_aux), holomorphic=bool(holomorphic),
                         **_compile_option(compile))


# -- jacfwd --------------------------------------------------------------------------------
class jacfwd(_Jacobian):  # noqa: N801 - named as JAX names it
    """``jacfwd(f, argnums=0, has_aux=False, holomorphic=False)(*args)``: the Jacobian by
    forward mode, one pass with a tangent per scalar of the differentiated arguments
    (complex ones: ``holomorphic=True``, JAX's)."""

    kind = "jacfwd"

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # (api_boundary's, inline: no frame more on the fast call)
        try:
            fast = float_gradient(self, args, kwargs) if type(self.fun) is not jacrev \
                else float_hessian(self, args, kwargs)
            return fast if fast is not None else self._forward(args, kwargs)
        except Exception as error:
            hide_own_frames(error)
            raise

    def _forward(self, args, kwargs):
        positions, single = argnums_positions(self.options["argnums"], len(args))
        if not self.options["holomorphic"]:
            _refuse_complex([args[k] for k in positions], "an argument", self)
        inputs = []

        def basis(state, plans):
            found = _Inputs(plans)
            inputs.append(found)
            # one direction per leaf of the plans: an object at two places has a leaf at
            # each (JAX's partials), which _count_inputs' walk of the values counts once
            state.level.width = found.size
            eye = np.eye(found.size)
            for (slot, shape), offset in zip(found.leaves, found.offsets):
                size = int(np.prod(shape))
                tangent = eye[:, offset:offset + size]
                state.set_tangent(slot, tangent.reshape((found.size,) + tuple(shape))
                                  if shape != () else tangent[:, 0], "primals")

        width = _count_inputs(args, positions)
        if width == 0 and _holds_floats(args, positions):
            # inputs of no elements (np.zeros(0)): an empty Jacobian, as JAX gives, which
            # reverse mode's sweep makes without a tangent of width 0
            return jacrev(self.fun, **self.options)(*args, **kwargs)
        if width == 0:
            raise InputError(f"jacfwd of {name_of(self.fun)}: no argument chosen for "
                             "differentiation holds a float")
        pass_ = forward(transformed_callable(self.fun), args, kwargs, positions,
                        width=width, basis=basis)
        found = inputs[0]
        out, aux = split_aux(pass_.result, self.options["has_aux"], self.fun)
        tangents = pass_.tangent_of(out)
        value = pass_.primal_of(out)
        leaves = _output_leaves(value)
        columns = _output_leaves(tangents)
        blocks = []
        for leaf, column in zip(leaves, columns):
            out_shape = np.shape(leaf)
            # column: (inputs,) + out_shape -> out_shape + (inputs,)
            moved = np.moveaxis(column, 0, -1)
            blocks.append(found.rebuild({
                slot: _block(moved[..., offset:offset + int(np.prod(shape))], out_shape,
                             shape, slot in found.arrays)
                for (slot, shape), offset in zip(found.leaves, found.offsets)}, single))
        jacobian = _rebuild_output(value, blocks)
        if self.options["has_aux"]:
            return jacobian, pass_.primal_of(aux)
        return jacobian


def _refuse_complex(values, what: str, transform) -> None:
    """A complex leaf where a Jacobian's real basis would not tell the whole derivative
    (forward mode's inputs, reverse mode's outputs): refused unless the function is said
    to be holomorphic (JAX's convention, rules/complex_values.py)."""
    for leaf in leaves(values, holds_derivative):
        if np.iscomplexobj(leaf):
            raise InputError(
                f"{transform.kind} of {name_of(transform.fun)}: {what} is complex. A "
                "Jacobian of complex values is f'(z), which exists where f is holomorphic: "
                "pass holomorphic=True if it is (as JAX takes it); a real function of "
                "complex inputs has its gradient df/dx - i df/dy from astad.grad or "
                "astad.jacrev")


def _holds_floats(args, positions) -> bool:
    """Whether a differentiated argument has a float leaf (perhaps of no elements)."""
    return any(leaves(args[k], holds_derivative) for k in positions)


def _count_inputs(args, positions) -> int:
    """The number of scalars in the differentiated arguments (their float leaves)."""
    return sum(int(np.prod(np.shape(leaf))) for k in positions
               for leaf in leaves(args[k], holds_derivative))


# -- jacrev --------------------------------------------------------------------------------
class jacrev(_Jacobian):  # noqa: N801
    """``jacrev(f, argnums=0, has_aux=False, holomorphic=False)(*args)``: the Jacobian by
    reverse mode, one forward pass and one sweep with an adjoint per scalar of the output
    (a complex output: ``holomorphic=True``, JAX's)."""

    kind = "jacrev"

    @api_boundary
    def __call__(self, *args, **kwargs):
        fast = float_gradient(self, args, kwargs)
        if fast is not None:
            return fast
        positions, single = argnums_positions(self.options["argnums"], len(args))
        pass_ = reverse(self.fun, args, kwargs, positions)
        return self.from_pass(pass_, positions, single)

    def from_pass(self, pass_, positions, single):
        """The Jacobian from a forward pass of reverse mode: one sweep of vectors."""
        tape = pass_.tape
        out, aux = split_aux(pass_.result, self.options["has_aux"], self.fun)
        value = pass_.primal_of(out)
        if not self.options["holomorphic"]:
            _refuse_complex(value, "its result", self)
        outputs = _output_leaves(out)
        sizes = [int(np.prod(np.shape(pass_.primal_of(leaf)))) for leaf in outputs]
        width = sum(sizes)
        adjoint, arrays = [0.0] * len(tape), {}
        offset = 0
        vectors = width > 1  # one output scalar: the ordinary sweep, a row of one
        for leaf, size in zip(outputs, sizes):  # each output scalar its own adjoint row
            if type(leaf) in SCALAR_DUALS and leaf.t is tape:
                if vectors:
                    row = np.zeros(width)
                    row[offset] = 1.0
                else:
                    row = 1.0
                adjoint[leaf.i] = adjoint[leaf.i] + row
            elif type(leaf) is ArrayDual and leaf.t is tape and size:  # (empty: no row)
                rows = np.zeros((width,) + np.shape(leaf.v))
                rows.reshape(width, -1)[offset:offset + size] = np.eye(size)
                if not vectors:
                    rows = rows[0]
                slot = index_of(leaf)
                arrays[slot] = arrays[slot] + rows if slot in arrays else rows
            offset += size
        if width:
            pass_.sweep(adjoint, arrays, sweep_general, width=width if vectors else None)
        found = _Inputs([pass_.plans[k] for k in range(len(positions))])
        blocks, offset = [], 0
        for leaf, size in zip(outputs, sizes):
            out_shape = np.shape(pass_.primal_of(leaf))
            per_input = {}
            for slot, shape in found.leaves:
                rows = arrays.get(slot) if slot in found.arrays else adjoint[slot]
                if rows is None or vectors and type(rows) in (float, int):  # never reached
                    rows = np.zeros((width,) + tuple(shape))  # (with one output scalar the
                elif not vectors:  # sweep is the ordinary one: a float is its adjoint)
                    rows = np.reshape(rows, (1,) + tuple(shape))
                per_input[slot] = _block(rows[offset:offset + size], out_shape, shape,
                                         slot in found.arrays)
            blocks.append(found.rebuild(per_input, single))
            offset += size
        jacobian = _rebuild_output(value, blocks)
        if self.options["has_aux"]:
            return jacobian, pass_.primal_of(aux)
        return jacobian


class jacobian(_Jacobian):  # noqa: N801
    """``jacobian(f, argnums=0, has_aux=False)``: ``jacfwd`` when the differentiated
    arguments hold fewer scalars than the output, else ``jacrev``. The output's size is
    read off reverse mode's forward pass, which ``jacrev`` then continues from; choosing
    ``jacfwd`` runs ``f`` once more."""

    kind = "jacobian"

    @api_boundary
    def __call__(self, *args, **kwargs):
        fast = float_gradient(self, args, kwargs)  # (a float result: its gradient)
        if fast is not None:
            return fast
        positions, single = argnums_positions(self.options["argnums"], len(args))
        n_in = _count_inputs(args, positions)
        pass_ = reverse(self.fun, args, kwargs, positions)  # (its result gives the sizes)
        out, _ = split_aux(pass_.result, self.options["has_aux"], self.fun)
        n_out = sum(int(np.prod(np.shape(pass_.primal_of(leaf))))
                    for leaf in _output_leaves(out))
        if n_in < n_out:  # fewer columns than rows: forward mode, one more pass
            return jacfwd(self.fun, **self.options)(*args, **kwargs)
        return jacrev(self.fun, **self.options).from_pass(pass_, positions, single)


@api_boundary
def hessian(fun: Callable[..., Any], argnums=0, has_aux: bool = False,
            holomorphic: bool = False, compile: str | None = None):  # noqa: A002
    """``hessian(f, argnums=0, has_aux=False, holomorphic=False)``: forward mode over
    reverse mode, ``jacfwd(jacrev(f))``; with ``has_aux``, ``(hessian, aux)``.
    ``compile="numba"``: its Hessian-vector code for floats compiled (docs/compiled.md)."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic,
                         compile=compile), argnums, has_aux=has_aux,
                  holomorphic=holomorphic, compile=compile)


def _compile_option(compile) -> dict:  # noqa: A002
    """The ``compile=`` option as a transform keeps it: only when one is asked for (the
    transform's repr and pickle are unchanged without it)."""
    backend = check_backend(compile)
    return {} if backend is None else {"compile": backend}


# -- a float function of floats: the code written for floats -------------------------------
def _float_function(transform, kwargs, n: int):
    """``(fun, entry, positions, single)``: ``transform``'s function, its current entry
    and argnums for ``n`` arguments, where the code written for floats may serve it (a
    plain Python function; no aux, holomorphic or keyword arguments; no enclosing
    differentiation), else None. What depends on the transform alone is kept on it."""
    found = _found(transform)
    plans = found.get("plans")
    if plans is None:
        fun, options = transform.fun, transform.options
        plans = found["plans"] = {} if not (
            options["has_aux"] or options.get("holomorphic") or
            type(fun) is not types.FunctionType or not resolvable_function(fun)) else False
    if plans is False or kwargs or running.stack:
        return None
    plan = plans.get(n)
    if plan is None:
        plan = plans[n] = argnums_positions(transform.options["argnums"], n)
    fun, entry = transform.fun, found.get("entry")
    if entry is None or not entry.is_current(fun):
        entry = found["entry"] = compiled.transformed(fun)
    return fun, entry, *plan


# What the calls of a Jacobian or Hessian transform found (its plans, its function's
# entry, a Hessian's code for floats), shared by every transform of the same plain Python
# function with the same options, so that one made inline, anew at each call, finds it
# (api/inline.py does the same for grad): function -> {(kind, options): what was
# found}, held weakly (a lambda made per call is not kept alive, and costs a weak
# reference, not a finaliser). Each item is checked where it is read (an entry
# is_current, a plan is per argument count), as it is on a transform kept.
_FOUND = weakref.WeakKeyDictionary()


def _found(transform) -> dict:
    """Where ``transform`` keeps what its calls found: shared as ``_FOUND`` says for a
    plain Python function (or the jacrev of one: a Hessian), else its own."""
    found = transform.__dict__.get("_found")
    if found is not None:
        return found
    # (the options in the order every transform stores them: argnums, has_aux,
    # holomorphic, then compile where asked for)
    fun, key = transform.fun, (type(transform), *transform.options.values())
    if type(fun) is jacrev:  # (hessian: jacfwd(jacrev(f)))
        fun, key = fun.fun, (*key, *fun.options.values())
    found = transform._found = {}
    if type(fun) is types.FunctionType and all(type(k) in _KEYS for k in key[1:]):
        kept = _FOUND.get(fun)
        if kept is None:
            kept = _FOUND[fun] = {}
        found = transform._found = kept.setdefault(key, found)
    return found


_KEYS = (int, bool, str, tuple)  # (an argnums given as a list: the transform's own)


def float_gradient(transform, args, kwargs):
    """The Jacobian of a plain Python function whose result is a float: its gradient
    (the same structure, JAX's for a scalar output), by the code ``grad`` runs for float
    arguments (specialise/); None where that code does not apply."""
    plan = _float_function(transform, kwargs, len(args))
    if plan is None:
        return None
    fun, entry, positions, single = plan
    select = selection_of(positions, single, len(args))
    out = specialised(entry, fun, args, select, True, transform.options.get("compile"))
    if out is None:  # (a tuple of floats: each output's gradient, its row)
        return _float_rows(entry, fun, args, select, transform.options.get("compile"))
    if type(out[0]) is not float and type(out[0]) is not np.float64:
        return None
    return out[1]


def _float_rows(entry, fun, args, select, backend=None):
    """The Jacobian of a plain Python function whose result is a tuple or list of floats,
    by the code written for its rows (diff.specialised_rows), as the general path gives
    it: the result's container of each output's gradient; None where that code does not
    apply."""
    out = specialised_rows(entry, fun, args, backend)
    picked = None if out is None else selected_rows(out[1], args, select)
    if picked is None:
        return None
    if type(out[0]) is np.ndarray:  # (np.array of floats: each argument's block, stacked)
        if not picked:
            return None  # (no output: the general path's (0, n) blocks)
        if type(select) is int:
            return _stacked_rows(picked)
        blocks = [_stacked_rows([row[j] for row in picked])
                  for j in range(len(args) if select is ALL_GRADIENTS else len(select))]
        return None if any(b is None for b in blocks) else tuple(blocks)
    return picked if type(out[0]) is list else tuple(picked)


def _stacked_rows(rows: list):
    """The block of a Jacobian of a vector by one argument from each output's gradient
    (floats, or 1-d float arrays as an array read by element gives them), as the general
    path gives it; None for any other kind of argument."""
    kinds = {type(g) for g in rows}
    if kinds <= {float, np.float64} or kinds == {np.ndarray} and all(
            g.ndim == 1 and g.dtype == np.float64 for g in rows):
        return np.array(rows)
    return None


def float_hessian(transform, args, kwargs):
    """``hessian(f)(*args)`` (``jacfwd(jacrev(f))``, the same options) for float and
    list-of-float arguments: one Hessian-vector product per differentiated float
    (api/hvp.py: reverse mode over forward mode's code for floats), assembled as the
    general path gives it; None where that code does not apply."""
    inner = transform.fun
    # what the last call of floats found: (entry, count of arguments, its Hessian-vector
    # code or None, positions, single), kept while the entry is current
    known = _found(transform).get("floats")
    if known is not None and known[2] is not None and not kwargs and \
            len(args) == known[1] and known[0].is_current(inner.fun) and \
            not running.stack and floats(*args):
        found = _hessian_of_floats(known[2], args, known[3], known[4])
        if found is not None:  # (the common case, whose fixed cost shows)
            return found
    if type(inner) is not jacrev or inner.options != transform.options:
        return None
    plan = _float_function(inner, kwargs, len(args))
    if plan is None:
        return None
    fun, entry, positions, single = plan
    backend = transform.options.get("compile")
    if floats(*args):
        if known is None or known[0] is not entry or known[1] != len(args):
            known = _found(transform)["floats"] = (entry, len(args), floats_code(
                entry, fun, len(args), backend), positions, single)
        found = None if known[2] is None else \
            _hessian_of_floats(known[2], args, positions, single)
        if found is not None:
            return found
    sizes = []
    for k in positions:
        a = args[k]
        if type(a) is float:
            sizes.append(None)
        elif type(a) is list and a and all(type(v) is float for v in a):
            sizes.append(len(a))
        else:
            return None
    zero = []  # the tangents of the arguments: none of a plain one (never read)
    for a in args:
        if type(a) is float:
            zero.append(0.0)
        elif type(a) is list and all(type(v) is float for v in a):
            zero.append([0.0] * len(a))
        elif type(a) in (int, bool, str) or a is None:
            zero.append(a)
        else:
            return None  # (a record's, an array's tangent: the general path)
    columns = {}  # (argument, element or None) -> H times that unit vector
    for k, size in zip(positions, sizes):
        for m in ([None] if size is None else range(size)):
            tangents = list(zero)
            if m is None:
                tangents[k] = 1.0
            else:
                tangents[k] = [0.0] * size
                tangents[k][m] = 1.0
            out = hessian_vector_product(entry, fun, positions, single, args, tangents,
                                         backend)
            if out is None:
                return None
            columns[k, m] = out[1] if not single else (out[1],)

    def row(i, e):  # d/dx_i[e] of the gradient, by each differentiated argument
        parts = []
        for k, size in zip(positions, sizes):
            at = (lambda c: c[i]) if e is None else (lambda c: c[i][e])
            parts.append(at(columns[k, None]) if size is None else
                         [at(columns[k, m]) for m in range(size)])
        return parts[0] if single else tuple(parts)
    rows = [row(i, None) if size is None else [row(i, e) for e in range(size)]
            for i, size in enumerate(sizes)]
    return rows[0] if single else tuple(rows)


@functools.lru_cache(maxsize=64)
def _in_order(n: int) -> tuple:
    return tuple(range(n))


@functools.lru_cache(maxsize=64)
def _units(n: int) -> tuple:
    """The unit vectors of n floats, as tuples."""
    return tuple(tuple(1.0 if i == k else 0.0 for i in range(n)) for k in range(n))


def _hessian_of_floats(code, args, positions, single):
    """``float_hessian`` when every argument is a float, by the Hessian-vector ``code``
    for floats (``code(*primals, *tangents)``), or None."""
    units, n = _units(len(args)), len(args)
    try:  # (one column of H per float: H e_k, and the gradient after it)
        columns = [code(*args, *units[k])[1] for k in positions]
    except Exception:  # noqa: BLE001 (it only reads its arguments, or answered None: the
        return None  # general path runs, and raises the error at the user's line)
    total = 0.0
    for column in columns:
        total += sum(column)
    if total - total != 0.0:
        return None  # (a zero times an infinite partial: the general path's result)
    if single:
        return columns[0][positions[0]]
    if positions == _in_order(n):  # (every argument, in order: the common case)
        return tuple(zip(*columns))[:n]
    return tuple([tuple([column[i] for column in columns]) for i in positions])


__all__ = ["jacfwd", "jacrev", "jacobian", "hessian"]
