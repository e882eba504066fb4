"""Forward mode: one call of a function on forward duals (paper sections 2-3).

Forward mode runs the same transformed code as reverse mode: with boxed duals, D maps
every construct homomorphically except the primitive operations, so the generated code
is the same and only the rules differ by the kind of dual they meet (a forward dual
carries its tangent instead of a tape index; rules/scalar.py). The function receives a
``ForwardLevel`` where reverse mode passes its tape.

At the boundary (as interleave does for reverse mode, core/boundary.py): each float leaf of
the arguments becomes a forward dual whose tangent comes from the tangents given (the
same structure as the arguments, ``None`` for zero), the function runs on copies, the
caller's objects end as the original leaves them, and the result's tangent is read off
with the result's own structure.

A *vector* of tangents (``width`` directions at once) gives a Jacobian's columns in one
pass: each tangent then has one leading axis per direction.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..runtime.array_dual import FArrayDual
from .escape import run
from ..runtime.duals import (DUAL_TYPES, FDual, ForwardLevel, NestedFDual, forward_dual,
                             new_dual, running)
from ..data.tree import children_like, short as _short, tree_map
from .boundary import (Interleaving, ArrayPlan, FloatPlan, RecordPlan, NodePlan, RunPlan,
                         holds_derivative, primal, scalar_of, towered)


class ForwardInterleaving(Interleaving):
    """Interleave for forward mode: every float leaf becomes a forward dual of ``handle``;
    ``self.tape`` lists them by slot, so that their tangents can be given afterwards
    from the plan (``set_tangents``) and the copies and write-back are those of reverse
    mode."""

    def __init__(self, handle: ForwardLevel):
        super().__init__([])
        self.level = handle

    def _new_duals(self, xs) -> list:
        handle = self.level
        out = []
        for x in xs:
            d = new_dual(FDual)
            d.v, d.d, d.t = x, 0.0, handle
            out.append(d)
        self.tape.extend(out)
        return out

    def _dual(self, x):
        d = forward_dual(x, 0.0, self.level)
        self.tape.append(d)
        return d

    def _array_dual(self, value):
        if type(value) is np.ndarray and running.stack:  # (see Interleaving._array_dual)
            value = towered(value, self.level)
        d = FArrayDual(value, None, self.level)
        self.tape.append(d)
        return d

    # -- an array at two places (Interleaving.check_places) -----------------------------
    # A forward array dual has no slot that a write moves: what tells is its values and
    # tangent, taken once the tangents are given (snapshot_places).
    @staticmethod
    def _held(copy):
        if type(copy) is FArrayDual:
            return None if copy.d is None else (copy.v.copy(), np.copy(copy.d))
        return Interleaving._held(copy)

    def snapshot_places(self) -> None:
        """What each place of an array given twice holds, once the tangents are given."""
        for places in self.places.values():
            for k, (path, copy, _) in enumerate(places):
                if type(copy) is FArrayDual:
                    places[k] = (path, copy, self._held(copy))

    def _written(self, copy, before) -> bool:
        if type(copy) is not FArrayDual:
            return super()._written(copy, before)
        values, tangent = before
        return not (np.array_equal(copy.v, values, equal_nan=True)
                    and np.array_equal(copy.d, tangent, equal_nan=True))

    # -- tangents ------------------------------------------------------------------------
    def set_tangent(self, slot: int, tangent, path: str) -> None:
        leaf = self.tape[slot]
        if type(leaf) is FArrayDual:
            shape = np.shape(leaf.v)
            expected = shape if self.level.width is None else (self.level.width,) + shape
            if np.shape(tangent) != expected:
                raise InputError(f"the tangent at {path} should be an array of shape "
                                 f"{expected}, got {_short(tangent)}")
            # a copy: the function's writes into its argument write into the tangent
            # (x *= x), and the caller's tangent is left as given (as JAX does)
            leaf.d = tangent.copy() if hasattr(tangent, "copy") else \
                np.array(tangent, dtype=leaf.v.dtype)
            return
        tangent = scalar_of(tangent)
        if isinstance(tangent, bool) or not (
                isinstance(tangent, (int, float)) or type(tangent) in DUAL_TYPES or
                (self.level.width is not None and np.shape(tangent) == (self.level.width,))):
            raise InputError(f"the tangent at {path} should be a float, got "
                             f"{type(tangent).__name__} {_short(tangent)}")
        if type(tangent) is int:
            tangent = float(tangent)
        leaf.d = tangent
        if type(tangent) is not float or type(leaf.v) is not float:
            leaf.__class__ = NestedFDual  # (same layout; the rules' fast paths skip it)

    def set_tangents(self, plan, tangent, path: str) -> None:
        """Give the leaves described by ``plan`` the tangents of the structure ``tangent``
        (which mirrors the argument; None is zero)."""
        if tangent is None:
            return
        t = type(plan)
        if t is int:
            self.set_tangent(plan, tangent, path)
        elif t is FloatPlan or t is ArrayPlan:
            self.set_tangent(plan.slot, tangent, path)
        elif t is RunPlan:
            if not isinstance(tangent, (list, tuple)) or len(tangent) != plan.n:
                raise InputError(f"the tangent at {path} should be a sequence of length "
                                 f"{plan.n}, got {_short(tangent)}")
            for k, x in enumerate(tangent):
                if x is not None:
                    self.set_tangent(plan.start + k, x, f"{path}[{k}]")
        elif t is RecordPlan:
            for k, name in enumerate(plan.names):
                x = getattr(tangent, name, None)
                if x is not None:
                    self.set_tangent(plan.start + k, x, f"{path}.{name}")
        elif t is NodePlan:
            self._set_node(plan, tangent, path)
        # a _Const leaf (an int, a string...) has no tangent

    def _set_node(self, plan, tangent, path):
        node = plan.node
        given = children_like(node, plan.cls, plan.keys, tangent, path, "tangent", "primal")
        for key, child, x in zip(plan.keys, plan.children, given):
            self.set_tangents(child, x, path + node.step(key))

    def zero_missing(self) -> None:
        """Leaves given no tangent: zero (of the right shape for vectors of tangents)."""
        width = self.level.width
        for leaf in self.tape:
            if type(leaf) is FArrayDual:
                if leaf.d is None:
                    shape = np.shape(leaf.v)
                    leaf.d = np.zeros(shape if width is None else (width,) + shape,
                                      dtype=leaf.v.dtype)
            elif width is not None and type(leaf.d) is float:
                leaf.d = np.zeros(width)
                leaf.__class__ = NestedFDual


class ForwardPass:
    """What one forward-mode call leaves: its result (holding forward duals), the level
    they belong to, the plans of the differentiated arguments and their leaves."""

    def __init__(self, result, handle, state, plans):
        self.result, self.level, self.state, self.plans = result, handle, state, plans
        self._originals = state.originals() if state.copies else None

    def primal_of(self, value):
        return primal(value, self._originals, self.level)

    def tangent_of(self, value):
        return tangent_of(value, self.level)


def forward(rev, args: tuple, kwargs: dict, positions, tangents=None, width=None,
            basis=None) -> ForwardPass:
    """Run ``rev`` (a transformed function, called as ``rev(level, *args, **kwargs)``) on
    forward duals for the arguments at ``positions``; the other arguments and the
    keyword arguments are constants (copies, as in reverse mode).

    ``tangents`` mirrors the differentiated arguments (None: zero); ``basis(state,
    plans)``, instead, gives every leaf its tangent (a Jacobian's directions)."""
    handle = ForwardLevel(width)
    state = ForwardInterleaving(handle)
    dual_args, plans = list(args), []
    for k in positions:
        dual_args[k], plan = state.interleave(args[k], f"primals[{k}]")
        plans.append(plan)
    if basis is not None:
        basis(state, plans)
    elif tangents is not None:
        for k, plan, tangent in zip(positions, plans, tangents):
            state.set_tangents(plan, tangent, f"tangents[{k}]")
    state.zero_missing()
    if state.places:
        state.snapshot_places()
    for k in range(len(args)):
        if k not in positions:
            dual_args[k] = state.copy_constant(args[k])
    kwargs = {name: state.copy_constant(v) for name, v in kwargs.items()}
    # (as reverse mode: arguments written back, no dual left behind: core/escape.py)
    result = run(rev, handle, state, dual_args, kwargs)
    return ForwardPass(result, handle, state, plans)


def tangent_of(value, handle):
    """The tangent of ``value`` (a result holding forward duals of ``handle``), with its
    structure: a float or an array for each differentiated leaf, zero for a float or
    float array that does not depend on the inputs, and every other leaf as it is."""
    width = handle.width

    def tangent(x):
        if type(x) in DUAL_TYPES:
            if x.t is handle and hasattr(x, "d"):
                return x.d
            return zero_tangent(x.v if hasattr(x, "v") else x, width)
        return zero_tangent(x, width)
    return tree_map(tangent, value, holds_derivative)


def zero_tangent(value, width=None):
    """The zero tangent of a float or float array ``value`` (``width`` directions: a
    leading axis of them)."""
    shape = np.shape(value)
    if width is None:
        return 0.0 if shape == () else np.zeros(shape)
    return np.zeros((width,) + shape)


__all__ = ["forward", "tangent_of", "zero_tangent", "ForwardInterleaving", "ForwardPass"]
