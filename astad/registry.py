"""The rule registry: one record per differentiable callable, and the ``ad`` namespace
that generated code calls, built from it.

A record holds what every mode and every path needs to differentiate one callable (or
one scalar rule that several callables share: ``operator.abs`` and ``abs``):

- the scalar rule: its name in ``ad``, the function generated code calls
  (``call(tape, *args)``), its formula as text in the inputs ``x``, ``y`` and the result
  ``r`` (preaccumulation and the code specialised for floats write it into their code),
  and its general form (any mix of levels and modes: rules/scalar_general.py);
- the array rule: what numpy's dispatch calls (``array(tape, *args, **kwargs)``), and the
  derivatives it is made from: element-wise partials (forward mode derives the jvp), or
  one vjp and one jvp per argument, with what the sweep may assume of them;
- what dispatch does first: an argument check, a write into an argument, a view.

The rule modules (astad/rules/) fill it through the functions users call too
(``register_scalar``, ``register_vjp``, ``register_jvp``, ``register_elementwise``,
``custom_vjp``): astad extends itself exactly as users extend it. This module imports
none of them, so every layer may read it.
"""
from __future__ import annotations

import types
from collections.abc import Callable

__all__ = ["Record", "record", "renew", "lookup", "named", "scalar_rule", "publish", "ad",
           "RECORDS", "on_missing", "unique_name"]


class Record:
    """Everything astad knows about differentiating one callable."""

    __slots__ = (
        # -- the scalar rule (rules/scalar.py, rules/scalar_general.py)
        "name",          # its function in ``ad`` (what generated code calls), or None
        "call",          # that function: call(tape, *args, **kwargs)
        "formula",       # (primal text, partial texts, parameters "x" or "x, y"), or None
        "general",       # its general form (rules.scalar_general.Rule), or None
        "total",         # never raises on floats (inf or nan instead): fusing may reorder
        # -- the array rule (rules/array.py and the topic modules)
        "array",         # what numpy's dispatch calls: array(tape, *args, **kwargs)
        "partials",      # element-wise: partials[k](*args, result), one per argument
        "finite",        # element-wise partials finite wherever the arguments are
        "vjps",          # vjps[k](g, result, *args, **kwargs), None where not differentiable
        "jvps",          # jvps[k](t, result, *args, **kwargs)
        "refusals",      # (name or None, {k: (what, why)}): how errors name an argument
                         # with no derivative ("its order v") and the function
        "batched_vjps",  # the vjps take cotangents with leading axes (a Jacobian's rows)
        "batched_jvps",  # the jvps take tangents with leading axes (its columns)
        "result_kind",   # what the vjps return: rules.array.NEW_ARRAYS, VIEWS_OF_G or None
        "shapes_only",   # the vjps read only the arguments' shapes and dtypes
        "primal_only",   # the result carries no derivative (argmax, isnan, floor)
        "outputs",       # several differentiable outputs (linalg decompositions)
        "linear",        # forward mode: linear in these arguments (its jvp is itself)
        "multilinear",   # forward mode: linear in each of these arguments
        "selects",       # forward mode: selects among its arguments (where, maximum)
        "complex",       # complex values: True where the rule holds for them (JAX's
                         # convention: holomorphic, or linear with real coefficients), the
                         # record of a rule for them (|z|), None: refused
        # -- what numpy's dispatch does before the rule (runtime/array_dual.py)
        "check",         # check(args, kwargs) -> (args, kwargs): refuse or rearrange
        "writer",        # writes into an argument (np.add.at, np.copyto)
        "view",          # view(args, kwargs): a view of the array, or None
        # -- what calls of it are recorded as
        "primitive",     # a Python function recorded as this callable (scipy's logsumexp)
        # -- what the code specialised for floats computes for a call of it on floats
        "float_rule",    # the name of its formula there (numpy's functions of a float:
                         # rules/numpy_floats.py), or None
    )

    def __init__(self, name=None):
        self.name = name
        self.call = self.formula = self.general = self.array = self.partials = None
        self.vjps = self.jvps = self.result_kind = self.outputs = self.linear = None
        self.multilinear = self.check = self.writer = self.view = None
        self.primitive = self.refusals = self.complex = self.float_rule = None
        self.total = self.finite = self.batched_vjps = self.batched_jvps = False
        self.shapes_only = self.primal_only = self.selects = False

    def __repr__(self):
        filled = [f"{slot}={getattr(self, slot)!r}" for slot in ("name", "array", "vjps")
                  if getattr(self, slot) is not None]
        return f"Record({', '.join(filled)})"


RECORDS: dict = {}  # callable -> its Record
_NAMED: dict = {}   # the name of a scalar rule in ``ad`` -> its Record

# The namespace generated code calls, as ``ad.<name>``: every named rule's function and
# the runtime's helpers. ``publish`` is the one function that writes it.
ad = types.ModuleType("ad", "astad's runtime rules, as called by generated code")


def record(fn) -> Record:
    """The record of ``fn``, made empty if it has none, to be filled in place: astad's own
    rule modules, as they are imported, before any code is transformed."""
    found = RECORDS.get(fn)
    if found is None:
        found = RECORDS[fn] = Record()
    return found


def renew(fn) -> Record:
    """A new record for ``fn`` holding what its record held, to be changed: what every
    registration a user can make goes through. The code transformed earlier depends on
    the record it found (``RECORDS[fn] is record``), so it is made again after a change;
    and a scalar rule shared with other callables is changed for ``fn`` alone."""
    old = RECORDS.get(fn)
    new = Record()
    if old is not None:
        for slot in Record.__slots__:
            setattr(new, slot, getattr(old, slot))
        new.float_rule = None  # (a rule changed: the formula for floats no longer holds)
    RECORDS[fn] = new
    return new


def has_rule(fn) -> bool:
    """Does ``fn`` have a rule already (one a user registered before astad's own, which
    are registered on first use, is kept)?"""
    found = RECORDS.get(fn)
    return found is not None and (found.call is not None or found.array is not None)


def lookup(fn) -> Record | None:
    """The record of ``fn``, or None (the rules registered on first use are asked for:
    ``on_missing``)."""
    found = RECORDS.get(fn)
    if found is None and _missing:
        for hook in _missing:
            if hook(fn):
                return RECORDS.get(fn)
    return found


def named(name: str) -> Record | None:
    """The record of the scalar rule called ``ad.<name>``."""
    return _NAMED.get(name)


def scalar_rule(name: str, *callables) -> Record:
    """The record of the scalar rule ``name`` (made if new), the record of each of
    ``callables`` too (calls of them are calls of the rule)."""
    found = _NAMED.get(name)
    if found is None:
        found = _NAMED[name] = Record(name)
    for fn in callables:
        RECORDS[fn] = found
    return found


def publish(name: str, function: Callable) -> None:
    """Make ``function`` callable from generated code as ``ad.<name>``: a rule, or one of
    the runtime's helpers (``ad.rev``, ``ad.float``). A name is given once: two modules
    giving it two meanings would make the import order decide which one runs."""
    before = getattr(ad, name, function)
    if before is not function:
        raise RuntimeError(f"ad.{name} is published twice ({before!r}, then {function!r})")
    setattr(ad, name, function)


def define(name: str, call: Callable, *callables) -> Record:
    """``ad.<name>`` is ``call``: the rule ``name``, and the rule of each of ``callables``
    (calls of them are calls of it). A callable that has a record already (an array
    rule, an earlier rule) gets a new one, named so, keeping its array rule."""
    publish(name, call)
    rule = scalar_rule(name)
    rule.call = call
    for fn in callables:
        if fn not in RECORDS:
            RECORDS[fn] = rule
        else:
            found = renew(fn)
            found.name, found.call = rule.name, rule.call
            found.formula, found.general, found.total = rule.formula, rule.general, rule.total
    return rule


def published(name: str) -> bool:
    return hasattr(ad, name)


def unique_name(prefix: str, fn) -> str:
    """A name for ``fn``'s rule in ``ad``, from its qualified name, numbered if taken:
    generated code shows it, so it must not depend on run-time ids."""
    import re
    base = prefix + (re.sub(r"\W+", "_", getattr(fn, "__qualname__", None)
                            or getattr(fn, "__name__", None) or "").strip("_") or "fn")
    name, k = base, 1
    while hasattr(ad, name):
        k += 1
        name = f"{base}_{k}"
    return name


_missing: list = []  # hooks(fn) -> True when they registered rules for fn now


def on_missing(hook: Callable) -> None:
    """``hook(fn)`` is asked when ``fn`` has no record; it returns True when it has just
    registered rules (scipy.special's are registered on first use)."""
    _missing.append(hook)


_FLOAT_RULES: dict = {}  # the name of a formula for floats -> (primal, partials)


def float_rule(fn, name: str, primal: str, partials: tuple) -> None:
    """Calls of ``fn`` on floats compute ``primal`` (text in ``x``, ``y``), whose partials
    are ``partials`` (in ``x``, ``y`` and the result ``r``): the formula the code
    specialised for floats writes for them, called ``name``. For a callable whose own
    rule is an array rule (numpy's functions of one element); a rule registered for
    ``fn`` later takes it away (``renew``)."""
    _FLOAT_RULES[name] = (primal, tuple(partials))
    record(fn).float_rule = name


def float_rules() -> list:
    """``(name, primal, partials)`` of every formula for floats (``float_rule``)."""
    return [(name, primal, partials) for name, (primal, partials) in _FLOAT_RULES.items()]


def formula(name, arity: int | None = None):
    """``(primal, partials)``: the scalar rule ``name`` as text in ``x`` (and ``y``) and the
    result ``r`` (or the formula for floats so named), or None if it is not given as text
    (or takes another number of arguments than ``arity``)."""
    found = _NAMED.get(name)
    if found is None or found.formula is None:
        if name not in _FLOAT_RULES:
            return None
        primal, partials = _FLOAT_RULES[name]
        return None if arity is not None and len(partials) != arity else (primal, partials)
    primal, partials, _ = found.formula
    if arity is not None and len(partials) != arity:
        return None
    return primal, partials


def formulas() -> list:
    """``(name, primal, partials)`` of every scalar rule given as text."""
    return [(name, r.formula[0], r.formula[1]) for name, r in _NAMED.items()
            if r.formula is not None]


def total(name) -> bool:
    """Does the scalar rule ``name`` never raise on floats (giving inf or nan instead)?"""
    found = _NAMED.get(name)
    return found is not None and found.total or name in _FLOAT_RULES  # (numpy warns)


def rule_name(fn):
    """``(name, record)``: the name of ``fn``'s rule in ``ad`` (what generated code calls
    for it) and its record, or ``(None, record or None)`` when calls of ``fn`` are not
    calls of a rule (numpy's dispatch may still find its array rule). A TypeError for an
    unhashable ``fn``."""
    found = RECORDS.get(fn)
    return (None, None) if found is None else (found.name, found)
