"""Transforms made inline cost what kept ones cost.

``astad.grad(f, argnums=1)(a, x)`` written in a loop makes a new transform object per
call. What it needs of ``f`` alone, the compiled call of its specialised float code
(runtime/_specialised.c's ``SpecialisedCall``) with the entry and the argument selection
it reads, is made once per (function, kind, argnums) and kept here, so a new transform
finds it at once (``inline_call``); a ``functools.partial`` made anew finds its
function's, and a lambda made anew runs the code written for its code (``made_again``).

Nothing kept holds the function: the call's owner (``WeakOwner``) and the
SpecialisedCall hold it weakly, and the function's calls leave when it dies
(``weakref.finalize``), so a lambda made at run time is not kept alive. A changed
function is seen: the compiled call checks on every call that the entry it runs was
written from the function as it is now (its ``__code__``, its defaults, the bindings its
code read), and where it was not, the general path finds the current one, which is kept.
A transform called a second time is kept by its caller: it makes a DiffFunction of its
own (api/transforms.py), as before.
"""
from __future__ import annotations

import functools
import types
import weakref

from ..argnums import argnums_positions
from ..compile import calls as compiled
from ..runtime.duals import running
from ..runtime.tape import native
from ..transform.bindings import MISSING
from ..compile.entry import BY_CODE, with_cells
from .diff import (DiffFunction, run_specialised, selection_of, specialised_call,
                   with_defaults)

# id(function) -> {(argnums, gradient_only): (WeakOwner, SpecialisedCall)}; an id's entry
# leaves with its function (weakref.finalize), before the id can name another one
_CALLS: dict = {}


class WeakOwner:
    """What a SpecialisedCall reads of its owner (``entry``, ``fn``, ``selection``), for a
    function held weakly; its general path makes the function's DiffFunction when it
    runs (arguments that are not floats: numpy arrays, structures)."""

    __slots__ = ("_function", "entry", "_argnums", "_gradient_only", "_call", "__weakref__")

    def __init__(self, fun, argnums, gradient_only: bool, call: str):
        self._function = weakref.ref(fun)
        self.entry = None
        self._argnums = argnums  # (an int or a tuple: as DiffFunction takes it)
        self._gradient_only = gradient_only
        self._call = call  # how the user asked (astad.grad), for messages

    @property
    def fn(self):
        return self._function()

    def selection(self, n_args: int):
        """DiffFunction.selection's answer for ``argnums`` (always given here)."""
        return selection_of(*argnums_positions(self._argnums, n_args), n_args)

    def general(self, *args, **kwargs):
        """The general path (one reverse pass); the entry it finds current is kept."""
        diff = DiffFunction(self._function(), self._argnums)
        diff.call = self._call
        diff.entry = self.entry
        try:
            if self._gradient_only:
                return diff._grad_general(*args, **kwargs)
            return diff._value_and_grad_general(*args, **kwargs)
        finally:
            self.entry = diff.entry  # (rebuilt by the pass if it was not current)


def plain_call(fun, argnums, gradient_only: bool, kind: str):
    """The compiled call of ``astad.grad`` (``gradient_only``) or ``value_and_grad``
    (``kind``) of plain Python function ``fun`` with ``argnums``; None without the
    compiled runtime (the caller makes a DiffFunction's call then). The call checks that
    its entry is current (the function's code, defaults and bindings, in C) and takes
    the general path, which finds the current one, where it is not."""
    if native is None:
        return None
    found = _kept(fun, (argnums, gradient_only))
    if found is not None:
        return found
    calls = _CALLS.get(id(fun))
    if calls is None:
        calls = _CALLS[id(fun)] = {}
        weakref.finalize(fun, _CALLS.pop, id(fun), None)
    owner = WeakOwner(fun, argnums, gradient_only, f"astad.{kind}")
    owner.entry = compiled.transformed(fun)
    call = native.SpecialisedCall(owner, owner.general, running, MISSING, specialised_call,
                                  gradient_only)
    calls[(argnums, gradient_only)] = (owner, call)
    return call


def kept_call(fun, argnums, gradient_only: bool):
    """The call ``plain_call`` made for ``fun`` with ``argnums``, when that is a
    non-negative int (so read the same for any count of arguments), else None: what a
    transform made inline finds at once, with no other check (the call checks its entry
    as it runs)."""
    if type(argnums) is not int or argnums < 0:
        return None
    return _kept(fun, (argnums, gradient_only))


def inline_call(fun, argnums, gradient_only: bool, args: tuple, kwargs: dict):
    """The first call of a transform made inline (api/transforms.py), by what is kept
    for its function: the call kept for ``fun`` and ``argnums``; for a function made
    again, the code of its kind (``made_again``); for a ``functools.partial``, its
    function's kept call with the bound arguments before (constants, as to JAX).
    ``MISSING`` where none applies: the transform's own first call runs."""
    found = kept_call(fun, argnums, gradient_only)
    if found is not None:
        return found(*args, **kwargs)
    if kwargs:
        return MISSING
    positions, single = argnums_positions(argnums, len(args))  # (its errors: the call's)
    if type(fun) is types.FunctionType:
        return made_again(fun, args, selection_of(positions, single, len(args)),
                          gradient_only)
    if type(fun) is functools.partial and not fun.keywords and single:
        found = kept_call(fun.func, positions[0] + len(fun.args), gradient_only)
        if found is not None:
            return found(*fun.args, *args)
    return MISSING


def _kept(fun, key):
    """The SpecialisedCall kept for ``fun`` under ``key`` (argnums, gradient_only), or
    None (none made, or made for a dead function whose id ``fun`` now has)."""
    calls = _CALLS.get(id(fun))
    found = None if calls is None else calls.get(key)
    return None if found is None or found[0]._function() is not fun else found[1]


def made_again(fun, args: tuple, select, gradient_only: bool):
    """The first call of a transform of ``fun``, a function made again (a lambda or nested
    ``def`` evaluated anew, of code written for before: compile/entry.BY_CODE), by the
    specialised code written for the first such function, bound to ``fun``'s cells for
    this call: no entry, kept call or finaliser of its own, which a function made per
    call would pay for at every call. ``MISSING`` where that does not apply (the kept
    call is then made: api/transforms.py)."""
    if id(fun) in _CALLS or running.stack:
        return MISSING  # (a function with a kept call; an enclosing differentiation)
    template = BY_CODE.get((fun.__code__, True, False))
    if template is None:
        return MISSING
    if template.last_run is not None and template.last_run() is fun:
        return MISSING  # (run here before: a function its caller keeps, whose call is kept)
    template.last_run = weakref.ref(fun)
    full = with_defaults(fun, args, fun.__code__.co_argcount)
    if full is None or not template.fits(fun):
        return MISSING
    recipe = template.cell_recipes.get("tapeless")
    tapeless = with_cells(recipe, fun) if recipe is not None else \
        template.artifacts["tapeless"]
    if tapeless is None:
        return MISSING
    out = run_specialised(tapeless, template.artifacts["tapes"], full, select, len(args))
    if out is None:
        return MISSING
    return out[1] if gradient_only else out
