"""What the float-specialised code generator knows of each value: its kind.

The specialised code (specialise/loops.py) keeps every float in a local of its own beside its
derivative's *handle*: the local holding its tape slot (reverse mode with a tape), its
tangent (forward mode, specialise/forward.py) or the name of its adjoint (straight-line
code, specialise/straight_line.py). What else a value can be is known when the code is written:

- ``Plain``: a value that carries no derivative (an int counter, a bool, a string, None,
  a float constant), computed as Python computes it;
- ``ListArg`` / ``MatrixArg``: an argument that is a list (or tuple) of floats, or a
  list of such lists, only read: element ``k`` of it has slot ``start + k``;
- ``Row``: a row of such a matrix, a list and the slot of its first element;
- ``TupleVal`` / ``RecordVal``: a tuple of values, or a dataclass instance made or read
  by the code, kept as one local per element or field (no tuple or object is built);
- ``RecordArg``: a dataclass argument whose float fields are read (``p.x``).

This module holds those kinds, the guesses made about each parameter before the code is
written, the static lookups of a function's names, and what the generated code calls at
run time to build the gradient of each argument.
"""
from __future__ import annotations

import dataclasses
import operator
import types

import gast
import numpy as np

from ..core.forward_pass import zero_tangent
from ..data.tree import is_differentiable
from ..front.source import filename_of
from ..registry import RECORDS, publish, rule_name
from ..runtime import tape as _tape_module

ABSENT = object()


class CannotSpecialise(Exception):
    """The code is not of the kind the specialised writer takes: the ordinary code runs."""


# -- values and the locals that hold them -------------------------------------------------
class Float:
    """A float (or a number standing for one): the expression of its value, and of its
    derivative's handle; ``param``: the list parameter it is an element of, if read
    straight from one (used as a list, a helper's say, it makes that parameter a list
    of lists)."""
    __slots__ = ("value", "handle", "param")

    def __init__(self, value: str, handle: str, param: str | None = None):
        self.value, self.handle, self.param = value, handle, param


class Plain:
    """A value with no derivative, and the expression computing it; ``param``: the
    parameter it is, if it is one (used as a float, it makes that parameter a float)."""
    __slots__ = ("value", "param")

    def __init__(self, value: str, param: str | None = None):
        self.value, self.param = value, param


class Row:
    """A row of a matrix argument: the list, and the handle of its first element (its
    slot, or the list of its tangents)."""
    __slots__ = ("value", "handle")

    def __init__(self, value: str, handle: str):
        self.value, self.handle = value, handle


class TupleVal:
    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items


class RecordVal:
    """A dataclass instance the code made, one value per field (``fields`` in the
    class's order)."""
    __slots__ = ("cls", "fields")

    def __init__(self, cls, fields: dict):
        self.cls, self.fields = cls, fields


class ListArg:
    """A list (or tuple) argument of floats, only read. ``start``: the expression of its
    first slot (taped) or its tangents' list (forward); ``length``: a local holding
    its length, or None."""
    __slots__ = ("name", "start", "length", "param")

    def __init__(self, name, start, length, param):
        self.name, self.start, self.length, self.param = name, start, length, param


class MatrixArg:
    """A list of lists of floats, only read: ``starts`` the local listing each row's
    first slot (taped) or the tangents' rows (forward)."""
    __slots__ = ("name", "starts", "length", "param")

    def __init__(self, name, starts, length, param):
        self.name, self.starts, self.length, self.param = name, starts, length, param


class RecordArg:
    """A dataclass argument: its fields read so far, each a Float local (read once, on
    entry), in the order first read. ``cls``: its class, once a method called on it has
    fixed one (the entry then checks it), and ``cls_name``, the class's name in the
    generated code."""
    __slots__ = ("name", "fields", "param", "cls", "cls_name")

    def __init__(self, name, param):
        self.name, self.fields, self.param = name, {}, param
        self.cls = self.cls_name = None

    def values(self) -> str:
        """The expression reading its fields on entry (None if it is not such a
        dataclass, or not of the class its methods were written for)."""
        of = f", {self.cls_name}" if self.cls_name else ""
        return f"ad.record_values({self.name}, {tuple(self.fields)!r}{of})"


# -- the locals of the generated code -----------------------------------------------------
class FloatLocal:
    """A user's float local: ``name`` holds its value, ``handle`` its derivative's
    handle. Straight-line code rebinds both statically (every value its own name).
    ``param`` as Float's, for a loop variable over a list parameter."""
    __slots__ = ("name", "handle", "param")

    def __init__(self, name: str, handle: str, param: str | None = None):
        self.name, self.handle, self.param = name, handle, param

    def read(self):
        return Float(self.name, self.handle, self.param)


class PlainLocal:
    """A local with no derivative. ``param``: the argument (taken for an int) it was
    bound to, if any: used as a number, it makes that argument a float one."""
    __slots__ = ("name", "param")

    def __init__(self, name: str):
        self.name, self.param = name, None

    def read(self):
        return Plain(self.name, self.param)


class RowLocal:
    __slots__ = ("name", "handle")

    def __init__(self, name: str, handle: str):
        self.name, self.handle = name, handle

    def read(self):
        return Row(self.name, self.handle)


class TupleLocal:
    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items

    def read(self):
        return TupleVal([item.read() for item in self.items])


class RecordLocal:
    __slots__ = ("cls", "fields")

    def __init__(self, cls, fields: dict):
        self.cls, self.fields = cls, fields

    def read(self):
        return RecordVal(self.cls, {name: local.read() for name, local in self.fields.items()})


class Alias:
    """A name bound to a value that is never rebound (a helper's parameter given a list
    argument, a float local of the caller): reads give the value itself."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def read(self):
        return self.value


class ListLocal:
    """A list of floats the code makes (specialise/lists.py): ``name`` holds its values,
    ``handles`` each value's handle (a slot, or a tangent). ``array``: a 1-d float array
    (``np.zeros(n)``) written by element, its values numpy.float64 as numpy stores them."""
    __slots__ = ("name", "handles", "array")

    def __init__(self, name: str, handles: str, array: bool = False):
        self.name, self.handles, self.array = name, handles, array

    def read(self):
        return self


class FreeFunction:
    """A function held in a closure cell of the function being written (``inner`` in
    ``lambda v: -inner(v)``): each call is its body inlined, as a helper's is, for the
    code it has now; the written code reads the cell in its prologue and checks that the
    function there has that code (``name``: the local it is read into)."""
    __slots__ = ("name", "fn")

    def __init__(self, name: str, fn):
        self.name, self.fn = name, fn

    def read(self):
        raise CannotSpecialise  # (a function used as a value: the ordinary code)


class LocalFunction:
    """A function the code defines (``def g(t): ...`` or ``g = lambda t: ...``), never
    rebound: each call is its body inlined, its free names read in ``scope``, the body
    it is defined in, as Python reads a closure's (the binding at the call). ``node``:
    its syntax tree as a FunctionDef. Used as a value (passed, returned), the ordinary
    code runs."""
    __slots__ = ("node", "scope")

    def __init__(self, node, scope):
        self.node, self.scope = node, scope

    def read(self):
        raise CannotSpecialise


# -- static lookups in one function's namespace -------------------------------------------
class Resolver:
    """What the free names of one function's code refer to now (its globals, then the
    builtins), each lookup recorded as a dependency (namespace, name, value): the code is
    rebuilt when one changes. A closure variable is not resolved here: the written code
    reads its cell when it runs (inline.Inliner.free_value), through ``cells``, the
    expression of the function's closure in the written code (None: the written code is
    itself a closure over the same cells, and reads the name)."""

    def __init__(self, fn, dependencies: list, cells: str | None = None):
        self.fn = fn
        self.globals = fn.__globals__
        self.free = set(fn.__code__.co_freevars)
        self.dependencies = dependencies
        self.cells = cells

    def value(self, name: str):
        if name in self.free:
            return ABSENT
        from ..transform.reverse import MISSING, global_value
        value = global_value(self.globals, name, self.dependencies)
        return ABSENT if value is MISSING else value

    def callee(self, func):
        """The object ``func`` (a name or ``module.name``) names, or ABSENT."""
        if isinstance(func, gast.Name):
            return self.value(func.id)
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name):
            module = self.value(func.value.id)
            if isinstance(module, types.ModuleType):
                return getattr(module, func.attr, ABSENT)
        return ABSENT

    def rule_name(self, func, floats: bool = False):
        """The registered scalar rule ``func`` names (or with ``floats``, its formula for
        floats: numpy's functions of a float, rules/numpy_floats.py), or None (a rule
        registered for it later rebuilds the code: a dependency on the rule table)."""
        callee = self.callee(func)
        try:
            rule, found = rule_name(callee) if callee is not ABSENT else (None, None)
        except TypeError:
            return None
        if rule is None and floats and found is not None:
            rule = found.float_rule
        if rule is not None:
            self.dependencies.append((RECORDS, callee, found))
        return rule


def constant_global(value) -> bool:
    """A global the code may read as a constant (its value is written into the code,
    and the code rebuilt if the name is rebound)."""
    return type(value) in (int, float, bool, str) or value is None


# -- dataclasses -------------------------------------------------------------------------
def plain_record_class(cls) -> bool:
    """A dataclass whose instances keep their fields in ``__dict__``, read as stored,
    and whose ``__init__`` only stores its arguments (no ``__post_init__``)."""
    from ..data.tree import plain_record
    kind = plain_record(cls)
    return bool(kind) and not hasattr(cls, "__post_init__") and \
        filename_of(cls.__init__) == "<string>"  # the one dataclasses wrote


def record_fields(cls) -> list | None:
    """The fields of a dataclass the constructor takes, as (name, default or ABSENT,
    keyword only); None if one is not an argument or has a default factory."""
    out = []
    for field in dataclasses.fields(cls):
        if not field.init or field.default_factory is not dataclasses.MISSING:
            return None
        default = ABSENT if field.default is dataclasses.MISSING else field.default
        if default is not ABSENT and not constant_global(default):
            return None
        out.append((field.name, default, getattr(field, "kw_only", False)))
    return out


# -- guesses about the parameters ---------------------------------------------------------
_INT_CONTEXT_CALLS = ("range",)


def parameter_guesses(root, params: list) -> dict:
    """param -> "list", "matrix", "record" or "scalar", from how the function's own code
    uses it (a helper it is passed to may prove the guess wrong: the code is then written
    again, floatexpr.Retry)."""
    parents = _parents(root)
    containers = {n.id for n in gast.walk(root) if isinstance(n, gast.Name) and
                  isinstance(n.ctx, gast.Load) and (_iterated(n, parents) or (
                      isinstance(parents.get(id(n)), gast.Subscript) and
                      parents[id(n)].value is n))}
    guesses = {}
    for p in params:
        kind = "scalar"
        for n in gast.walk(root):
            if not (isinstance(n, gast.Name) and n.id == p and isinstance(n.ctx, gast.Load)):
                continue
            parent = parents.get(id(n))
            if isinstance(parent, gast.Attribute) and parent.value is n:
                kind = "record"
            elif isinstance(parent, gast.Subscript) and parent.value is n:
                grand = parents.get(id(parent))
                if isinstance(grand, gast.Subscript) and grand.value is parent or \
                        _bound_to(parent, grand, containers):
                    kind = "matrix"
                elif kind == "scalar":
                    kind = "list"
            elif _iterated(n, parents):
                target = _element_target(n, parents)
                if target is not None and _names(target) & containers:
                    kind = "matrix"
                elif kind == "scalar":
                    kind = "list"
        guesses[p] = kind
    return guesses


def _element_target(node, parents):
    """The part of a ``for`` target that an element of the iterated ``node`` is bound to
    (through ``zip``, ``enumerate`` and ``reversed``), or None."""
    parent = parents.get(id(node))
    if isinstance(parent, gast.For) and parent.iter is node:
        return parent.target
    if not (isinstance(parent, gast.Call) and isinstance(parent.func, gast.Name)):
        return None
    outer = _element_target(parent, parents)
    if outer is None or parent.func.id == "reversed":
        return outer
    if not isinstance(outer, (gast.Tuple, gast.List)):
        return None
    if parent.func.id == "enumerate" and parent.args[0] is node and len(outer.elts) == 2:
        return outer.elts[1]
    if parent.func.id == "zip" and node in parent.args and \
            len(outer.elts) == len(parent.args):
        return outer.elts[parent.args.index(node)]
    return None


def _bound_to(node, parent, containers) -> bool:
    """Is ``node`` the value of an assignment to a name used as a container?"""
    return isinstance(parent, gast.Assign) and parent.value is node and any(
        isinstance(t, gast.Name) and t.id in containers for t in parent.targets)


def _iterated(n, parents) -> bool:
    """Is name ``n`` iterated: ``for _ in n``, ``zip(n, ...)``, ``enumerate(n)``,
    ``reversed(n)``, ``len(n)``?"""
    parent = parents.get(id(n))
    if isinstance(parent, gast.For) and parent.iter is n:
        return True
    return isinstance(parent, gast.Call) and isinstance(parent.func, gast.Name) and \
        parent.func.id in ("zip", "enumerate", "reversed", "len") and n in parent.args


def int_context_names(root) -> set:
    """Names used where an int (or another value with no derivative) is expected: a
    bound of ``range``, an index, an operand of ``//`` or of a bit operation, a value
    compared equal to an int (``n == 0``)."""
    found = set()
    for n in gast.walk(root):
        operands = []
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and \
                n.func.id in _INT_CONTEXT_CALLS:
            operands = list(n.args)
        elif isinstance(n, gast.Subscript):
            operands = [n.slice]
        elif isinstance(n, gast.BinOp) and isinstance(n.op, (
                gast.FloorDiv, gast.LShift, gast.RShift, gast.BitAnd, gast.BitOr,
                gast.BitXor)):
            operands = [n.left, n.right]
        elif isinstance(n, gast.Compare) and len(n.ops) == 1 and \
                isinstance(n.ops[0], (gast.Eq, gast.NotEq)) and \
                _int_constant(n.comparators[0]) is not None:  # n == 0
            operands = [n.left]
        for operand in operands:
            found.update(m.id for m in gast.walk(operand) if isinstance(m, gast.Name))
    return found


def nonnegative_names(root, plain: set) -> set:
    """Plain names that only ever hold ints >= 0: counters of ``range`` with a start >= 0
    (or a negative step down to a stop >= -1), ``enumerate`` counts, and names bound only
    to sums and products of those, constants >= 0 and ``len(...)``. An element read
    ``xs[i]`` that succeeded with such an ``i`` is at slot ``start + i``: no ``% n``."""
    bindings: dict = {}
    for n in gast.walk(root):
        if isinstance(n, gast.Assign):
            for target in n.targets:
                for name in _names(target):
                    bindings.setdefault(name, []).append(
                        n.value if isinstance(target, gast.Name) else None)
        elif isinstance(n, gast.For):
            for name in _names(n.target):
                bindings.setdefault(name, []).append(("for", n))
        elif isinstance(n, (gast.AugAssign, gast.NamedExpr)):
            for name in _names(n.target):
                bindings.setdefault(name, []).append(None)
    good = {name for name in bindings if name in plain}
    changed = True
    while changed:
        changed = False
        for name in list(good):
            if not all(_nonnegative_binding(b, name, good) for b in bindings[name]):
                good.discard(name)
                changed = True
    return good


def _nonnegative_binding(binding, name, good) -> bool:
    if binding is None:
        return False
    if isinstance(binding, tuple):
        loop = binding[1]
        it, target = loop.iter, loop.target
        if not (isinstance(it, gast.Call) and isinstance(it.func, gast.Name)):
            return False
        if it.func.id == "range" and isinstance(target, gast.Name) and not it.keywords:
            args = it.args
            if len(args) == 1:
                return True
            if len(args) == 2:
                return nonnegative(args[0], good)
            step = _int_constant(args[2])
            if step is not None and step > 0:
                return nonnegative(args[0], good)
            stop = _int_constant(args[1])
            return step is not None and step < 0 and stop is not None and stop >= -1
        if it.func.id == "enumerate" and isinstance(target, gast.Tuple) and \
                target.elts and isinstance(target.elts[0], gast.Name) and \
                target.elts[0].id == name and not any(
                    name in _names(e) for e in target.elts[1:]):
            return len(it.args) == 1 and not it.keywords or (
                len(it.args) == 2 and nonnegative(it.args[1], good))
        return False
    return nonnegative(binding, good)


def nonnegative(node, good: set) -> bool:
    if isinstance(node, gast.Constant):
        return type(node.value) is int and node.value >= 0
    if isinstance(node, gast.Name):
        return node.id in good
    if isinstance(node, gast.BinOp) and isinstance(node.op, (gast.Add, gast.Mult,
                                                             gast.FloorDiv)):
        return nonnegative(node.left, good) and nonnegative(node.right, good)
    return isinstance(node, gast.Call) and isinstance(node.func, gast.Name) and \
        node.func.id == "len"


def _int_constant(node):
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        inner = _int_constant(node.operand)
        return None if inner is None else -inner
    return None


def _names(target) -> set:
    return {n.id for n in gast.walk(target) if isinstance(n, gast.Name)}


def _parents(root) -> dict:
    parents = {}
    for node in gast.walk(root):
        for child in gast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


# -- at run time: the gradient of each argument -------------------------------------------
_FLOAT64 = np.float64
_FLOAT64_DTYPE = np.dtype(np.float64)


def tape_gradient_of(tape: list, width: int, value, index: int, sink: int,
                         layout: tuple):
    """``(value, gradients)`` for the code specialise/loops.py writes: sweep its flat tape
    (``width`` (slot, partial) pairs per entry, entry ``sink + 1`` first; the compiled
    sweep where it is built) and give each argument its gradient as ``layout`` says:

    - ``(slot, -1)``: a float; ``(start, n)``: a list of n floats; ``(starts, None)``: a
      list of lists of floats, row ``r`` at ``starts[r]``;
    - ``(value, -2)``: an argument that is not differentiated (an int, a string): None;
      ``(slot, -5, original)``: a float argument given an int (None) or a numpy.float64;
      ``(value, -4)``: one only tested or compared: 0.0 for a float, else None;
    - ``(start, n, original)`` / ``(starts, None, original)``: a tuple, or elements of
      another float type (numpy.float64): rebuilt like ``original``;
    - ``(start, names, original)``: a dataclass, fields ``names`` at ``start``...

    None for a result that is not a float: the transformed code then raises its error."""
    if type(value) is not float and type(value) is not _FLOAT64:
        return None
    return value, _swept(tape, width, index, sink, layout, True)


def _swept(tape, width: int, index: int, sink: int, layout: tuple, last: bool):
    """Each argument's gradient (``layout``) from one sweep of the tape seeded at slot
    ``index`` (runtime.tape.float_adjoints; ``last``: no other sweep follows)."""
    adjoint = _tape_module.float_adjoints(tape, width, index, sink + 1, last)
    return tuple([gradient_by_plan(adjoint, plan) for plan in layout])


def tape_rows_of(tape: list, width: int, values: tuple, indices: tuple, sink: int,
                 layout: tuple, kind: str):
    """``(values, rows)`` for the code specialise/loops.py writes for a Jacobian's rows
    (a function returning a tuple, or a list, of floats): the values as the function
    returns them and, for each, the gradients of the arguments as ``tape_gradient_of``
    gives them, one sweep of the flat tape per output. None for a value that is not a
    float."""
    if any(type(v) is not float and type(v) is not _FLOAT64 for v in values):
        return None
    last = len(indices) - 1
    rows = [_swept(tape, width, index, sink, layout, k == last)
            for k, index in enumerate(indices)]
    return (list(values) if kind == "list" else np.array(values) if kind == "array" else
            values), rows


def vector_size(n) -> int:
    """``np.zeros(n)``'s length, for the list standing for it: numpy's refusals kept (a
    negative or non-integer size raises, and the ordinary code raises it)."""
    n = operator.index(n)
    if n < 0:
        raise ValueError("negative dimensions are not allowed")
    return n


def number_gradient(value, cotangent):
    """The gradient of a float argument given another number: an int is a constant (its
    gradient None), a numpy.float64 gets a cotangent of its own type."""
    t = type(value)
    if t is int or t is bool:
        return None
    return cotangent if type(cotangent) is t else t(cotangent)


def plain_gradient(value):
    """The gradient of an argument the code only tests or compares: a zero of its type
    for a float, else None (not differentiated)."""
    t = type(value)
    return None if t is not float and t is not _FLOAT64 else t(0.0)


def gradient_by_plan(adjoint, plan):
    """An argument's gradient from the adjoints of its slots, as ``plan`` (a layout's
    item: ``tape_gradient_of``) says."""
    start, n = plan[0], plan[1]
    if len(plan) == 2:
        if n == -1:
            return adjoint[start]
        if n == -4:
            return plain_gradient(start)
        if n == -2:
            return None
        if n is None:
            return [adjoint[a:b] for a, b in zip(start, start[1:])]
        return adjoint[start:start + n]
    original = plan[2]
    if n == -5:  # a float argument given an int (a constant), or a numpy.float64
        return number_gradient(original, adjoint[start])
    if type(n) is tuple:  # a dataclass
        return record_gradient(original, n, adjoint[start:start + len(n)])
    if n is None:
        if type(original) is np.ndarray:  # (a 2-d array read by element)
            return np.array([adjoint[a:b] for a, b in zip(start, start[1:])],
                            dtype=original.dtype).reshape(original.shape)
        return type(original)([_rebuilt(row, adjoint[a:b]) for row, a, b in
                               zip(original, start, start[1:])])
    return _rebuilt(original, adjoint[start:start + n])


def record_gradient(original, names: tuple, cotangents):
    """The gradient of the dataclass ``original``: the cotangents of its fields ``names``,
    zero for its other float fields, its other fields themselves; made without running
    the class's code (as structure.build_gradient does)."""
    obj = object.__new__(type(original))
    fields = obj.__dict__
    position = _POSITIONS.get(names)
    if position is None:
        position = _POSITIONS[names] = {name: k for k, name in enumerate(names)}
    for name, v in original.__dict__.items():
        k = position.get(name)
        if k is not None:
            g = cotangents[k]
            fields[name] = g if type(g) is type(v) else type(v)(g)  # (as _like)
        else:
            fields[name] = _like(v, 0.0) if isinstance(v, float) else v
    return obj


_POSITIONS: dict = {}  # a dataclass's float fields (a tuple of names) -> name: position


def _like(original, g):
    """The cotangent ``g`` of a float leaf as the leaf's own type (numpy.float64 partials
    may have made it a numpy.float64 where the leaf is a float)."""
    t = type(original)
    return g if type(g) is t else t(g)


def _rebuilt(original, gs):
    if type(original) is np.ndarray:  # (an array read by element)
        return np.array(gs, dtype=original.dtype)
    if floats(*original) and floats(*gs):  # (floats in and out: nothing to convert)
        return gs if type(original) is list else tuple(gs)
    if set(map(type, original)) == _JUST_FLOAT64:  # (numpy.float64s: made at once)
        out = list(np.array(gs, dtype=_FLOAT64))
    else:
        out = [_like(x, g) for x, g in zip(original, gs)]
    return out if type(original) is list else tuple(out)


_JUST_FLOAT64 = {_FLOAT64}


def record_values(obj, names: tuple, of=None):
    """The fields ``names`` of the dataclass ``obj`` if each holds a float (or a
    numpy.float64), ``obj`` is a plain dataclass (plain_record_class) and its other
    fields hold no float the code could miss (ints, strings, bools, None); else None.
    ``of``: the class ``obj`` must be (the code inlined its methods)."""
    cls = type(obj)
    if of is not None and cls is not of:
        return None
    plain = _PLAIN_CLASSES.get(cls)
    if plain is None:
        plain = _PLAIN_CLASSES[cls] = dataclasses.is_dataclass(cls) and \
            plain_record_class(cls)
    if not plain:
        return None
    fields = obj.__dict__
    for v in fields.values():
        t = type(v)
        if t is not float and t is not _FLOAT64 and t is not int and t is not str and \
                t is not bool and v is not None:
            return None
    values = []
    for name in names:
        v = fields.get(name, ABSENT)
        if type(v) is not float and type(v) is not _FLOAT64:
            return None
        values.append(v)
    return values


_PLAIN_CLASSES: dict = {}
_INTEGERS = frozenset({int, bool})


def record_tangents(tangent, names: tuple):
    """The tangents of fields ``names`` given by ``tangent`` (any object with those
    attributes; None is zero), or None if one is missing or not a float."""
    out = []
    for name in names:
        t = getattr(tangent, name, ABSENT)
        if t is None:
            t = 0.0
        elif type(t) is not float:
            return None  # (also a missing attribute: the general path says so)
        out.append(t)
    return out


_FLOAT_TYPES = frozenset({float, _FLOAT64})


def float_sequences(lists: tuple, matrices: tuple) -> bool:
    """Are ``lists`` lists or tuples of floats (or numpy.float64), or 1-d float64 arrays,
    and ``matrices`` lists or tuples of those, or 2-d float64 arrays? (What the entry's
    quick check, exact lists of floats, missed.) The code only reads them by element, by
    length and by iteration, where an array of float64 is a sequence of numpy.float64:
    its elements are read as numpy gives them, and the gradient is an array again."""
    for xs in lists:
        if type(xs) is np.ndarray:
            if xs.ndim != 1 or xs.dtype != _FLOAT64_DTYPE:
                return False
        elif (type(xs) is not list and type(xs) is not tuple) or \
                not set(map(type, xs)) <= _FLOAT_TYPES:
            return False
    for m in matrices:
        if type(m) is np.ndarray:
            if m.ndim != 2 or m.dtype != _FLOAT64_DTYPE:
                return False
            continue
        if type(m) is not list and type(m) is not tuple:
            return False
        for row in m:
            if (type(row) is not list and type(row) is not tuple) or \
                    not set(map(type, row)) <= _FLOAT_TYPES:
                return False
    return True


def float_lists(*lists) -> bool:
    """Is each argument a list of floats (exactly those types)? The entry's check of its
    list arguments (compiled in runtime/_native.c where it is built)."""
    return all(type(xs) is list and set(map(type, xs)) <= _FLOAT_ONLY for xs in lists)


def floats(*values) -> bool:
    """Is every argument a float (exactly that type)? The written-out code's check of its
    float arguments in the common case (compiled where it is built)."""
    for value in values:
        if type(value) is not float:
            return False
    return True


def float_rows(*matrices) -> bool:
    """Is each argument a list of lists of floats, all with the same number of rows and
    row ``r`` of the same length in each (a matrix and its tangents)?"""
    if not matrices:
        return True
    first = matrices[0]
    if not all(type(m) is list and len(m) == len(first) for m in matrices):
        return False
    return all(float_lists(*rows) and len(set(map(len, rows))) == 1
               for rows in zip(*matrices))


_FLOAT_ONLY = frozenset({float})
# (the reference the compiled ones are tested on)
python_checks = (float_lists, float_rows, floats)
if _tape_module.native is not None:
    float_lists, float_rows = _tape_module.native.float_lists, _tape_module.native.float_rows
    floats = _tape_module.native.floats

# a closure's values the written code reads as plain values (inline.Inliner.free_value)
FREE_CONSTANTS = frozenset({float, int, bool, str, type(None)})
_PLAIN_DATA = FREE_CONSTANTS | {list, tuple}


def plain_data(value, depth: int = 0) -> bool:
    """Is ``value`` (a list or tuple) a closure's data the written code reads as plain
    values: numbers, strings, None, and lists or tuples of those, nothing that carries a
    derivative (a dual of an enclosing differentiation, an array)?"""
    if type(value) is not list and type(value) is not tuple:
        return False
    kinds = set(map(type, value))
    if kinds <= FREE_CONSTANTS:
        return True
    return kinds <= _PLAIN_DATA and depth < 8 and all(
        plain_data(v, depth + 1) for v in value if type(v) is list or type(v) is tuple)


# what generated code calls (through ``ad``, in the rules' namespace)
publish("tape_gradient_of", tape_gradient_of)
publish("tape_rows_of", tape_rows_of)
publish("float_tape", _tape_module.float_tape)
publish("record_values", record_values)
publish("plain_gradient", plain_gradient)
publish("number_gradient", number_gradient)
publish("free_constants", FREE_CONSTANTS)
publish("plain_data", plain_data)
publish("function", types.FunctionType)
publish("rule_records", RECORDS)
publish("quiet_types", frozenset({int, bool, str, type(None), float, _FLOAT64}))
publish("numbers", frozenset({float, _FLOAT64, int, bool}))
publish("integers", _INTEGERS)
publish("record_gradient", record_gradient)
publish("float_sequences", float_sequences)
publish("float_lists", float_lists)
publish("floats", floats)
publish("float_rows", float_rows)
publish("record_tangents", record_tangents)
publish("float64", _FLOAT64)
publish("vector_size", vector_size)


def plain_tangent(value):
    """The tangent forward mode gives a returned leaf the code computes with no tangent:
    zero for a float (or complex, or float array), the leaf itself otherwise (an int, a
    string), as core/forward_pass.tangent_of gives it."""
    return zero_tangent(value) if is_differentiable(value) else value


publish("plain_tangent", plain_tangent)


def numpy_reduced(name: str, *arrays):
    """``np.<name>`` (sum, mean, dot...) of 1-d float64 arrays of the values ``arrays``
    hold (a list the code wrote, an argument as given): numpy's value to the last bit,
    and numpy's error for lengths that differ."""
    return getattr(np, name)(*[a if type(a) is np.ndarray else np.array(a, dtype=_FLOAT64)
                               for a in arrays])


publish("numpy_reduced", numpy_reduced)
